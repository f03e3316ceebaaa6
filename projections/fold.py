"""The part of a fold both stores share: segmenting a batch into units of work,
admission (checkpoint fence, rebuild windows, tombstones), event-id
deduplication, refused merges, and the replay and erasure control flows.

A batch must leave exactly the state that applying its events one by one
would (DESIGN 5.3). The events between control events share one unit of work
(a run of consecutive extractions shares each write); a control event ends the
segment before it, and a replay request ends the batch. A merge is known to
close an alias cycle only once its aliases are written, so a segment whose
merge is refused (or whose store turns out corrupt) is rolled back and
re-applied one event per unit of work, where the refused merge is rolled back
alone (ADR 0007).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Generic, NoReturn, Protocol, TypeVar

from contracts.domain import ErasureSweep, ErasureTombstone, RebuildMarker, StreamPartition
from contracts.errors import (
    AliasCycleError,
    DimensionMismatchError,
    MissingEntityError,
    PermanentStoreError,
)
from contracts.events import (
    DocumentExtractedEvent,
    EntitiesMergedEvent,
    EntitiesUnmergedEvent,
    Event,
    TenantErasedEvent,
    TenantReplayRequestedEvent,
)
from contracts.ids import EventId, TenantId
from contracts.ports.ledger import ProjectionLedger
from projections.admission import Admission, Verdict, next_needed_offset
from projections.records import FailedEvent, FoldReport, LogRecord

U = TypeVar("U", bound=ProjectionLedger)
U_co = TypeVar("U_co", bound=ProjectionLedger, covariant=True)


class LedgeredStore(ProjectionLedger, Protocol[U_co]):
    def unit_of_work(self, partition: StreamPartition) -> AbstractAsyncContextManager[U_co]: ...

    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep: ...


#: Errors caused by one event's values: skip and dead-letter that event.
PER_EVENT_ERRORS = (PermanentStoreError, MissingEntityError, DimensionMismatchError)


class _Refused(Exception):
    """A store refused an event: the batch stops before it until the caller has
    dead-lettered it and called ``skip_refused``."""


class _Ahead(Exception):
    """The batch starts past what the store needs; nothing of it may be applied."""


class MergeRefused(Exception):
    """The merge would close an alias cycle; it is rolled back and dead-lettered."""


@dataclass(frozen=True, slots=True)
class Admitted:
    offset: int
    event: Event


def _is_merge(record: LogRecord) -> bool:
    return isinstance(record.event, EntitiesMergedEvent)


def _is_control(record: LogRecord) -> bool:
    return isinstance(record.event, TenantReplayRequestedEvent | TenantErasedEvent)


def _tenant_of(record: LogRecord) -> TenantId | None:
    if record.event is not None:
        return record.event.tenant
    return record.tenant_id


class Fold(abc.ABC, Generic[U]):
    """Subclasses write one kind of store; this class decides what to write."""

    def __init__(
        self, store: LedgeredStore[U], *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.store = store
        self._clock = clock or (lambda: datetime.now(UTC))

    # -- what a subclass writes ------------------------------------------

    @abc.abstractmethod
    async def apply_run(self, uow: U, run: Sequence[Admitted], report: FoldReport) -> None:
        """Apply consecutive admitted ``DocumentExtracted`` events."""

    @abc.abstractmethod
    async def apply_merge(self, uow: U, event: EntitiesMergedEvent, report: FoldReport) -> None:
        """Apply one merge; raise ``MergeRefused`` if it would close a cycle."""

    @abc.abstractmethod
    async def apply_unmerge(
        self, uow: U, event: EntitiesUnmergedEvent, report: FoldReport
    ) -> None: ...

    # -- the shared driver -----------------------------------------------

    async def next_needed_offset(self, partition: StreamPartition) -> int:
        return await next_needed_offset(self.store, partition)

    async def apply(
        self,
        partition: StreamPartition,
        records: Sequence[LogRecord],
        *,
        log_start: int = 0,
        read_from: int | None = None,
    ) -> FoldReport:
        """Fold a batch read contiguously from ``read_from`` (default: the first
        record's offset). A batch that starts past the store's next needed offset
        changes nothing: the caller must seek back (DESIGN 5.2)."""
        # Set by each unit of work that commits from the state it wrote, so
        # that a batch costs no read after it; unknown (-1) after a control
        # event, whose effects are written outside the admission state.
        report = FoldReport(next_needed_offset=-1)
        ordered = list(records)
        expected = ordered[0].offset if ordered and read_from is None else read_from
        index = 0
        try:
            while index < len(ordered) and report.halted is None:
                record = ordered[index]
                if _is_control(record):
                    ended = await self._control(partition, record, report, log_start, expected)
                    index += 1
                    if ended:
                        break
                else:
                    end = index
                    while end < len(ordered) and not _is_control(ordered[end]):
                        end += 1
                    await self._segment(partition, ordered[index:end], report, expected)
                    index = end
                expected = ordered[index - 1].offset + 1
        except _Ahead:
            pass  # the caller seeks back to next_needed_offset
        except _Refused:
            pass  # the caller dead-letters report.failed, then calls skip_refused
        if report.next_needed_offset < 0:
            report.next_needed_offset = await self.next_needed_offset(partition)
        return report

    @staticmethod
    async def _load(uow: U, partition: StreamPartition, expected: int | None) -> Admission:
        """The admission state of a unit of work, after checking under the
        store's lock that the records start no later than the store needs: a
        zombie or a consumer that ran ahead must not leave a gap (DESIGN 5.1-5.2)."""
        admission = await Admission.load(uow, partition)
        if expected is not None and expected > admission.next_needed():
            raise _Ahead
        return admission

    async def _admit(
        self, uow: U, admission: Admission, records: Sequence[LogRecord], report: FoldReport
    ) -> list[Admitted]:
        """Admission and event-id deduplication for a run of records, in order."""
        admitted: list[Admitted] = []
        for record in records:
            tenant = _tenant_of(record)
            verdict = await admission.decide(
                uow, record.offset, tenant, is_control=_is_control(record)
            )
            admission.scanned(record.offset)
            if verdict is Verdict.APPLY and record.event is not None:
                admitted.append(Admitted(record.offset, record.event))
            else:
                report.skipped += 1
        return await self._deduplicate(uow, admitted, report)

    async def _deduplicate(
        self, uow: U, admitted: list[Admitted], report: FoldReport
    ) -> list[Admitted]:
        by_tenant: dict[TenantId, list[EventId]] = {}
        for item in admitted:
            by_tenant.setdefault(item.event.tenant, []).append(EventId(str(item.event.event_id)))
        seen: dict[TenantId, set[EventId]] = {
            tenant: await uow.applied_event_ids(tenant, ids) for tenant, ids in by_tenant.items()
        }
        fresh: list[Admitted] = []
        for item in admitted:
            event_id = EventId(str(item.event.event_id))
            known = seen.setdefault(item.event.tenant, set())
            if event_id in known:
                report.skipped += 1
                continue
            known.add(event_id)
            fresh.append(item)
        return fresh

    async def _record_applied(self, uow: U, applied: Sequence[Admitted]) -> None:
        by_tenant: dict[TenantId, list[EventId]] = {}
        for item in applied:
            by_tenant.setdefault(item.event.tenant, []).append(EventId(str(item.event.event_id)))
        now = self._clock()
        for tenant, ids in by_tenant.items():
            await uow.record_applied_events(tenant, ids, now)

    async def _segment(
        self,
        partition: StreamPartition,
        records: Sequence[LogRecord],
        report: FoldReport,
        expected: int | None,
    ) -> None:
        """Events in one unit of work. If a store rejects a value, refuses a
        merge or finds an alias cycle, the segment is rolled back and re-applied
        one event at a time, so that only the event at fault is skipped and
        dead-lettered, and the store halts exactly where it would have."""
        if len(records) == 1 and _is_merge(records[0]):
            await self._merge(partition, records[0], report, expected)
            return
        try:
            await self._segment_once(partition, records, report, expected)
        except (*PER_EVENT_ERRORS, MergeRefused, AliasCycleError) as exc:
            if len(records) == 1:
                if isinstance(exc, AliasCycleError):
                    report.halted = exc
                    return
                self._refuse(records[0], report, str(exc))
            for record in records:
                await self._segment(partition, [record], report, expected)
                if report.halted is not None:
                    return
                expected = record.offset + 1

    async def _segment_once(
        self,
        partition: StreamPartition,
        records: Sequence[LogRecord],
        report: FoldReport,
        expected: int | None,
    ) -> None:
        scratch = FoldReport()
        async with self.store.unit_of_work(partition) as uow:
            admission = await self._load(uow, partition, expected)
            original = dict(admission.markers)
            admitted = await self._admit(uow, admission, records, scratch)
            run: list[Admitted] = []
            for item in admitted:
                if isinstance(item.event, DocumentExtractedEvent):
                    run.append(item)
                    continue
                if run:
                    await self.apply_run(uow, run, scratch)
                    run = []
                if isinstance(item.event, EntitiesUnmergedEvent):
                    await self.apply_unmerge(uow, item.event, scratch)
                elif isinstance(item.event, EntitiesMergedEvent):
                    await self.apply_merge(uow, item.event, scratch)
            if run:
                await self.apply_run(uow, run, scratch)
            scratch.applied += len(admitted)
            await self._record_applied(uow, admitted)
            await admission.persist(uow, original)
        _add(report, scratch)
        report.next_needed_offset = admission.next_needed()

    @staticmethod
    def _refuse(record: LogRecord, report: FoldReport, reason: str) -> NoReturn:
        """Stop the batch before an event this store refuses, writing nothing of
        it. The checkpoint stays below it until ``skip_refused``, so a crash before
        the dead letter is written refuses it again instead of losing it."""
        event_id = str(record.event.event_id) if record.event is not None else ""
        report.failed.append(
            FailedEvent(record.offset, event_id, reason or "the store rejected a value")
        )
        raise _Refused

    async def skip_refused(self, partition: StreamPartition, offset: int) -> None:
        """Advance past a refused event once it has been dead-lettered: call it
        right after the ``apply`` that reported it (which applied everything
        before it; offsets may have gaps). A no-op when the store is already past
        it (another worker, or an earlier attempt, skipped it)."""
        async with self.store.unit_of_work(partition) as uow:
            admission = await Admission.load(uow, partition)
            if admission.next_needed() > offset:
                return
            original = dict(admission.markers)
            admission.scanned(offset)
            await admission.persist(uow, original)

    async def _merge(
        self,
        partition: StreamPartition,
        record: LogRecord,
        report: FoldReport,
        expected: int | None,
    ) -> None:
        assert isinstance(record.event, EntitiesMergedEvent)
        event = record.event
        scratch = FoldReport()
        try:
            async with self.store.unit_of_work(partition) as uow:
                admission = await self._load(uow, partition, expected)
                original = dict(admission.markers)
                admitted = await self._admit(uow, admission, [record], scratch)
                if admitted:
                    await self.apply_merge(uow, event, scratch)
                    scratch.applied += 1
                    await self._record_applied(uow, admitted)
                await admission.persist(uow, original)
            report.next_needed_offset = admission.next_needed()
        except MergeRefused as refused:
            self._refuse(record, report, str(refused))
        except PER_EVENT_ERRORS as exc:
            self._refuse(record, report, str(exc))
        except AliasCycleError as exc:
            report.halted = exc
            return
        _add(report, scratch)

    async def _control(
        self,
        partition: StreamPartition,
        record: LogRecord,
        report: FoldReport,
        log_start: int,
        expected: int | None,
    ) -> bool:
        """Replay requests and erasures. Returns True when the batch must end here."""
        event = record.event
        assert isinstance(event, TenantReplayRequestedEvent | TenantErasedEvent)
        tenant = event.tenant
        event_id = EventId(str(event.event_id))
        report.next_needed_offset = -1
        async with self.store.unit_of_work(partition) as uow:
            admission = await self._load(uow, partition, expected)
            original = dict(admission.markers)
            verdict = await admission.decide(uow, record.offset, tenant, is_control=True)
            # Control events act once (DESIGN 6): a copy of one this store has
            # already acted on (a producer retry, a re-sent request) is skipped.
            if verdict is Verdict.APPLY and await uow.acted_control_events(tenant, [event_id]):
                verdict = Verdict.SKIP
            if verdict is Verdict.SKIP:
                admission.scanned(record.offset)
                await admission.persist(uow, original)
                report.skipped += 1
                return False
            # Announce the rebuild so readers can tell while the deletion runs;
            # the checkpoint stays below the request until the deletion is done,
            # so a crash in between repeats it.
            await admission.persist(uow, original)
            window = RebuildMarker(
                tenant, partition, log_start, record.offset, log_start - 1, state="deleting"
            )
            if isinstance(event, TenantReplayRequestedEvent):
                await uow.put_rebuild_marker(window)

        sweep = await self.store.delete_by_tenant(tenant)
        if not sweep.complete:
            # Something of the tenant survived the deletion: not safe to rebuild
            # or to call it erased. Raised, so the agent retries the deletion.
            raise PermanentStoreError(
                f"tenant {tenant!r} still holds {sweep.outstanding} after deletion"
            )

        async with self.store.unit_of_work(partition) as uow:
            await uow.forget_applied_events(tenant)
            # Recorded with what completes the event: a crash before this
            # commit repeats it, a crash after never does.
            await uow.record_control_event(tenant, event_id, record.offset, self._clock())
            if isinstance(event, TenantErasedEvent):
                await uow.close_rebuild_marker(tenant, partition)
                await uow.put_erasure_tombstone(ErasureTombstone(tenant, partition, record.offset))
            else:
                rebuilding = replace(window, state="rebuilding")
                if rebuilding.complete:
                    await uow.close_rebuild_marker(tenant, partition)
                else:
                    await uow.put_rebuild_marker(rebuilding)
            if record.offset > await uow.checkpoint(partition):
                await uow.advance_checkpoint(partition, record.offset)
        report.applied += 1
        if isinstance(event, TenantReplayRequestedEvent):
            report.replays_started.append(record.offset)
            return True
        return False


def _add(total: FoldReport, part: FoldReport) -> None:
    total.applied += part.applied
    total.skipped += part.skipped
    total.collapsed += part.collapsed
    total.dangling += part.dangling
    total.failed.extend(part.failed)
