"""redstring's `adapters` layer (see docs/adr/0002-top-level-package-names.md)."""

#: Marks this package as redstring's own: PyPI has unrelated distributions that
#: install a top-level `adapters` package, and streams.packaging checks this marker.
REDSTRING_LAYER = "adapters"
