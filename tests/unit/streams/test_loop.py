"""The worker loop's consumer actions, over the memory stores and a consumer
that records what it is asked (tests/simulation drives the same loop through a
consumer that behaves like Kafka and Faust)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Collection, Mapping
from typing import Any

import pytest

from contracts import signing
from contracts.domain import StreamPartition
from contracts.events import make_event
from contracts.ids import EntityId, TenantId
from streams.worker.bounds import UNBOUNDED, BatchBounds, InFlight, batch_values_size
from streams.worker.loop import WorkerLoop
from streams.worker.metrics import Metrics
from streams.worker.projector import Decision
from tests.unit.streams.test_projector import KEY, ListSink, doc, newer, projector, raw


class Recorder:
    def __init__(self, partitions: set[int], log_end: dict[int, int]) -> None:
        self.partitions = partitions
        self.ends = log_end
        self.commits: list[dict[int, int]] = []
        self.seeks: list[tuple[int, int]] = []
        self.paused: list[int] = []
        self.resumed: list[int] = []

    def assigned(self) -> set[int]:
        return set(self.partitions)

    async def commit(self, offsets: Mapping[int, int]) -> None:
        self.commits.append(dict(offsets))

    async def seek(self, partition: int, offset: int) -> None:
        self.seeks.append((partition, offset))

    def pause(self, partition: int) -> None:
        self.paused.append(partition)

    def resume(self, partition: int) -> None:
        self.resumed.append(partition)

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


async def test_a_batch_commits_its_partitions_positions_in_one_call(stores: Any) -> None:
    """Each commit is a round trip through the consumer's thread, which waits
    behind its fetches: a batch of several partitions commits once."""
    p = projector(*stores, ListSink())
    consumer = Recorder({0, 1, 2}, {0: 2, 1: 1, 2: 0})
    loop = WorkerLoop(p, consumer)
    await loop.on_batch(
        {0: [raw(0, doc("a", "x")), raw(1, doc("a", "y"))], 1: [raw(0, doc("b", "z"))]}
    )
    assert consumer.commits == [{0: 2, 1: 1}] and consumer.seeks == []


async def test_each_batch_is_logged_at_debug_with_its_size_and_times(
    stores: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The line a latency tail is read from (docs/performance.md, "Plans per
    parameter size"): which batch took the time, and in the stores or in the
    commit."""
    p = projector(*stores, ListSink())
    loop = WorkerLoop(p, Recorder({0, 1}, {0: 2, 1: 1}))
    with caplog.at_level(logging.DEBUG, logger="redstring.worker"):
        await loop.on_batch(
            {0: [raw(0, doc("a", "x")), raw(1, doc("a", "y"))], 1: [raw(0, doc("b", "z"))]}
        )
    lines = [r for r in caplog.records if r.getMessage() == "batch"]
    assert len(lines) == 1
    line: Any = lines[0]
    assert (line.partitions, line.records) == (2, 3)
    assert line.apply_s >= 0 and line.commit_s >= 0


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


async def test_an_idle_caught_up_partition_is_committed_once_per_rebalance(stores: Any) -> None:
    """The watchdog commits the position of a partition another worker caught
    up (a zombie's late batch), and only once: committing it again on every
    pass was a round trip through the consumer's thread for nothing (and in
    the simulation, with the watchdog's passes a round apart, a commit always
    in flight, so the run never quiesced). After a rebalance the group may
    have lost what was committed: it commits again."""
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 2})
    loop = WorkerLoop(p, consumer, stall_after=1, clock=clock)
    await loop.on_assigned()
    assert consumer.commits == [{0: 0}]
    await p.handle(0, [raw(0, doc("a", "x")), raw(1, doc("a", "y"))])  # the zombie
    for now in (1, 2, 3, 4):
        clock.now = now
        await loop.check_stalls()
    assert consumer.commits == [{0: 0}, {0: 2}] and consumer.seeks == [(0, 0)]
    assert p.health.ready
    await loop.on_assigned()
    for now in (5, 6, 7):
        clock.now = now
        await loop.check_stalls()
    assert consumer.commits == [{0: 0}, {0: 2}, {0: 2}]
    # A batch's commit is remembered as well.
    consumer.ends[0] = 3
    await loop.on_batch({0: [raw(2, doc("b", "z"))]})
    clock.now = 9
    await loop.check_stalls()
    assert consumer.commits[3:] == [{0: 3}]


