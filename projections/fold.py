"""The part of a fold both stores share: segmenting a batch into units of work,
admission (checkpoint fence, rebuild windows, tombstones), event-id
deduplication, refused merges, and the replay and erasure control flows.

A batch must leave exactly the state that applying its events one by one
would (docs/design.md 5.3). The events between control events share one unit of work
(a run of consecutive extractions shares each write); a control event ends the
segment before it, and a replay request ends the batch. A merge is known to
close an alias cycle only once its aliases are written, so a segment whose
merge is refused (or whose store turns out corrupt) is rolled back and
re-applied one event per unit of work, where the refused merge is rolled back
alone (ADR 0007).

Folds that apply the same records to different stores reach the same verdict
for every event (docs/design.md 5.10): given seats of one ``Verdicts``, they meet
before each unit of work commits, and commit it only if no store refused any
of its events (docs/semantics.md, "Failures").
"""

from __future__ import annotations

import abc
import asyncio
import enum
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
    is_transient,
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


#: Errors caused by one event's values: skip and dead-letter that event. Any
#: other error raised while an event's effects are written is one too, unless
#: it is transient (``contracts.errors.is_transient``: the whole pass is then
#: retried) or ``AliasCycleError`` (the store is corrupt: the partition stops).
#: Errors met outside an event's effects (opening the unit of work, the
#: ledger's reads and writes, the commit) are the store's, not the event's:
#: they propagate, and the caller retries a bounded number of times.
PER_EVENT_ERRORS = (PermanentStoreError, MissingEntityError, DimensionMismatchError)


class _Refused(Exception):
    """A store refused an event: the batch stops before it until the caller has
    dead-lettered it and called ``skip_refused``."""


class _Ahead(Exception):
    """The batch starts past what the store needs; nothing of it may be applied."""


class _Stopped(Exception):
    """The batch ends before a unit of work no store may commit: another store
    stopped early, or this one is corrupt (``report.halted``)."""


class _Abandon(Exception):
    """Roll back a unit of work the stores did not agree to commit."""


