"""Where the first passes of a batch's partitions meet, so that their writes
share one unit of work per store (docs/adr/0024-units-of-work-across-partitions.md).

Each partition of the batch is handled as it is alone (select, decode, dead
letters, passes, decision); only its first pass stops here and waits until
every other partition of the batch has either come to its own first pass or
ended without one. Then one of them runs the shared pass for all that came;
each gets its reports from it, or None, and then applies its pass on its own
as it would have: a shared pass that does not commit writes nothing.

Nothing waits here for anything that waits for it: a partition is expected
until it arrives or its handling ends (``leave``, from a ``finally``), and
the caller never lets a partition wait for room that a rider holds (the
loop takes the batch's whole in-flight budget before it starts).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from projections.records import LogRecord

log = logging.getLogger("redstring.projector")

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Rider:
    """A partition's first pass: its records, read from ``read_from``."""

    partition: int
    records: Sequence[LogRecord]
    read_from: int


Ride = Callable[[Sequence[Rider]], Awaitable[Mapping[int, R] | None]]


class Carpool(Generic[R]):
    """One batch's meeting point. ``ride`` runs the shared pass over the
    riders that came (two at least) and answers each partition's result, or
    None for all of them."""

    def __init__(self, partitions: Collection[int], ride: Ride[R]) -> None:
        self._expected = set(partitions)
        self._riders: list[Rider] = []
        self._ride = ride
        self._full = asyncio.Event()
        self._done = asyncio.Event()
        self._driving = False
        self._results: Mapping[int, R] | None = None
        if not self._expected:
            self._full.set()

    def leave(self, partition: int) -> None:
        """The partition's handling ended: it comes no more (a no-op once it came)."""
        self._expected.discard(partition)
        if not self._expected:
            self._full.set()

    async def ride(self, rider: Rider) -> R | None:
        """The partition's first pass, shared with the others that come: its
        result, or None when it is to run on its own (not its first pass,
        nobody else came, or the shared pass wrote nothing)."""
        if rider.partition not in self._expected or self._full.is_set():
            return None
        self._riders.append(rider)
        self.leave(rider.partition)
        await self._full.wait()
        if not self._driving:
            self._driving = True
            try:
                if len(self._riders) > 1:
                    self._results = await self._ride(sorted(self._riders, key=_by_partition))
            except Exception as exc:
                # Nothing committed that a later pass would not see: each
                # partition's own pass finds, under the stores' locks, what is
                # written and what is not.
                log.info(
                    "a shared unit of work failed; each partition applies its own",
                    extra={"error": type(exc).__name__},
                )
            finally:
                self._done.set()
        await self._done.wait()
        return None if self._results is None else self._results.get(rider.partition)


def _by_partition(rider: Rider) -> int:
    return rider.partition
