"""A merge asks the store for what it needs in two resolutions and at most one
existence lookup, whatever its edges (projections/graph.py, apply_merge), and
still ends where applying its steps one at a time ends: the oracle's state,
its collapsed edges counted once, a cycle it closes refused, and a cycle the
store already held reported as corruption."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from adapters.memory.graph import InMemoryGraphStore
from contracts.domain import Alias, StreamPartition
from contracts.errors import AliasCycleError
from contracts.ids import EntityId, TenantId
from projections.graph import GraphProjection
from projections.snapshot import graph_snapshot
from tests.scenarios.harness import to_log
from tests.scenarios.histories import TOPIC_ID, LogBuilder
from tests.scenarios.oracle import Oracle

PARTITION = StreamPartition("events", 0, TOPIC_ID)
READS = ("resolve_entity_ids", "get_entities", "get_relationships_for")


class _Counted:
    def __init__(self, inner: Any, asked: Counter[str]) -> None:
        self._inner = inner
        self._asked = asked

    def __getattr__(self, name: str) -> Any:
        self._asked[name] += 1
        return getattr(self._inner, name)


class _CountedStore(InMemoryGraphStore):
    def __init__(self) -> None:
        super().__init__()
        self.asked: Counter[str] = Counter()

    @asynccontextmanager
    async def unit_of_work(self, partition: StreamPartition) -> AsyncIterator[Any]:  # type: ignore[override]
        async with super().unit_of_work(partition) as uow:
            yield _Counted(uow, self.asked)


def _history() -> LogBuilder:
    log = LogBuilder("merge-reads")
    people = [("a", "A", "Person"), ("b", "B", "Person"), ("c", "C", "Person")]
    more = [("d", "D", "Person"), ("e", "E", "Person")]
    rels = [("a", "c", "KNOWS"), ("a", "d", "KNOWS"), ("e", "a", "KNOWS"), ("b", "d", "KNOWS")]
    log.extract("acme", "d1", people + more, rels)  # 0
    # b absorbs a: one edge removed, one added that collapses onto b itself
    # (the absorbed a's own edge a -> b), one added between others, and a's
    # remaining edges moved onto b.
    log.extract("acme", "d2", [("a", "A", "Person"), ("b", "B", "Person")], [("a", "b", "LIKES")])
    log.merge(
        "acme",
        "b",
        ["a"],
        remove=[("a", "c", "KNOWS")],
        add=[("a", "b", "LIKES"), ("c", "e", "KNOWS")],
    )  # 2
    return log


async def _folded(store: InMemoryGraphStore, log: LogBuilder, first: int) -> GraphProjection:
    """A fold over ``store`` that has applied the first ``first`` records of ``log``."""
    fold = GraphProjection(store)
    await fold.apply(PARTITION, to_log(log.records)[:first])
    return fold


async def test_a_merge_reads_twice_and_looks_up_once_and_ends_as_the_oracle() -> None:
    log = _history()
    store = _CountedStore()
    fold = await _folded(store, log, 2)
    store.asked.clear()
    report = await fold.apply(PARTITION, to_log(log.records)[2:])
    assert report.applied == 1 and report.failed == [] and report.halted is None
    reads = {name: store.asked[name] for name in READS}
    assert reads == {"resolve_entity_ids": 2, "get_entities": 1, "get_relationships_for": 1}
    # a -> b LIKES, added, collapses (and its stored copy goes); a's moved
    # edges: a -> d onto b -> d (already there), e -> a onto e -> b.
    assert report.collapsed == 1
    expected = Oracle().feed_all(log.records).state("acme")
    ids = [EntityId(i) for i in "abcde"]
    found = await graph_snapshot(store, TenantId("acme"), ids)
    assert found == {k: expected[k] for k in found}
    # a -> c removed, a -> b LIKES gone, a -> d onto b -> d, e -> a onto e -> b, c -> e added.
    assert len(found["relationships"]) == 3


async def test_a_merge_that_closes_a_cycle_is_refused_whatever_its_edges() -> None:
    log = _history()
    log.merge("acme", "a", ["b"], add=[("c", "d", "KNOWS")])  # b -> a would close a -> b -> a
    fold = await _folded(InMemoryGraphStore(), log, 3)
    report = await fold.apply(PARTITION, to_log(log.records)[3:])
    assert [f.offset for f in report.failed] == [3]
    assert "alias cycle" in report.failed[0].reason


async def test_a_cycle_the_store_already_held_halts_the_merge_as_corruption() -> None:
    store = InMemoryGraphStore()
    log = _history()
    fold = await _folded(store, log, 2)
    tenant = TenantId("acme")
    # Corrupt the store: d and e alias each other (no fold writes this).
    async with store.unit_of_work(PARTITION) as uow:
        await uow.upsert_alias(tenant, Alias(tenant, EntityId("d"), EntityId("e"), "corrupt"))
        await uow.upsert_alias(tenant, Alias(tenant, EntityId("e"), EntityId("d"), "corrupt"))
    # The merge's own ids resolve; only an added edge's end meets the cycle.
    report = await fold.apply(PARTITION, to_log(log.records)[2:])
    assert isinstance(report.halted, AliasCycleError)
    assert report.failed == []