async def test_a_paused_partition_is_left_alone_by_the_watchdog(stores: Any) -> None:
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 3})
    loop = WorkerLoop(p, consumer, stall_after=1, clock=clock)
    p.health.paused[0] = "schema version 99"
    clock.now = 5
    await loop.check_stalls()
    assert consumer.seeks == []


async def test_a_skipped_pause_is_resumed_and_sought_to_the_stores_position(
    stores: Any,
) -> None:
    """A partition paused on a newer schema version waits (the watchdog leaves
    it alone, however long) until the stores move past the record that paused
    it, as `redstring skip` moves them; then the watchdog clears the pause,
    resumes the partition and seeks it to the stores' position, and the
    records after it are applied."""
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0, 1}, {0: 4, 1: 0})
    loop = WorkerLoop(p, consumer, stall_after=1, clock=clock)
    await loop.on_assigned()
    consumer.seeks.clear()
    await loop.on_batch({0: [raw(0, doc("a", "x")), newer(1), raw(2, doc("a", "y"))]})
    assert consumer.paused == [0] and loop.paused_at == {0: 1}
    assert "schema_version" in p.health.reasons()[0]
    for now in (5.0, 50.0):
        clock.now = now
        await loop.check_stalls()
        assert consumer.resumed == [] and consumer.seeks == [] and not p.health.ready
    # The operator's skip: both stores move past offset 1 (Fold.skip_refused).
    part = StreamPartition("events", 0, "tid")
    for fold in p.folds:
        await fold.skip_refused(part, 1)
    clock.now = 50.5  # the watchdog's next tick, not stall_after later
    await loop.check_stalls()
    assert consumer.resumed == [0] and consumer.seeks == [(0, 2)]
    assert consumer.commits[-1] == {0: 2}
    assert p.health.ready and loop.paused_at == {}
    await loop.on_batch({0: [raw(2, doc("a", "y")), raw(3, doc("a", "z"))]})
    graph, _vector = stores
    for entity in ("x", "y", "z"):
        assert await graph.get_entity(TenantId("a"), EntityId(entity)) is not None
    assert await graph.get_entity(TenantId("a"), EntityId("later")) is None
    assert consumer.commits[-1] == {0: 4}


async def test_a_skip_landing_while_the_pause_is_handled_is_still_resumed(
    stores: Any,
) -> None:
    """The operator's skip can land between the projector's pause and the
    loop's handling of it (found by the simulation's operator). The loop then
    asked the stores for the paused record's offset, got the one after the
    skipped record, and the watchdog never saw the stores move past it: the
    partition stayed paused for good, /readyz saying so."""
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 3})
    loop = WorkerLoop(p, consumer, stall_after=1, clock=clock)
    decision = await p.handle(0, [raw(0, doc("a", "x")), newer(1), raw(2, doc("a", "y"))])
    assert decision.pause is not None and decision.paused_at == 1
    for fold in p.folds:  # the skip lands now
        await fold.skip_refused(StreamPartition("events", 0, "tid"), 1)
    await loop._act(0, decision)
    assert consumer.paused == [0] and loop.paused_at == {0: 1}
    clock.now = 1.5
    await loop.check_stalls()
    assert consumer.resumed == [0] and consumer.seeks == [(0, 2)] and p.health.ready


async def test_a_pause_on_a_record_the_stores_do_not_wait_on_is_resumed(stores: Any) -> None:
    """A pause holds only while both stores wait on the record that paused
    it. Stores that need earlier records (a rebuild window the pause did not
    see; the projector now seeks instead of pausing, but the loop must not
    depend on that) would never reach it, and ``redstring skip`` refuses a
    record they do not wait on: the watchdog resumes the partition and seeks
    it to the stores' position, where reading meets the record again."""
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 4})
    loop = WorkerLoop(p, consumer, stall_after=1, clock=clock)
    decision = await p.handle(0, [newer(0)])
    assert decision.paused_at == 0
    await loop._act(0, dataclasses.replace(decision, paused_at=3))  # the stores need 0
    assert consumer.paused == [0] and loop.paused_at == {0: 3}
    clock.now = 1.5
    await loop.check_stalls()
    assert consumer.resumed == [0] and consumer.seeks == [(0, 0)] and p.health.ready
    await loop.on_batch({0: [newer(0)]})  # read again: the stores wait on it now
    assert consumer.paused == [0, 0] and loop.paused_at == {0: 0}
    clock.now = 5.0
    await loop.check_stalls()
    assert consumer.resumed == [0] and not p.health.ready


