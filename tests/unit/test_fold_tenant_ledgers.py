"""A unit of work that reads several tenants' ledgers at once
(``contracts.ports.ledger.TenantLedgerReads``) is asked once per unit of work,
and the fold reaches the same state and counts as with a store asked tenant by
tenant: tombstones still skip what they cover and applied ids still
de-duplicate. The memory store stands in, wrapped to count what is asked and,
for the store asked tenant by tenant, to hide the batched read."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from adapters.memory.graph import InMemoryGraphStore
from contracts.domain import ErasureTombstone, StreamPartition
from contracts.ids import EntityId, EventId, TenantId
from contracts.ports.ledger import TenantLedgerReads
from projections.graph import GraphProjection
from tests.scenarios.harness import to_log
from tests.scenarios.histories import TOPIC_ID, LogBuilder

PARTITION = StreamPartition("events", 0, TOPIC_ID)


class _Counted:
    """A unit of work read tenant by tenant (the batched read hidden, as in a
    store without it); counts what the fold asks."""

    def __init__(self, inner: Any, asked: list[str]) -> None:
        self._inner = inner
        self._asked = asked

    def __getattr__(self, name: str) -> Any:
        if name == "tenant_ledgers":
            raise AttributeError(name)
        if name in {"erasure_tombstone", "applied_event_ids"}:
            self._asked.append(name)
        return getattr(self._inner, name)


class _CountedBatched(_Counted):
    """The same, offering the memory store's batched read."""

    async def tenant_ledgers(
        self, wanted: Mapping[TenantId, Sequence[EventId]]
    ) -> dict[TenantId, tuple[ErasureTombstone | None, set[EventId]]]:
        self._asked.append("tenant_ledgers")
        found: dict[
            TenantId, tuple[ErasureTombstone | None, set[EventId]]
        ] = await self._inner.tenant_ledgers(wanted)
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
            assert isinstance(counted, TenantLedgerReads) is self.batched
            yield counted


async def _fold(store: _CountedStore) -> list[Any]:
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
    batched, one_by_one = _CountedStore(batched=True), _CountedStore(batched=False)
    assert await _fold(batched) == await _fold(one_by_one)
    assert batched.asked == ["tenant_ledgers", "tenant_ledgers"]
    assert "tenant_ledgers" not in one_by_one.asked
    assert {"erasure_tombstone", "applied_event_ids"} <= set(one_by_one.asked)
