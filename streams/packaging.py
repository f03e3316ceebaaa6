"""Guards against a clash of redstring's top-level package names.

redstring installs four top-level packages named for its layers: ``contracts``,
``projections``, ``adapters`` and ``streams``. PyPI has unrelated distributions
that install packages with some of the same names. If one of them shadows ours,
fail at start-up with an error that says what to do, instead of an
AttributeError deep inside a worker.
"""

from __future__ import annotations

import importlib

LAYERS = ("contracts", "projections", "adapters", "streams")


class ForeignPackageError(RuntimeError):
    pass


def check_own_packages() -> None:
    for name in LAYERS:
        module = importlib.import_module(name)
        if getattr(module, "REDSTRING_LAYER", None) != name:
            location = getattr(module, "__file__", None) or "an unknown location"
            raise ForeignPackageError(
                f"the package {name!r} imported from {location} is not redstring's: another "
                f"distribution installs a top-level {name!r}. Install redstring in its own "
                "virtual environment, or uninstall the other distribution "
                f"(pip show -f to find which one owns {location})."
            )
