"""Before a unit of work's first call, the graph fold tells a store that
offers it (``contracts.ports.graph.ResolutionAhead``) the edge endpoints of
the segment's extractions, by tenant: what it will ask ``resolve_entity_ids_by_tenant``
for, so that the store may resolve them with its first statement. A
segment with more endpoints than a chunk tells nothing (they are resolved
chunk by chunk). The memory store offers it and ignores it; wrapped here, it
records what it is told."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters.memory.graph import InMemoryGraphStore
from contracts.domain import StreamPartition
from contracts.ids import EntityId, TenantId
from contracts.ports.graph import ResolutionAhead
from projections.graph import GraphProjection
from tests.scenarios.harness import to_log
from tests.scenarios.histories import TOPIC_ID, LogBuilder

PARTITION = StreamPartition("events", 0, TOPIC_ID)


class _Told:
    def __init__(self, inner: Any, told: list[dict[TenantId, list[EntityId]]]) -> None:
        self._inner, self._told = inner, told

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def resolve_ahead(self, asks: Mapping[TenantId, Sequence[EntityId]]) -> None:
        self._told.append({tenant: list(ids) for tenant, ids in asks.items()})
        self._inner.resolve_ahead(asks)


class _TellingStore(InMemoryGraphStore):
    def __init__(self) -> None:
        super().__init__()
        self.told: list[dict[TenantId, list[EntityId]]] = []

    @asynccontextmanager
    async def unit_of_work(self, partition: StreamPartition) -> AsyncIterator[Any]:  # type: ignore[override]
        async with super().unit_of_work(partition) as uow:
            told = _Told(uow, self.told)
            assert isinstance(told, ResolutionAhead)
            yield told


def _log() -> LogBuilder:
    log = LogBuilder("resolve-ahead")
    log.extract("acme", "d1", [("a", "A", "Person"), ("b", "B", "Person")], [("a", "b", "KNOWS")])
    log.merge("acme", "b", ["a"])
    log.extract("globex", "d1", [("c", "C", "Org"), ("d", "D", "Org")], [("c", "d", "OWNS")])
    acme = [("x", "X", "Person"), ("a", "A", "Person"), ("b", "B", "Person")]
    log.extract("acme", "d2", acme, [("x", "a", "KNOWS"), ("x", "b", "KNOWS")])
    return log


@pytest.mark.parametrize(("chunk", "told"), [(1000, True), (5, True), (4, False)])
async def test_a_segment_tells_its_extractions_endpoints_ahead(chunk: int, told: bool) -> None:
    store = _TellingStore()
    fold = GraphProjection(store, chunk=chunk)
    await fold.apply(PARTITION, to_log(_log().records))
    # One segment, one unit of work: five endpoints in all, a, b and x of
    # acme and c and d of globex (the merge's ids are not edge endpoints).
    expected = {TenantId("acme"): ["a", "b", "x"], TenantId("globex"): ["c", "d"]}
    assert store.told == ([expected] if told else [])
