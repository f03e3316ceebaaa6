"""How a fold cuts a batch into pieces, and what applying a piece yields.

Pure: no store, no I/O, so the cuts can be tested on their own. The events
between control events share one unit of work (a ``Segment``); each control
event is a piece of its own (a ``Control``), because its effects are written
outside the admission state (docs/design.md 5.3). Within a unit of work, a run
of extractions shares each write; a merge or an unmerge ends its tenant's
run, so that tenant's later extractions resolve through the new aliases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from contracts.events import (
    DocumentExtractedEvent,
    EntitiesMergedEvent,
    EntitiesUnmergedEvent,
    Event,
    TenantErasedEvent,
    TenantReplayRequestedEvent,
)
from contracts.ids import TenantId
from projections.records import LogRecord, Outcome, Tally

ControlEvent = TenantReplayRequestedEvent | TenantErasedEvent


def is_control(record: LogRecord) -> bool:
    return isinstance(record.event, TenantReplayRequestedEvent | TenantErasedEvent)


def tenant_of(record: LogRecord) -> TenantId | None:
    if record.event is not None:
        return record.event.tenant
    return record.tenant_id


@dataclass(frozen=True, slots=True)
class Segment:
    """Records between control events, tried as one unit of work.

    ``expected`` is the offset the records are read from: the unit of work
    checks it against the store's position under its lock (docs/design.md 5.1
    and 5.2)."""

    records: Sequence[LogRecord]
    expected: int

    @property
    def offsets(self) -> tuple[int, ...]:
        return tuple(record.offset for record in self.records)

    def singles(self) -> list[Segment]:
        """One segment per record, each read from where the one before it ended."""
        expected, out = self.expected, []
        for record in self.records:
            out.append(Segment([record], expected))
            expected = record.offset + 1
        return out


@dataclass(frozen=True, slots=True)
class Control:
    """A replay request or an erasure, read from ``expected``."""

    record: LogRecord
    event: ControlEvent
    expected: int

    @property
    def records(self) -> Sequence[LogRecord]:
        return (self.record,)


Piece = Segment | Control


def split_batch(records: Sequence[LogRecord], read_from: int | None) -> list[Piece]:
    """The pieces of a batch in log order; ``read_from`` defaults to the first
    record's offset."""
    pieces: list[Piece] = []
    run: list[LogRecord] = []
    expected = records[0].offset if records and read_from is None else read_from
    for record in records:
        assert expected is not None  # set whenever there is a record
        event = record.event
        if not isinstance(event, TenantReplayRequestedEvent | TenantErasedEvent):
            run.append(record)
            continue
        if run:
            pieces.append(Segment(run, expected))
            expected, run = run[-1].offset + 1, []
        pieces.append(Control(record, event, expected))
        expected = record.offset + 1
    if run:
        assert expected is not None
        pieces.append(Segment(run, expected))
    return pieces


@dataclass(frozen=True, slots=True)
class Admitted:
    """An event a unit of work applies: admitted and not seen before."""

    offset: int
    event: Event


Mend = EntitiesMergedEvent | EntitiesUnmergedEvent
Write = Sequence[Admitted] | Mend
#: A tenant's run of extractions, or one of its merges or unmerges and its offset.
_TenantWrite = list[Admitted] | tuple[int, Mend]


def _tenant_writes(admitted: Sequence[Admitted]) -> list[list[_TenantWrite]]:
    """Each tenant's writes in log order, tenants in the order they first
    appear: runs of its consecutive extractions, and each of its merges and
    unmerges on its own. Any other event ends the tenant's run and writes
    nothing."""
    writes: dict[TenantId, list[_TenantWrite]] = {}
    runs: dict[TenantId, list[Admitted]] = {}
    for item in admitted:
        tenant, event = item.event.tenant, item.event
        if isinstance(event, DocumentExtractedEvent):
            if tenant not in runs:
                runs[tenant] = []
                writes.setdefault(tenant, []).append(runs[tenant])
            runs[tenant].append(item)
            continue
        runs.pop(tenant, None)
        if isinstance(event, EntitiesMergedEvent | EntitiesUnmergedEvent):
            writes.setdefault(tenant, []).append((item.offset, event))
    return list(writes.values())


def write_order(admitted: Sequence[Admitted]) -> list[Write]:
    """The writes of a unit of work: every tenant's in its own log order,
    with as few runs of extractions as that allows.

    Tenants never touch each other's rows (keys, aliases and ledgers all
    carry the tenant), so applying each tenant's events in log order leaves
    the state that the whole log in order would, whatever the order between
    tenants. A merge or an unmerge ends only its own tenant's run, and the
    tenants' runs are written together, aligned on their last: with ``R``
    runs for the busiest tenant, a tenant with ``r`` runs writes its first in
    the combined run ``R - r``, and the merges and unmerges before each of its
    runs just before that combined run (those after its last at the end). A
    unit of work then writes ``R`` runs, not one more per merge in the
    partition. A combined run, and the merges and unmerges between two, keep
    their log order."""
    tenants = _tenant_writes(admitted)
    busiest = max((sum(isinstance(w, list) for w in writes) for writes in tenants), default=0)
    runs: list[list[Admitted]] = [[] for _ in range(busiest)]
    # Slot k holds what goes before combined run k; slot ``busiest``, the end.
    mends: list[list[tuple[int, Mend]]] = [[] for _ in range(busiest + 1)]
    for writes in tenants:
        slot = busiest - sum(isinstance(w, list) for w in writes)
        for write in writes:
            if isinstance(write, list):
                runs[slot].extend(write)
                slot += 1
            else:
                mends[slot].append(write)
    order: list[Write] = []
    for k in range(busiest + 1):
        order.extend(event for _, event in sorted(mends[k], key=lambda mend: mend[0]))
        if k < busiest:
            order.append(sorted(runs[k], key=lambda item: item.offset))
    return order


@dataclass(frozen=True, slots=True)
class Step:
    """What applying one piece (or one unit of work) did.

    ``needed`` is the store's next needed offset as the last unit of work it
    committed left it (None when it committed none); ``end`` says how the
    batch ends here (None when it goes on)."""

    tally: Tally = field(default_factory=Tally)
    needed: int | None = None
    end: Outcome | None = None

    def then(self, later: Step) -> Step:
        needed = later.needed if later.needed is not None else self.needed
        return Step(self.tally + later.tally, needed, later.end)
