"""The part of a fold both stores share: the loop over a batch's pieces, and the
unit of work that applies a segment (admission, event-id deduplication, the
writes, the checkpoint).

A batch must leave exactly the state that applying its events one by one
would (docs/design.md 5.3): ``projections.batch`` cuts it into segments and
control events, and ``projections.controls`` acts on the control events. A
merge is known to close an alias cycle only once its aliases are written, so a
segment whose merge is refused (or whose store turns out corrupt) is rolled
back and re-applied one event per unit of work, where the refused merge is
rolled back alone (ADR 0007).

Folds that apply the same records to different stores reach the same verdict
for every event (docs/design.md 5.10): given seats of one
``projections.verdicts.Verdicts``, they meet before each unit of work commits,
and commit it only if no store refused any of its events.

How a pass ends is a value (``projections.records.Outcome``); each piece
yields a ``Step``, and the report is built from them once the pass ends.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from contracts.domain import ErasureTombstone, StreamPartition
from contracts.errors import (
    AliasCycleError,
    DimensionMismatchError,
    MissingEntityError,
    PermanentStoreError,
    is_transient,
)
from contracts.events import EntitiesMergedEvent, EntitiesUnmergedEvent
from contracts.ids import EventId, TenantId
from contracts.ports.ledger import ProjectionLedger, TenantLedgerReads, UnitsAcrossPartitions
from projections import controls
from projections.admission import Admission, Verdict, next_needed_offset
from projections.batch import (
    Admitted,
    Control,
    Piece,
    Segment,
    Step,
    is_control,
    split_batch,
    tenant_of,
    write_order,
)
from projections.controls import LedgeredStore
from projections.records import (
    Ahead,
    Applied,
    FailedEvent,
    FoldReport,
    Halted,
    LogRecord,
    Refused,
    Replaying,
    Stopped,
    Tally,
)
from projections.verdicts import HALT, Agreement, Seat, agreement

U = TypeVar("U", bound=ProjectionLedger)

#: Errors caused by one event's values: skip and dead-letter that event. Any
#: other error raised while an event's effects are written is one too, unless
#: it is transient (``contracts.errors.is_transient``: the whole pass is then
#: retried) or ``AliasCycleError`` (the store is corrupt: the partition stops).
#: Errors met outside an event's effects (opening the unit of work, the
#: ledger's reads and writes, the commit) are the store's, not the event's:
#: they propagate, and the caller retries a bounded number of times.
PER_EVENT_ERRORS = (PermanentStoreError, MissingEntityError, DimensionMismatchError)


class MergeRefused(Exception):
    """The merge would close an alias cycle; it is rolled back and dead-lettered."""


class _EventFault(Exception):
    """An unclassified error while one event's effects were written."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


#: The errors that fail a unit of work's events rather than the pass.
_UNIT_ERRORS = (*PER_EVENT_ERRORS, MergeRefused, AliasCycleError, _EventFault)


@dataclass(frozen=True, slots=True)
class Part:
    """One partition's segment in a unit of work across partitions (ADR 0024)."""

    partition: StreamPartition
    segment: Segment


def shared_segment(records: Sequence[LogRecord], read_from: int | None) -> Segment | None:
    """The one segment ``records`` make when no control event is among them
    (what a unit of work across partitions takes), else None."""
    pieces = split_batch(records, read_from)
    if len(pieces) == 1 and isinstance(pieces[0], Segment):
        return pieces[0]
    return None


def any_ahead(parts: Sequence[Part], admissions: Sequence[Admission]) -> bool:
    """Whether a part starts past where its store needs it read from: checked
    under the stores' locks, per partition, as ``_write_unit`` checks its
    segment (docs/design.md 5.1 and 5.2)."""
    pairs = zip(parts, admissions, strict=True)
    return any(part.segment.expected > admission.next_needed() for part, admission in pairs)


@dataclass(frozen=True, slots=True)
class Split:
    """The stores failed on a segment of several events: try each on its own."""


class _Declined(Exception):
    """Leaves a unit of work across partitions without committing it: each
    partition is then applied on its own, where the reason is handled."""


class _RollBack(Exception):
    """Leaves a unit of work without committing it (a normal exit commits),
    carrying what the unit of work yields instead."""

    def __init__(self, result: Step | Split) -> None:
        super().__init__()
        self.result = result


