"""Sub-batches (docs/adr/0009-read-ahead-by-bytes.md): a batch handed over by the consumer is cut,
per partition and in offset order, into consecutive sub-batches bounded by
records, bytes and entities, and each goes through the projector as a batch
would, one after the other.

The projector applies only the run that continues the stores' position, so the
sub-batches of one partition are handled strictly in turn; once one of them
ends in anything but a commit (a seek, a pause), the rest are dropped: the
consumer reads them again from where the stores need.

Entities are counted before decoding, from the raw value, as its JSON objects
(``{`` bytes): every entity is one object and a ``{`` cannot be escaped, so the
count never falls below the entities (property maps, relationships and braces
inside strings only add to it). Decoding a value just to weigh it would cost
as much as applying it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from streams.settings import Settings
from streams.worker.projector import Decision, RawRecord


class _ByteBudget:
    """Bytes held against ``max_bytes``: a holder waits while what is held
    would pass the budget with it, but never when nothing is held, so one
    value or sub-batch over the budget alone still moves."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.held = 0
        self._room = asyncio.Event()
        self._room.set()

    async def _hold(self, size: int) -> None:
        while self.held > 0 and self.held + size > self.max_bytes:
            self._room.clear()
            await self._room.wait()
        self.held += size

    def release(self, size: int) -> None:
        """``size`` bytes held earlier are let go."""
        self.held = max(0, self.held - size)
        self._room.set()


class InFlight(_ByteBudget):
    """A byte budget on the values of the sub-batches being applied at once,
    across partitions (docs/adr/0009-read-ahead-by-bytes.md).

    The sub-batch bounds hold per partition, but the loop applies a batch's
    partitions concurrently, and a decoded event takes about five times its
    value's bytes (each embedding component is a Python float: 32 bytes for
    the 10-20 a JSON number takes). Without this, a batch of
    REDSTRING_READ_AHEAD_BYTES over twelve partitions was all decoded at once.
    A sub-batch waits while those already in flight would pass ``max_bytes``
    with it; when nothing is in flight it always goes, so a sub-batch over
    the budget alone still moves, and sub-batches never wait for each other
    in a cycle (a partition holds at most one at a time).
    """

    async def acquire(self, size: int) -> None:
        await self._hold(size)


@dataclass(frozen=True, slots=True)
class BatchBounds:
    """At most this many records, bytes of values and entities per sub-batch
    (None: unbounded). A record over a bound alone is a sub-batch of its own.
    ``in_flight``: the budget the sub-batches of every partition share while
    they are applied (None: none); it does not change how a batch is cut."""

    max_records: int | None = None
    max_bytes: int | None = None
    max_entities: int | None = None
    in_flight: InFlight | None = field(default=None, compare=False)


UNBOUNDED = BatchBounds()


def batch_bounds(settings: Settings) -> BatchBounds:
    """The sub-batch bounds REDSTRING_BATCH_SIZE, _BATCH_MAX_BYTES and
    _BATCH_MAX_ENTITIES give, and the budget REDSTRING_APPLY_MAX_BYTES gives
    all partitions' sub-batches in flight (one per worker: call once)."""
    return BatchBounds(
        max_records=settings.batch_size,
        max_bytes=settings.batch_max_bytes,
        max_entities=settings.batch_max_entities,
        in_flight=InFlight(settings.apply_max_bytes),
    )


def values_size(records: Sequence[RawRecord]) -> int:
    return sum(len(record.value) for record in records if record.value)


def batch_values_size(batch: Mapping[int, Sequence[RawRecord]]) -> int:
    """Bytes of values in a batch of records by partition."""
    return sum(values_size(records) for records in batch.values())


def entity_bound(value: bytes | None) -> int:
    """At least the number of entities ``value`` holds (its JSON objects)."""
    return value.count(b"{") if value else 0


def sub_batches(records: Sequence[RawRecord], bounds: BatchBounds) -> list[list[RawRecord]]:
    """``records`` by offset (each offset once, the first copy kept, as the
    projector would), cut into consecutive non-empty sub-batches within
    ``bounds``."""
    unique: dict[int, RawRecord] = {}
    for record in records:
        unique.setdefault(record.offset, record)
    ordered = [unique[offset] for offset in sorted(unique)]
    if bounds == UNBOUNDED:
        return [ordered] if ordered else []
    batches: list[list[RawRecord]] = []
    current: list[RawRecord] = []
    size = entities = 0
    for record in ordered:
        value_size = len(record.value) if record.value else 0
        value_entities = entity_bound(record.value) if bounds.max_entities is not None else 0
        if current and (
            (bounds.max_records is not None and len(current) + 1 > bounds.max_records)
            or (bounds.max_bytes is not None and size + value_size > bounds.max_bytes)
            or (bounds.max_entities is not None and entities + value_entities > bounds.max_entities)
        ):
            batches.append(current)
            current, size, entities = [], 0, 0
        current.append(record)
        size += value_size
        entities += value_entities
    if current:
        batches.append(current)
    return batches


class Handler(Protocol):
    async def handle(self, partition: int, records: Sequence[RawRecord]) -> Decision: ...


async def handle_bounded(
    projector: Handler, partition: int, records: Sequence[RawRecord], bounds: BatchBounds
) -> Decision:
    """Hand ``records`` to the projector one sub-batch at a time. Returns the
    decision the loop acts on: the last commit when every sub-batch ended in
    one (a later commit covers an earlier), else the first other decision."""
    parts = sub_batches(records, bounds)
    if len(parts) <= 1:
        return await _handle_within(projector, partition, records, bounds.in_flight)
    decision = Decision()
    applied = 0
    for part in parts:
        decision = await _handle_within(projector, partition, part, bounds.in_flight)
        applied += decision.applied
        if decision.commit is None:
            break
    # The decision whole, reason included: the loop tells a seek's remnants
    # by it (streams.worker.loop.WorkerLoop._remnant).
    return dataclasses.replace(decision, applied=applied)


async def _handle_within(
    projector: Handler, partition: int, records: Sequence[RawRecord], in_flight: InFlight | None
) -> Decision:
    if in_flight is None:
        return await projector.handle(partition, records)
    size = values_size(records)
    await in_flight.acquire(size)
    try:
        return await projector.handle(partition, records)
    finally:
        in_flight.release(size)


class ReadAhead(_ByteBudget):
    """A byte budget on what the consumer has handed over but the applier has
    not taken yet (docs/design.md 7.2): the worker's intake admits each value
    here before it joins the batch being gathered, and waits while the values
    admitted and not yet taken would pass ``max_bytes``. A value is always
    admitted when nothing is held, so one record over the budget still moves.

    Faust bounds its buffers by count only (its channel queue and the batch
    ``take_events`` gathers), which for maximum-size events is gigabytes; this
    is what keeps the batch within bytes. What the applier takes, and what a
    rebalance drops from the intake, is ``release``d by its own bytes, never
    by starting the count again: values admitted into the batch ``take_events``
    is still gathering stay counted, so the next batch cannot hold them and a
    full budget besides (docs/adr/0009-read-ahead-by-bytes.md). Every value
    admitted reaches the intake: admission runs after Faust's generation check
    and just before ``take_events``' own processor, which always keeps it.
    """

    async def admit(self, size: int) -> None:
        await self._hold(size)

    def give_back(self, batch: Mapping[int, Sequence[RawRecord]]) -> None:
        """``batch`` left the intake (taken by the applier, or dropped by a
        rebalance): its values' bytes are free again."""
        self.release(batch_values_size(batch))