async def test_a_corrupt_store_pause_is_not_resumed_by_the_watchdog(stores: Any) -> None:
    """Only a newer schema version's pause is recorded for resuming: a corrupt
    store needs an operator and a restart (docs/operations.md)."""
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 3})
    loop = WorkerLoop(p, consumer, stall_after=1, clock=clock)
    await loop._act(0, Decision(pause="the store is corrupt and needs an operator: cycle"))
    p.health.paused[0] = "the store is corrupt and needs an operator: cycle"
    assert consumer.paused == [0] and loop.paused_at == {}
    for fold in p.folds:
        await fold.skip_refused(StreamPartition("events", 0, "tid"), 0)
    clock.now = 5
    await loop.check_stalls()
    assert consumer.resumed == [] and consumer.seeks == [] and not p.health.ready


async def test_a_pause_of_a_revoked_partition_is_forgotten(stores: Any) -> None:
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 1})
    loop = WorkerLoop(p, consumer)
    await loop.on_batch({0: [newer(0)]})
    assert loop.paused_at == {0: 0}
    consumer.partitions = {1}
    await loop.on_assigned()
    assert loop.paused_at == {} and p.health.ready


@pytest.mark.parametrize("revoked", ["before the decision", "after it"])
@pytest.mark.parametrize("pause", ["newer", "the store is corrupt and needs an operator: cycle"])
async def test_a_pause_decided_after_its_partition_was_revoked_is_dropped(
    stores: Any, pause: str, revoked: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch in hand during a rebalance decides its pause after the
    partition went to another worker (the simulation's seed 16598666): the
    pause stayed in this worker's readiness, for a partition it no longer
    held, until the next rebalance, and the consumer was told to pause a
    partition not assigned to it (Faust keeps that pause if the partition
    comes back). The new owner reads the record and decides for itself."""
    p = projector(*stores, ListSink())
    consumer = Recorder({0, 1}, {0: 1, 1: 0})
    loop = WorkerLoop(p, consumer)
    await loop.on_assigned()
    handle = p.handle

    async def revoke() -> None:
        consumer.partitions = {1}
        await loop.on_assigned()

    async def revoked_while_in_hand(partition: int, records: Any) -> Decision:
        if revoked == "before the decision":
            await revoke()
        decision = await handle(partition, records)
        if pause != "newer":
            p.health.paused[partition] = pause
            decision = Decision(pause=pause)
        if revoked == "after it":
            await revoke()
        return decision

    monkeypatch.setattr(p, "handle", revoked_while_in_hand)
    await loop.on_batch({0: [newer(0)]})
    assert p.health.ready, p.health.reasons()
    assert consumer.paused == [] and loop.paused_at == {}


async def test_the_lag_timer_reports_lag_per_store_windows_and_pauses(stores: Any) -> None:
    """redstring_consumer_lag (the slower store) and redstring_store_lag_records
    per store; an open rebuild window counted, aged and its progress shown; a
    paused partition with its reason's kind; a revoked partition's series gone."""
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    clock = Clock()
    p.metrics = Metrics(clock=clock)
    consumer = Recorder({0, 1}, {0: 5, 1: 0})
    loop = WorkerLoop(p, consumer)
    await loop.on_batch({0: [raw(0, doc("a", "x")), raw(1, doc("a", "y"))]})
    await loop.update_lag()
    assert served(p, "redstring_consumer_lag") == {("0",): 3, ("1",): 0}
    assert served(p, "redstring_store_lag_records") == {
        ("0", "graph"): 3,
        ("0", "vector"): 3,
        ("1", "graph"): 0,
        ("1", "vector"): 0,
    }
    assert served(p, "redstring_rebuild_progress_ratio")[("0",)] == 1.0
    assert served(p, "redstring_rebuild_windows_open") == {("graph",): 0, ("vector",): 0}
    assert served(p, "redstring_partition_paused") == {}

    # A replay request at offset 2 opens a window [0, 2) in both stores.
    replay = signing.sign(
        make_event("TenantReplayRequested", "a", {"requested_by": "ops"}), KEY, topic_id="tid"
    )
    await loop.on_batch({0: [raw(2, replay)]})
    await loop.update_lag()
    assert served(p, "redstring_rebuild_windows_open") == {("graph",): 1, ("vector",): 1}
    assert served(p, "redstring_rebuild_progress_ratio")[("0",)] == 0.0
    assert served(p, "redstring_store_lag_records")[("0", "graph")] == 5
    clock.now = 90.0
    await loop.update_lag()
    assert served(p, "redstring_rebuild_window_age_seconds") == {
        ("0", "graph"): 90.0,
        ("0", "vector"): 90.0,
    }

    await loop.on_batch({1: [newer(0)]})
    consumer.partitions = {1}
    await loop.update_lag()
    assert served(p, "redstring_partition_paused") == {("1", "schema_version"): 1}
    # Partition 0 is no longer held: none of its series is left.
    assert served(p, "redstring_rebuild_window_age_seconds") == {}
    assert served(p, "redstring_rebuild_windows_open") == {("graph",): 0, ("vector",): 0}
    assert set(served(p, "redstring_consumer_lag")) == {("1",)}


async def test_a_failing_store_skips_the_lag_tick_and_leaves_readiness_alone(
    stores: Any, monkeypatch: Any
) -> None:
    """The lag timer asks the stores once: a store that fails is not retried
    there (the timer would hang through an outage) and its answer does not
    clear the reason a batch set for /readyz while that batch retries."""
    import asyncio

    graph, vector = stores
    p = projector(graph, vector, ListSink())
    consumer = Recorder({0, 1}, {0: 1, 1: 1})
    loop = WorkerLoop(p, consumer)
    await loop.on_batch({0: [raw(0, doc("a", "x"))], 1: [raw(0, doc("b", "y"))]})
    await loop.update_lag()
    p.health.failing[0] = "ConnectionError: retrying"

    async def down(*args: Any) -> Any:
        raise ConnectionError("the store is down")

    monkeypatch.setattr(graph, "rebuild_markers", down)
    await asyncio.wait_for(loop.update_lag(), 5)
    assert p.health.failing == {0: "ConnectionError: retrying"}
    assert not p.health.ready


def served(p: Any, family: str) -> dict[tuple[str, ...], float]:
    """A family's samples as the registry serves them, by label values."""
    (metric,) = [m for m in p.metrics.registry.collect() if m.name == family]
    return {tuple(s.labels.values()): s.value for s in metric.samples}


@pytest.mark.parametrize(
    "bounds", [UNBOUNDED, BatchBounds(max_records=1)], ids=["whole", "sub-batches"]
)
async def test_the_remnants_of_a_seek_are_dropped_without_seeking_again(
    stores: Any, bounds: BatchBounds
) -> None:
    """Records fetched before a seek landed still arrive after it, past its
    target. Each one seeking again refilled the consumer's queue behind them
    faster than it drained: a partition that never caught up (found by the
    simulation with 38 tenants on 6 partitions, replays and duplicates). Cut
    into sub-batches (as a worker's bounds cut them) they are remnants too:
    the sub-batches' decision keeps its reason (found by the simulation with
    4 tenants of up to 40 steps on one partition)."""
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 8})
    loop = WorkerLoop(p, consumer, bounds=bounds)
    await loop.on_batch({0: [raw(0, doc("a", "x")), raw(3, doc("b", "y"))]})
    assert consumer.seeks == [(0, 1)]
    for remnant in ([raw(3, doc("b", "y"))], [raw(4, doc("b", "z")), raw(5, doc("c", "z"))]):
        await loop.on_batch({0: remnant})
    assert consumer.seeks == [(0, 1)]
    assert max(c[0] for c in consumer.commits) == 1
    # The records from the target on: applied, and the seek is answered.
    await loop.on_batch({0: [raw(1, doc("a", "w")), raw(2, doc("b", "w"))]})
    assert max(c[0] for c in consumer.commits) == 3
    # A gap after that is a new one: sought.
    await loop.on_batch({0: [raw(6, doc("a", "v"))]})
    assert consumer.seeks == [(0, 1), (0, 3)]


