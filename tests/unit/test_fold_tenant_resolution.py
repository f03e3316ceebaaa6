"""The graph fold resolves a run's edge endpoints once for all its tenants
when the unit of work offers it (``contracts.ports.graph.TenantResolution``),
and ends in the state that resolving tenant by tenant reaches: extractions
write no aliases, so an id resolves at the start of a run as it does before
its tenant's writes. The memory store offers it; wrapped to hide it, it
stands in for a store that does not."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters.memory.graph import InMemoryGraphStore
from contracts.domain import StreamPartition
from contracts.ids import EntityId, TenantId
from contracts.ports.graph import TenantResolution
from projections.graph import GraphProjection
from tests.scenarios.harness import to_log
from tests.scenarios.histories import TOPIC_ID, LogBuilder

PARTITION = StreamPartition("events", 0, TOPIC_ID)


class _Counted:
    """A unit of work that counts its resolution calls and resolves tenant by
    tenant (the memory store's batched call is hidden)."""

    def __init__(self, inner: Any, asked: list[str]) -> None:
        self._inner = inner
        self._asked = asked

    def __getattr__(self, name: str) -> Any:
        if name == "resolve_entity_ids_by_tenant":
            raise AttributeError(name)
        if name == "resolve_entity_ids":
            self._asked.append(name)
        return getattr(self._inner, name)


class _CountedBatched(_Counted):
    """The same, offering the memory store's batched call."""

    async def resolve_entity_ids_by_tenant(
        self, asked: Mapping[TenantId, Iterable[EntityId]]
    ) -> dict[TenantId, dict[EntityId, EntityId]]:
        self._asked.append("resolve_entity_ids_by_tenant")
        found: dict[
            TenantId, dict[EntityId, EntityId]
        ] = await self._inner.resolve_entity_ids_by_tenant(asked)
        return found


class _CountedStore(InMemoryGraphStore):
    def __init__(self, *, batched: bool) -> None:
        super().__init__()
        self.batched = batched
        self.asked: list[str] = []

    @asynccontextmanager
    async def unit_of_work(self, partition: StreamPartition) -> AsyncIterator[Any]:  # type: ignore[override]
        async with super().unit_of_work(partition) as uow:
            counted = (_CountedBatched if self.batched else _Counted)(uow, self.asked)
            assert isinstance(counted, TenantResolution) is self.batched
            yield counted


async def _fold(store: _CountedStore, chunk: int) -> list[Any]:
    log = LogBuilder("tenant-resolution")
    # Both tenants merge first, so that the extraction run after the merges
    # resolves through aliases in two tenants: edges to "a" go to its canonical.
    log.extract("acme", "d1", [("a", "A", "Person"), ("b", "B", "Person")])  # 0
    log.extract("globex", "d1", [("a", "A", "Org"), ("c", "C", "Org")])  # 1
    log.merge("acme", "b", ["a"])  # 2
    log.merge("globex", "c", ["a"])  # 3
    acme = [("x", "X", "Person"), ("a", "A", "Person")]
    log.extract("acme", "d2", acme, [("a", "x", "KNOWS")])  # 4
    globex = [("y", "Y", "Org"), ("a", "A", "Org"), ("c", "C", "Org")]
    log.extract("globex", "d2", globex, [("y", "a", "OWNS"), ("a", "c", "OWNS")])  # 5
    acme = [("z", "Z", "Person"), ("a", "A", "Person"), ("q", "Q", "Person")]
    log.extract("acme", "d3", acme, [("z", "a", "KNOWS"), ("q", "z", "KNOWS")])  # 6
    fold = GraphProjection(store, chunk=chunk)
    records = to_log(log.records)
    reports = [await fold.apply(PARTITION, records[:2]), await fold.apply(PARTITION, records[2:])]
    found = []
    for tenant in ("acme", "globex"):
        ids = [EntityId(i) for i in ("a", "b", "c", "x", "y", "z", "q")]
        found.append(await store.get_entities(TenantId(tenant), ids))
        found.append(await store.get_relationships(TenantId(tenant)))
    return [reports, found]


#: The last run's endpoints: a, q, x, z of acme and a, c, y of globex.
ENDPOINTS = 7


@pytest.mark.parametrize("chunk", [1000, 2])
async def test_a_run_asks_a_resolving_store_once_per_chunk_for_all_its_tenants(
    chunk: int,
) -> None:
    batched, one_by_one = _CountedStore(batched=True), _CountedStore(batched=False)
    assert await _fold(batched, chunk) == await _fold(one_by_one, chunk)
    # Only the last run has edges; the merges resolve tenant by tenant in both.
    merges = batched.asked.count("resolve_entity_ids")
    assert batched.asked.count("resolve_entity_ids_by_tenant") == -(-ENDPOINTS // chunk)
    if chunk > ENDPOINTS:
        assert one_by_one.asked.count("resolve_entity_ids") == merges + 2  # acme, globex
    assert "resolve_entity_ids_by_tenant" not in one_by_one.asked


async def test_edges_resolve_through_each_tenants_own_aliases() -> None:
    _, found = await _fold(_CountedStore(batched=True), 1000)
    acme_edges, globex_edges = found[1], found[3]
    assert {(r.source_id, r.target_id) for r in acme_edges} == {("b", "x"), ("z", "b"), ("q", "z")}
    # a -> c collapsed onto c itself.
    assert {(r.source_id, r.target_id) for r in globex_edges} == {("y", "c")}
