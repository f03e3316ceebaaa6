"""``ProjectionLedger`` over one Postgres connection (see vectors.py for why
one connection-parametrised body serves both direct calls and units of work).

The checkpoint row of a partition is the lock that serialises units of work on
it: ``lock`` inserts the row if it is missing (offset NULL: "no checkpoint")
and takes it ``FOR UPDATE``, so the comparison and the advance happen in one
transaction that no other writer of the partition can interleave with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from adapters.ledger_rules import check_topic_id, regression
from adapters.pgvector.errors import translated
from adapters.pgvector.sql import Statements
from contracts.domain import ErasureTombstone, RebuildMarker, StreamPartition
from contracts.ids import EventId, TenantId
from contracts.ports.ledger import NO_CHECKPOINT

__all__ = ["PgLedger"]


def _offset(partition: StreamPartition, row: Any) -> int:
    if row is None or row["last_offset"] is None:
        return NO_CHECKPOINT
    check_topic_id(partition, row["topic_id"])
    return int(row["last_offset"])


class PgLedger:
    def __init__(self, conn: asyncpg.Connection, sql: Statements) -> None:
        self._conn = conn
        self._sql = sql
        # Checkpoint rows this transaction has locked, as they stand in it
        # (one PgUnitOfWork lives exactly as long as its transaction): no
        # other transaction can change a locked row, so its checkpoint is
        # answered from here, a round trip fewer per unit of work.
        self._locked: dict[tuple[str, int], Any] = {}

    async def lock(self, partition: StreamPartition) -> int:
        """Take the partition's checkpoint row for this transaction; its offset."""
        key = (partition.topic, partition.partition)
        with translated("pgvector.checkpoint lock"):
            row = await self._conn.fetchrow(self._sql.lock_checkpoint, *key)
            if row is None:
                # The partition's first unit of work creates the row to lock;
                # every later one locks it in one round trip. Two first ones
                # at once: the second's insert waits for the first's commit,
                # changes nothing, and its select then locks the row.
                await self._conn.execute(self._sql.ensure_checkpoint_row, *key, partition.topic_id)
                row = await self._conn.fetchrow(self._sql.lock_checkpoint, *key)
        self._locked[key] = row
        return _offset(partition, row)

    async def lock_all(self, partitions: Sequence[StreamPartition]) -> None:
        """``lock`` for several partitions, given in lock order
        (contracts.ports.ledger.lock_order): one statement when every row
        exists; when one is missing, every row is locked by ``lock``, in
        order, creating the missing ones. Waiting on another transaction only
        ever happens on a row after all those held, so two such units never
        wait for each other in a cycle."""
        if len(partitions) == 1:
            await self.lock(partitions[0])
            return
        topics = [p.topic for p in partitions]
        numbers = [p.partition for p in partitions]
        with translated("pgvector.checkpoint lock"):
            # In a savepoint: should a row be missing, the rows the select
            # locked may lie after it in lock order, and holding them while
            # creating it could wait in a cycle with a unit holding it (a CI
            # run met that deadlock). Rolling back to the savepoint releases
            # them, and the rows are then locked one by one, in order.
            savepoint = self._conn.transaction()
            await savepoint.start()
            rows = await self._conn.fetch(self._sql.lock_checkpoints, topics, numbers)
            if len(rows) < len(partitions):
                await savepoint.rollback()
                rows = []
            else:
                await savepoint.commit()
        for row in rows:
            self._locked[(row["topic"], row["partition"])] = row
        for partition in partitions:
            if (partition.topic, partition.partition) not in self._locked:
                await self.lock(partition)

    async def checkpoint(self, partition: StreamPartition) -> int:
        key = (partition.topic, partition.partition)
        if key in self._locked:
            return _offset(partition, self._locked[key])
        with translated("pgvector.checkpoint"):
            row = await self._conn.fetchrow(
                self._sql.read_checkpoint, partition.topic, partition.partition
            )
        return _offset(partition, row)

    async def advance_checkpoint(self, partition: StreamPartition, offset: int) -> None:
        key = (partition.topic, partition.partition)
        if key not in self._locked:
            await self.lock(partition)
        # The compare and the write are one statement under the row lock this
        # transaction holds (sql.advance_checkpoint keeps the rules of
        # adapters.ledger_rules); only when it changes nothing is there an
        # error to name, and reading the row then says which.
        with translated("pgvector.advance_checkpoint"):
            row = await self._conn.fetchrow(
                self._sql.advance_checkpoint, *key, offset, partition.topic_id
            )
        if row is not None:
            self._locked[key] = row  # the row as the statement left it
            return
        current = await self.checkpoint(partition)  # TopicRecreatedError, if that is why
        raise regression(partition, current, offset)

    async def checkpoints(self) -> dict[tuple[str, int], int]:
        with translated("pgvector.checkpoints"):
            rows = await self._conn.fetch(self._sql.all_checkpoints)
        return {(r["topic"], r["partition"]): r["last_offset"] for r in rows}

    async def rebuild_markers(self, partition: StreamPartition) -> list[RebuildMarker]:
        # Not read with the lock, as Neo4j's are: a statement that waited for
        # the row lock reads the re-fetched row but answers a subquery from the
        # snapshot it took before the wait, so markers written by the unit of
        # work it waited on would be missing. Read after the lock, they are not.
        with translated("pgvector.rebuild_markers"):
            rows = await self._conn.fetch(self._sql.markers, partition.topic, partition.partition)
        return [
            RebuildMarker(
                tenant_id=r["tenant_id"],
                partition=StreamPartition(r["topic"], r["partition"], r["topic_id"]),
                start_offset=r["start_offset"],
                end_offset=r["end_offset"],
                applied_through=r["applied_through"],
                state=r["state"],
            )
            for r in rows
        ]

    async def put_rebuild_marker(self, marker: RebuildMarker) -> None:
        p = marker.partition
        with translated("pgvector.put_rebuild_marker"):
            await self._conn.execute(
                self._sql.put_marker,
                marker.tenant_id,
                p.topic,
                p.partition,
                p.topic_id,
                marker.start_offset,
                marker.end_offset,
                marker.applied_through,
                marker.state,
            )

    async def close_rebuild_marker(self, tenant_id: TenantId, partition: StreamPartition) -> bool:
        with translated("pgvector.close_rebuild_marker"):
            status = await self._conn.execute(
                self._sql.close_marker, tenant_id, partition.topic, partition.partition
            )
        return bool(status == "DELETE 1")

    async def is_rebuilding(self, tenant_id: TenantId) -> bool:
        with translated("pgvector.is_rebuilding"):
            return bool(await self._conn.fetchval(self._sql.is_rebuilding, tenant_id))

    async def erasure_tombstone(self, tenant_id: TenantId) -> ErasureTombstone | None:
        with translated("pgvector.erasure_tombstone"):
            row = await self._conn.fetchrow(self._sql.tombstone, tenant_id)
        if row is None:
            return None
        return ErasureTombstone(
            tenant_id=row["tenant_id"],
            partition=StreamPartition(row["topic"], row["partition"], row["topic_id"]),
            offset=row["erased_offset"],
        )

    async def put_erasure_tombstone(self, tombstone: ErasureTombstone) -> None:
        p = tombstone.partition
        with translated("pgvector.put_erasure_tombstone"):
            await self._conn.execute(
                self._sql.put_tombstone,
                tombstone.tenant_id,
                p.topic,
                p.partition,
                p.topic_id,
                tombstone.offset,
            )

    async def applied_event_ids(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> set[EventId]:
        asked = list(dict.fromkeys(event_ids))
        if not asked:
            return set()
        with translated("pgvector.applied_event_ids"):
            rows = await self._conn.fetch(self._sql.applied, tenant_id, asked)
        return {EventId(r["event_id"]) for r in rows}

    async def tenant_ledgers(
        self, wanted: Mapping[TenantId, Sequence[EventId]]
    ) -> dict[TenantId, tuple[ErasureTombstone | None, set[EventId]]]:
        """``erasure_tombstone`` and ``applied_event_ids`` of every tenant of
        ``wanted``, in one statement (contracts.ports.ledger.TenantLedgerReads)."""
        if not wanted:
            return {}
        pairs = sorted({(tenant, event_id) for tenant, ids in wanted.items() for event_id in ids})
        with translated("pgvector.tenant_ledgers"):
            rows = await self._conn.fetch(
                self._sql.tenant_ledgers,
                sorted(wanted),
                [tenant for tenant, _ in pairs],
                [event_id for _, event_id in pairs],
            )
        stones: dict[TenantId, ErasureTombstone] = {}
        applied: dict[TenantId, set[EventId]] = {tenant: set() for tenant in wanted}
        for r in rows:
            tenant = TenantId(r["tenant_id"])
            if r["kind"] == 0:
                partition = StreamPartition(r["topic"], r["partition"], r["topic_id"])
                stones[tenant] = ErasureTombstone(tenant, partition, r["erased_offset"])
            else:
                applied[tenant].add(EventId(r["event_id"]))
        return {tenant: (stones.get(tenant), applied[tenant]) for tenant in wanted}

    async def record_applied_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId], applied_at: datetime
    ) -> None:
        # ON CONFLICT cannot touch one row twice in a statement: de-duplicate.
        ids = list(dict.fromkeys(event_ids))
        if not ids:
            return
        with translated("pgvector.record_applied_events"):
            await self._conn.execute(self._sql.record_applied, tenant_id, ids, applied_at)

    async def forget_applied_events(self, tenant_id: TenantId) -> None:
        with translated("pgvector.forget_applied_events"):
            await self._conn.execute(self._sql.forget_applied, tenant_id)

    async def expire_applied_events(self, older_than: datetime) -> int:
        with translated("pgvector.expire_applied_events"):
            status = await self._conn.execute(self._sql.expire_applied, older_than)
        return int(status.split()[-1])

    async def acted_control_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> dict[EventId, int]:
        asked = list(dict.fromkeys(event_ids))
        if not asked:
            return {}
        with translated("pgvector.acted_control_events"):
            rows = await self._conn.fetch(self._sql.acted_control, tenant_id, asked)
        return {EventId(r["event_id"]): int(r["acted_offset"]) for r in rows}

    async def record_control_event(
        self, tenant_id: TenantId, event_id: EventId, offset: int, acted_at: datetime
    ) -> None:
        with translated("pgvector.record_control_event"):
            await self._conn.execute(
                self._sql.record_control, tenant_id, event_id, offset, acted_at
            )
