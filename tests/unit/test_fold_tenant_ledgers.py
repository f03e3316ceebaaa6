"""A unit of work that reads several tenants' ledgers at once
(``contracts.ports.ledger.TenantLedgerReads``) is asked once per unit of work,
and the fold reaches the same state and counts as with a store asked tenant by
tenant: tombstones still skip what they cover and applied ids still
de-duplicate. The memory store stands in, wrapped to offer the batched read."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from adapters.memory.graph import InMemoryGraphStore
from contracts.domain import ErasureTombstone, StreamPartition
from contracts.ids import EntityId, EventId, TenantId
from projections.graph import GraphProjection
from tests.scenarios.harness import to_log
from tests.scenarios.histories import TOPIC_ID, LogBuilder

PARTITION = StreamPartition("events", 0, TOPIC_ID)


class _Batched:
    """A unit of work offering ``tenant_ledgers``; counts what the fold asks."""

    def __init__(self, inner: Any, asked: list[str]) -> None:
        self._inner = inner
        self._asked = asked

    def __getattr__(self, name: str) -> Any:
        if name in {"erasure_tombstone", "applied_event_ids"}:
            self._asked.append(name)
        return getattr(self._inner, name)

    async def tenant_ledgers(
        self, wanted: Mapping[TenantId, Sequence[EventId]]
    ) -> dict[TenantId, tuple[ErasureTombstone | None, set[EventId]]]:
        self._asked.append("tenant_ledgers")
        return {
            tenant: (
                await self._inner.erasure_tombstone(tenant),
                await self._inner.applied_event_ids(tenant, ids),
            )
            for tenant, ids in wanted.items()
        }


class _BatchedStore(InMemoryGraphStore):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    @asynccontextmanager
    async def unit_of_work(self, partition: StreamPartition) -> AsyncIterator[Any]:  # type: ignore[override]
        async with super().unit_of_work(partition) as uow:
            yield _Batched(uow, self.asked)


async def _fold(store: InMemoryGraphStore) -> list[Any]:
    await store.put_erasure_tombstone(ErasureTombstone(TenantId("globex"), PARTITION, 1))
    log = LogBuilder("batched-ledgers")
    first = log.extract("acme", "d1", [("a", "A", "Person")])  # 0
    log.extract("globex", "d1", [("old", "Old", "Person")])  # 1: under the tombstone
    log.extract("globex", "d2", [("new", "New", "Person")])  # 2
    log.redeliver(first)  # 3: the same event id again
    log.extract("acme", "d3", [("b", "B", "Person")])  # 4
    fold = GraphProjection(store)
    records = to_log(log.records)
    reports = [await fold.apply(PARTITION, records[:2]), await fold.apply(PARTITION, records[2:])]
    found = []
    for tenant in ("acme", "globex"):
        ids = [EntityId(i) for i in ("a", "b", "old", "new")]
        found += await store.get_entities(TenantId(tenant), ids)
    return [reports, found]


async def test_the_fold_asks_a_batched_store_once_per_unit_of_work_and_gets_the_same() -> None:
    batched = _BatchedStore()
    assert await _fold(batched) == await _fold(InMemoryGraphStore())
    assert batched.asked == ["tenant_ledgers", "tenant_ledgers"]
