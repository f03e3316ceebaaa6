"""The projection ledger on Neo4j, written once against a ``Runner``.

System-level, not tenant-scoped (DESIGN section 4): checkpoints per (topic,
partition), rebuild markers, erasure tombstones and applied event ids live as
their own labelled nodes beside the tenant data, in the same database, so a
unit of work commits them with the effects they describe.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from adapters.neo4j import ledger_cypher as q
from adapters.neo4j.rows import marker_from, partition_params
from adapters.neo4j.runner import Blame, Runner
from contracts.domain import ErasureTombstone, RebuildMarker, StreamPartition
from contracts.errors import CheckpointRegressionError, TopicRecreatedError
from contracts.ids import EventId, TenantId
from contracts.ids import tenant_id as valid_tenant
from contracts.ports.ledger import NO_CHECKPOINT

#: Rows deleted per statement by the batched deletes.
DELETE_BATCH = 5000


def _aware(moment: datetime) -> datetime:
    # Neo4j never orders a zoned DateTime against a LocalDateTime (the
    # comparison is null), so every stored time is zoned; naive means UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class LedgerOps:
    def __init__(self, runner: Runner) -> None:
        self._runner = runner

    async def _read(self, query: Any, params: dict[str, Any], what: str) -> list[Any]:
        return await self._runner.run(query, params, write=False, blame=Blame(what))

    async def _write(self, query: Any, params: dict[str, Any], what: str) -> list[Any]:
        return await self._runner.run(query, params, write=True, blame=Blame(what))

    async def _delete_in_batches(self, query: Any, params: dict[str, Any], blame: Blame) -> int:
        total = 0
        while True:
            records = await self._runner.run(
                query, {**params, "batch": DELETE_BATCH}, write=True, blame=blame
            )
            deleted = int(records[0]["deleted"])
            total += deleted
            if deleted < DELETE_BATCH:
                return total

    async def checkpoint(self, partition: StreamPartition) -> int:
        records = await self._read(q.READ_CHECKPOINT, partition_params(partition), "checkpoint")
        if not records or records[0]["offset"] is None:
            return NO_CHECKPOINT
        stored_id = records[0]["topic_id"] or ""
        if stored_id and partition.topic_id and stored_id != partition.topic_id:
            raise TopicRecreatedError(partition.topic, stored_id, partition.topic_id)
        return int(records[0]["offset"])

    async def advance_checkpoint(self, partition: StreamPartition, offset: int) -> None:
        if offset < NO_CHECKPOINT:
            # Every stored checkpoint is at least NO_CHECKPOINT.
            raise CheckpointRegressionError(
                f"checkpoint of {partition.topic}[{partition.partition}] cannot move to {offset}"
            )
        params = {
            **partition_params(partition),
            "topic_id": partition.topic_id,
            "offset": offset,
            "token": uuid.uuid4().hex,
        }
        record = (await self._write(q.ADVANCE_CHECKPOINT, params, "advance_checkpoint"))[0]
        stored_id, before = record["stored_id"], record["before"]
        if stored_id and partition.topic_id and stored_id != partition.topic_id:
            raise TopicRecreatedError(partition.topic, stored_id, partition.topic_id)
        if offset < before:
            raise CheckpointRegressionError(
                f"checkpoint of {partition.topic}[{partition.partition}] is {before}; "
                f"refusing to move it back to {offset}"
            )

    async def checkpoints(self) -> dict[tuple[str, int], int]:
        records = await self._read(q.CHECKPOINTS, {}, "checkpoints")
        return {(r["topic"], r["partition"]): r["offset"] for r in sorted(records, key=_topic_key)}

    async def rebuild_markers(self, partition: StreamPartition) -> list[RebuildMarker]:
        records = await self._read(q.REBUILD_MARKERS, partition_params(partition), "markers")
        return sorted((marker_from(r["m"]) for r in records), key=lambda m: m.tenant_id)

    async def put_rebuild_marker(self, marker: RebuildMarker) -> None:
        params = {
            **partition_params(marker.partition),
            "tenant": valid_tenant(marker.tenant_id),
            "topic_id": marker.partition.topic_id,
            "start_offset": marker.start_offset,
            "end_offset": marker.end_offset,
            "applied_through": marker.applied_through,
            "state": marker.state,
        }
        await self._write(q.PUT_REBUILD_MARKER, params, "put_rebuild_marker")

    async def close_rebuild_marker(self, tenant_id: TenantId, partition: StreamPartition) -> bool:
        params = {**partition_params(partition), "tenant": tenant_id}
        records = await self._write(q.CLOSE_REBUILD_MARKER, params, "close_rebuild_marker")
        return bool(records[0]["closed"])

    async def is_rebuilding(self, tenant_id: TenantId) -> bool:
        records = await self._read(q.IS_REBUILDING, {"tenant": tenant_id}, "is_rebuilding")
        return bool(records[0]["rebuilding"])

    async def erasure_tombstone(self, tenant_id: TenantId) -> ErasureTombstone | None:
        records = await self._read(q.ERASURE_TOMBSTONE, {"tenant": tenant_id}, "tombstone")
        if not records:
            return None
        stored = records[0]["t"]
        return ErasureTombstone(
            TenantId(stored["tenant_id"]),
            StreamPartition(stored["topic"], stored["partition"], stored["topic_id"]),
            stored["offset"],
        )

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
        if not ids:
            return set()
        params = {"tenant": tenant_id, "ids": ids}
        records = await self._read(q.APPLIED_EVENT_IDS, params, "applied_event_ids")
        return {EventId(r["id"]) for r in records}

    async def record_applied_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId], applied_at: datetime
    ) -> None:
        ids = sorted(set(event_ids))
        if not ids:
            return
        params = {"tenant": tenant_id, "ids": ids, "applied_at": _aware(applied_at)}
        await self._write(q.RECORD_APPLIED_EVENTS, params, "record_applied_events")

    async def forget_applied_events(self, tenant_id: TenantId) -> None:
        blame = Blame("forget_applied_events", tenant_id)
        await self._delete_in_batches(q.FORGET_APPLIED_EVENTS, {"tenant": tenant_id}, blame)

    async def expire_applied_events(self, older_than: datetime) -> int:
        params = {"older_than": _aware(older_than)}
        return await self._delete_in_batches(
            q.EXPIRE_APPLIED_EVENTS, params, Blame("expire_applied_events")
        )


def _topic_key(record: Any) -> tuple[str, int]:
    return (record["topic"], record["partition"])
