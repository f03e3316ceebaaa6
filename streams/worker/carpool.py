"""Where the first passes of a batch's partitions meet, so that their writes
share one unit of work per store (docs/adr/0024-units-of-work-across-partitions.md).

Each partition of the batch is handled as it is alone (select, decode, dead
letters, passes, decision); only the first pass of a partition small enough
to share stops here and waits until every other such partition of the batch
has either come to its own first pass or ended without one (a larger one is
not expected, and writes its own units at once). Then one of them runs the
shared passes for those that came, grouped in partition order into units of
at most ``group_records`` records each, the groups at once: fewer units of
work than partitions, and still several in flight, so that the stores keep
both cores busy (one unit of a whole batch was measured slower than a unit
per partition: its statements run one after the other). Each partition gets
its reports from its group's pass, or None, and then applies its pass on its
own as it would have: a shared pass that does not commit writes nothing.

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
    """One batch's meeting point. ``ride`` runs a shared pass over a group of
    riders (two at least) and answers each partition's result, or None for
    all of them."""

    def __init__(self, partitions: Collection[int], ride: Ride[R], group_records: int) -> None:
        self._group_records = group_records
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
                groups = groups_of(self._riders, self._group_records)
                rides = await asyncio.gather(
                    *(self._ride(group) for group in groups), return_exceptions=True
                )
                self._results = {}
                for ridden in rides:
                    if isinstance(ridden, Exception):
                        # Nothing committed that a later pass would not see:
                        # each partition's own pass finds, under the stores'
                        # locks, what is written and what is not.
                        log.info(
                            "a shared unit of work failed; each partition applies its own",
                            extra={"error": type(ridden).__name__},
                        )
                    elif isinstance(ridden, BaseException):
                        raise ridden
                    elif ridden is not None:
                        self._results.update(ridden)
            finally:
                self._done.set()
        await self._done.wait()
        return None if self._results is None else self._results.get(rider.partition)


def groups_of(riders: Sequence[Rider], most: int) -> list[list[Rider]]:
    """The riders in partition order, cut into groups of at most ``most``
    records each; only groups of two riders or more (a rider over ``most``
    alone, and a group of one, run on their own)."""
    groups: list[list[Rider]] = []
    current: list[Rider] = []
    held = 0
    for rider in sorted(riders, key=lambda r: r.partition):
        size = len(rider.records)
        if current and held + size > most:
            groups.append(current)
            current, held = [], 0
        current.append(rider)
        held += size
    groups.append(current)
    return [group for group in groups if len(group) > 1 and _records(group) <= most]


def _records(group: Sequence[Rider]) -> int:
    return sum(len(rider.records) for rider in group)
