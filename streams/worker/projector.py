"""One partition's batch, from raw Kafka records to both stores and back to a
decision about the consumer: commit, seek, or pause.

Kept apart from Faust so that the rules of docs/design.md 3, 5 and 7 can be
read (and tested) in one place: the stores say where to read; a batch that
starts past that is dropped and the consumer seeks back; dead letters are
written before the checkpoints move past them; store errors are retried here
and never escape; a newer schema version or a corrupt store pauses the
partition.

Errors are classified (``contracts.errors.is_transient``): transient ones are
retried with backoff for as long as they last; any other is retried at most
``max_attempts`` times within a batch, then the partition pauses with a fixed
reason (the detail goes to the log). An error met while one event's effects
are written is that event's refusal, in both stores alike
(``projections.verdicts.Verdicts``). A worker told to stop abandons a batch
whose stores keep failing at its next backoff: every unit of work has rolled
back, and the checkpoints fence whatever a later batch does again.

A batch goes through named steps, each handing the next a value: select the
records that continue the stores' position, decode them, dead-letter the
values that are not events, apply the events to both stores (pass after pass
while refusals are dead-lettered and skipped), and decide what the consumer
does next.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol, TypeVar

from opentelemetry import trace

from contracts.domain import RebuildMarker, StreamPartition
from contracts.errors import SchemaVersionTooNewError, TransactionEndedError, is_transient
from contracts.events import TenantReplayRequestedEvent
from contracts.ids import TenantId
from contracts.limits import DEFAULT_LIMITS, EventLimits
from contracts.ports.ledger import UnitsAcrossPartitions
from contracts.signing import ControlKeys
from projections.admission import next_needed_offset
from projections.batch import is_control, tenant_of
from projections.fold import Fold, Part, shared_segment
from projections.records import FoldReport, LogRecord
from projections.verdicts import Verdicts
from streams import telemetry
from streams.worker.carpool import Carpool, Rider
from streams.worker.decode import Decoded, decode
from streams.worker.metrics import STORES, Metrics
from streams.worker.pass_limits import PassLimits

log = logging.getLogger("redstring.projector")

T = TypeVar("T")

#: Records decoded between two yields to the event loop.
DECODE_SLICE = 16

#: What readiness says while a partition's store calls fail: the error's class
#: and one of these, never the exception's text (it can name tenants and
#: entities; the log has it).
RETRYING_TRANSIENT = "a store or the broker is unavailable; retrying with backoff"
RETRYING_PERSISTENT = "a store call failed with an error that is not transient; retrying"

#: Set while ``handle`` runs (in its task and the tasks it starts): there, an
#: error that is not transient is retried ``max_attempts`` times, then the
#: partition pauses. Elsewhere (the loop asking a position) it is retried.
_BOUNDED: contextvars.ContextVar[bool] = contextvars.ContextVar("bounded", default=False)

#: Set while ``handle_together`` runs: where its partitions' first passes meet.
_CARPOOL: contextvars.ContextVar[Carpool[list[FoldReport]] | None] = contextvars.ContextVar(
    "carpool", default=None
)


class _GaveUp(Exception):
    """A store call failed ``max_attempts`` times with an error that is not transient."""

    def __init__(self, error: Exception, attempts: int) -> None:
        super().__init__(repr(error))
        self.error = error
        self.attempts = attempts


class _Abandoned(Exception):
    """The worker is stopping while a store call keeps failing: the batch ends."""


@dataclass(frozen=True, slots=True)
class RawRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    #: The record's Kafka timestamp (when it reached the log), if it has one.
    logged_at: datetime | None = None
    #: The record's headers, read only for a producer's trace context.
    headers: telemetry.Headers | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A refused record, to be written to the dead-letter topic as it was."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    reason: str
    event_type: str | None = None


class DeadLetterSink(Protocol):
    """Where the projector sends refused records; tests and the simulation
    stand in lists for the Kafka topic."""

    async def send(self, letters: Sequence[DeadLetter]) -> None:
        """Durably write the letters (the call returns once the broker has them)."""
        ...


@dataclass(frozen=True, slots=True)
class Decision:
    """What the consumer does next for the partition."""

    commit: int | None = None  # commit this offset (the next offset to read)
    seek: int | None = None  # seek back (and commit) to this offset
    pause: str | None = None  # stop consuming the partition, and why
    applied: int = 0
    #: The offset of the record of a newer schema version that paused the
    #: partition: once the stores are past it (``redstring skip``), the loop
    #: resumes the partition. Known here, not asked afterwards: an operator's
    #: skip can land between the pause and the question, and the partition
    #: then looked paused on the record after the one skipped, for good.
    paused_at: int | None = None
    #: Why a seek (the ``redstring_seeks_total`` reason) or why nothing: for
    #: traces, and for the loop, which drops a seek's remnants ("ahead" to
    #: the target it sought) by it. Whatever combines decisions keeps it.
    reason: str | None = field(default=None, compare=False)


@dataclass
class PartitionHealth:
    paused: dict[int, str] = field(default_factory=dict)
    failing: dict[int, str] = field(default_factory=dict)
    #: Partitions the watchdog found idle while their stores were behind (streams.worker.loop).
    stalled: dict[int, str] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return not self.paused and not self.failing and not self.stalled

    def reasons(self) -> list[str]:
        merged = {**self.stalled, **self.failing, **self.paused}
        return [f"partition {p}: {why}" for p, why in sorted(merged.items())]


def rebuild_progress(markers: Iterable[RebuildMarker]) -> float:
    """The least scanned fraction of these rebuild windows; 1.0 when there are none."""
    fractions = [1.0]
    for marker in markers:
        span = max(1, marker.end_offset - marker.start_offset)
        scanned = marker.applied_through - marker.start_offset + 1
        fractions.append(min(1.0, max(0.0, scanned / span)))
    return min(fractions)


def contiguous_run(
    records: Sequence[RawRecord], start: int, empty: Mapping[int, int] | None = None
) -> tuple[list[RawRecord], int | None]:
    """The records that continue the log from ``start`` without a hole, in
    offset order and each offset once, and the first offset missing after
    them (None when the batch has no hole). ``empty`` maps the first offset
    of a known run of offsets that hold no record (a transaction's commit
    marker, say) to the offset after it.

    A consumer can hand over records out of order, twice, or with some missing
    (Faust delivers records fetched before a seek after it, and drops records
    at or below a read offset those pushed up; issue 14). A record at an offset
    never changes, so sorting and dropping repeats is safe; stepping over a
    missing offset is not: the stores would move past a record nobody applied.
    """
    by_offset: dict[int, RawRecord] = {}
    for record in records:
        if record.offset >= start:
            by_offset.setdefault(record.offset, record)
    run: list[RawRecord] = []
    expected = start
    for offset in sorted(by_offset):
        while empty and offset > expected and expected in empty:
            expected = empty[expected]
        if offset != expected:
            return run, expected
        run.append(by_offset[offset])
        expected += 1
    return run, None


#: Asks the broker for the offset of the first record at or after an offset
#: (None if it cannot tell now, or there is none yet).
Probe = Callable[[int, int], Awaitable[int | None]]

#: Dead letters sent during the batch in hand, for its span (set only while tracing).
_LETTERED: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "lettered", default=None
)


def _continued(pending: Sequence[LogRecord], taken: int, after: int | None) -> int | None:
    """Where the next pass reads the records a pass that took only the first
    ``taken`` of ``pending`` left, if the stores continue right after those
    (else None: a rebuild window opened, and the consumer seeks)."""
    if after is not None and pending[taken - 1].offset < after <= pending[taken].offset:
        return after
    return None


def _store(index: int) -> str:
    return STORES[index] if index < len(STORES) else f"store{index}"


def _links(records: Sequence[RawRecord]) -> tuple[trace.SpanContext | None, list[trace.Link]]:
    """The producers' contexts the records carry: the first is the batch span's
    parent, so that one event's trace runs from its publish to the store
    writes; the others are links (one batch holds many producers' traces)."""
    parent: trace.SpanContext | None = None
    links: list[trace.Link] = []
    seen: set[int] = set()
    for record in records:
        context = telemetry.extract(record.headers)
        if context is None or context.span_id in seen:
            continue
        seen.add(context.span_id)
        if parent is None:
            parent = context
        else:
            links.append(trace.Link(context, {"messaging.kafka.offset": record.offset}))
    return parent, links


def _outcome(decision: Decision) -> dict[str, str | int]:
    if decision.pause is not None:
        return {"redstring.decision": "pause", "redstring.decision.reason": decision.pause}
    for kind, offset in (("seek", decision.seek), ("commit", decision.commit)):
        if offset is not None:
            outcome: dict[str, str | int] = {
                "redstring.decision": kind,
                "redstring.decision.offset": offset,
            }
            if decision.reason is not None:
                outcome["redstring.decision.reason"] = decision.reason
            return outcome
    return {"redstring.decision": "none", "redstring.decision.reason": decision.reason or ""}


class _Judged:
    """The lowest checkpoint of the stores (``Projector.judged_through``), read
    at most once a batch and only when a record needs it: most batches have no
    letter to write. Records at or below it were judged before (a rebuild
    window rescans them), so their dead letters are already written. A store
    stops before an event it refuses, so it is below every refusal of the
    batch whether it is read before the batch or after."""

    def __init__(self, read: Callable[[], Awaitable[int]]) -> None:
        self._read = read
        self._value: int | None = None

    async def get(self) -> int:
        if self._value is None:
            self._value = await self._read()
        return self._value


@dataclass(frozen=True, slots=True)
class _Selected:
    """The records of a batch that continue the stores' position (``needed``),
    and the first offset missing after them, if any."""

    records: list[RawRecord]
    needed: int
    hole: int | None


@dataclass(frozen=True, slots=True)
class _Decoded:
    """The records decoded, and the dead letters of the values that are not
    events. ``pause``: a newer schema version stopped the decoding before it,
    at offset ``paused_at``; ``truncated``: a replay request not judged yet
    ended it."""

    records: list[LogRecord]
    letters: list[DeadLetter]
    pause: str | None = None
    truncated: bool = False
    paused_at: int | None = None


@dataclass(frozen=True, slots=True)
class _Applied:
    """What the folds' passes over a batch did: events applied, where the
    stores need the partition read from (None: ask them), and why to pause."""

    applied: int = 0
    after: int | None = None
    pause: str | None = None


class Projector:
    def __init__(
        self,
        folds: Sequence[Fold[Any]],
        dead_letters: DeadLetterSink,
        *,
        topic: str,
        topic_id: str,
        control_key: ControlKeys | bytes | None,
        metrics: Metrics,
        partitions: int | None = None,
        control_max_age: timedelta | None = None,
        log_start: Callable[[int], Awaitable[int]] | None = None,
        max_backoff: float = 30.0,
        max_attempts: int = 5,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        probe: Probe | None = None,
        limits: EventLimits = DEFAULT_LIMITS,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.folds = list(folds)
        # None: tracing is off, and no record's headers are read; the API's
        # no-op tracer makes each span a few attribute-free calls.
        self._tracing = tracer is not None
        self._tracer = tracer if tracer is not None else trace.NoOpTracer()
        self.limits = limits  # the configurable caps decode applies (contracts.limits)
        self.dead_letters = dead_letters
        self.topic = topic
        self.topic_id = topic_id
        self.control_key = control_key
        self.partitions = partitions  # the topic's partition count, to check each record's
        self.control_max_age = control_max_age
        self.metrics = metrics
        self._log_start = log_start
        self.max_backoff = max_backoff
        self.max_attempts = max_attempts
        self._stopping = asyncio.Event()
        self._sleep = sleep
        self._probe = probe
        # Runs of offsets the broker said hold no record (transaction markers,
        # aborted or compacted records), per partition: first offset -> next.
        self._empty: dict[int, dict[int, int]] = {}
        self.health = PartitionHealth()
        # The highest offset per partition whose invalid-value letters this
        # worker has written: records after a refused event are read again
        # (the fold stopped before it), and must not be dead-lettered twice.
        self._lettered: dict[int, int] = {}
        # Where the stores needed each partition read from after this worker's
        # last batch on it, so the next batch asks them nothing first. Only a
        # shortcut: every unit of work checks its records against the store's
        # own state under its lock (docs/design.md 5.1 and 5.2), and a rebalance refreshes
        # it (``next_needed`` is called for every assigned partition).
        self._needed: dict[int, int] = {}
        # Decoding is CPU work on the event loop, a few ms per event. The
        # partitions of a batch decode one at a time, each starting its units
        # of work as soon as its records are decoded, so the stores write one
        # partition while the next decodes (instead of all decoding first).
        self._decoding = asyncio.Lock()
        # Fewer records per pass for a partition whose unit of work a store
        # ended for outliving its transaction timeout (ADR 0021).
        self._pass_limits = PassLimits()

    def stop(self) -> None:
        """The worker is stopping: a batch whose store calls keep failing ends at
        its next backoff (``handle`` returns a decision that does nothing)
        instead of holding the shutdown."""
        self._stopping.set()

    def stream_partition(self, partition: int) -> StreamPartition:
        return StreamPartition(self.topic, partition, self.topic_id)

    async def next_needed(self, partition: int) -> int:
        """Asks the stores (and remembers their answer)."""
        part = self.stream_partition(partition)
        offsets = [
            await self._retry(partition, partial(fold.next_needed_offset, part))
            for fold in self.folds
        ]
        self._needed[partition] = min(offsets)
        return self._needed[partition]

    async def replay_progress(self, partition: int) -> float:
        """The least scanned fraction of the partition's open rebuild windows
        over both stores (docs/design.md 6.1); 1.0 when none is open."""
        views = await self.stores_view(partition)
        return rebuild_progress(m for _, markers in views.values() for m in markers)

    async def stores_view(self, partition: int) -> dict[str, tuple[int, list[RebuildMarker]]]:
        """Each store's next needed offset and open rebuild windows, asked (not
        remembered), by store name: what the lag timer reports. Asked once,
        outside ``_retry``: a store error here raises to the timer, which skips
        the tick, instead of waiting out an outage and clearing the readiness
        reason a batch set while it retries."""
        part = self.stream_partition(partition)
        views: dict[str, tuple[int, list[RebuildMarker]]] = {}
        for store, fold in zip(STORES, self.folds, strict=False):
            # The markers read once: the position is computed from them.
            markers = list(await fold.store.rebuild_markers(part))
            views[store] = (await next_needed_offset(fold.store, part, markers), markers)
        return views

    async def position(self, partition: int) -> int:
        """Where the stores need the partition read from, as of this worker's
        last batch on it (asks them if there was none)."""
        known = self._needed.get(partition)
        return known if known is not None else await self.next_needed(partition)

    async def holds_records_from(self, partition: int, offset: int) -> bool:
        """Whether the log holds a record at or after ``offset`` (True when no
        probe can tell: the high watermark is then the only measure)."""
        if self._probe is None:
            return True
        return await self._retry(partition, partial(self._probe, partition, offset)) is not None

    async def judged_through(self, partition: int) -> int:
        """The lowest checkpoint of the stores: every record at or below it has
        been applied, skipped or dead-lettered by all of them."""
        part = self.stream_partition(partition)
        return min(
            [
                await self._retry(partition, partial(fold.store.checkpoint, part))
                for fold in self.folds
            ]
        )

    @contextmanager
    def _span(
        self,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        *,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        context: trace.SpanContext | None = None,
        links: Sequence[trace.Link] = (),
    ) -> Iterator[trace.Span]:
        """A child span of the current one (or of ``context``). An error is
        recorded by its class only: exception texts can name tenants and
        entities, which no span carries."""
        parent = trace.set_span_in_context(trace.NonRecordingSpan(context)) if context else None
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=kind,
            attributes=attributes if self._tracing else None,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(trace.StatusCode.ERROR, type(exc).__name__)
                raise

    @property
    def shares_units(self) -> bool:
        """Whether every store opens units of work across partitions
        (``handle_together`` then writes a batch's first passes together)."""
        return all(isinstance(fold.store, UnitsAcrossPartitions) for fold in self.folds)

    async def handle_together(
        self, batch: Sequence[tuple[int, Sequence[RawRecord]]], group_records: int
    ) -> list[Decision]:
        """Several partitions' batches, each handled as ``handle`` does, but
        with their first passes written in units of work shared by several
        partitions (at most ``group_records`` records each; ADR 0024) where
        they can be: each partition's records from where its stores need
        them, no control event among them, no tenant in two partitions. A
        shared pass that does not commit writes nothing, and each partition
        then applies its own. The decisions, in ``batch``'s order."""
        # Only partitions small enough to share wait for the others: a larger
        # one writes its own units at once, as it would in a batch that
        # shares nothing, instead of waiting for every partition to decode.
        carpool: Carpool[list[FoldReport]] = Carpool(
            [p for p, records in batch if len(records) < group_records],
            self._ride_together,
            group_records,
        )
        token = _CARPOOL.set(carpool)
        try:

            async def one(partition: int, records: Sequence[RawRecord]) -> Decision:
                try:
                    return await self.handle(partition, records)
                finally:
                    carpool.leave(partition)

            return list(await asyncio.gather(*(one(p, records) for p, records in batch)))
        finally:
            _CARPOOL.reset(token)

    async def _shared_pass(
        self, partition: int, records: Sequence[LogRecord], read_from: int
    ) -> tuple[list[FoldReport], int] | None:
        """The partition's first pass in ``handle_together``'s shared unit of
        work: its reports and how many records it took, or None (it runs on
        its own)."""
        carpool = _CARPOOL.get()
        if carpool is None:
            return None
        taken = self._pass_limits.take(partition, len(records))
        reports = await carpool.ride(Rider(partition, records[:taken], read_from))
        if reports is None:
            return None
        self._pass_limits.committed(partition)
        return reports, taken

    async def _ride_together(self, riders: Sequence[Rider]) -> dict[int, list[FoldReport]] | None:
        """One unit of work per store for the riders that can share it (two at
        least): each fold's report per partition, or None when nothing was
        written. The folds agree on the shared unit as on any other
        (``Verdicts``): none commits it unless all can."""
        parts: list[Part] = []
        partitions: list[int] = []
        tenants: set[TenantId] = set()
        for rider in riders:
            segment = shared_segment(rider.records, rider.read_from)
            own = {t for t in map(tenant_of, rider.records) if t is not None}
            if segment is None or own & tenants:
                continue
            tenants |= own
            parts.append(Part(self.stream_partition(rider.partition), segment))
            partitions.append(rider.partition)
        if len(parts) < 2:
            return None
        verdicts = Verdicts(len(self.folds))
        attributes = {
            "redstring.partitions": len(parts),
            "redstring.records": sum(len(part.segment.records) for part in parts),
        }
        with self._span("apply shared", attributes):
            results = await asyncio.gather(
                *(
                    fold.apply_across(parts, seat)
                    for fold, seat in zip(self.folds, verdicts.seats, strict=True)
                ),
                return_exceptions=True,
            )
        errors = [result for result in results if isinstance(result, BaseException)]
        reports = [result for result in results if isinstance(result, list)]
        if errors or len(reports) < len(self.folds):
            self.metrics.units_shared.labels(outcome="declined").inc()
            if errors:
                raise errors[0]
            return None
        self.metrics.units_shared.labels(outcome="committed").inc()
        return {p: [store[i] for store in reports] for i, p in enumerate(partitions)}

    async def handle(self, partition: int, records: Sequence[RawRecord]) -> Decision:
        """One partition's batch, in a ``process <topic>`` span when tracing
        (docs/operations.md, "Traces")."""
        if not self._tracing:
            return await self._handle_bounded(partition, records)
        parent, links = _links(records)
        offsets = [record.offset for record in records]
        attributes = {
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.destination.name": self.topic,
            "messaging.destination.partition.id": str(partition),
            "messaging.batch.message_count": len(records),
            "redstring.offset.first": min(offsets, default=-1),
            "redstring.offset.last": max(offsets, default=-1),
        }
        lettered: list[int] = []
        token = _LETTERED.set(lettered)
        try:
            with self._span(
                f"process {self.topic}",
                attributes,
                kind=trace.SpanKind.CONSUMER,
                context=parent,
                links=links,
            ) as span:
                decision = await self._handle_bounded(partition, records)
                span.set_attributes(
                    {
                        **_outcome(decision),
                        "redstring.applied": decision.applied,
                        "redstring.dead_lettered": len(lettered),
                    }
                )
                return decision
        finally:
            _LETTERED.reset(token)

    async def _handle_bounded(self, partition: int, records: Sequence[RawRecord]) -> Decision:
        token = _BOUNDED.set(True)
        try:
            return await self._handle(partition, records)
        except _GaveUp as gave_up:
            reason = (
                f"a store call failed {gave_up.attempts} times with "
                f"{type(gave_up.error).__name__}, which is not transient: paused for an "
                "operator (details in the log)"
            )
            self.health.failing.pop(partition, None)
            self.health.paused[partition] = reason
            log.error(
                "pausing partition",
                extra={"partition": partition, "reason": reason, "error": repr(gave_up.error)},
                exc_info=gave_up.error,
            )
            return Decision(pause=reason)
        except _Abandoned:
            log.warning("batch abandoned: the worker is stopping", extra={"partition": partition})
            return Decision(reason="abandoned: the worker is stopping")
        finally:
            _BOUNDED.reset(token)

    async def _handle(self, partition: int, records: Sequence[RawRecord]) -> Decision:
        if partition in self.health.paused:
            return Decision(reason="partition paused")
        selected = await self._select(partition, records)
        if isinstance(selected, Decision):
            return selected
        trace.get_current_span().set_attribute("redstring.records.new", len(selected.records))
        judged = _Judged(partial(self.judged_through, partition))
        decoded = await self._decode(partition, selected.records, judged)
        await self._dead_letter(partition, decoded.letters)
        applied = await self._apply_records(partition, selected, decoded.records, judged)
        return await self._decide(partition, selected, decoded, applied)

    async def _select(self, partition: int, records: Sequence[RawRecord]) -> _Selected | Decision:
        """The records that continue the stores' position, or what the consumer
        does when none does."""
        needed = await self.position(partition)
        fresh, hole = await self._contiguous(partition, records, needed)
        if not fresh:
            # Nothing here reaches the fold, whose checks under the stores'
            # locks would correct a remembered position that is stale: ask the
            # stores before committing or seeking to it.
            needed = await self.next_needed(partition)
            fresh, hole = await self._contiguous(partition, records, needed)
        if fresh:
            return _Selected(fresh, needed, hole)
        if hole is None:
            return Decision(commit=needed, reason="already applied")
        # The consumer is ahead of what the stores hold (a replay opened a
        # window, or a seek or a record was lost): read the gap first.
        self.metrics.seeks.labels(reason="ahead").inc()
        return Decision(seek=needed, reason="ahead")

    async def _decode(
        self, partition: int, fresh: Sequence[RawRecord], judged: _Judged
    ) -> _Decoded:
        """Decode the records in order, up to a newer schema version (which
        pauses the partition) or a replay request the stores have not judged."""
        async with self._decoding:
            with self._span("decode", {"redstring.records": len(fresh)}) as span:
                decoded = await self._decode_run(partition, fresh, judged)
                span.set_attribute("redstring.decoded", len(decoded.records))
                span.set_attribute("redstring.invalid", len(decoded.letters))
                if decoded.pause is not None or decoded.truncated:
                    stop = "newer schema version" if decoded.pause else "replay request"
                    span.set_attribute("redstring.stopped_at", stop)
                return decoded

    async def _decode_run(
        self, partition: int, fresh: Sequence[RawRecord], judged: _Judged
    ) -> _Decoded:
        records: list[LogRecord] = []
        letters: list[DeadLetter] = []
        for index, raw in enumerate(fresh):
            if index and index % DECODE_SLICE == 0:
                # Let the other partitions' units of work move on meanwhile.
                await asyncio.sleep(0)
            try:
                decoded = self._decode_one(partition, raw)
            except SchemaVersionTooNewError as exc:
                tenant = None if exc.tenant_id is None else TenantId(exc.tenant_id)
                if await self._admitted_anywhere(partition, raw.offset, tenant):
                    return _Decoded(records, letters, pause=str(exc), paused_at=raw.offset)
                # No store would apply it (a rebuild window rescanning the log
                # for another tenant meets a record an operator skipped): it
                # cannot hold the partition up, and it was judged before.
                records.append(LogRecord(raw.offset, tenant, None))
                continue
            records.append(decoded.record)
            reason = decoded.dead_letter_reason
            if reason is not None and raw.offset > max(
                await judged.get(), self._lettered.get(partition, -1)
            ):
                letters.append(DeadLetter(partition, raw.offset, raw.key, raw.value, reason))
            is_replay = isinstance(decoded.record.event, TenantReplayRequestedEvent)
            if is_replay and raw.offset > await judged.get():
                # A store ends the batch at a replay request it has not seen and
                # rescans the partition from the log start: judge nothing past it
                # now, or its dead letters would be written again on the rescan.
                return _Decoded(records, letters, truncated=True)
        return _Decoded(records, letters)

    async def _admitted_anywhere(
        self, partition: int, offset: int, tenant: TenantId | None
    ) -> bool:
        """Whether any store would apply an event of ``tenant`` at ``offset``."""
        if tenant is None:
            return True  # whose it is unknown: the pause is the safe side
        part = self.stream_partition(partition)
        for fold in self.folds:
            if await self._retry(partition, partial(fold.admits, part, offset, tenant)):
                return True
        return False

    def _decode_one(self, partition: int, raw: RawRecord) -> Decoded:
        return decode(
            raw.offset,
            raw.key,
            raw.value,
            self.control_key,
            topic_id=self.topic_id,
            partition=partition,
            partitions=self.partitions,
            logged_at=raw.logged_at,
            max_age=self.control_max_age,
            limits=self.limits,
        )

    async def _dead_letter(self, partition: int, letters: Sequence[DeadLetter]) -> None:
        if not letters:
            return
        # Written before any checkpoint moves past them: never silently lost.
        await self._retry(partition, partial(self._send_letters, letters))
        self.metrics.dead_lettered.inc(len(letters))
        self._lettered[partition] = max(letter.offset for letter in letters)

    async def _apply_records(
        self,
        partition: int,
        selected: _Selected,
        records: Sequence[LogRecord],
        judged: _Judged,
    ) -> _Applied:
        if not records:
            return _Applied()
        started = time.monotonic()
        # Only a control event opens a window from the log's start, and asking
        # for it is a request to the broker: not one per batch.
        log_start = 0
        if self._log_start is not None and any(is_control(r) for r in records):
            log_start = await self._log_start(partition)
        applied = await self._passes(partition, selected, records, log_start, judged)
        self.metrics.batch_latency.observe(time.monotonic() - started)
        self.metrics.batch_size.observe(len(records))
        return applied

    async def _passes(
        self,
        partition: int,
        selected: _Selected,
        records: Sequence[LogRecord],
        log_start: int,
        judged: _Judged,
    ) -> _Applied:
        """Each pass applies what is left of the batch; a pass that meets a
        refusal dead-letters it, skips it, and the next pass applies the records
        after it, which are in hand: no round trip to Kafka. So does a pass
        that took only the first of them (``PassLimits``): every pass takes at
        least one record off ``pending``."""
        done = _Applied()
        pending, read_from = records, selected.needed
        for _ in range(len(records) + 1):
            reports, taken = await self._pass(
                partition, pending, read_from, log_start, selected, judged
            )
            ended, resume = await self._after_pass(partition, reports)
            after = ended.after if ended.after is not None else done.after
            done = _Applied(done.applied + max(r.applied for r in reports), after, ended.pause)
            if resume is None and ended.pause is None and taken < len(pending):
                resume = _continued(pending, taken, ended.after)
            if resume is None:
                break
            # The batch is a run from the stores' position (any offset it
            # lacks holds no record), so what is left of it continues theirs.
            pending = [record for record in pending if record.offset >= resume]
            if not pending:
                break
            read_from = resume
        return done

    async def _pass(
        self,
        partition: int,
        pending: Sequence[LogRecord],
        read_from: int,
        log_start: int,
        selected: _Selected,
        judged: _Judged,
    ) -> tuple[list[FoldReport], int]:
        """The folds' reports over the first ``taken`` of ``pending``."""
        reports, taken = await self._apply(partition, pending, read_from, log_start)
        await self._report(partition, reports, selected.records, judged)
        # A fold stops before an event its store refuses; only now that the
        # dead letter is written may the store move past it. A crash before
        # this point refuses the event again (a duplicate letter, never a
        # lost one).
        part = self.stream_partition(partition)
        for fold, report in zip(self.folds, reports, strict=True):
            for failure in report.failed:
                await self._retry(partition, partial(fold.skip_refused, part, failure.offset))
        return reports, taken

    async def _after_pass(
        self, partition: int, reports: Sequence[FoldReport]
    ) -> tuple[_Applied, int | None]:
        """Where the stores stand after a pass, and where the next pass reads
        the rest of the batch from (None: there is no next pass)."""
        halted = next((r.halted for r in reports if r.halted is not None), None)
        if halted is not None:
            # The exception's text names the tenant and entity: log only.
            log.error("a store is corrupt", extra={"partition": partition, "error": repr(halted)})
            reason = f"{type(halted).__name__} (details in the log)"
            return _Applied(pause=f"the store is corrupt and needs an operator: {reason}"), None
        if not any(report.failed for report in reports):
            # Each fold reports the position its last unit of work left.
            after = min(report.next_needed_offset for report in reports)
            self._needed[partition] = after
            return _Applied(after=after), None
        after = await self.next_needed(partition)  # skip_refused moved the stores
        if any(report.replays_started for report in reports):
            return _Applied(after=after), None  # a rebuild window opened: the consumer seeks back
        return _Applied(after=after), after

    async def _decide(
        self, partition: int, selected: _Selected, decoded: _Decoded, applied: _Applied
    ) -> Decision:
        pause = applied.pause if applied.pause is not None else decoded.pause
        if applied.pause is None and decoded.paused_at is not None:
            known = applied.after
            needed = known if known is not None else await self.next_needed(partition)
            if needed < decoded.paused_at:
                # The stores need earlier records (another worker opened a
                # rebuild window, and this one's remembered position was
                # stale): a pause here would wait on a record the stores never
                # reach, which neither the watchdog nor ``redstring skip``
                # could release. Read them first; the pause comes on the way.
                self.metrics.seeks.labels(reason="ahead").inc()
                return Decision(seek=needed, applied=applied.applied, reason="ahead")
        if pause is not None:
            self.health.paused[partition] = pause
            log.error("pausing partition", extra={"partition": partition, "reason": pause})
            at = decoded.paused_at if applied.pause is None else None
            return Decision(pause=pause, applied=applied.applied, paused_at=at)
        after = applied.after
        if after is None:
            after = await self.next_needed(partition)
        if after <= decoded.records[-1].offset:
            # A store asked for an earlier offset (a rebuild window opened, or
            # the records after a refused event are still to be applied).
            self.metrics.seeks.labels(reason="replay").inc()
            return Decision(seek=after, applied=applied.applied, reason="replay")
        if decoded.truncated or selected.hole is not None:
            # The consumer has read past the records left out of this batch
            # (after a replay request, or after a record it did not hand over).
            reason = "hole" if selected.hole is not None else "replay"
            self.metrics.seeks.labels(reason=reason).inc()
            return Decision(seek=after, applied=applied.applied, reason=reason)
        return Decision(commit=after, applied=applied.applied)

    async def _apply(
        self, partition: int, records: Sequence[LogRecord], read_from: int, log_start: int
    ) -> tuple[list[FoldReport], int]:
        """Both folds over the same records, or the first of them that the
        partition's pass limit allows; returns their reports and how many
        records they were given. The stores are independent (each
        fold writes its own, under its own checkpoint): apply to both at once,
        so that the worker waits for the slower store rather than for the sum
        of the two (measured by bench/e2e.py; docs/performance.md). The folds
        agree on every unit of work before committing it (``Verdicts``), so
        they refuse the same events; a pass that fails is retried as a whole,
        once both folds have ended, and with fewer records if a store ended a
        unit of work of it for its length (ADR 0021)."""
        shared = await self._shared_pass(partition, records, read_from)
        if shared is not None:
            return shared
        part = self.stream_partition(partition)
        taken = len(records)

        async def attempt() -> list[FoldReport]:
            nonlocal taken
            taken = self._pass_limits.take(partition, len(records))
            head = records[:taken]
            verdicts = Verdicts(len(self.folds))
            results = await asyncio.gather(
                *(
                    self._fold(index, part, head, log_start, read_from, seat)
                    for index, seat in enumerate(verdicts.seats)
                ),
                return_exceptions=True,
            )
            errors = [result for result in results if isinstance(result, BaseException)]
            if errors:
                if any(isinstance(e, TransactionEndedError) for e in errors):
                    self._pass_limits.ended(partition, taken)
                    log.warning(
                        "a store ended a unit of work; the partition's passes take fewer records",
                        extra={
                            "partition": partition,
                            "records": taken,
                            "next": self._pass_limits.take(partition, len(records)),
                        },
                    )
                # One that is not transient first, so that the bound applies.
                raise next((e for e in errors if not is_transient(e)), errors[0])
            self._pass_limits.committed(partition)
            return [result for result in results if isinstance(result, FoldReport)]

        return await self._retry(partition, attempt), taken

    async def _fold(
        self,
        index: int,
        part: StreamPartition,
        records: Sequence[LogRecord],
        log_start: int,
        read_from: int,
        seat: Any,
    ) -> FoldReport:
        """One store's units of work over the records, in an ``apply <store>`` span."""
        fold = self.folds[index]
        attributes = {
            "redstring.store": _store(index),
            "redstring.records": len(records),
            "redstring.offset.first": records[0].offset,
            "redstring.offset.last": records[-1].offset,
            "redstring.read_from": read_from,
        }
        with self._span(f"apply {_store(index)}", attributes) as span:
            report = await fold.apply(
                part, records, log_start=log_start, read_from=read_from, seat=seat
            )
            if self._tracing:
                span.set_attributes(
                    {
                        "redstring.outcome": type(report.outcome).__name__,
                        "redstring.applied": report.applied,
                        "redstring.skipped": report.skipped,
                        "redstring.collapsed": report.collapsed,
                        "redstring.dangling": report.dangling,
                        "redstring.next_needed_offset": report.next_needed_offset,
                    }
                )
                if report.failed:
                    span.set_attribute("redstring.refused_offset", report.failed[0].offset)
            return report

    async def _contiguous(
        self, partition: int, records: Sequence[RawRecord], start: int
    ) -> tuple[list[RawRecord], int | None]:
        """``contiguous_run``, asking the broker about each hole before the
        last record: offsets that hold no record are not a lost delivery."""
        empty = self._empty.setdefault(partition, {})
        for stale in [offset for offset in empty if offset < start]:
            del empty[stale]
        last = max((r.offset for r in records), default=-1)
        while True:
            run, hole = contiguous_run(records, start, empty)
            if hole is None or hole > last or self._probe is None:
                return run, hole
            first = await self._retry(partition, partial(self._probe, partition, hole))
            if first is None or first <= hole:
                return run, hole  # the record is there: the consumer lost it
            empty[hole] = first

    async def _report(
        self,
        partition: int,
        reports: Sequence[FoldReport],
        raws: Sequence[RawRecord],
        judged: _Judged,
    ) -> None:
        by_offset = {r.offset: r for r in raws}
        failed: dict[int, str] = {}
        for report in reports:
            for failure in report.failed:
                # A refusal met again while a replay re-applies the tenant's
                # history was dead-lettered when the event was first applied.
                if failure.offset > await judged.get():
                    failed.setdefault(failure.offset, failure.reason)
        for store, report in zip(("graph", "vector"), reports, strict=False):
            self.metrics.applied.labels(store=store).inc(report.applied)
            self.metrics.skipped.labels(store=store).inc(report.skipped)
            self.metrics.collapsed.labels(store=store).inc(report.collapsed)
        if failed:
            letters = [
                DeadLetter(partition, off, by_offset[off].key, by_offset[off].value, why)
                for off, why in sorted(failed.items())
                if off in by_offset
            ]
            await self._retry(partition, partial(self._send_letters, letters))
            self.metrics.dead_lettered.inc(len(letters))

    async def _send_letters(self, letters: Sequence[DeadLetter]) -> None:
        offsets = [letter.offset for letter in letters]
        with self._span(
            "send dead letters",
            {
                "messaging.operation.type": "send",
                "redstring.dead_letters": len(letters),
                "redstring.offset.first": min(offsets),
                "redstring.offset.last": max(offsets),
            },
            kind=trace.SpanKind.PRODUCER,
        ):
            await self.dead_letters.send(letters)
        lettered = _LETTERED.get()
        if lettered is not None:
            lettered.extend(offsets)

    async def _retry(self, partition: int, attempt: Callable[[], Awaitable[T]]) -> T:
        """Store and broker errors are retried with backoff and never escape: the
        partition waits, and readiness says why while it does (the error's class,
        never its text). Within ``handle`` an error that is not transient is
        retried at most ``max_attempts`` times (``_GaveUp``). A worker that is
        stopping ends the wait at the backoff (``_Abandoned``)."""
        delay = 0.1
        failures = 0
        persistent = 0
        while True:
            try:
                result = await attempt()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                transient = is_transient(exc)
                persistent += 0 if transient else 1
                self.metrics.store_retries.inc()
                log.warning(
                    "store call failed; retrying",
                    extra={"partition": partition, "error": repr(exc), "delay": delay},
                    exc_info=None if transient else exc,
                )
                if not transient and _BOUNDED.get() and persistent >= self.max_attempts:
                    raise _GaveUp(exc, persistent) from exc
                if failures >= 3:
                    why = RETRYING_TRANSIENT if transient else RETRYING_PERSISTENT
                    self.health.failing[partition] = f"{type(exc).__name__}: {why}"
                await self._backoff(delay)
                delay = min(self.max_backoff, delay * 2)
                continue
            self.health.failing.pop(partition, None)
            return result

    async def _backoff(self, delay: float) -> None:
        if self._stopping.is_set():
            raise _Abandoned
        sleeping = asyncio.ensure_future(self._sleep(delay))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait((sleeping, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeping.cancel()
            stopping.cancel()
        if self._stopping.is_set():
            raise _Abandoned
