"""The in-memory projection ledger, shared by both memory stores."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from adapters.ledger_rules import check_advance, check_topic_id, recorded_topic_id
from contracts.domain import ErasureTombstone, RebuildMarker, StreamPartition
from contracts.ids import EventId, TenantId
from contracts.ports.ledger import NO_CHECKPOINT


@dataclass
class LedgerState:
    checkpoints: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    markers: dict[tuple[TenantId, str, int], RebuildMarker] = field(default_factory=dict)
    tombstones: dict[TenantId, ErasureTombstone] = field(default_factory=dict)
    applied: dict[TenantId, dict[EventId, datetime]] = field(default_factory=dict)
    #: Acted-on control events: (offset, acted_at) by id, per tenant. Never
    #: forgotten, expired or deleted with the tenant (docs/design.md 6.4).
    control: dict[TenantId, dict[EventId, tuple[int, datetime]]] = field(default_factory=dict)

    def copy(self) -> LedgerState:
        # Values are frozen dataclasses or immutable tuples; one level of copying
        # is enough for a transaction's private snapshot.
        return LedgerState(
            checkpoints=dict(self.checkpoints),
            markers=dict(self.markers),
            tombstones=dict(self.tombstones),
            applied={t: dict(ids) for t, ids in self.applied.items()},
            control={t: dict(ids) for t, ids in self.control.items()},
        )


class MemoryLedger:
    """ProjectionLedger over one ``LedgerState`` (committed, or a transaction's copy)."""

    def __init__(self, state: LedgerState) -> None:
        self._ledger = state

    def _stored(self, partition: StreamPartition) -> tuple[int, str]:
        entry = self._ledger.checkpoints.get((partition.topic, partition.partition))
        if entry is None:
            return NO_CHECKPOINT, ""
        stored_id, offset = entry
        return offset, stored_id

    async def checkpoint(self, partition: StreamPartition) -> int:
        offset, stored_id = self._stored(partition)
        check_topic_id(partition, stored_id)
        return offset

    async def advance_checkpoint(self, partition: StreamPartition, offset: int) -> None:
        before, stored_id = self._stored(partition)
        check_advance(partition, before, stored_id, offset)
        key = (partition.topic, partition.partition)
        self._ledger.checkpoints[key] = (recorded_topic_id(stored_id, partition), offset)

    async def checkpoints(self) -> dict[tuple[str, int], int]:
        return {key: offset for key, (_, offset) in sorted(self._ledger.checkpoints.items())}

    async def rebuild_markers(self, partition: StreamPartition) -> list[RebuildMarker]:
        return sorted(
            (
                m
                for (_, topic, part), m in self._ledger.markers.items()
                if (topic, part) == (partition.topic, partition.partition)
            ),
            key=lambda m: m.tenant_id,
        )

    async def put_rebuild_marker(self, marker: RebuildMarker) -> None:
        key = (marker.tenant_id, marker.partition.topic, marker.partition.partition)
        self._ledger.markers[key] = replace(marker)

    async def close_rebuild_marker(self, tenant_id: TenantId, partition: StreamPartition) -> bool:
        key = (tenant_id, partition.topic, partition.partition)
        return self._ledger.markers.pop(key, None) is not None

    async def is_rebuilding(self, tenant_id: TenantId) -> bool:
        return any(t == tenant_id for (t, _, _) in self._ledger.markers)

    async def erasure_tombstone(self, tenant_id: TenantId) -> ErasureTombstone | None:
        return self._ledger.tombstones.get(tenant_id)

    async def put_erasure_tombstone(self, tombstone: ErasureTombstone) -> None:
        self._ledger.tombstones[tombstone.tenant_id] = tombstone

    async def applied_event_ids(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> set[EventId]:
        known = self._ledger.applied.get(tenant_id, {})
        return {e for e in event_ids if e in known}

    async def tenant_ledgers(
        self, wanted: Mapping[TenantId, Sequence[EventId]]
    ) -> dict[TenantId, tuple[ErasureTombstone | None, set[EventId]]]:
        """contracts.ports.ledger.TenantLedgerReads: the reference for what
        the database adapters answer in one statement."""
        return {
            tenant: (
                self._ledger.tombstones.get(tenant),
                {e for e in ids if e in self._ledger.applied.get(tenant, {})},
            )
            for tenant, ids in wanted.items()
        }

    async def record_applied_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId], applied_at: datetime
    ) -> None:
        known = self._ledger.applied.setdefault(tenant_id, {})
        for event_id in event_ids:
            known[event_id] = applied_at

    async def forget_applied_events(self, tenant_id: TenantId) -> None:
        self._ledger.applied.pop(tenant_id, None)

    async def expire_applied_events(self, older_than: datetime) -> int:
        dropped = 0
        for tenant in list(self._ledger.applied):
            ids = self._ledger.applied[tenant]
            old = [e for e, at in ids.items() if at < older_than]
            for e in old:
                del ids[e]
            dropped += len(old)
            if not ids:
                del self._ledger.applied[tenant]
        return dropped

    async def acted_control_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> dict[EventId, int]:
        known = self._ledger.control.get(tenant_id, {})
        return {e: known[e][0] for e in event_ids if e in known}

    async def record_control_event(
        self, tenant_id: TenantId, event_id: EventId, offset: int, acted_at: datetime
    ) -> None:
        self._ledger.control.setdefault(tenant_id, {}).setdefault(event_id, (offset, acted_at))