class Fold(abc.ABC, Generic[U]):
    """Subclasses write one kind of store; this class decides what to write."""

    def __init__(
        self, store: LedgeredStore[U], *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.store = store
        self._clock = clock or (lambda: datetime.now(UTC))

    # -- what a subclass writes ------------------------------------------

    @abc.abstractmethod
    async def apply_run(self, uow: U, run: Sequence[Admitted], tally: Tally) -> None:
        """Apply consecutive admitted ``DocumentExtracted`` events."""

    @abc.abstractmethod
    async def apply_merge(self, uow: U, event: EntitiesMergedEvent, tally: Tally) -> None:
        """Apply one merge; raise ``MergeRefused`` if it would close a cycle."""

    @abc.abstractmethod
    async def apply_unmerge(self, uow: U, event: EntitiesUnmergedEvent, tally: Tally) -> None: ...

    def look_ahead(self, uow: U, records: Sequence[LogRecord]) -> None:
        """Before a unit of work's first call: tell it what this fold will ask
        of it for ``records`` (the segment, before admission), which a store
        may read with its first statement. By default nothing."""

    # -- the loop over a batch -------------------------------------------

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
        done = Step()
        finished = 0  # records this pass is done with, for the other seats
        try:
            for piece in split_batch(records, read_from):
                step = await self._step(partition, piece, log_start, seat)
                if isinstance(piece, Control):
                    # A control event's effects are written outside the admission
                    # state: where the store needs reading from is then unknown.
                    done = Step(done.tally)
                done = done.then(step)
                if step.end is None or isinstance(step.end, Replaying):
                    finished += len(piece.records)
                if step.end is not None:
                    break
        finally:
            if seat is not None:
                seat.leave(early=finished < len(records))
        return await self._report(partition, done)

    async def _report(self, partition: StreamPartition, done: Step) -> FoldReport:
        outcome = done.end if done.end is not None else Applied()
        # The last unit of work to commit said where the store needs reading
        # from, so that a batch costs no read after it; else the store says.
        needed = done.needed
        if needed is None:
            needed = await self.next_needed_offset(partition)
        counted = done.tally
        return FoldReport(
            outcome,
            needed,
            counted.applied,
            counted.skipped,
            counted.collapsed,
            counted.dangling,
        )

    async def _step(
        self, partition: StreamPartition, piece: Piece, log_start: int, seat: Seat | None
    ) -> Step:
        if isinstance(piece, Control):
            return await controls.act(
                self.store, partition, piece, log_start=log_start, clock=self._clock
            )
        return await self._segment(partition, piece, seat)

    async def _segment(
        self, partition: StreamPartition, segment: Segment, seat: Seat | None
    ) -> Step:
        """Events in one unit of work. If a store rejects a value, refuses a
        merge or finds an alias cycle, the segment is rolled back and re-applied
        one event at a time, so that only the event at fault is skipped and
        dead-lettered, and the store halts exactly where it would have."""
        whole = await self._unit(partition, segment, seat)
        if not isinstance(whole, Split):
            return whole
        done = Step()
        for single in segment.singles():
            step = await self._unit(partition, single, seat)
            assert not isinstance(step, Split)  # the folds never split one event
            done = done.then(step)
            if step.end is not None:
                break
        return done

    # -- one unit of work ------------------------------------------------

    async def _unit(
        self, partition: StreamPartition, segment: Segment, seat: Seat | None
    ) -> Step | Split:
        if seat is not None:
            await seat.turn(segment.offsets)
        try:
            return await self._write_unit(partition, segment, seat)
        except _UNIT_ERRORS as exc:
            result = HALT if isinstance(exc, AliasCycleError) else (str(exc) or type(exc).__name__)
            if seat is not None:
                agreed = await seat.agree(segment.offsets, result)
            else:
                agreed = agreement(segment.offsets, {0: result})
            return _settle(segment, agreed, exc)

    async def _write_unit(
        self, partition: StreamPartition, segment: Segment, seat: Seat | None
    ) -> Step | Split:
        """Admit and write a segment, and commit it if the other seats agree."""
        tally = Tally()
        try:
            async with self.store.unit_of_work(partition) as uow:
                self.look_ahead(uow, segment.records)
                # The tenant ledgers first: a store may read them with its lock
                # (ADR 0004), a round trip fewer than after the admission reads.
                ledgers = await _read_tenants(uow, segment.records)
                admission = await Admission.load(uow, partition)
                # Checked under the store's lock: a zombie or a consumer that ran
                # ahead must not leave a gap (docs/design.md 5.1 and 5.2).
                if segment.expected > admission.next_needed():
                    raise _RollBack(Step(end=Ahead()))
                if seat is not None:
                    seat.enter(segment.offsets)
                original = dict(admission.markers)
                applied = None
                if ledgers is not None:
                    stones, applied = ledgers
                    admission.tombstones.update(stones)
                admitted = await self._admit(uow, admission, segment.records, tally, applied)
                # The ledger before the effects: the same transaction either
                # way, and a store may send its ledger write with the first
                # data write (ADR 0004).
                await self._record_applied(uow, admitted)
                await admission.persist(uow, original)
                await self._write(uow, admitted, tally)
                tally.applied += len(admitted)
                if seat is not None:
                    agreed = await seat.agree(segment.offsets, None)
                    if agreed[0] is not Agreement.COMMIT:
                        raise _RollBack(_settle(segment, agreed, None))
        except _RollBack as back:
            return back.result
        return Step(tally, admission.next_needed())

    async def _admit(
        self,
        uow: U,
        admission: Admission,
        records: Sequence[LogRecord],
        tally: Tally,
        applied: dict[TenantId, set[EventId]] | None = None,
    ) -> list[Admitted]:
        """Admission and event-id deduplication for a run of records, in order."""
        admitted: list[Admitted] = []
        for record in records:
            tenant = tenant_of(record)
            verdict = await admission.decide(
                uow, record.offset, tenant, is_control=is_control(record)
            )
            admission.scanned(record.offset)
            if verdict is Verdict.APPLY and record.event is not None:
                admitted.append(Admitted(record.offset, record.event))
            else:
                tally.skipped += 1
        return await self._deduplicate(uow, admitted, tally, applied)

    async def _deduplicate(
        self,
        uow: U,
        admitted: list[Admitted],
        tally: Tally,
        applied: dict[TenantId, set[EventId]] | None = None,
    ) -> list[Admitted]:
        """``applied``: what ``_read_tenants`` read of every event of the
        segment, when the store reads it at once; else it is asked here."""
        by_tenant: dict[TenantId, list[EventId]] = {}
        for item in admitted:
            by_tenant.setdefault(item.event.tenant, []).append(EventId(str(item.event.event_id)))
        seen: dict[TenantId, set[EventId]]
        if applied is not None:
            seen = {tenant: applied[tenant] & set(ids) for tenant, ids in by_tenant.items()}
        else:
            seen = {
                tenant: await uow.applied_event_ids(tenant, ids)
                for tenant, ids in by_tenant.items()
            }
        fresh: list[Admitted] = []
        for item in admitted:
            event_id = EventId(str(item.event.event_id))
            known = seen.setdefault(item.event.tenant, set())
            if event_id in known:
                tally.skipped += 1
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

    async def _write(self, uow: U, admitted: Sequence[Admitted], tally: Tally) -> None:
        """The effects of admitted events, in log order. An error that is neither
        transient nor classified is the event's (``_EventFault``)."""
        try:
            for write in write_order(admitted):
                if isinstance(write, EntitiesMergedEvent):
                    await self.apply_merge(uow, write, tally)
                elif isinstance(write, EntitiesUnmergedEvent):
                    await self.apply_unmerge(uow, write, tally)
                else:
                    await self.apply_run(uow, write, tally)
        except Exception as exc:
            if is_transient(exc) or isinstance(
                exc, (*PER_EVENT_ERRORS, MergeRefused, AliasCycleError)
            ):
                raise
            raise _EventFault(exc) from exc

    async def apply_across(
        self, parts: Sequence[Part], seat: Seat | None = None
    ) -> list[FoldReport] | None:
        """The segments of several partitions (each its partition's records
        from where they were read, no control event among them, no tenant in
        two) in one unit of work across partitions (ADR 0024): a report per
        part, as ``apply`` would give for its segment alone when that commits
        in one unit of work. The collapsed and dangling counts of the whole
        unit are the first part's: they are counted per write, not per
        partition, and only their sums are reported.

        None: nothing was written, and each partition is to be applied on its
        own, where everything that can go differently is handled (a partition
        ahead of its store, an event a store fails on, a merge refused, the
        other seats not committing, the store offering no such unit).
        Any other error propagates, nothing written; the seats are then told
        to stop, so no seat commits what another did not."""
        committed = False
        try:
            if not parts or not isinstance(self.store, UnitsAcrossPartitions):
                return None
            key = tuple(offset for part in parts for offset in part.segment.offsets)
            if seat is not None:
                await seat.turn(key)
            try:
                tallies, written, needed = await self._write_across(self.store, parts, seat, key)
            except (_Declined, *_UNIT_ERRORS):
                return None
            committed = True
        finally:
            if seat is not None:
                seat.leave(early=not committed)
        first = tallies[0]
        return [
            FoldReport(
                Applied(),
                next_needed,
                tally.applied,
                tally.skipped,
                written.collapsed if tally is first else 0,
                written.dangling if tally is first else 0,
            )
            for tally, next_needed in zip(tallies, needed, strict=True)
        ]

    async def _write_across(
        self,
        store: UnitsAcrossPartitions[U],
        parts: Sequence[Part],
        seat: Seat | None,
        key: tuple[int, ...],
    ) -> tuple[list[Tally], Tally, list[int]]:
        """``_write_unit`` for the segments of several partitions: each
        admitted under its own partition's state, all written together. The
        tallies per part, the writes' tally, each part's next needed offset."""
        tallies = [Tally() for _ in parts]
        written = Tally()
        async with store.unit_of_work_across([part.partition for part in parts]) as uow:
            records = [record for part in parts for record in part.segment.records]
            self.look_ahead(uow, records)
            ledgers = await _read_tenants(uow, records)
            admissions = [await Admission.load(uow, part.partition) for part in parts]
            if any_ahead(parts, admissions):
                raise _Declined
            if seat is not None:
                seat.enter(key)
            originals = [dict(admission.markers) for admission in admissions]
            applied = None
            if ledgers is not None:
                stones, applied = ledgers
                for admission in admissions:
                    admission.tombstones.update(stones)
            admitted: list[Admitted] = []
            for part, admission, tally in zip(parts, admissions, tallies, strict=True):
                fresh = await self._admit(uow, admission, part.segment.records, tally, applied)
                tally.applied += len(fresh)
                admitted.extend(fresh)
            await self._record_applied(uow, admitted)
            for admission, original in zip(admissions, originals, strict=True):
                await admission.persist(uow, original)
            await self._write(uow, admitted, written)
            if seat is not None:
                agreed = await seat.agree(key, None)
                if agreed[0] is not Agreement.COMMIT:
                    raise _Declined
        return tallies, written, [admission.next_needed() for admission in admissions]

    async def admits(self, partition: StreamPartition, offset: int, tenant: TenantId) -> bool:
        """Whether this store would apply an event of ``tenant`` at ``offset``
        now (before event-id deduplication), read outside a unit of work: a
        record the store would step over whatever it holds (another tenant's,
        met while a rebuild window rescans the log) need not be understood."""
        admission = await Admission.load(self.store, partition)
        verdict = await admission.decide(self.store, offset, tenant, is_control=False)
        return verdict is Verdict.APPLY

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


async def _read_tenants(
    uow: ProjectionLedger, records: Sequence[LogRecord]
) -> tuple[dict[TenantId, ErasureTombstone | None], dict[TenantId, set[EventId]]] | None:
    """A store that reads several tenants' ledgers at once
    (``TenantLedgerReads``) is asked once for the tombstone and the applied
    ids of every tenant and event of the segment: what admission and event-id
    deduplication would otherwise ask tenant by tenant, in the same unit of
    work. Returns the tombstones and the applied ids by tenant (None when the
    store reads tenant by tenant)."""
    if not isinstance(uow, TenantLedgerReads):
        return None
    wanted: dict[TenantId, list[EventId]] = {}
    for record in records:
        tenant = tenant_of(record)
        if tenant is not None:
            ids = wanted.setdefault(tenant, [])
            if record.event is not None:
                ids.append(EventId(str(record.event.event_id)))
    found = await uow.tenant_ledgers(wanted)
    stones = {tenant: stone for tenant, (stone, _) in found.items()}
    return stones, {tenant: ids for tenant, (_, ids) in found.items()}


def _settle(
    segment: Segment, agreed: tuple[Agreement, str | None], error: Exception | None
) -> Step | Split:
    """What a unit of work the stores did not all commit yields."""
    verdict, reason = agreed
    if verdict is Agreement.SPLIT:
        return Split()
    if verdict is Agreement.REFUSE:
        return Step(end=Refused(_failure(segment.records[0], reason)))
    if verdict is Agreement.STOP:
        # Only the store that met the cycle is corrupt; the others just stop.
        return Step(end=Halted(error) if isinstance(error, AliasCycleError) else Stopped())
    return Step()


def _failure(record: LogRecord, reason: str | None) -> FailedEvent:
    """The batch stops before an event the stores refuse, writing nothing of
    it. The checkpoint stays below it until ``skip_refused``, so a crash before
    the dead letter is written refuses it again instead of losing it."""
    event_id = str(record.event.event_id) if record.event is not None else ""
    return FailedEvent(record.offset, event_id, reason or "the store rejected a value")
