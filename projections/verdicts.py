"""Where the folds of one pass over one batch agree on each unit of work, so
that both stores reach the same verdict for every event (docs/design.md 5.10;
docs/semantics.md, "Failures")."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass


class Agreement(enum.Enum):
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
        self._settled: dict[Offsets, tuple[Agreement, str | None]] = {}
        self._changed = asyncio.Event()
        self.seats = [Seat(self, index) for index in range(seats)]

    def _notify(self) -> None:
        for offsets, arrived in list(self._arrived.items()):
            if self._early:
                self._settled[offsets] = (Agreement.STOP, None)
            elif self._present <= set(arrived):
                self._settled[offsets] = agreement(offsets, arrived)
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
    ) -> tuple[Agreement, str | None]:
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


def agreement(
    offsets: tuple[int, ...], arrived: dict[int, str | None]
) -> tuple[Agreement, str | None]:
    """What becomes of a unit of work, given each seat's result for it (a fold
    without a seat agrees with itself)."""
    failures = [arrived[seat] for seat in sorted(arrived) if arrived[seat] is not None]
    if not failures:
        return Agreement.COMMIT, None
    if len(offsets) > 1:
        return Agreement.SPLIT, None
    if HALT in failures:
        return Agreement.STOP, None
    return Agreement.REFUSE, failures[0]


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

    async def agree(self, offsets: Offsets, result: str | None) -> tuple[Agreement, str | None]:
        return await self.verdicts._agree(self.index, offsets, result)

    def leave(self, *, early: bool) -> None:
        self.verdicts._leave(self.index, early=early)
