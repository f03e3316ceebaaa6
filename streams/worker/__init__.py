"""The projector worker: a Faust app (``app``) whose loop (``loop``) hands each
partition's batch to the projector (``projector``), which decodes records
(``decode``), applies them to both stores in bounded sub-batches (``bounds``)
and decides whether the consumer commits, seeks or pauses; ``metrics`` and
``logs`` are what it reports (docs/design.md 5 and 7)."""
