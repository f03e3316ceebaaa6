"""Python's cyclic garbage collector, set for a worker's batches
(docs/adr/0022-garbage-collector.md).

A decoded batch is hundreds of thousands of young container objects (models,
lists, dicts, tuples), nearly all freed by reference counting once the batch
is written. With Python's default threshold (700) the collector ran a
youngest-generation collection every few hundred of them and a full one
dozens of times a minute, each over every object the process holds: a
quarter of a busy worker's CPU (docs/performance.md, "The garbage
collector").
"""

from __future__ import annotations

import gc


def settle_for_batches(young_threshold: int) -> None:
    """Call once, when the worker is started and before its first batch: what
    exists then (modules, schemas, clients, connection pools) lives as long as
    the process, so it is moved out of the collector's sight (``gc.freeze``),
    and the youngest generation is collected every ``young_threshold`` net
    allocations of container objects (``REDSTRING_GC_YOUNG_THRESHOLD``). A
    batch's objects die by reference counting long before that many
    accumulate, so the collections that remain find the few cycles without
    walking a whole batch each time. The older generations keep their
    thresholds."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(young_threshold, older, oldest)


def collector_state() -> dict[str, object]:
    """The collector's thresholds and frozen objects, for the worker's log."""
    return {"gc_threshold": list(gc.get_threshold()), "gc_frozen": gc.get_freeze_count()}
