from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol, TypeVar, runtime_checkable

from contracts.domain import ErasureTombstone, RebuildMarker, StreamPartition
from contracts.ids import EventId, TenantId

NO_CHECKPOINT = -1

U_co = TypeVar("U_co", covariant=True)


@runtime_checkable
class ProjectionLedger(Protocol):
    """Where a store records what it holds of the log (docs/design.md 4, 5 and 6).

    System-level, not tenant-scoped: checkpoints are per (topic, partition) and
    written in the same transaction as the effects they cover. Outside a unit of
    work each call is its own transaction.
    """

    async def checkpoint(self, partition: StreamPartition) -> int:
        """The last offset whose effects this store holds, or ``NO_CHECKPOINT``.

        Raises ``TopicRecreatedError`` when the stored checkpoint belongs to
        another topic id of the same name.
        """
        ...

    async def advance_checkpoint(self, partition: StreamPartition, offset: int) -> None:
        """Move the checkpoint to ``offset``; ``CheckpointRegressionError`` if it
        would move backwards (equal is a no-op)."""
        ...

    async def checkpoints(self) -> dict[tuple[str, int], int]:
        """Every checkpoint the store holds, by (topic, partition)."""
        ...

    async def rebuild_markers(self, partition: StreamPartition) -> list[RebuildMarker]:
        """The open rebuild markers on one partition, ordered by tenant."""
        ...

    async def put_rebuild_marker(self, marker: RebuildMarker) -> None:
        """Create or replace the marker for (marker.tenant_id, marker.partition)."""
        ...

    async def close_rebuild_marker(
        self, tenant_id: TenantId, partition: StreamPartition
    ) -> bool: ...

    async def is_rebuilding(self, tenant_id: TenantId) -> bool:
        """Whether any rebuild marker of the tenant is open, on any partition."""
        ...

    async def erasure_tombstone(self, tenant_id: TenantId) -> ErasureTombstone | None: ...

    async def put_erasure_tombstone(self, tombstone: ErasureTombstone) -> None: ...

    async def applied_event_ids(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> set[EventId]:
        """Which of ``event_ids`` this store has already applied for the tenant."""
        ...

    async def record_applied_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId], applied_at: datetime
    ) -> None: ...

    async def forget_applied_events(self, tenant_id: TenantId) -> None:
        """Drop the tenant's applied-event ledger (a replay re-applies its history)."""
        ...

    async def expire_applied_events(self, older_than: datetime) -> int:
        """Drop applied ids recorded before ``older_than``; returns how many."""
        ...

    async def acted_control_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> dict[EventId, int]:
        """Which of ``event_ids`` this store has acted on as control events
        (replay requests, erasures) for the tenant, each with the offset it was
        acted on at (docs/design.md 6.4, "Control events act once")."""
        ...

    async def record_control_event(
        self, tenant_id: TenantId, event_id: EventId, offset: int, acted_at: datetime
    ) -> None:
        """Record that the control event ``event_id`` of the tenant was acted on
        at ``offset``. Idempotent: the first record of an id is kept. Kept apart
        from the applied-event ids: neither ``forget_applied_events``,
        ``expire_applied_events`` nor a tenant deletion removes it."""
        ...


@runtime_checkable
class TenantLedgerReads(Protocol):
    """What a unit of work may offer besides ``ProjectionLedger``: the erasure
    tombstone and the applied ids of several tenants at once, as
    ``erasure_tombstone`` and ``applied_event_ids`` would answer them, so that
    a fold asks once per unit of work instead of twice per tenant (measured by
    bench/neo4j_profile.py; ADR 0004). A store without it is asked tenant by
    tenant."""

    async def tenant_ledgers(
        self, wanted: Mapping[TenantId, Sequence[EventId]]
    ) -> dict[TenantId, tuple[ErasureTombstone | None, set[EventId]]]:
        """For each tenant of ``wanted``: its tombstone and which of its ids
        this store has already applied."""
        ...


@runtime_checkable
class UnitsAcrossPartitions(Protocol[U_co]):
    """What a store may offer besides ``unit_of_work(partition)``: one
    transaction holding the checkpoint locks of several partitions, so that a
    batch's partitions cost one unit of work instead of one each (ADR 0024).

    The locks are taken in (topic, partition) order whatever the order given,
    so two units over overlapping partitions (a zombie's and its successor's)
    wait for each other and never deadlock. Inside, every listed partition is
    as it is in its own unit of work (its checkpoint and markers read under
    its lock, compared and advanced there); everything commits or rolls back
    together. A store without it is written one partition per unit of work."""

    def unit_of_work_across(
        self, partitions: Sequence[StreamPartition]
    ) -> AbstractAsyncContextManager[U_co]:
        """``partitions``: at least one, no (topic, partition) twice
        (``ValueError`` otherwise, before anything is locked)."""
        ...


def lock_order(partitions: Sequence[StreamPartition]) -> list[StreamPartition]:
    """The partitions of a unit across partitions in the order their locks
    are taken; ``ValueError`` for none, or for a (topic, partition) twice."""
    ordered = sorted(partitions, key=lambda p: (p.topic, p.partition))
    if not ordered:
        raise ValueError("a unit of work across partitions needs at least one partition")
    keys = [(p.topic, p.partition) for p in ordered]
    if len(set(keys)) != len(keys):
        raise ValueError(f"a partition is listed twice: {keys}")
    return ordered
