"""Faults at await points: a worker crash (a BaseException the projector's
retry does not catch) at the Nth await of a worker's stores, dead-letter sink
or consumer, and transient store errors the projector retries: some of them
a unit of work the store's server ended (``TransactionEndedError``), after
which the projector's passes take fewer records (ADR 0021).

The stores are wrapped with the scenario harness's ``CrashingStore`` (every
async call, inside units of work too, ticks the wire, and may give other
tasks a turn before it answers, as a real store's round trip does); the
memory stores' units of work roll back on any exception, this one included
(test_simulation checks it)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

from contracts.errors import TransactionEndedError
from streams.worker.projector import DeadLetter
from tests.scenarios.harness import CrashingStore, Tripwire


class WorkerCrash(BaseException):
    """The worker process died here (kill -9): not an ``Exception``, so the
    projector's retry does not catch it."""


class FaultWire(Tripwire):
    """One worker incarnation's await points. Once it has crashed, every
    further await of that incarnation raises too (the process is gone)."""

    def __init__(self, turns: random.Random | None = None, chance: float = 0.0) -> None:
        super().__init__()
        #: How often a store call gives other tasks a turn before it answers.
        self.turns = turns
        self.chance = chance
        self.dead = False
        self.transient_at: int | None = None
        self.transients = 0
        self.ending = False
        self.ended = 0

    def arm_transient(self, after: int, *, ended: bool = False) -> None:
        self.transient_at = self.calls + max(1, after)
        self.ending = ended

    def disarm(self) -> None:
        super().disarm()
        self.transient_at = None

    def _crash_check(self, what: str) -> None:
        self.calls += 1
        if self.dead:
            raise WorkerCrash(f"dead worker at {what}")
        if self.crash_at is not None and self.calls >= self.crash_at:
            self.crash_at = None
            self.dead = True
            self.fired += 1
            raise WorkerCrash(f"crash at await {self.calls} ({what})")

    def tick(self, what: str) -> None:
        """A store or dead-letter call: crash, or fail once with a transient error."""
        self._crash_check(what)
        if self.transient_at is not None and self.calls >= self.transient_at:
            self.transient_at = None
            self.transients += 1
            if self.ending:
                self.ended += 1
                raise TransactionEndedError(f"transaction ended at await {self.calls} ({what})")
            raise ConnectionError(f"transient failure at await {self.calls} ({what})")

    async def turn(self) -> None:
        """A store's round trip: sometimes other tasks (the other members, the
        consumer's side, an operator) run between the call and its answer, as
        they do while a real store is asked."""
        if self.turns is not None and self.turns.random() < self.chance:
            await asyncio.sleep(0)

    def tick_consumer(self, what: str) -> None:
        """A consumer call: only a crash (Faust crashes on its own errors)."""
        self._crash_check(what)


def crashing(store: Any, wire: FaultWire, hidden: frozenset[str] = frozenset()) -> Any:
    return CrashingStore(store, wire, hidden)


class DeadLetterTopic:
    """The dead-letter topic: survives every crash."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    def offsets(self) -> set[tuple[int, int]]:
        return {(letter.partition, letter.offset) for letter in self.letters}

    async def send(self, letters: Sequence[DeadLetter]) -> None:
        """The operator's producer (``redstring skip``), which no worker fault reaches."""
        await asyncio.sleep(0)
        self.letters.extend(letters)


class TrippingSink:
    """One worker's producer to the dead-letter topic."""

    def __init__(self, topic: DeadLetterTopic, wire: FaultWire) -> None:
        self.topic = topic
        self.wire = wire

    async def send(self, letters: Sequence[DeadLetter]) -> None:
        self.wire.tick("dead_letters.send")
        await asyncio.sleep(0)
        self.topic.letters.extend(letters)
