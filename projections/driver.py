"""Drives folds over a log held in memory, the way the agent drives them over
Kafka: batches read from the lowest next needed offset of the stores, seeking
back whenever a store asks for an earlier offset (a replay window, a resume).

Used by ``redstring fold`` (the producers' dry run) and by the tests.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.domain import StreamPartition
from projections.fold import Fold
from projections.records import FailedEvent, LogRecord


class HaltedError(RuntimeError):
    """A store reported corruption; the partition cannot go on."""


@dataclass
class DriveResult:
    batches: int = 0
    applied: int = 0
    collapsed: int = 0
    dangling: int = 0
    failed: dict[int, FailedEvent] = field(default_factory=dict)


async def drive(
    folds: Sequence[Fold[Any]],
    partition: StreamPartition,
    log: Sequence[LogRecord],
    *,
    batch_size: int = 500,
    max_batches: int = 1_000_000,
) -> DriveResult:
    """Fold ``log`` (ordered by offset) into every fold's store until all of them
    have caught up with its end."""
    offsets = [record.offset for record in log]
    log_start = offsets[0] if offsets else 0
    result = DriveResult()
    while result.batches < max_batches:
        needed = min([await fold.next_needed_offset(partition) for fold in folds], default=0)
        start = bisect.bisect_left(offsets, needed)
        if start >= len(log):
            return result
        batch = log[start : start + batch_size]
        result.batches += 1
        for fold in folds:
            report = await fold.apply(partition, batch, log_start=log_start, read_from=needed)
            if report.halted is not None:
                raise HaltedError(str(report.halted)) from report.halted
            result.applied += report.applied
            result.collapsed += report.collapsed
            result.dangling += report.dangling
            for failure in report.failed:
                result.failed.setdefault(failure.offset, failure)
                # Nothing to send in memory: the result is the dead-letter list.
                await fold.skip_refused(partition, failure.offset)
    raise RuntimeError(f"the folds did not catch up within {max_batches} batches")
