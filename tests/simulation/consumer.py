"""A simulated Faust consumer (faust-streaming 0.15.3 over aiokafka 0.14),
implementing ``streams.worker.loop.Consumer`` and faithful to the parts that bit in
issue 14:

- ``fetch`` is one ``getmany``: records from the fetch positions of the active
  partitions, in chunks, into the chunk that ``_drain_messages`` iterates;
- ``deliver`` is that iteration: each record passes Faust's read-offset filter
  (a delivered record raises the partition's read offset; a record below it is
  dropped, "DROPPED MESSAGE ROFF") into the agent's queue, which is bounded
  (``stream_buffer_maxsize``): while it is full, delivery and fetching wait;
- a seek moves aiokafka's fetch position and sets the read offset to the target
  (None for 0) when it lands, which may be after a few more deliveries; records
  already fetched are still delivered after it (those at or past the target
  pass the filter);
- commits land late too, fenced by the group generation, and a crash loses the
  ones that have not landed;
- a rebalance (eager) clears the chunk and the queue, resets the fetch
  positions to the committed offsets, runs ``on_rebalance_complete`` (the
  runner calls ``WorkerLoop.on_assigned``), then ``perform_seek``: every
  partition to its committed offset, where aiokafka's ``seek_to_committed``
  skips a committed 0 (or none);
- ``take_events`` hands the agent up to N queued records across partitions.

Two faults go beyond what Faust is known to do, for what the loop must survive
anyway (its watchdog, docs/design.md 5.9): a seek that is lost, and a fetched record
that is never handed over.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from streams.worker.projector import RawRecord
from tests.simulation.faults import FaultWire
from tests.simulation.kafka import SimKafka


class NotAssigned(Exception):
    """aiokafka's IllegalStateError: a seek of a partition not assigned."""


@dataclass
class _Pending:
    kind: str  # "seek" | "commit"
    offsets: dict[int, int]
    due: int  # lands once this many records have been delivered


