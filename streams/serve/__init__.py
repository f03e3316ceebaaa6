"""``redstring serve``: the tenant-scoped read API over HTTP (docs/readers.md).

``app`` builds the FastAPI app (stores, token checks, errors, metrics, logs),
``auth`` verifies bearer tokens, ``routes`` and ``models`` are the endpoints
and what they answer, ``metrics`` what it counts."""
