"""The projection-ledger compliance suite: checkpoints, fencing, atomicity,
rebuild markers, erasure tombstones and the applied-event ledger.

Written once; every store adapter's ledger runs it through a subclass that
provides the ``store`` fixture and two hooks that write and observe one
tenant-scoped fact through the store's own port (an entity for a graph store, a
vector for a vector store). Every test uses its own topic name and tenants, so
the suite can run against one long-lived real database.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.compliance.ledger_across import UnitsAcrossPartitionsTier
from contracts.domain import ErasureTombstone, RebuildMarker, StreamPartition
from contracts.errors import CheckpointRegressionError, TopicRecreatedError
from contracts.ids import EventId, TenantId
from contracts.ports.ledger import NO_CHECKPOINT, TenantLedgerReads


def fresh_tenant() -> TenantId:
    return TenantId(f"t-{uuid.uuid4().hex[:10]}")


def fresh_partition(partition: int = 0) -> StreamPartition:
    return StreamPartition(
        topic=f"test-events-{uuid.uuid4().hex[:10]}", partition=partition, topic_id=uuid.uuid4().hex
    )


class Boom(Exception):
    """Raised inside a unit of work to prove it rolls back."""


async def _bump_together(store: Any, part: StreamPartition, units: int) -> None:
    """``units`` units of work at once, each reading the checkpoint and, a
    moment later, advancing it by one: only a lock that serialises them keeps
    every advance."""

    async def bump() -> None:
        async with store.unit_of_work(part) as uow:
            seen = await uow.checkpoint(part)
            await asyncio.sleep(0.05)
            await uow.advance_checkpoint(part, seen + 1)

    await asyncio.wait_for(asyncio.gather(*(bump() for _ in range(units))), timeout=60)


class LedgerCompliance(UnitsAcrossPartitionsTier):
    """Subclasses provide an async fixture ``store`` and the two hooks below."""

    async def write_tenant_fact(self, uow: Any, tenant: TenantId) -> None:
        raise NotImplementedError

    async def has_tenant_fact(self, store: Any, tenant: TenantId) -> bool:
        raise NotImplementedError

    # -- checkpoints -------------------------------------------------------

    async def test_a_new_partition_has_no_checkpoint(self, store: Any) -> None:
        assert await store.checkpoint(fresh_partition()) == NO_CHECKPOINT

    async def test_a_checkpoint_advances_and_reads_back(self, store: Any) -> None:
        part = fresh_partition()
        await store.advance_checkpoint(part, 7)
        assert await store.checkpoint(part) == 7
        await store.advance_checkpoint(part, 7)  # equal is a no-op
        assert await store.checkpoint(part) == 7

    async def test_a_checkpoint_never_moves_backwards(self, store: Any) -> None:
        part = fresh_partition()
        await store.advance_checkpoint(part, 10)
        with pytest.raises(CheckpointRegressionError):
            await store.advance_checkpoint(part, 9)
        assert await store.checkpoint(part) == 10

    async def test_checkpoints_are_per_topic_and_partition(self, store: Any) -> None:
        p0 = fresh_partition(0)
        p1 = StreamPartition(p0.topic, 1, p0.topic_id)
        other = fresh_partition(0)
        await store.advance_checkpoint(p0, 3)
        assert await store.checkpoint(p1) == NO_CHECKPOINT
        assert await store.checkpoint(other) == NO_CHECKPOINT
        await store.advance_checkpoint(p1, 5)
        listed = await store.checkpoints()
        assert listed[(p0.topic, 0)] == 3 and listed[(p0.topic, 1)] == 5

    async def test_a_recreated_topic_is_refused(self, store: Any) -> None:
        part = fresh_partition()
        await store.advance_checkpoint(part, 4)
        recreated = StreamPartition(part.topic, part.partition, uuid.uuid4().hex)
        with pytest.raises(TopicRecreatedError):
            await store.checkpoint(recreated)
        with pytest.raises(TopicRecreatedError):
            async with store.unit_of_work(recreated) as uow:
                await uow.advance_checkpoint(recreated, 5)
        assert await store.checkpoint(part) == 4

    # -- units of work -----------------------------------------------------

    async def test_a_unit_of_work_commits_effects_with_the_checkpoint(self, store: Any) -> None:
        part, tenant = fresh_partition(), fresh_tenant()
        async with store.unit_of_work(part) as uow:
            await self.write_tenant_fact(uow, tenant)
            await uow.advance_checkpoint(part, 0)
            # Reads inside the transaction see its earlier writes.
            assert await self.has_tenant_fact(uow, tenant)
            assert await uow.checkpoint(part) == 0
        assert await self.has_tenant_fact(store, tenant)
        assert await store.checkpoint(part) == 0

    async def test_a_failed_unit_of_work_leaves_neither_effects_nor_checkpoint(
        self, store: Any
    ) -> None:
        part, tenant = fresh_partition(), fresh_tenant()
        await store.advance_checkpoint(part, 2)
        with pytest.raises(Boom):
            async with store.unit_of_work(part) as uow:
                await self.write_tenant_fact(uow, tenant)
                await uow.advance_checkpoint(part, 9)
                await uow.put_rebuild_marker(
                    RebuildMarker(tenant, part, start_offset=0, end_offset=9, applied_through=-1)
                )
                await uow.record_applied_events(tenant, [EventId("e-1")], datetime.now(UTC))
                raise Boom
        assert not await self.has_tenant_fact(store, tenant)
        assert await store.checkpoint(part) == 2
        assert await store.rebuild_markers(part) == []
        assert await store.applied_event_ids(tenant, [EventId("e-1")]) == set()

    async def test_units_of_work_on_one_partition_do_not_interleave(self, store: Any) -> None:
        """Two workers (a zombie and its successor) read the checkpoint and advance
        it by one: the store's lock on the checkpoint must serialise them, so no
        advance is lost and neither sees the other's uncommitted state."""
        part = fresh_partition()
        await store.advance_checkpoint(part, 0)
        await _bump_together(store, part, 3)
        assert await store.checkpoint(part) == 3

    async def test_the_first_units_of_work_of_a_partition_do_not_interleave(
        self, store: Any
    ) -> None:
        """As above on a partition the store has never seen: there is nothing
        to lock until the first unit of work creates it, and the units that
        start together must still run one after the other."""
        part = fresh_partition()
        await _bump_together(store, part, 3)
        assert await store.checkpoint(part) == NO_CHECKPOINT + 3

    async def test_a_unit_of_work_may_hold_several_tenants(self, store: Any) -> None:
        part, a, b = fresh_partition(), fresh_tenant(), fresh_tenant()
        async with store.unit_of_work(part) as uow:
            await self.write_tenant_fact(uow, a)
            await self.write_tenant_fact(uow, b)
            await uow.advance_checkpoint(part, 1)
        assert await self.has_tenant_fact(store, a)
        assert await self.has_tenant_fact(store, b)

    async def test_markers_read_while_they_are_put_and_closed(self, store: Any) -> None:
        """A reader polling a partition's markers (the replay command, a status
        page) while units of work open and close them sees each marker whole or
        not at all, never a half-deleted one."""
        part, tenant = fresh_partition(), fresh_tenant()
        marker = RebuildMarker(tenant, part, 0, 9, -1)
        writing = True
        seen: list[list[RebuildMarker]] = []

        async def write() -> None:
            nonlocal writing
            try:
                for _ in range(400):
                    await store.put_rebuild_marker(marker)
                    await asyncio.sleep(0)
                    await store.close_rebuild_marker(tenant, part)
                    await asyncio.sleep(0)
            finally:
                writing = False

        async def read() -> None:
            while writing:
                seen.append(await store.rebuild_markers(part))
                await asyncio.sleep(0)

        await asyncio.gather(write(), read(), read(), read())
        assert seen and all(markers in ([], [marker]) for markers in seen)

    async def test_inside_a_unit_of_work_its_partition_reads_follow_its_writes(
        self, store: Any
    ) -> None:
        """Checkpoint and markers read inside a unit of work reflect its own
        earlier writes, and a regression is refused at the call, not at commit."""
        part, a, b = fresh_partition(), fresh_tenant(), fresh_tenant()
        await store.advance_checkpoint(part, 3)
        await store.put_rebuild_marker(RebuildMarker(a, part, 0, 9, 1))
        async with store.unit_of_work(part) as uow:
            assert await uow.checkpoint(part) == 3
            assert await uow.rebuild_markers(part) == [RebuildMarker(a, part, 0, 9, 1)]
            await uow.advance_checkpoint(part, 5)
            assert await uow.checkpoint(part) == 5
            with pytest.raises(CheckpointRegressionError):
                await uow.advance_checkpoint(part, 4)
            assert await uow.checkpoint(part) == 5
            await uow.put_rebuild_marker(RebuildMarker(b, part, 0, 9, 4))
            await uow.put_rebuild_marker(RebuildMarker(a, part, 0, 9, 2))
            assert await uow.close_rebuild_marker(b, part) is True
            assert await uow.rebuild_markers(part) == [RebuildMarker(a, part, 0, 9, 2)]
            await uow.put_rebuild_marker(RebuildMarker(b, part, 0, 9, 5))
            await uow.advance_checkpoint(part, 6)
            assert (await uow.checkpoints())[(part.topic, part.partition)] == 6
            assert await store.checkpoint(part) == 3
        assert await store.checkpoint(part) == 6
        assert await store.rebuild_markers(part) == sorted(
            [RebuildMarker(a, part, 0, 9, 2), RebuildMarker(b, part, 0, 9, 5)],
            key=lambda m: m.tenant_id,
        )

    async def test_a_unit_of_work_refuses_a_recreated_topic_when_reading(self, store: Any) -> None:
        part = fresh_partition()
        await store.advance_checkpoint(part, 4)
        recreated = StreamPartition(part.topic, part.partition, uuid.uuid4().hex)
        async with store.unit_of_work(part) as uow:
            with pytest.raises(TopicRecreatedError):
                await uow.checkpoint(recreated)
            with pytest.raises(TopicRecreatedError):
                await uow.advance_checkpoint(recreated, 5)
            assert await uow.checkpoint(part) == 4
        # A partition that held no checkpoint takes the topic id of its first advance.
        fresh = fresh_partition()
        async with store.unit_of_work(fresh) as uow:
            await uow.advance_checkpoint(fresh, 0)
            with pytest.raises(TopicRecreatedError):
                await uow.checkpoint(StreamPartition(fresh.topic, 0, uuid.uuid4().hex))
        with pytest.raises(TopicRecreatedError):
            await store.checkpoint(StreamPartition(fresh.topic, 0, uuid.uuid4().hex))

    async def test_a_unit_of_work_reads_other_partitions_as_stored(self, store: Any) -> None:
        part, other, tenant = fresh_partition(), fresh_partition(), fresh_tenant()
        await store.advance_checkpoint(other, 8)
        await store.put_rebuild_marker(RebuildMarker(tenant, other, 0, 9, 3))
        async with store.unit_of_work(part) as uow:
            await uow.advance_checkpoint(part, 1)
            assert await uow.checkpoint(other) == 8
            assert await uow.rebuild_markers(other) == [RebuildMarker(tenant, other, 0, 9, 3)]
            assert await uow.rebuild_markers(part) == []
        assert await store.checkpoint(part) == 1
        assert await store.checkpoint(other) == 8

    async def test_applied_events_recorded_in_a_unit_of_work_are_seen_in_it(
        self, store: Any
    ) -> None:
        part, a, b = fresh_partition(), fresh_tenant(), fresh_tenant()
        now = datetime.now(UTC)
        await store.record_applied_events(a, [EventId("old")], now)
        async with store.unit_of_work(part) as uow:
            await uow.record_applied_events(a, [EventId("x"), EventId("y")], now)
            await uow.record_applied_events(b, [EventId("x")], now)
            asked = [EventId("old"), EventId("x"), EventId("z")]
            assert await uow.applied_event_ids(a, asked) == {"old", "x"}
            assert await uow.applied_event_ids(a, [EventId("y")]) == {"y"}
            assert await uow.applied_event_ids(b, asked) == {"x"}
            assert await store.applied_event_ids(a, asked) == {"old"}
            await uow.advance_checkpoint(part, 0)
        assert await store.applied_event_ids(a, [*asked, EventId("y")]) == {"old", "x", "y"}
        assert await store.applied_event_ids(b, asked) == {"x"}

    async def test_forgetting_inside_a_unit_of_work_drops_what_it_recorded(
        self, store: Any
    ) -> None:
        part, a, b = fresh_partition(), fresh_tenant(), fresh_tenant()
        now = datetime.now(UTC)
        async with store.unit_of_work(part) as uow:
            await uow.record_applied_events(a, [EventId("x")], now)
            await uow.record_applied_events(b, [EventId("x")], now)
            await uow.forget_applied_events(a)
            assert await uow.applied_event_ids(a, [EventId("x")]) == set()
            await uow.record_applied_events(a, [EventId("y")], now)
        assert await store.applied_event_ids(a, [EventId("x"), EventId("y")]) == {"y"}
        assert await store.applied_event_ids(b, [EventId("x")]) == {"x"}

    async def test_expiring_inside_a_unit_of_work_counts_what_it_recorded(self, store: Any) -> None:
        part, tenant = fresh_partition(), fresh_tenant()
        now = datetime.now(UTC)
        # Far enough back that no other test's rows expire with it.
        ancient = now - timedelta(days=365 * 300)
        async with store.unit_of_work(part) as uow:
            await uow.record_applied_events(tenant, [EventId("old")], ancient)
            await uow.record_applied_events(tenant, [EventId("new")], now)
            assert await uow.expire_applied_events(ancient + timedelta(days=1)) == 1
            assert await uow.applied_event_ids(tenant, [EventId("old"), EventId("new")]) == {"new"}
        assert await store.applied_event_ids(tenant, [EventId("old"), EventId("new")]) == {"new"}

    # -- rebuild markers ---------------------------------------------------

    async def test_rebuild_markers_round_trip_and_close(self, store: Any) -> None:
        part, a, b = fresh_partition(), fresh_tenant(), fresh_tenant()
        first = RebuildMarker(
            a, part, start_offset=0, end_offset=50, applied_through=-1, state="deleting"
        )
        await store.put_rebuild_marker(first)
        await store.put_rebuild_marker(RebuildMarker(b, part, 0, 40, 10))
        moved = RebuildMarker(a, part, 0, 50, 20)  # same (tenant, partition): replaces
        await store.put_rebuild_marker(moved)
        markers = await store.rebuild_markers(part)
        assert markers == sorted(
            [moved, RebuildMarker(b, part, 0, 40, 10)], key=lambda m: m.tenant_id
        )
        assert await store.is_rebuilding(a)
        assert await store.rebuild_markers(fresh_partition()) == []
        assert await store.close_rebuild_marker(a, part) is True
        assert await store.close_rebuild_marker(a, part) is False
        assert not await store.is_rebuilding(a)
        assert await store.is_rebuilding(b)

    async def test_a_marker_reports_when_its_window_is_covered(self, store: Any) -> None:
        part, tenant = fresh_partition(), fresh_tenant()
        assert not RebuildMarker(tenant, part, 0, 10, 8).complete
        assert RebuildMarker(tenant, part, 0, 10, 9).complete
        assert not RebuildMarker(tenant, part, 0, 10, 9, state="deleting").complete

    # -- tombstones and applied events ----------------------------------------

    async def test_erasure_tombstones_round_trip(self, store: Any) -> None:
        part, tenant = fresh_partition(), fresh_tenant()
        assert await store.erasure_tombstone(tenant) is None
        stone = ErasureTombstone(tenant, part, 42)
        await store.put_erasure_tombstone(stone)
        assert await store.erasure_tombstone(tenant) == stone
        assert await store.erasure_tombstone(fresh_tenant()) is None

    async def test_applied_events_are_per_tenant(self, store: Any) -> None:
        a, b = fresh_tenant(), fresh_tenant()
        now = datetime.now(UTC)
        await store.record_applied_events(a, [EventId("x"), EventId("y")], now)
        assert await store.applied_event_ids(a, [EventId("x"), EventId("z")]) == {"x"}
        assert await store.applied_event_ids(b, [EventId("x")]) == set()
        await store.forget_applied_events(a)
        assert await store.applied_event_ids(a, [EventId("x"), EventId("y")]) == set()

    async def test_a_unit_of_work_reads_several_tenants_ledgers_as_one_by_one(
        self, store: Any
    ) -> None:
        """``tenant_ledgers`` (contracts.ports.ledger.TenantLedgerReads, which
        a unit of work may offer) answers what ``erasure_tombstone`` and
        ``applied_event_ids`` answer for each tenant: ids recorded earlier in
        the unit of work count, another tenant's ids and repeats do not."""
        erased, live, absent = fresh_tenant(), fresh_tenant(), fresh_tenant()
        part = fresh_partition()
        now = datetime.now(UTC)
        await store.put_erasure_tombstone(ErasureTombstone(erased, part, 41))
        await store.record_applied_events(erased, [EventId("e1"), EventId("e5")], now)
        await store.record_applied_events(live, [EventId("e2")], now)
        async with store.unit_of_work(part) as uow:
            reads = uow if isinstance(uow, TenantLedgerReads) else None
            if reads is None:
                pytest.skip("this store's units of work read tenant ledgers one by one")
            await uow.record_applied_events(live, [EventId("e9")], now)
            wanted = {
                erased: [EventId("e1"), EventId("e3"), EventId("e1")],
                live: [EventId("e2"), EventId("e9"), EventId("e5"), EventId("e1")],
                absent: [],
            }
            found = await reads.tenant_ledgers(wanted)
            one_by_one = {}
            for tenant, ids in wanted.items():
                stone = await uow.erasure_tombstone(tenant)
                one_by_one[tenant] = (stone, await uow.applied_event_ids(tenant, ids))
            assert found == one_by_one
            assert found == {
                erased: (ErasureTombstone(erased, part, 41), {"e1"}),
                live: (None, {"e2", "e9"}),
                absent: (None, set()),
            }
            assert await reads.tenant_ledgers({}) == {}

    async def test_applied_events_expire_by_age(self, store: Any) -> None:
        tenant = fresh_tenant()
        now = datetime.now(UTC)
        await store.record_applied_events(tenant, [EventId("old")], now - timedelta(days=8))
        await store.record_applied_events(tenant, [EventId("new")], now)
        dropped = await store.expire_applied_events(now - timedelta(days=7))
        assert dropped >= 1
        assert await store.applied_event_ids(tenant, [EventId("old"), EventId("new")]) == {"new"}

    # -- acted-on control events (docs/design.md 6.4, "Control events act once") -------

    async def test_control_events_are_recorded_once_and_read_back(self, store: Any) -> None:
        tenant = fresh_tenant()
        now = datetime.now(UTC)
        assert await store.acted_control_events(tenant, [EventId("r-1")]) == {}
        assert await store.acted_control_events(tenant, []) == {}
        await store.record_control_event(tenant, EventId("r-1"), 12, now)
        await store.record_control_event(tenant, EventId("e-1"), 30, now)
        # Recording an id again keeps the first record.
        await store.record_control_event(tenant, EventId("r-1"), 40, now + timedelta(hours=1))
        asked = [EventId("r-1"), EventId("e-1"), EventId("other")]
        assert await store.acted_control_events(tenant, asked) == {"r-1": 12, "e-1": 30}
        assert await store.acted_control_events(tenant, [EventId("r-1"), EventId("r-1")]) == {
            "r-1": 12
        }
        # Not applied events: the two ledgers are apart.
        assert await store.applied_event_ids(tenant, asked) == set()

    async def test_control_events_are_per_tenant(self, store: Any) -> None:
        a, b = fresh_tenant(), fresh_tenant()
        await store.record_control_event(a, EventId("x"), 3, datetime.now(UTC))
        assert await store.acted_control_events(a, [EventId("x")]) == {"x": 3}
        assert await store.acted_control_events(b, [EventId("x")]) == {}
        await store.record_control_event(b, EventId("x"), 9, datetime.now(UTC))
        assert await store.acted_control_events(a, [EventId("x")]) == {"x": 3}
        assert await store.acted_control_events(b, [EventId("x")]) == {"x": 9}

    async def test_control_events_survive_forgetting_expiry_and_the_tenant_purge(
        self, store: Any
    ) -> None:
        """A replay or an erasure forgets the tenant's applied ids and deletes
        its data; neither may forget which control events were acted on."""
        part, tenant = fresh_partition(), fresh_tenant()
        # Far enough back that no other test's rows expire with it.
        ancient = datetime.now(UTC) - timedelta(days=365 * 300)
        async with store.unit_of_work(part) as uow:
            await self.write_tenant_fact(uow, tenant)
            await uow.record_applied_events(tenant, [EventId("a")], ancient)
            await uow.record_control_event(tenant, EventId("r"), 4, ancient)
            await uow.advance_checkpoint(part, 4)
        await store.record_control_event(tenant, EventId("e"), 5, ancient)
        await store.forget_applied_events(tenant)
        await store.expire_applied_events(ancient + timedelta(days=1))
        sweep = await store.delete_by_tenant(tenant)
        assert sweep.complete and not await self.has_tenant_fact(store, tenant)
        asked = [EventId("r"), EventId("e"), EventId("a")]
        assert await store.acted_control_events(tenant, asked) == {"r": 4, "e": 5}
        # The same inside a unit of work, which may defer its own writes.
        async with store.unit_of_work(part) as uow:
            await uow.record_control_event(tenant, EventId("u"), 6, ancient)
            await uow.record_applied_events(tenant, [EventId("b")], ancient)
            await uow.forget_applied_events(tenant)
            await uow.expire_applied_events(ancient + timedelta(days=1))
            await uow.delete_by_tenant(tenant)
            assert await uow.acted_control_events(tenant, [*asked, EventId("u")]) == {
                "r": 4,
                "e": 5,
                "u": 6,
            }
            await uow.advance_checkpoint(part, 6)
        assert await store.acted_control_events(tenant, [*asked, EventId("u")]) == {
            "r": 4,
            "e": 5,
            "u": 6,
        }
        assert await store.applied_event_ids(tenant, [EventId("a"), EventId("b")]) == set()

    async def test_control_events_recorded_in_a_unit_of_work_are_seen_in_it(
        self, store: Any
    ) -> None:
        part, tenant = fresh_partition(), fresh_tenant()
        now = datetime.now(UTC)
        async with store.unit_of_work(part) as uow:
            assert await uow.acted_control_events(tenant, [EventId("r")]) == {}
            await uow.record_control_event(tenant, EventId("r"), 7, now)
            assert await uow.acted_control_events(tenant, [EventId("r")]) == {"r": 7}
            await uow.advance_checkpoint(part, 7)
        assert await store.acted_control_events(tenant, [EventId("r")]) == {"r": 7}

    async def test_a_failed_unit_of_work_records_no_control_event(self, store: Any) -> None:
        part, tenant = fresh_partition(), fresh_tenant()
        now = datetime.now(UTC)
        await store.record_control_event(tenant, EventId("kept"), 1, now)
        with pytest.raises(Boom):
            async with store.unit_of_work(part) as uow:
                await uow.record_control_event(tenant, EventId("lost"), 8, now)
                await uow.advance_checkpoint(part, 8)
                raise Boom
        asked = [EventId("kept"), EventId("lost")]
        assert await store.acted_control_events(tenant, asked) == {"kept": 1}
        assert await store.checkpoint(part) == NO_CHECKPOINT
