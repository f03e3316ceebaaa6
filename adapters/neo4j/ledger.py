"""The projection ledger on Neo4j, written once against a ``Runner``.

System-level, not tenant-scoped (docs/design.md 4): checkpoints per (topic,
partition), rebuild markers, erasure tombstones, applied event ids and acted-on
control events live as their own labelled nodes beside the tenant data, in the
same database, so a unit of work commits them with the effects they describe.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from adapters.ledger_rules import check_advance, check_storable, check_topic_id, recorded_topic_id
from adapters.neo4j import ledger_cypher as q
from adapters.neo4j.rows import marker_from, partition_params
from adapters.neo4j.runner import Blame, Runner
from contracts.domain import ErasureTombstone, RebuildMarker, StreamPartition
from contracts.errors import TenantIsolationError
from contracts.ids import EntityId, EventId, TenantId
from contracts.ids import tenant_id as valid_tenant
from contracts.ports.ledger import NO_CHECKPOINT

#: What a stored rebuild marker holds (adapters/neo4j/rows.marker_from).
MARKER_FIELDS = frozenset(
    {
        "tenant_id",
        "topic",
        "partition",
        "topic_id",
        "start_offset",
        "end_offset",
        "applied_through",
        "state",
    }
)

#: Rows deleted per statement by the batched deletes.
DELETE_BATCH = 5000


def _aware(moment: datetime) -> datetime:
    # Neo4j never orders a zoned DateTime against a LocalDateTime (the
    # comparison is null), so every stored time is zoned; naive means UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass
class LockedPartition:
    """A partition of a unit of work: its checkpoint and rebuild markers as
    read under the checkpoint lock, kept current through the unit of work's own
    writes, and whether its checkpoint moved (written by the deferred write,
    one statement before commit, with the unit of work's applied event ids).

    Nothing else can change the checkpoint or the markers until commit: the
    lock is held from the first statement, and every writer of either takes it
    first (ADR 0004, "The locked partition in memory").
    """

    topic: str
    partition: int
    #: The stored offset, None while the node holds no checkpoint.
    offset: int | None
    topic_id: str
    markers: dict[TenantId, RebuildMarker]
    checkpoint_moved: bool = False

    def checkpoint(self, partition: StreamPartition) -> int:
        if self.offset is None:
            return NO_CHECKPOINT
        check_topic_id(partition, self.topic_id)
        return self.offset

    def advance(self, partition: StreamPartition, offset: int) -> None:
        before = NO_CHECKPOINT if self.offset is None else self.offset
        check_advance(partition, before, self.topic_id, offset)
        moved = (offset, recorded_topic_id(self.topic_id, partition))
        if moved != (self.offset, self.topic_id):
            self.offset, self.topic_id = moved
            self.checkpoint_moved = True

    def take_moved(self) -> dict[str, Any] | None:
        """The checkpoint's row of the deferred write if it moved since the
        last one (taking it clears the move), else None."""
        if not self.checkpoint_moved:
            return None
        self.checkpoint_moved = False
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "topic_id": self.topic_id,
        }


def _key(partition: StreamPartition) -> tuple[str, int]:
    return (partition.topic, partition.partition)


class Neo4jLedger:
    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        # The unit of work's partitions, by (topic, partition), for its
        # length (``lock_partitions``), and the applied events it recorded,
        # by (tenant, event id), the latest time winning: both written by
        # ``write_deferred``.
        self._locked: dict[tuple[str, int], LockedPartition] = {}
        self._applied: dict[tuple[TenantId, EventId], datetime] = {}
        # Locks asked for and not yet taken (``lock_on_first_statement``).
        self._pending: list[StreamPartition] = []
        # Ids the fold will resolve, sent with the first statement if it is
        # the tenant ledgers' (``resolve_ahead``), and what that statement's
        # walks found for them, by tenant and id: valid until the unit of work
        # writes anything (``_statement``, ``_defer``), since only a write of
        # this transaction could change them under its lock's tenants.
        self._ahead: dict[TenantId, list[str]] = {}
        self._walks_ahead: dict[TenantId, dict[str, Any]] | None = None
        self._asked_ahead: dict[TenantId, set[str]] = {}

    async def _own(self, partition: StreamPartition) -> LockedPartition | None:
        await self._take_pending_lock()
        return self._locked.get(_key(partition))

    def _buffered(self, tenant_id: TenantId, event_ids: Iterable[EventId]) -> set[EventId]:
        """Which of ``event_ids`` this unit of work recorded and has not written."""
        return {i for i in event_ids if (tenant_id, i) in self._applied}

    async def lock_partition(self, partition: StreamPartition) -> None:
        """Lock the partition's checkpoint now and read it with the partition's
        rebuild markers. Called on a unit of work's view only; its direct view
        always reads the database."""
        await self.lock_partitions([partition])

    async def lock_partitions(self, partitions: Sequence[StreamPartition]) -> None:
        """``lock_partition`` for several partitions, given in lock order
        (contracts.ports.ledger.lock_order), in one statement."""
        params, query = self._lock_params(partitions, q.LOCK_PARTITION, q.LOCK_PARTITIONS)
        record = (await self._write(query, params, "lock the checkpoint"))[0]
        self._hold(partitions, record)

    @staticmethod
    def _lock_params(
        partitions: Sequence[StreamPartition], one: str, several: str
    ) -> tuple[dict[str, Any], str]:
        """A lock statement's parameters, and the form that takes them: ``one``
        for a single partition (its columns inline), else ``several``
        (``held``)."""
        token = uuid.uuid4().hex
        if len(partitions) == 1:
            return {**partition_params(partitions[0]), "token": token}, one
        return {"partitions": [partition_params(p) for p in partitions], "token": token}, several

    def lock_on_first_statement(self, *partitions: StreamPartition) -> None:
        """Have the unit of work's first statement take ``lock_partitions``'
        locks: before it, or in it when that is the tenant ledgers' read
        (``LOCK_WITH_TENANT_LEDGERS``, the fold's first call). Every
        statement and every answer from a locked partition waits for the
        locks, so nothing is read or written before they are held (ADR 0004).
        ``partitions``: in lock order."""
        self._pending = list(partitions)

    def resolve_ahead(self, asks: Mapping[TenantId, Sequence[EntityId]]) -> None:
        """Have the first statement, when it is the tenant ledgers' read, walk
        these ids' aliases too (contracts.ports.graph.ResolutionAhead). Told
        after the first statement, or on the store's direct view, it is
        ignored: the ids are resolved when asked."""
        if self._pending:
            self._ahead = {tenant: [str(i) for i in ids] for tenant, ids in asks.items()}

    async def _take_pending_lock(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            await self.lock_partitions(pending)

    def _hold(self, partitions: Sequence[StreamPartition], record: Any) -> None:
        """Keep what a lock statement read of each partition: its columns
        inline for one partition, else a ``held`` map per partition."""
        if len(partitions) == 1:
            rows = {_key(partitions[0]): record}
        else:
            rows = {(row["topic"], row["partition"]): row for row in record["held"]}
        for partition in partitions:
            row = rows[_key(partition)]
            markers = (marker_from(m) for m in row["markers"])
            self._locked[_key(partition)] = LockedPartition(
                partition.topic,
                partition.partition,
                row["offset"],
                row["topic_id"] or "",
                {m.tenant_id: m for m in markers},
            )

    def _take_deferred(self) -> dict[str, Any] | None:
        """The parameters of what ``write_deferred`` would write now, for a
        statement that carries it (``WRITE_DEFERRED`` joined to it); None when
        nothing is deferred (nor while the lock is pending: every call that
        defers a write takes it first). Taking them clears what they carry."""
        moved = [row for held in self._locked.values() if (row := held.take_moved())]
        if not moved and not self._applied:
            return None
        groups: dict[tuple[TenantId, datetime], list[EventId]] = {}
        for (tenant, event_id), at in sorted(self._applied.items()):
            groups.setdefault((tenant, at), []).append(event_id)
        self._applied = {}
        applied = [
            {"tenant": tenant, "applied_at": at, "ids": ids} for (tenant, at), ids in groups.items()
        ]
        return {"checkpoints": moved, "applied": applied}

    async def write_deferred(self) -> None:
        """Write what the unit of work deferred, in one statement: run before
        commit, and before any read the deferred writes would change."""
        params = self._take_deferred()
        if params is not None:
            await self._write(q.WRITE_DEFERRED, params, "write the unit of work's ledger")

    def release_partition(self) -> None:
        """The unit of work has ended: its calls reach the (closed) runner again."""
        self._locked, self._applied, self._pending = {}, {}, []
        self._walks_ahead = None
        self._ahead, self._asked_ahead = {}, {}

    async def _statement(
        self, query: Any, params: dict[str, Any], *, write: bool, blame: Blame
    ) -> list[Any]:
        """Every statement goes through here: after the pending lock, if any."""
        await self._take_pending_lock()
        if write:
            self._walks_ahead = None
        return await self._runner.run(query, params, write=write, blame=blame)

    async def _defer(
        self, query: Any, params: dict[str, Any], blame: Blame, joins: dict[str, Any]
    ) -> None:
        await self._take_pending_lock()
        self._walks_ahead = None
        await self._runner.defer(query, params, blame, joins)

    async def _read(self, query: Any, params: dict[str, Any], what: str) -> list[Any]:
        return await self._statement(query, params, write=False, blame=Blame(what))

    async def _write(self, query: Any, params: dict[str, Any], what: str) -> list[Any]:
        return await self._statement(query, params, write=True, blame=Blame(what))

    async def _delete_in_batches(self, query: Any, params: dict[str, Any], blame: Blame) -> int:
        total = 0
        while True:
            records = await self._statement(
                query, {**params, "batch": DELETE_BATCH}, write=True, blame=blame
            )
            deleted = int(records[0]["deleted"])
            total += deleted
            if deleted < DELETE_BATCH:
                return total

    async def checkpoint(self, partition: StreamPartition) -> int:
        if (own := await self._own(partition)) is not None:
            return own.checkpoint(partition)
        records = await self._read(q.READ_CHECKPOINT, partition_params(partition), "checkpoint")
        if not records or records[0]["offset"] is None:
            return NO_CHECKPOINT
        check_topic_id(partition, records[0]["topic_id"] or "")
        return int(records[0]["offset"])

    async def advance_checkpoint(self, partition: StreamPartition, offset: int) -> None:
        # Every stored checkpoint is at least NO_CHECKPOINT: no statement needed.
        check_storable(partition, offset)
        if (own := await self._own(partition)) is not None:
            own.advance(partition, offset)  # written by write_deferred
            return
        params = {
            **partition_params(partition),
            "topic_id": partition.topic_id,
            "offset": offset,
            "token": uuid.uuid4().hex,
        }
        record = (await self._write(q.ADVANCE_CHECKPOINT, params, "advance_checkpoint"))[0]
        check_advance(partition, record["before"], record["stored_id"], offset)

    async def checkpoints(self) -> dict[tuple[str, int], int]:
        await self.write_deferred()
        records = await self._read(q.CHECKPOINTS, {}, "checkpoints")
        return {(r["topic"], r["partition"]): r["offset"] for r in sorted(records, key=_topic_key)}

    async def rebuild_markers(self, partition: StreamPartition) -> list[RebuildMarker]:
        if (own := await self._own(partition)) is not None:
            return sorted(own.markers.values(), key=lambda m: m.tenant_id)
        records = await self._read(q.REBUILD_MARKERS, partition_params(partition), "markers")
        # A marker deleted while it is read comes back missing properties
        # (ledger_cypher.REBUILD_MARKERS): it is closed, so it is left out.
        whole = [r["m"] for r in records if MARKER_FIELDS <= r["m"].keys()]
        return sorted((marker_from(m) for m in whole), key=lambda m: m.tenant_id)

    async def put_rebuild_marker(self, marker: RebuildMarker) -> None:
        params = {
            **partition_params(marker.partition),
            "tenant": valid_tenant(marker.tenant_id),
            "topic_id": marker.partition.topic_id,
            "start_offset": marker.start_offset,
            "end_offset": marker.end_offset,
            "applied_through": marker.applied_through,
            "state": marker.state,
            "token": uuid.uuid4().hex,
        }
        await self._write(q.PUT_REBUILD_MARKER, params, "put_rebuild_marker")
        if (own := await self._own(marker.partition)) is not None:
            own.markers[marker.tenant_id] = marker

    async def close_rebuild_marker(self, tenant_id: TenantId, partition: StreamPartition) -> bool:
        params = {**partition_params(partition), "tenant": tenant_id, "token": uuid.uuid4().hex}
        records = await self._write(q.CLOSE_REBUILD_MARKER, params, "close_rebuild_marker")
        if (own := await self._own(partition)) is not None:
            own.markers.pop(tenant_id, None)
        return bool(records[0]["closed"])

    async def is_rebuilding(self, tenant_id: TenantId) -> bool:
        records = await self._read(q.IS_REBUILDING, {"tenant": tenant_id}, "is_rebuilding")
        return bool(records[0]["rebuilding"])

    async def erasure_tombstone(self, tenant_id: TenantId) -> ErasureTombstone | None:
        records = await self._read(q.ERASURE_TOMBSTONE, {"tenant": tenant_id}, "tombstone")
        return _tombstone(records[0]["t"]) if records else None

    async def tenant_ledgers(
        self, wanted: Mapping[TenantId, Sequence[EventId]]
    ) -> dict[TenantId, tuple[ErasureTombstone | None, set[EventId]]]:
        """``erasure_tombstone`` and ``applied_event_ids`` of every tenant of
        ``wanted``, in one statement (contracts.ports.ledger.TenantLedgerReads)."""
        asked = {tenant: sorted(set(ids)) for tenant, ids in wanted.items()}
        if not asked:
            return {}
        pending, self._pending = self._pending, []
        ahead, self._ahead = (self._ahead, {}) if pending else ({}, {})
        rows = []
        for tenant, ids in sorted(asked.items()):
            buffered = self._buffered(tenant, ids)
            row: dict[str, Any] = {
                "tenant": valid_tenant(tenant),
                "ids": [i for i in ids if i not in buffered],
            }
            if ahead:
                row["resolve"] = sorted(set(ahead.get(tenant, ())))
            rows.append(row)
        if not pending:
            records = await self._read(q.TENANT_LEDGERS, {"tenants": rows}, "tenant_ledgers")
        else:
            # The unit of work's first statement: its locks with the ledgers,
            # and the aliases of the ids its fold will resolve, if told.
            if ahead:
                one, several = (
                    q.LOCK_WITH_TENANT_LEDGERS_AND_RESOLVE,
                    q.LOCK_PARTITIONS_WITH_TENANT_LEDGERS_AND_RESOLVE,
                )
            else:
                one, several = q.LOCK_WITH_TENANT_LEDGERS, q.LOCK_PARTITIONS_WITH_TENANT_LEDGERS
            params, query = self._lock_params(pending, one, several)
            params["tenants"] = rows
            what = "lock the checkpoint and read the tenant ledgers"
            records = await self._write(query, params, what)
            self._hold(pending, records[0])
            if ahead:
                self._asked_ahead = {tenant: set(ahead.get(tenant, ())) for tenant in asked}
                self._walks_ahead = {
                    TenantId(record["tenant"]): {walk["id"]: walk for walk in record["walks"]}
                    for record in records
                }
        found: dict[TenantId, tuple[ErasureTombstone | None, set[EventId]]] = {}
        for record in records:
            tenant = TenantId(record["tenant"])
            stone = _tombstone(record["stone"]) if record["stone"] is not None else None
            if stone is not None and stone.tenant_id != tenant:
                raise TenantIsolationError(tenant, stone.tenant_id, "neo4j.ledger.tenant_ledgers")
            buffered = self._buffered(tenant, asked[tenant])
            found[tenant] = (stone, buffered | {EventId(i) for i in record["applied"]})
        return found

    async def put_erasure_tombstone(self, tombstone: ErasureTombstone) -> None:
        params = {
            **partition_params(tombstone.partition),
            "tenant": valid_tenant(tombstone.tenant_id),
            "topic_id": tombstone.partition.topic_id,
            "offset": tombstone.offset,
        }
        await self._write(q.PUT_ERASURE_TOMBSTONE, params, "put_erasure_tombstone")

    async def applied_event_ids(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> set[EventId]:
        ids = sorted(set(event_ids))
        await self._take_pending_lock()
        buffered = self._buffered(tenant_id, ids)
        ids = [i for i in ids if i not in buffered]
        if not ids:
            return buffered
        params = {"tenant": tenant_id, "ids": ids}
        records = await self._read(q.APPLIED_EVENT_IDS, params, "applied_event_ids")
        return buffered | {EventId(r["id"]) for r in records}

    async def record_applied_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId], applied_at: datetime
    ) -> None:
        ids = sorted(set(event_ids))
        if not ids:
            return
        await self._take_pending_lock()
        if self._locked:
            # Written by write_deferred, with the checkpoints.
            self._applied.update(((tenant_id, i), _aware(applied_at)) for i in ids)
            return
        params = {"tenant": tenant_id, "ids": ids, "applied_at": _aware(applied_at)}
        await self._write(q.RECORD_APPLIED_EVENTS, params, "record_applied_events")

    async def forget_applied_events(self, tenant_id: TenantId) -> None:
        await self.write_deferred()
        blame = Blame("forget_applied_events", tenant_id)
        await self._delete_in_batches(q.FORGET_APPLIED_EVENTS, {"tenant": tenant_id}, blame)

    async def expire_applied_events(self, older_than: datetime) -> int:
        await self.write_deferred()
        params = {"older_than": _aware(older_than)}
        return await self._delete_in_batches(
            q.EXPIRE_APPLIED_EVENTS, params, Blame("expire_applied_events")
        )

    async def acted_control_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> dict[EventId, int]:
        ids = sorted(set(event_ids))
        if not ids:
            return {}
        params = {"tenant": tenant_id, "ids": ids}
        records = await self._read(q.ACTED_CONTROL_EVENTS, params, "acted_control_events")
        return {EventId(r["id"]): int(r["offset"]) for r in records}

    async def record_control_event(
        self, tenant_id: TenantId, event_id: EventId, offset: int, acted_at: datetime
    ) -> None:
        # Not deferred like the applied ids: a control event is rare, and its
        # record must be read back by the unit of work that wrote it.
        params = {
            "tenant": valid_tenant(tenant_id),
            "event_id": event_id,
            "offset": offset,
            "acted_at": _aware(acted_at),
        }
        await self._write(q.RECORD_CONTROL_EVENT, params, "record_control_event")


def _topic_key(record: Any) -> tuple[str, int]:
    return (record["topic"], record["partition"])


def _tombstone(stored: dict[str, Any]) -> ErasureTombstone:
    return ErasureTombstone(
        TenantId(stored["tenant_id"]),
        StreamPartition(stored["topic"], stored["partition"], stored["topic_id"]),
        stored["offset"],
    )