async def test_remnants_do_not_hold_the_watchdog_off_a_lost_seek(stores: Any) -> None:
    """A remnant is not a sign that the partition flows: if the seek (or the
    record at its target) was lost, the watchdog seeks again on time, however
    many remnants keep arriving."""
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 8})
    loop = WorkerLoop(p, consumer, stall_after=10, clock=clock)
    await loop.on_batch({0: [raw(0, doc("a", "x")), raw(3, doc("b", "y"))]})
    assert consumer.seeks == [(0, 1)]
    for now, offset in ((4, 4), (9, 5)):
        clock.now = now
        await loop.on_batch({0: [raw(offset, doc("b", "z"))]})
    clock.now = 10
    await loop.check_stalls()
    assert consumer.seeks == [(0, 1), (0, 1)]
    assert not p.health.ready


async def test_the_watchdog_leaves_a_partition_handed_a_batch_while_it_looked(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that arrives while the watchdog asks the stores where the
    partition stands decides the partition's seeks itself: the watchdog
    seeking too made a second seek to the same target (found by the
    simulation's seek watch)."""
    clock = Clock()
    p = projector(*stores, ListSink())
    consumer = Recorder({0}, {0: 8})
    loop = WorkerLoop(p, consumer, stall_after=10, clock=clock)
    batch: list[asyncio.Task[None]] = []
    asked = p.next_needed

    async def batch_arrives(partition: int) -> int:
        if not batch:  # the batch starts (the partition is in hand) meanwhile
            batch.append(asyncio.ensure_future(loop.on_batch({0: [raw(0, doc("a", "x"))]})))
            await asyncio.sleep(0)
        return await asked(partition)

    monkeypatch.setattr(p, "next_needed", batch_arrives)
    await loop.check_stalls()  # the watchdog's first look: nothing heard yet
    clock.now = 10
    await loop.check_stalls()
    await batch[0]
    assert consumer.seeks == []
    assert p.health.ready
    assert max(c[0] for c in consumer.commits) == 1


# -- units of work shared by a batch's partitions (ADR 0024) ---------------------


def _shared(p: Any) -> dict[str, float]:
    """``redstring_units_shared_total`` by outcome."""
    (metric,) = [m for m in p.metrics.registry.collect() if m.name == "redstring_units_shared"]
    return {s.labels["outcome"]: s.value for s in metric.samples if s.name.endswith("_total")}


def merge(tenant: str, canonical: str, absorbed: str) -> Any:
    return make_event(
        "EntitiesMerged", tenant, {"canonical_id": canonical, "absorbed_ids": [absorbed]}
    )


async def test_a_small_batch_over_partitions_shares_one_unit_of_work_per_store(
    stores: Any,
) -> None:
    """Both stores write the batch's partitions in one unit of work each,
    and the loop commits what it would have: each partition's position."""
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    consumer = Recorder({0, 1, 2}, {0: 2, 1: 1, 2: 1})
    loop = WorkerLoop(p, consumer, share_up_to=10)
    await loop.on_batch(
        {
            0: [raw(0, doc("a", "x")), raw(1, doc("a", "y"))],
            1: [raw(0, doc("b", "z"))],
            2: [raw(0, doc("c", "w"))],
        }
    )
    assert consumer.commits == [{0: 2, 1: 1, 2: 1}] and consumer.seeks == []
    assert _shared(p) == {"committed": 1.0, "declined": 0.0}
    for tenant, entity in (("a", "y"), ("b", "z"), ("c", "w")):
        assert await graph.get_entity(TenantId(tenant), EntityId(entity)) is not None
        assert await vector.get(TenantId(tenant), EntityId(entity)) is not None
    # Delivered again: already applied, nothing to share, nothing committed again.
    await loop.on_batch({0: [raw(1, doc("a", "y"))], 1: [raw(0, doc("b", "z"))]})
    assert consumer.commits == [{0: 2, 1: 1, 2: 1}]
    assert _shared(p) == {"committed": 1.0, "declined": 0.0}


@pytest.mark.parametrize(
    ("share_up_to", "partitions"),
    [(0, {0: 1, 1: 1}), (2, {0: 2, 1: 1}), (10, {0: 1})],
    ids=["off", "over-the-bound", "one-partition"],
)
async def test_a_batch_shares_only_within_its_bounds(
    stores: Any, share_up_to: int, partitions: dict[int, int]
) -> None:
    p = projector(*stores, ListSink())
    consumer = Recorder(set(partitions), dict(partitions))
    loop = WorkerLoop(p, consumer, share_up_to=share_up_to)
    batch = {
        part: [raw(o, doc(f"t{part}", f"e{o}")) for o in range(count)]
        for part, count in partitions.items()
    }
    await loop.on_batch(batch)
    assert consumer.commits == [partitions]
    assert _shared(p) == {"committed": 0.0, "declined": 0.0}


async def test_a_partition_with_a_refused_event_leaves_the_shared_unit_to_the_others(
    stores: Any,
) -> None:
    """A merge that closes a cycle fails the shared unit: it writes nothing,
    each partition applies its own, and only the merge is dead-lettered."""
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    await p.handle(0, [raw(0, doc("a", "x", "y")), raw(1, merge("a", "y", "x"))])
    consumer = Recorder({0, 1}, {0: 3, 1: 1})
    loop = WorkerLoop(p, consumer, share_up_to=10)
    await loop.on_batch({0: [raw(2, merge("a", "x", "y"))], 1: [raw(0, doc("b", "z"))]})
    assert _shared(p) == {"committed": 0.0, "declined": 1.0}
    assert [letter.offset for letter in sink.letters] == [2]
    assert consumer.commits[-1] == {0: 3, 1: 1}
    assert await vector.get(TenantId("b"), EntityId("z")) is not None


async def test_a_batch_over_the_in_flight_budget_does_not_share(stores: Any) -> None:
    """A shared batch is decoded at once, so one whose values pass the
    in-flight budget (a backlog's) goes partition by partition, within it."""
    p = projector(*stores, ListSink())
    consumer = Recorder({0, 1}, {0: 1, 1: 1})
    batch = {0: [raw(0, doc("a", "x"))], 1: [raw(0, doc("b", "y"))]}
    bounds = BatchBounds(in_flight=InFlight(batch_values_size(batch) - 1))
    loop = WorkerLoop(p, consumer, bounds=bounds, share_up_to=10)
    await asyncio.wait_for(loop.on_batch(batch), 10)
    assert consumer.commits == [{0: 1, 1: 1}]
    assert _shared(p) == {"committed": 0.0, "declined": 0.0}
    assert bounds.in_flight is not None and bounds.in_flight.held == 0


async def test_a_batch_within_the_in_flight_budget_shares(stores: Any) -> None:
    p = projector(*stores, ListSink())
    consumer = Recorder({0, 1}, {0: 1, 1: 1})
    batch = {0: [raw(0, doc("a", "x"))], 1: [raw(0, doc("b", "y"))]}
    bounds = BatchBounds(in_flight=InFlight(batch_values_size(batch)))
    loop = WorkerLoop(p, consumer, bounds=bounds, share_up_to=10)
    await asyncio.wait_for(loop.on_batch(batch), 10)
    assert consumer.commits == [{0: 1, 1: 1}]
    assert _shared(p)["committed"] == 1.0
    assert bounds.in_flight is not None and bounds.in_flight.held == 0


async def test_a_partition_too_large_to_share_writes_without_waiting_for_the_shared_units(
    stores: Any,
) -> None:
    """Only the small partitions of a batch wait for each other: a larger
    one asks for its own unit of work while the shared unit is still open
    (it used to wait until the shared units had committed)."""
    graph, vector = stores
    own_asked = asyncio.Event()
    own, across = graph.unit_of_work, graph.unit_of_work_across

    def unit_of_work(partition: StreamPartition) -> Any:
        if partition.partition == 0:
            own_asked.set()
        return own(partition)

    @contextlib.asynccontextmanager
    async def unit_of_work_across(partitions: Any) -> Any:
        await asyncio.wait_for(own_asked.wait(), 5)
        async with across(partitions) as unit:
            yield unit

    graph.unit_of_work, graph.unit_of_work_across = unit_of_work, unit_of_work_across
    p = projector(graph, vector, ListSink())
    consumer = Recorder({0, 1, 2}, {0: 12, 1: 1, 2: 1})
    loop = WorkerLoop(p, consumer, share_up_to=10)
    await asyncio.wait_for(
        loop.on_batch(
            {
                0: [raw(o, doc("a", f"x{o}")) for o in range(12)],
                1: [raw(0, doc("b", "y"))],
                2: [raw(0, doc("c", "z"))],
            }
        ),
        10,
    )
    assert consumer.commits == [{0: 12, 1: 1, 2: 1}]
    assert _shared(p) == {"committed": 1.0, "declined": 0.0}
