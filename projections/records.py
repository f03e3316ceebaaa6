"""What a fold consumes and what it reports."""

from __future__ import annotations

from dataclasses import dataclass, field

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
class FoldReport:
    applied: int = 0
    skipped: int = 0
    collapsed: int = 0
    dangling: int = 0
    failed: list[FailedEvent] = field(default_factory=list)
    #: Where this store needs the partition to be read from next (docs/design.md 5.2).
    next_needed_offset: int = 0
    #: Set when the store is corrupt (``AliasCycleError``): the partition must stop.
    halted: Exception | None = None
    #: Offsets of replay requests that ended the batch and opened a rebuild window.
    replays_started: list[int] = field(default_factory=list)
