"""The ledger compliance tier for units of work across partitions
(contracts.ports.ledger.UnitsAcrossPartitions, ADR 0024), run by every
adapter's ledger suite through ``LedgerCompliance``; a store without the
capability reports a skip.

What must hold: each listed partition is as it is in its own unit of work;
everything commits or rolls back together; units over overlapping partitions,
whatever the order their partitions are given in, run one after the other and
never deadlock, alone or beside units of one partition.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from contracts.domain import RebuildMarker, StreamPartition
from contracts.errors import CheckpointRegressionError
from contracts.ids import EventId, TenantId
from contracts.ports.ledger import NO_CHECKPOINT, TenantLedgerReads, UnitsAcrossPartitions


class _Boom(Exception):
    """Raised inside a unit of work to prove it rolls back."""


def _partitions(count: int, topics: int = 1) -> list[StreamPartition]:
    """``count`` partitions of fresh topics, spread over ``topics`` of them."""
    names = [(f"test-across-{uuid.uuid4().hex[:10]}", uuid.uuid4().hex) for _ in range(topics)]
    return [StreamPartition(names[i % topics][0], i, names[i % topics][1]) for i in range(count)]


def _across(store: Any) -> UnitsAcrossPartitions[Any]:
    if not isinstance(store, UnitsAcrossPartitions):
        pytest.skip("the store offers no units of work across partitions")
    return store


async def _bump(store: Any, parts: Sequence[StreamPartition]) -> None:
    """One unit of work reads every listed checkpoint and, a moment later,
    advances each by one: only locks that serialise it with every other unit
    holding any of them keep every advance. ``parts`` of one: a plain unit."""
    unit = store.unit_of_work(parts[0]) if len(parts) == 1 else store.unit_of_work_across(parts)
    async with unit as uow:
        seen = [await uow.checkpoint(p) for p in parts]
        await asyncio.sleep(0.05)
        for part, offset in zip(parts, seen, strict=True):
            await uow.advance_checkpoint(part, offset + 1)


class UnitsAcrossPartitionsTier:
    """Mixed into ``LedgerCompliance``, whose hooks it uses."""

    async def write_tenant_fact(self, uow: Any, tenant: TenantId) -> None:
        raise NotImplementedError

    async def has_tenant_fact(self, store: Any, tenant: TenantId) -> bool:
        raise NotImplementedError

    async def test_a_unit_across_partitions_commits_each_checkpoint_with_its_effects(
        self, store: Any
    ) -> None:
        across = _across(store)
        a, b, c = _partitions(3, topics=2)
        tenant = TenantId(f"t-{uuid.uuid4().hex[:10]}")
        marker = RebuildMarker(tenant, b, 0, 9, 2)
        await store.advance_checkpoint(b, 4)
        await store.put_rebuild_marker(marker)
        async with across.unit_of_work_across([c, b, a]) as uow:
            assert [await uow.checkpoint(p) for p in (a, b, c)] == [NO_CHECKPOINT, 4, NO_CHECKPOINT]
            assert await uow.rebuild_markers(b) == [marker]
            assert await uow.rebuild_markers(a) == []
            with pytest.raises(CheckpointRegressionError):
                await uow.advance_checkpoint(b, 3)
            await uow.advance_checkpoint(a, 0)
            await uow.advance_checkpoint(b, 7)
            await uow.advance_checkpoint(c, 1)
            await self.write_tenant_fact(uow, tenant)
            await uow.record_applied_events(tenant, [EventId("e-1")], datetime.now(UTC))
            assert [await uow.checkpoint(p) for p in (a, b, c)] == [0, 7, 1]
            assert await uow.applied_event_ids(tenant, [EventId("e-1")]) == {"e-1"}
        assert [await store.checkpoint(p) for p in (a, b, c)] == [0, 7, 1]
        assert await self.has_tenant_fact(store, tenant)
        assert await store.applied_event_ids(tenant, [EventId("e-1")]) == {"e-1"}

    async def test_a_failed_unit_across_partitions_moves_none_of_them(self, store: Any) -> None:
        across = _across(store)
        a, b = _partitions(2)
        tenant = TenantId(f"t-{uuid.uuid4().hex[:10]}")
        await store.advance_checkpoint(a, 2)
        with pytest.raises(_Boom):
            async with across.unit_of_work_across([a, b]) as uow:
                await uow.advance_checkpoint(a, 5)
                await uow.advance_checkpoint(b, 5)
                await uow.put_rebuild_marker(RebuildMarker(tenant, b, 0, 9, -1))
                await self.write_tenant_fact(uow, tenant)
                await uow.record_applied_events(tenant, [EventId("e-1")], datetime.now(UTC))
                raise _Boom
        assert [await store.checkpoint(p) for p in (a, b)] == [2, NO_CHECKPOINT]
        assert await store.rebuild_markers(b) == []
        assert not await self.has_tenant_fact(store, tenant)
        assert await store.applied_event_ids(tenant, [EventId("e-1")]) == set()

    async def test_a_unit_across_partitions_takes_its_locks_with_the_tenant_ledgers(
        self, store: Any
    ) -> None:
        """The fold's first call in a unit of work reads the tenant ledgers
        (``TenantLedgerReads``), which a store may send with its locks: every
        partition is then answered as if locked first."""
        across = _across(store)
        a, b = _partitions(2)
        tenant = TenantId(f"t-{uuid.uuid4().hex[:10]}")
        now = datetime.now(UTC)
        await store.record_applied_events(tenant, [EventId("old")], now)
        await store.advance_checkpoint(b, 3)
        async with across.unit_of_work_across([a, b]) as uow:
            if isinstance(uow, TenantLedgerReads):
                found = await uow.tenant_ledgers({tenant: [EventId("old"), EventId("new")]})
                assert found == {tenant: (None, {"old"})}
            assert [await uow.checkpoint(p) for p in (a, b)] == [NO_CHECKPOINT, 3]
            await uow.advance_checkpoint(a, 1)
            await uow.advance_checkpoint(b, 4)
            await uow.record_applied_events(tenant, [EventId("new")], now)
        assert [await store.checkpoint(p) for p in (a, b)] == [1, 4]
        assert await store.applied_event_ids(tenant, [EventId("new")]) == {"new"}

    @pytest.mark.parametrize("seen", [False, True], ids=["first-units", "known-partitions"])
    async def test_units_over_overlapping_partitions_wait_for_each_other(
        self, store: Any, seen: bool
    ) -> None:
        """A zombie's unit and its successor's can share partitions, given in
        any order, beside plain units of one of them: they must run one after
        the other (no advance lost) and never wait for each other in a cycle.
        On partitions the store has never seen, or on ones it holds."""
        _across(store)
        a, b, c = _partitions(3, topics=2)
        if seen:
            for part in (a, b, c):
                await store.advance_checkpoint(part, NO_CHECKPOINT + 1)
        units = [[a, b], [c, b, a], [b, c], [b], [c, a], [a, b, c], [a]]
        await asyncio.wait_for(asyncio.gather(*(_bump(store, parts) for parts in units)), 60)
        start = NO_CHECKPOINT + (1 if seen else 0)
        for part in (a, b, c):
            holding = sum(part in parts for parts in units)
            assert await store.checkpoint(part) == start + holding

    async def test_a_unit_across_partitions_needs_distinct_partitions(self, store: Any) -> None:
        across = _across(store)
        a, b = _partitions(2)
        twice = StreamPartition(a.topic, a.partition, a.topic_id)
        for partitions in ([], [a, b, twice]):
            with pytest.raises(ValueError):
                async with across.unit_of_work_across(partitions):
                    pass
        assert await store.checkpoint(a) == NO_CHECKPOINT
