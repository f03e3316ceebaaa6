"""The worker loop's consumer actions, over the memory stores and a consumer
that records what it is asked (tests/simulation drives the same loop through a
consumer that behaves like Kafka and Faust)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from streams.loop import WorkerLoop
from tests.unit.streams.test_projector import ListSink, doc, projector, raw


class Recorder:
    def __init__(self, partitions: set[int], log_end: dict[int, int]) -> None:
        self.partitions = partitions
        self.ends = log_end
        self.commits: list[dict[int, int]] = []
        self.seeks: list[tuple[int, int]] = []
        self.paused: list[int] = []

    def assigned(self) -> set[int]:
        return set(self.partitions)

    async def commit(self, offsets: Mapping[int, int]) -> None:
        self.commits.append(dict(offsets))

    async def seek(self, partition: int, offset: int) -> None:
        self.seeks.append((partition, offset))

    def pause(self, partition: int) -> None:
        self.paused.append(partition)

    async def log_end(self, partitions: Collection[int]) -> Mapping[int, int]:
        return {p: self.ends[p] for p in partitions}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_assignment_commits_and_seeks_the_stores_positions(stores: Any) -> None:
    p = projector(*stores, ListSink())
    await p.handle(0, [raw(0, doc("a", "x")), raw(1, doc("a", "y"))])
    consumer = Recorder({0, 1}, {0: 2, 1: 0})
    loop = WorkerLoop(p, consumer)
    await loop.on_assigned()
    assert consumer.commits == [{0: 2, 1: 0}]
    assert consumer.seeks == [(0, 2), (1, 0)]


async def test_a_hole_is_sought_and_the_commit_never_passes_it(stores: Any) -> None:
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 5})
    loop = WorkerLoop(p, consumer)
    await loop.on_batch({0: [raw(0, doc("a", "x")), raw(3, doc("b", "y"))]})
    assert consumer.seeks == [(0, 1)]
    assert max(c[0] for c in consumer.commits) == 1


async def test_an_idle_partition_behind_the_log_end_is_sought_and_reported(stores: Any) -> None:
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0, 1}, {0: 3, 1: 0})
    loop = WorkerLoop(p, consumer, stall_after=10, clock=clock)
    await loop.on_assigned()
    consumer.seeks.clear()
    clock.now = 9
    await loop.check_stalls()
    assert consumer.seeks == [] and p.health.ready
    clock.now = 10
    await loop.check_stalls()
    # Partition 1 is at its log end: idle is fine there.
    assert consumer.seeks == [(0, 0)]
    assert not p.health.ready
    assert "partition 0: handed no record for 10s" in p.health.reasons()[0]
    # Records flow again: ready.
    clock.now = 11
    await loop.on_batch({0: [raw(0, doc("a", "x")), raw(1, doc("a", "y")), raw(2, doc("b", "z"))]})
    assert p.health.ready
    clock.now = 30
    await loop.check_stalls()
    assert consumer.seeks == [(0, 0)]


async def test_a_paused_partition_is_left_alone_by_the_watchdog(stores: Any) -> None:
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 3})
    loop = WorkerLoop(p, consumer, stall_after=1, clock=clock)
    p.health.paused[0] = "schema version 99"
    clock.now = 5
    await loop.check_stalls()
    assert consumer.seeks == []
