"""What a fold consumes and what it reports."""

from __future__ import annotations

from dataclasses import dataclass

from contracts.events import Event
from contracts.ids import TenantId


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of a partition, in log order.

    ``event`` is None for a record the fold only steps over: a value that failed
    validation or a control event whose signature did not verify (the agent has
    dead-lettered it). ``tenant_id`` is the Kafka key when it names a valid tenant.
    """

    offset: int
    tenant_id: TenantId | None
    event: Event | None


@dataclass(frozen=True, slots=True)
class FailedEvent:
    """An event a store refused; the agent dead-letters it with ``reason``."""

    offset: int
    event_id: str
    reason: str


@dataclass(slots=True)
class Tally:
    """What one unit of work counts as it writes. A fold adds it to its report
    only once the unit of work commits: a rolled-back attempt counts nothing."""

    applied: int = 0
    skipped: int = 0
    collapsed: int = 0
    dangling: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.applied + other.applied,
            self.skipped + other.skipped,
            self.collapsed + other.collapsed,
            self.dangling + other.dangling,
        )


# -- how a fold's pass over a batch ends -------------------------------------


@dataclass(frozen=True, slots=True)
class Applied:
    """Every record of the batch was applied or skipped."""


@dataclass(frozen=True, slots=True)
class Replaying:
    """A replay request at ``offset`` opened a rebuild window and ended the
    batch: the consumer seeks back to the window (docs/design.md 6.1)."""

    offset: int


@dataclass(frozen=True, slots=True)
class Refused:
    """The store refused an event: the batch stopped before it. The caller
    dead-letters it, then calls ``Fold.skip_refused`` (docs/design.md 5.8)."""

    failure: FailedEvent


@dataclass(frozen=True, slots=True)
class Ahead:
    """The batch starts past what the store needs: nothing of it was applied,
    and the caller seeks back (docs/design.md 5.2)."""


@dataclass(frozen=True, slots=True)
class Halted:
    """The store is corrupt (``AliasCycleError``): the partition must stop."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Stopped:
    """Another fold of the same pass stopped (an early end, or its store is
    corrupt), so this one committed nothing from that point (docs/design.md 5.10)."""


Outcome = Applied | Replaying | Refused | Ahead | Halted | Stopped


@dataclass(frozen=True, slots=True)
class FoldReport:
    """One fold's pass over one batch: how it ended, where the store needs the
    partition read from next (docs/design.md 5.2), and what the committed units
    of work counted."""

    outcome: Outcome
    next_needed_offset: int
    applied: int = 0
    skipped: int = 0
    collapsed: int = 0
    dangling: int = 0

    # The outcome in the shape the worker and the tests read it.

    @property
    def failed(self) -> list[FailedEvent]:
        return [self.outcome.failure] if isinstance(self.outcome, Refused) else []

    @property
    def halted(self) -> Exception | None:
        return self.outcome.error if isinstance(self.outcome, Halted) else None

    @property
    def replays_started(self) -> list[int]:
        return [self.outcome.offset] if isinstance(self.outcome, Replaying) else []