class _EventFault(Exception):
    """An unclassified error while one event's effects were written."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


class Outcome(enum.Enum):
    """What becomes of a unit of work once every store has tried it."""

    COMMIT = "commit"  # every store wrote it
    SPLIT = "split"  # a store failed on one of its events: retry one event at a time
    REFUSE = "refuse"  # a store refused its one event: every store refuses it
    STOP = "stop"  # a store stopped (corrupt, or an early end): nobody commits


#: A store's result for a unit of work: None (written), a refusal's reason, or
#: HALT (its store is corrupt).
HALT = "\x00halt"


Offsets = tuple[int, ...]


class Verdicts:
    """Where the folds of one pass over one batch agree on each unit of work.

    Each fold has a seat. Before committing a unit of work (or after rolling
    it back on a failure), a fold says how it went and waits for the others
    to say so for the same records; then all of them do the same thing: commit,
    re-apply one event at a time, refuse the one event (with the first
    store's reason), or stop. So an event one store refuses is refused by
    every store, and none commits what another could not write. A fold that
    leaves before its last record (an error, a replay request that ends its
    batch, a batch ahead of its store) stops the others at their next meeting:
    nothing is applied past the point where one store stopped.

    A fold holds its unit of work (and its store's locks) while it waits, so
    the seats take their locks in seat order: a fold opens a unit of work only
    once every lower seat holds its own for the same records. Two workers on
    one partition (a zombie) then cannot each hold one store and wait for the
    other.
    """

    def __init__(self, seats: int) -> None:
        self._present = set(range(seats))
        self._early = False
        self._entered: dict[Offsets, set[int]] = {}
        self._arrived: dict[Offsets, dict[int, str | None]] = {}
        self._settled: dict[Offsets, tuple[Outcome, str | None]] = {}
        self._changed = asyncio.Event()
        self.seats = [Seat(self, index) for index in range(seats)]

    def _notify(self) -> None:
        for offsets, arrived in list(self._arrived.items()):
            if self._early:
                self._settled[offsets] = (Outcome.STOP, None)
            elif self._present <= set(arrived):
                self._settled[offsets] = _outcome(offsets, arrived)
            else:
                continue
            del self._arrived[offsets]
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self._changed.wait()

    async def _turn(self, seat: int, offsets: Offsets) -> None:
        entered = self._entered.setdefault(offsets, set())
        await self._until(
            lambda: self._early or all(s in entered or s not in self._present for s in range(seat))
        )

    def _enter(self, seat: int, offsets: Offsets) -> None:
        self._entered.setdefault(offsets, set()).add(seat)
        self._notify()

    async def _agree(
        self, seat: int, offsets: Offsets, result: str | None
    ) -> tuple[Outcome, str | None]:
        self._entered.setdefault(offsets, set()).add(seat)
        if offsets not in self._settled:
            self._arrived.setdefault(offsets, {})[seat] = result
        self._notify()
        await self._until(lambda: offsets in self._settled)
        return self._settled[offsets]

    def _leave(self, seat: int, *, early: bool) -> None:
        self._present.discard(seat)
        self._early = self._early or early
        self._notify()


def _outcome(
    offsets: tuple[int, ...], arrived: dict[int, str | None]
) -> tuple[Outcome, str | None]:
    failures = [arrived[seat] for seat in sorted(arrived) if arrived[seat] is not None]
    if not failures:
        return Outcome.COMMIT, None
    if len(offsets) > 1:
        return Outcome.SPLIT, None
    if HALT in failures:
        return Outcome.STOP, None
    return Outcome.REFUSE, failures[0]


@dataclass(frozen=True, slots=True)
class Seat:
    """One fold's place at a ``Verdicts``."""

    verdicts: Verdicts
    index: int

    async def turn(self, offsets: Offsets) -> None:
        """Wait until the lower seats hold their units of work for ``offsets``."""
        await self.verdicts._turn(self.index, offsets)

    def enter(self, offsets: Offsets) -> None:
        """This seat holds its unit of work for ``offsets`` (its locks taken)."""
        self.verdicts._enter(self.index, offsets)

    async def agree(self, offsets: Offsets, result: str | None) -> tuple[Outcome, str | None]:
        return await self.verdicts._agree(self.index, offsets, result)

    def leave(self, *, early: bool) -> None:
        self.verdicts._leave(self.index, early=early)


class MergeRefused(Exception):
    """The merge would close an alias cycle; it is rolled back and dead-lettered."""


@dataclass(frozen=True, slots=True)
class Admitted:
    offset: int
    event: Event


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
        seat: Seat | None = None,
    ) -> FoldReport:
        """Fold a batch read contiguously from ``read_from`` (default: the first
        record's offset). A batch that starts past the store's next needed offset
        changes nothing: the caller must seek back (docs/design.md 5.2). With a ``seat``,
        every unit of work is committed only as the other seats' folds agree
        (``Verdicts``)."""
        # Set by each unit of work that commits from the state it wrote, so
        # that a batch costs no read after it; unknown (-1) after a control
        # event, whose effects are written outside the admission state.
        report = FoldReport(next_needed_offset=-1)
        ordered = list(records)
        expected = ordered[0].offset if ordered and read_from is None else read_from
        index = 0
        try:
            while index < len(ordered):
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
                    await self._segment(partition, ordered[index:end], report, expected, seat)
                    index = end
                expected = ordered[index - 1].offset + 1
        except _Ahead:
            pass  # the caller seeks back to next_needed_offset
        except _Refused:
            pass  # the caller dead-letters report.failed, then calls skip_refused
        except _Stopped:
            pass  # report.halted, or another store stopped: the caller decides
        finally:
            if seat is not None:
                seat.leave(early=index < len(ordered))
        if report.next_needed_offset < 0:
            report.next_needed_offset = await self.next_needed_offset(partition)
        return report

    @staticmethod
    async def _load(uow: U, partition: StreamPartition, expected: int | None) -> Admission:
        """The admission state of a unit of work, after checking under the
        store's lock that the records start no later than the store needs: a
        zombie or a consumer that ran ahead must not leave a gap (docs/design.md 5.1 and 5.2)."""
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
        seat: Seat | None = None,
    ) -> None:
        """Events in one unit of work. If a store rejects a value, refuses a
        merge or finds an alias cycle, the segment is rolled back and re-applied
        one event at a time, so that only the event at fault is skipped and
        dead-lettered, and the store halts exactly where it would have."""
        outcome, reason = await self._segment_once(partition, records, report, expected, seat)
        if outcome is Outcome.SPLIT:
            for record in records:
                await self._segment(partition, [record], report, expected, seat)
                expected = record.offset + 1
        elif outcome is Outcome.REFUSE:
            self._refuse(records[0], report, reason or "")
        elif outcome is Outcome.STOP:
            raise _Stopped

    async def _segment_once(
        self,
        partition: StreamPartition,
        records: Sequence[LogRecord],
        report: FoldReport,
        expected: int | None,
        seat: Seat | None,
    ) -> tuple[Outcome, str | None]:
        offsets = tuple(record.offset for record in records)
        scratch = FoldReport()
        agreed: tuple[Outcome, str | None] = (Outcome.COMMIT, None)
        if seat is not None:
            await seat.turn(offsets)
        try:
            async with self.store.unit_of_work(partition) as uow:
                admission = await self._load(uow, partition, expected)
                if seat is not None:
                    seat.enter(offsets)
                original = dict(admission.markers)
                admitted = await self._admit(uow, admission, records, scratch)
                try:
                    await self._write(uow, admitted, scratch)
                except Exception as exc:
                    if is_transient(exc) or isinstance(
                        exc, (*PER_EVENT_ERRORS, MergeRefused, AliasCycleError)
                    ):
                        raise
                    raise _EventFault(exc) from exc
                scratch.applied += len(admitted)
                await self._record_applied(uow, admitted)
                await admission.persist(uow, original)
                if seat is not None:
                    agreed = await seat.agree(offsets, None)
                    if agreed[0] is not Outcome.COMMIT:
                        raise _Abandon
        except _Abandon:
            return agreed
        except (*PER_EVENT_ERRORS, MergeRefused, AliasCycleError, _EventFault) as exc:
            result = HALT if isinstance(exc, AliasCycleError) else (str(exc) or type(exc).__name__)
            if seat is not None:
                agreed = await seat.agree(offsets, result)
            else:
                agreed = _outcome(offsets, {0: result})
            if agreed[0] is Outcome.STOP and isinstance(exc, AliasCycleError):
                report.halted = exc
            return agreed
        _add(report, scratch)
        report.next_needed_offset = admission.next_needed()
        return agreed

    async def _write(self, uow: U, admitted: Sequence[Admitted], report: FoldReport) -> None:
        """The effects of admitted events, in log order: a run of consecutive
        extractions shares each write."""
        run: list[Admitted] = []
        for item in admitted:
            if isinstance(item.event, DocumentExtractedEvent):
                run.append(item)
                continue
            if run:
                await self.apply_run(uow, run, report)
                run = []
            if isinstance(item.event, EntitiesUnmergedEvent):
                await self.apply_unmerge(uow, item.event, report)
            elif isinstance(item.event, EntitiesMergedEvent):
                await self.apply_merge(uow, item.event, report)
        if run:
            await self.apply_run(uow, run, report)

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
            # Control events act once (docs/design.md 6.4): a copy of one this store has
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