class SimFaustConsumer:
    def __init__(
        self,
        kafka: SimKafka,
        member: str,
        rng: random.Random,
        wire: FaultWire,
        *,
        max_delay: int = 4,
        max_queue: int = 32,
    ) -> None:
        self.kafka = kafka
        self.member = member
        self.rng = rng
        self.wire = wire
        self.max_delay = max_delay
        #: Faust's channel queue holds ``stream_buffer_maxsize`` records (the
        #: worker sets it from REDSTRING_READ_AHEAD_BYTES, Settings.queue_records):
        #: while it is full, ``_drain_messages`` waits, and so does the fetcher.
        self.max_queue = max_queue
        self.generation = -1
        self._assigned: set[int] = set()
        self.flow_active = False
        self.position: dict[int, int] = {}
        self.read_offset: dict[int, int | None] = {}
        self.chunk: deque[tuple[int, RawRecord]] = deque()
        self.queue: deque[tuple[int, RawRecord]] = deque()
        self.paused: set[int] = set()
        self.pending: deque[_Pending] = deque()
        self.delivered = 0
        self.recent: deque[tuple[int, RawRecord]] = deque(maxlen=32)
        self.stats: Counter[str] = Counter()
        #: Faults: the next seek is lost; the next chunk record is not handed over.
        self.lose_next_seek = False
        self.lose_next_record = False

    # -- streams.worker.loop.Consumer ----------------------------------------------------

    def assigned(self) -> set[int]:
        return set(self._assigned)

    async def commit(self, offsets: Mapping[int, int]) -> None:
        self.wire.tick_consumer("commit")
        # FaustConsumer.commit: only what is still assigned.
        mine = {p: o for p, o in offsets.items() if p in self._assigned}
        if mine:
            self._defer("commit", mine)
        await asyncio.sleep(0)

    async def seek(self, partition: int, offset: int) -> None:
        self.wire.tick_consumer("seek")
        if partition not in self._assigned:
            raise NotAssigned(f"seek of partition {partition}, not assigned to {self.member}")
        if self.lose_next_seek:
            self.lose_next_seek = False
            self.stats["lost_seeks"] += 1
        else:
            self._defer("seek", {partition: offset})
        await asyncio.sleep(0)

    def pause(self, partition: int) -> None:
        self.paused.add(partition)

    def resume(self, partition: int) -> None:
        self.paused.discard(partition)

    async def log_end(self, partitions: Collection[int]) -> Mapping[int, int]:
        self.wire.tick_consumer("log_end")
        await asyncio.sleep(0)
        return {p: self.kafka.high_watermark(p) for p in partitions}

    # -- late actions -------------------------------------------------------------

    def _defer(self, kind: str, offsets: Mapping[int, int]) -> None:
        delay = self.rng.randint(0, self.max_delay)
        self.pending.append(_Pending(kind, dict(offsets), self.delivered + delay))
        self.stats[f"{kind}s"] += 1
        if delay:
            self.stats[f"late_{kind}s"] += 1
        self._land(due_only=True)

    def _land(self, *, due_only: bool) -> None:
        while self.pending and (not due_only or self.pending[0].due <= self.delivered):
            action = self.pending.popleft()
            if action.kind == "commit":
                self.kafka.commit(self.member, self.generation, action.offsets)
                continue
            for partition, offset in action.offsets.items():
                if partition not in self._assigned:
                    continue
                self.position[partition] = offset
                self.read_offset[partition] = offset if offset else None

    def crash(self) -> int:
        """The process died: commits not landed are lost."""
        lost = sum(1 for action in self.pending if action.kind == "commit")
        self.pending.clear()
        return lost

    # -- the fetcher --------------------------------------------------------------

    def fetch(self, chunk_size: int) -> int:
        """One getmany, when the previous chunk is drained."""
        if self.chunk or not self.flow_active:
            return 0
        # The consumer thread has run every seek and commit asked before this.
        self._land(due_only=False)
        active = sorted(self._assigned - self.paused)
        per_partition = {p: self.kafka.read(p, self.position.get(p, 0), chunk_size) for p in active}
        # Round robin across partitions, as Faust's scheduler iterates them.
        fetched: list[tuple[int, RawRecord]] = []
        while len(fetched) < chunk_size and any(per_partition.values()):
            for p in active:
                if per_partition[p] and len(fetched) < chunk_size:
                    record = per_partition[p].pop(0)
                    fetched.append((p, record))
                    self.position[p] = record.offset + 1
        self.chunk.extend(fetched)
        return len(fetched)

    def deliver(self, most: int) -> int:
        """``_drain_messages``: up to ``most`` records of the chunk through the
        read-offset filter into the agent's queue."""
        count = 0
        while self.chunk and count < most and self.flow_active and len(self.queue) < self.max_queue:
            partition, record = self.chunk.popleft()
            count += 1
            if partition not in self._assigned:
                continue
            if self.lose_next_record:
                self.lose_next_record = False
                self.stats["lost_records"] += 1
                continue
            floor = self.read_offset.get(partition)
            if floor is None or record.offset >= floor:
                self.queue.append((partition, record))
                self.recent.append((partition, record))
                self.read_offset[partition] = record.offset
            else:
                self.stats["dropped_by_read_offset"] += 1
            self.delivered += 1
            self._land(due_only=True)
        return count

    def duplicate(self) -> bool:
        """A record delivered again, anywhere in the queue."""
        if not self.recent:
            return False
        copy = self.recent[self.rng.randrange(len(self.recent))]
        self.queue.insert(self.rng.randint(0, len(self.queue)), copy)
        self.stats["duplicates"] += 1
        return True

    def take_events(self, most: int) -> dict[int, list[RawRecord]]:
        batch: dict[int, list[RawRecord]] = {}
        for _ in range(min(most, len(self.queue))):
            partition, record = self.queue.popleft()
            batch.setdefault(partition, []).append(record)
        return batch

    def idle(self) -> bool:
        return not (self.chunk or self.queue or self.pending)

    # -- rebalances ---------------------------------------------------------------

    def revoke_and_assign(self, partitions: set[int], generation: int) -> None:
        """Eager rebalance up to ``on_rebalance_complete``: everything revoked
        (Faust clears its buffers and read offsets), the new assignment's fetch
        positions at the committed offsets (or the log start)."""
        self.flow_active = False
        self.chunk.clear()
        self.queue.clear()
        self.read_offset.clear()
        # Faust drops the revoked partitions' pauses, then keeps only the new
        # assignment's: a pause of a partition this member did not hold (a
        # batch's late decision) survives, if the partition comes back.
        self.paused = (self.paused - self._assigned) & set(partitions)
        self.generation = generation
        self._assigned = set(partitions)
        self.position = {p: self.kafka.committed.get(p, 0) for p in partitions}

    def perform_seek(self) -> None:
        """Faust's recovery after ``on_rebalance_complete``: seek to committed
        (aiokafka skips 0 and none), read offsets from the commits; then the
        flow resumes."""
        for partition in sorted(self._assigned):
            committed = self.kafka.committed.get(partition)
            if committed is not None and committed > 0:
                self.position[partition] = committed
            self.read_offset[partition] = committed if committed is not None else None
        self.flow_active = True
