"""Replay requests and erasures (docs/design.md 6.1, 6.3 and 6.4).

A control event is acted on in three steps: a unit of work that decides it and
announces the rebuild, the deletion of the tenant (outside any unit of work:
it may take many transactions), and a unit of work that completes the event.
The checkpoint stays below the event until the last step commits, so a crash
in between repeats the deletion instead of losing it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import datetime
from typing import Protocol, TypeVar

from contracts.domain import ErasureSweep, ErasureTombstone, RebuildMarker, StreamPartition
from contracts.errors import PermanentStoreError
from contracts.events import TenantErasedEvent, TenantReplayRequestedEvent
from contracts.ids import EventId, TenantId
from contracts.ports.ledger import ProjectionLedger
from projections.admission import Admission, Verdict
from projections.batch import Control, Step
from projections.records import Ahead, Replaying, Tally

U_co = TypeVar("U_co", bound=ProjectionLedger, covariant=True)


class LedgeredStore(ProjectionLedger, Protocol[U_co]):
    """The store a fold writes: its ledger, its units of work, and the tenant
    deletion that replay requests and erasures start with."""

    def unit_of_work(self, partition: StreamPartition) -> AbstractAsyncContextManager[U_co]: ...

    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep: ...


Store = LedgeredStore[ProjectionLedger]


class _RollBack(Exception):
    """Leaves a unit of work without committing it (a normal exit commits)."""


async def act(
    store: Store,
    partition: StreamPartition,
    control: Control,
    *,
    log_start: int,
    clock: Callable[[], datetime],
) -> Step:
    """Act on a replay request or an erasure, or skip it. A replay request
    ends the batch: the store now needs the partition read from ``log_start``."""
    begun = await _begin(store, partition, control, log_start)
    if isinstance(begun, Step):
        return begun
    await _delete(store, control.event.tenant)
    await _complete(store, partition, control, begun, clock)
    if isinstance(control.event, TenantReplayRequestedEvent):
        return Step(Tally(applied=1), end=Replaying(control.record.offset))
    return Step(Tally(applied=1))


async def _begin(
    store: Store, partition: StreamPartition, control: Control, log_start: int
) -> Step | RebuildMarker:
    """The first unit of work: a step that skips the event (or finds the batch
    ahead of the store), else the rebuild window the event opens."""
    offset, event = control.record.offset, control.event
    tenant = event.tenant
    try:
        async with store.unit_of_work(partition) as uow:
            admission = await Admission.load(uow, partition)
            if control.expected > admission.next_needed():
                raise _RollBack
            original = dict(admission.markers)
            if not await _acts(uow, admission, control):
                admission.scanned(offset)
                await admission.persist(uow, original)
                return Step(Tally(skipped=1))
            # Announce the rebuild so readers can tell while the deletion runs.
            await admission.persist(uow, original)
            window = RebuildMarker(
                tenant, partition, log_start, offset, log_start - 1, state="deleting"
            )
            if isinstance(event, TenantReplayRequestedEvent):
                await uow.put_rebuild_marker(window)
            return window
    except _RollBack:
        return Step(end=Ahead())


async def _acts(uow: ProjectionLedger, admission: Admission, control: Control) -> bool:
    tenant = control.event.tenant
    verdict = await admission.decide(uow, control.record.offset, tenant, is_control=True)
    if verdict is Verdict.SKIP:
        return False
    # Control events act once (docs/design.md 6.4): a copy of one this store has
    # already acted on (a producer retry, a re-sent request) is skipped.
    event_id = EventId(str(control.event.event_id))
    return not await uow.acted_control_events(tenant, [event_id])


async def _delete(store: Store, tenant: TenantId) -> None:
    sweep = await store.delete_by_tenant(tenant)
    if not sweep.complete:
        # Something of the tenant survived the deletion: not safe to rebuild
        # or to call it erased. Raised, so the agent retries the deletion.
        raise PermanentStoreError(
            f"tenant {tenant!r} still holds {sweep.outstanding} after deletion"
        )


async def _complete(
    store: Store,
    partition: StreamPartition,
    control: Control,
    window: RebuildMarker,
    clock: Callable[[], datetime],
) -> None:
    offset, event = control.record.offset, control.event
    tenant = event.tenant
    async with store.unit_of_work(partition) as uow:
        await uow.forget_applied_events(tenant)
        # Recorded with what completes the event: a crash before this
        # commit repeats it, a crash after never does.
        await uow.record_control_event(tenant, EventId(str(event.event_id)), offset, clock())
        if isinstance(event, TenantErasedEvent):
            await uow.close_rebuild_marker(tenant, partition)
            await uow.put_erasure_tombstone(ErasureTombstone(tenant, partition, offset))
        else:
            rebuilding = replace(window, state="rebuilding")
            if rebuilding.complete:
                await uow.close_rebuild_marker(tenant, partition)
            else:
                await uow.put_rebuild_marker(rebuilding)
        if offset > await uow.checkpoint(partition):
            await uow.advance_checkpoint(partition, offset)
