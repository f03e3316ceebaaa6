"""The intake: what the consumer hands over is gathered while the loop applies
the batch before it (docs/adr/0006-faust-seeks.md, "Pipelining").

The agent ``put``s each batch the consumer hands over; one applier task takes
everything gathered so far and hands it to the loop as one batch. So the next
batch is fetched and gathered while the current one is written, and a batch
follows the log: up to ``max_records`` under a backlog (records pile up while
a batch is written), and only what arrived meanwhile when the worker is caught
up, with no wait for a full batch.

Nothing here decides a commit, a seek or a pause: the loop does, for the batch
the applier hands it, as it did when the agent handed batches over one at a
time. A record gathered before a seek that the batch in flight asks for is
stale; it reaches the projector, which applies a record only where it
continues the stores' position and otherwise seeks again, so a stale record
costs a seek, never a record. Records of a partition revoked while they wait
are dropped (``retain``): the new owner reads from the stores' position.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

from streams.worker.projector import RawRecord

log = logging.getLogger("redstring.worker")

Batch = Mapping[int, Sequence[RawRecord]]


class BatchHandler(Protocol):
    async def on_batch(self, batch: Batch) -> None:
        """Apply one batch (streams.worker.loop.WorkerLoop.on_batch)."""
        ...


class IntakeStopped(RuntimeError):
    """The applier ended (it raised, or the intake was closed): nothing put
    would ever be applied, so the agent must stop too."""


class Intake:
    """Records handed over but not yet applied, and the task that applies
    them. ``on_taken`` is called with each batch as the applier takes it, before
    it is applied (the read-ahead budget gets its bytes back);
    ``on_dropped`` with the records that waited and are dropped instead (a
    rebalance): they will never be taken, so whatever counted them must let
    go of them too, or an intake left empty could wait for room that never
    comes."""

    def __init__(
        self,
        handler: BatchHandler,
        *,
        max_records: int,
        on_taken: Callable[[Batch], None] | None = None,
        on_dropped: Callable[[Batch], None] | None = None,
    ) -> None:
        self.handler = handler
        self.max_records = max(1, max_records)
        self._on_taken = on_taken
        self._on_dropped = on_dropped
        self._pending: dict[int, list[RawRecord]] = {}
        self._count = 0
        self._in_flight = False
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    # -- the agent's side ------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Start the applier (once)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._apply_forever())
        return self._task

    async def put(self, batch: Batch) -> None:
        """Add a batch the consumer handed over; waits while the records
        gathered would pass ``max_records`` (a batch larger than that alone is
        taken whole once nothing else waits)."""
        size = sum(len(records) for records in batch.values())
        if not size:
            return
        while self._count and self._count + size > self.max_records:
            self._check()
            self._room.clear()
            await self._room.wait()
        self._check()
        for partition, records in batch.items():
            if records:
                self._pending.setdefault(partition, []).extend(records)
        self._count += size
        self._idle.clear()
        self._arrived.set()

    def retain(self, partitions: Collection[int]) -> None:
        """Drop what waits for partitions not in ``partitions`` (revoked by a
        rebalance: the new owner reads from the stores' position)."""
        dropped = {p: self._pending.pop(p) for p in list(self._pending) if p not in partitions}
        for records in dropped.values():
            self._count -= len(records)
        if dropped:
            self._room.set()  # a put waiting for room looks again
            if self._on_dropped is not None:
                self._on_dropped(dropped)
        if not self._count:
            self._arrived.clear()
            self._room.set()
            if not self._in_flight:
                self._idle.set()

    @property
    def pending(self) -> int:
        """Records gathered and not yet taken by the applier."""
        return self._count

    @property
    def applying(self) -> bool:
        """A batch is in flight."""
        return self._in_flight

    def idle(self) -> bool:
        """Nothing waits and nothing is being applied."""
        return self._idle.is_set()

    async def join(self) -> None:
        """Wait until everything put has been applied (or the applier ended)."""
        while not self._idle.is_set():
            if self._task is not None and self._task.done():
                return
            waiter = asyncio.ensure_future(self._idle.wait())
            pending = {waiter} if self._task is None else {waiter, self._task}
            await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()

    async def close(self) -> None:
        """Stop: drop what waits, let the batch in flight finish (its units of
        work end committed; a batch whose stores keep failing ends at its next
        backoff once the projector is stopped), then end the applier."""
        self.retain(())
        await self.join()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _check(self) -> None:
        if self._task is not None and self._task.done():
            error = None if self._task.cancelled() else self._task.exception()
            raise IntakeStopped("the worker's applier stopped") from error

    # -- the applier -----------------------------------------------------------------

    async def _apply_forever(self) -> None:
        while True:
            await self._arrived.wait()
            batch, self._pending, self._count = self._pending, {}, 0
            self._arrived.clear()
            self._room.set()
            self._in_flight = True
            try:
                if self._on_taken is not None:
                    self._on_taken(batch)
                await self.handler.on_batch(batch)
            finally:
                self._in_flight = False
                if not self._count:
                    self._idle.set()
