"""The simulation runner: one workload, one seed, one schedule.

Everything the schedule does comes from one ``random.Random(seed)``: when
records are published, fetched, delivered and handed over, how big the
chunks and batches are, when seeks and commits land, when the timers fire (on
a virtual clock), and the faults: crashes at any await point, rebalances (some
members learning late: zombies whose batches and commits must be fenced),
transient store errors, duplicated records. The asyncio tasks of the workers
interleave only at their awaits, in the order the event loop runs them, so a
seed replays exactly.

After ``Knobs.fault_steps`` steps the faults stop and the workers run to
quiescence within a bound of rounds; then every check of issue 14 is made.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import StreamPartition
from projections.admission import next_needed_offset
from projections.graph import GraphProjection
from projections.vector import VectorProjection
from streams.ops.skip import FetchedRecord, SkipRefused, check_skip, skip
from streams.worker.bounds import BatchBounds, InFlight, ReadAhead, batch_values_size
from streams.worker.intake import Intake, IntakeStopped
from streams.worker.loop import WorkerLoop
from streams.worker.metrics import Metrics
from streams.worker.projector import Decision, Projector, RawRecord
from tests.scenarios.harness import Stores, describe_difference, folded_states
from tests.simulation.consumer import SimFaustConsumer
from tests.simulation.faults import (
    DeadLetterTopic,
    FaultWire,
    TrippingSink,
    WorkerCrash,
    crashing,
)
from tests.simulation.kafka import SimKafka
from tests.workloads import Workload

T = TypeVar("T")
TOPIC, TOPIC_ID = "events", "sim-topic-id"
DIMENSION = 16

#: How often each step is chosen while faults are on.
WEIGHTS: Mapping[str, int] = {
    "publish": 6,
    "fetch": 6,
    "deliver": 10,
    "take": 8,
    "run": 14,
    "tick": 4,
    "rebalance": 1,
    "crash": 1,
    "transient": 2,
    "duplicate": 2,
    "lose_seek": 1,
    "lose_record": 1,
    "skip": 2,
}


class SimulationFailure(AssertionError):
    pass


@dataclass(frozen=True)
class Knobs:
    max_members: int = 2
    fault_steps: int = 300
    stall_after: float = 5.0
    max_batch: int = 8
    #: The most records a member's intake gathers while a batch is in flight
    #: (each member draws its own bound up to this).
    max_pending: int = 20
    max_chunk: int = 12
    max_delay: int = 4
    #: The consumer's queue bound (Faust's stream_buffer_maxsize; the worker's
    #: default is 16, Settings.queue_records).
    max_queue: int = 32
    zombie_chance: float = 0.5
    #: Rounds the workers get to quiesce, at least; a history with replays
    #: gets more (``Simulation.quiesce_bound``), since each rescans its partition.
    quiesce_rounds: int = 400
    weights: Mapping[str, int] = field(default_factory=lambda: dict(WEIGHTS))


@dataclass
class Report:
    seed: int
    records: int
    steps: int = 0
    rounds_to_quiesce: int = 0
    virtual_seconds: float = 0.0
    faults: Counter[str] = field(default_factory=Counter)


def _now(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a read of a memory store)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("the read suspended")


async def _no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


#: Sub-batches of at most 3 records, 4 KB of values and 40 JSON objects.
SIM_BOUNDS = BatchBounds(max_records=3, max_bytes=4096, max_entities=40)
#: The bytes of values all partitions' sub-batches may hold while applied at
#: once (REDSTRING_APPLY_MAX_BYTES), one per seed by ``seed // 81``: two or
#: three values (sub-batches wait for room, and a batch of more shares no
#: units of work: a shared batch is decoded at once), and about a dozen (most
#: small batches share).
SIM_APPLY_BYTES = (1024, 8192)
#: Event-loop turns a quiesce round lets a member's put move with its intake
#: idle before it gives up on it for that round.
FEED_TURNS = 50
#: Records per unit of work shared by a batch's partitions
#: (REDSTRING_SHARE_UNITS_UP_TO, ADR 0024), one per seed (no draw from the
#: schedule's generator): the whole batch in one, several small ones at once,
#: none.
SIM_SHARE_UP_TO = (1 << 30, 4, 0)
#: The read-ahead budgets (REDSTRING_READ_AHEAD_BYTES), one per seed by its
#: remainder (no draw from the schedule's generator): two or three values of
#: the workloads' 300-750 bytes, about ten, and none to speak of.
SIM_READ_AHEAD_BYTES = (1024, 4096, 1 << 30)
#: How often a store call gives other tasks a turn before it answers (a real
#: store's round trip), one per seed by ``seed // 9``: never (the memory
#: stores alone never suspend), sometimes, mostly. The turns draw from a
#: generator of their own, so the schedule's draws stay what they were.
SIM_TURN_CHANCES = (0.0, 0.3, 0.8)
#: The optional capabilities a seed's stores lack, by ``seed // 27``: none
#: (as the shipped stores), and the batched tenant-ledger read (a store
#: written outside redstring, read tenant by tenant).
SIM_HIDDEN = (frozenset(), frozenset({"tenant_ledgers"}))


class ObservedLoop(WorkerLoop):
    """The real loop, watched for what the oracle cannot see: a batch that
    only asks for the seek the loop already made (records fetched before it
    landed) answered with that seek again. Each such seek fetches the range
    again behind what is still queued, so the queue refills faster than it
    drains: a partition that converges late or never (docs/design.md 5.9).
    And a pause on a record the stores do not wait on (they need earlier
    records): only the watchdog's resume would release it."""

    def __init__(
        self,
        *args: Any,
        violations: list[str],
        name: str,
        needed: Callable[[int], int],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._violations = violations
        self._name = name
        #: The lowest offset the stores need on a partition, read at once.
        self._needed = needed
        #: Each partition's last seek from a batch or the watchdog, and whether
        #: a batch has since carried the record at its target.
        self._last_seek: dict[int, tuple[int, bool]] = {}

    async def on_assigned(self) -> None:
        self._last_seek.clear()
        await super().on_assigned()

    async def on_batch(self, batch: Mapping[int, Sequence[RawRecord]]) -> None:
        for partition, records in batch.items():
            last = self._last_seek.get(partition)
            if last is not None and any(r.offset == last[0] for r in records):
                self._last_seek[partition] = (last[0], True)
        await super().on_batch(batch)

    async def _act(self, partition: int, decision: Decision) -> int | None:
        # A batch that applied something moved the stores (another member may
        # have moved them past the target meanwhile): its seek is a new one.
        if (
            decision.pause is None
            and not decision.applied
            and decision.seek is not None
            and self._last_seek.get(partition) == (decision.seek, False)
        ):
            self._violations.append(
                f"{self._name} sought partition {partition} to {decision.seek} again "
                f"({decision.reason}) before any batch carried offset {decision.seek}: "
                "a seek's remnants taken for a new gap"
            )
        # The stores only move forward past a pause (a skip): never below it.
        if decision.paused_at is not None:
            needed = self._needed(partition)
            if needed < decision.paused_at:
                self._violations.append(
                    f"{self._name} paused partition {partition} on offset "
                    f"{decision.paused_at} while the stores need {needed}: "
                    "a record they do not wait on"
                )
        return await super()._act(partition, decision)

    async def _seek(self, partition: int, offset: int) -> None:
        await super()._seek(partition, offset)
        if partition in self.consumer.assigned():  # else the loop commits only
            self._last_seek[partition] = (offset, False)


class Member:
    """One worker incarnation: its own projector, loop and consumer over the
    shared stores; all of it lost when it crashes."""

    def __init__(self, sim: Simulation, name: str) -> None:
        self.name = name
        self.wire = FaultWire(sim.turns, sim.turn_chance)
        graph = crashing(sim.graph, self.wire, sim.hidden)
        vector = crashing(sim.vector, self.wire, sim.hidden)
        self.projector = Projector(
            [
                GraphProjection(graph, embedding_dimension=DIMENSION, chunk=2),
                VectorProjection(vector, sim.embedder, chunk=2),
            ],
            TrippingSink(sim.dead_letters, self.wire),
            topic=TOPIC,
            topic_id=TOPIC_ID,
            control_key=sim.workload.control_key,
            metrics=Metrics(),
            partitions=sim.workload.partitions,
            sleep=_no_sleep,
        )
        self.consumer = SimFaustConsumer(
            sim.kafka,
            name,
            sim.rng,
            self.wire,
            max_delay=sim.knobs.max_delay,
            max_queue=sim.knobs.max_queue,
        )
        self.loop = ObservedLoop(
            self.projector,
            self.consumer,
            violations=sim.violations,
            name=name,
            needed=sim.needed_now,
            stall_after=sim.knobs.stall_after,
            clock=sim.clock,
            # Small sub-batches: each consumer batch is handed to the projector
            # in several, one after the other (streams.worker.bounds).
            # with the budget every partition's sub-batches share while they
            # are applied (one per worker, as batch_bounds gives the worker).
            bounds=dataclasses.replace(
                SIM_BOUNDS,
                in_flight=InFlight(SIM_APPLY_BYTES[(sim.seed // 81) % len(SIM_APPLY_BYTES)]),
            ),
            share_up_to=SIM_SHARE_UP_TO[(sim.seed // 3) % len(SIM_SHARE_UP_TO)],
        )
        # Batches taken from the consumer are put here; its applier hands them
        # to the loop, the next one gathered while one is in flight
        # (streams.worker.intake), as the Faust agent does.
        # The agent admits each value into the read-ahead budget before it
        # puts it (Runtime.open_intake): what the applier takes, and what a
        # rebalance drops, gives its bytes back.
        self.read_ahead = ReadAhead(SIM_READ_AHEAD_BYTES[sim.seed % len(SIM_READ_AHEAD_BYTES)])
        self.intake = Intake(
            self.loop,
            max_records=sim.rng.randint(1, sim.knobs.max_pending),
            on_taken=partial(self.taken, sim),
            on_dropped=self.read_ahead.give_back,
        )
        self.applier: asyncio.Task[None] | None = None
        self.feeding: asyncio.Task[None] | None = None
        self.timer: asyncio.Task[None] | None = None
        self.recovery: asyncio.Task[None] | None = None
        #: A rebalance this member has not learned of yet (a zombie until then).
        self.next_assignment: tuple[set[int], int] | None = None
        self.learns_at = 0

    def taken(self, sim: Simulation, batch: Mapping[int, Sequence[RawRecord]]) -> None:
        size, budget = batch_values_size(batch), self.read_ahead.max_bytes
        if size > budget and sum(map(len, batch.values())) > 1:
            sim.violations.append(
                f"{self.name}'s applier took {size} bytes of values, over the "
                f"read-ahead budget of {budget} (only one value alone may pass it)"
            )
        self.read_ahead.give_back(batch)

    async def feed(self, batch: Mapping[int, list[RawRecord]], report: Report) -> None:
        """The agent's side of a batch: each value admitted into the read-ahead
        budget, in order, after a turn of the event loop; where admission
        would wait, what was admitted so far is put first (Faust's
        take_events hands its batch over at its timeout while our processor
        waits), then the value waits its turn."""
        gathered: dict[int, list[RawRecord]] = {}
        budget = self.read_ahead
        for partition, records in batch.items():
            for record in records:
                # Faust's stream gives the loop a turn before every value, so
                # the applier may take a batch while values wait here.
                await asyncio.sleep(0)
                size = len(record.value) if record.value else 0
                if gathered and budget.held and budget.held + size > budget.max_bytes:
                    report.faults["read_ahead_cuts"] += 1
                    await self.intake.put(gathered)
                    gathered = {}
                await budget.admit(size)
                gathered.setdefault(partition, []).append(record)
        if gathered:
            await self.intake.put(gathered)

    def tasks(self) -> list[asyncio.Task[None]]:
        tasks = (self.applier, self.feeding, self.timer, self.recovery)
        return [t for t in tasks if t is not None]

    def busy(self) -> bool:
        waiting = (self.feeding, self.timer, self.recovery)
        return not self.intake.idle() or any(t is not None and not t.done() for t in waiting)

    def seeks(self) -> Counter[str]:
        """The loop's seeks by reason, and its shared units of work by outcome
        (``units_shared_committed``, ``units_shared_declined``)."""
        out: Counter[str] = Counter()
        metrics = self.projector.metrics
        for counter, name, label in (
            (metrics.seeks, "seek", "reason"),
            (metrics.units_shared, "units_shared", "outcome"),
        ):
            for metric in counter.collect():
                for sample in metric.samples:
                    if sample.name.endswith("_total"):
                        out[f"{name}_{sample.labels[label]}"] += int(sample.value)
        return out


class Simulation:
    def __init__(self, workload: Workload, seed: int, knobs: Knobs | None = None) -> None:
        self.workload = workload
        self.seed = seed
        self.knobs = knobs or Knobs()
        self.rng = random.Random(seed)
        self.now = 0.0
        self.kafka = SimKafka(workload.partitions, on_commit=self._check_commit)
        self.embedder = HashingEmbedder(dimension=DIMENSION)
        self.graph = InMemoryGraphStore()
        self.vector = InMemoryVectorStore(self.embedder.identity)
        self.dead_letters = DeadLetterTopic()
        self.published = 0
        self.step = 0
        self.violations: list[str] = []
        self.report = Report(seed, len(workload.records))
        self.turns = random.Random(f"turns-{seed}")
        self.turn_chance = SIM_TURN_CHANCES[(seed // 9) % len(SIM_TURN_CHANCES)]
        self.hidden = SIM_HIDDEN[(seed // 27) % len(SIM_HIDDEN)]
        count = 1 + self.rng.randrange(self.knobs.max_members)
        self.members = [Member(self, f"w{i}") for i in range(count)]
        #: The operator's `redstring skip` over the shared stores, when one runs.
        self.operator: asyncio.Task[None] | None = None
        #: (partition, offset) of each record the operator's skip finished.
        self.skipped: set[tuple[int, int]] = set()
        # The operator's command runs beside the workers, its store calls
        # taking turns as theirs do; no fault reaches it.
        operator = FaultWire(self.turns, self.turn_chance)
        self.operator_folds = [
            GraphProjection(
                crashing(self.graph, operator, self.hidden), embedding_dimension=DIMENSION
            ),
            VectorProjection(crashing(self.vector, operator, self.hidden), self.embedder),
        ]

    def clock(self) -> float:
        return self.now

    # -- checks -------------------------------------------------------------------

    def _check_commit(self, partition: int, offset: int) -> None:
        """docs/design.md 5.9, when a commit lands: never past the lowest checkpoint + 1."""
        part = StreamPartition(TOPIC, partition, TOPIC_ID)
        lowest = min(_now(self.graph.checkpoint(part)), _now(self.vector.checkpoint(part)))
        if offset > lowest + 1:
            self.violations.append(
                f"step {self.step}: partition {partition} committed {offset} while the "
                f"stores' lowest checkpoint is {lowest} (docs/design.md 5.9)"
            )

    def fail(self, message: str) -> SimulationFailure:
        return SimulationFailure(
            f"seed {self.seed}, step {self.step}, t={self.now:g}s: {message}\n"
            f"workload: {self.workload.summary()}\nfaults: {dict(self.report.faults)}"
        )

    def needed_now(self, partition: int) -> int:
        """The lowest offset either store needs, read without suspending."""
        return min(_now(self.positions(partition)))

    async def positions(self, partition: int) -> tuple[int, int]:
        part = StreamPartition(TOPIC, partition, TOPIC_ID)
        return (
            await next_needed_offset(self.graph, part),
            await next_needed_offset(self.vector, part),
        )

    # -- the group ------------------------------------------------------------------

    def rebalance(self, *, zombies: bool) -> None:
        """A new generation: partitions dealt to the members at random. A member
        learns of it now, or (a zombie) some steps later."""
        self.kafka.generation += 1
        generation = self.kafka.generation
        share: dict[str, set[int]] = {m.name: set() for m in self.members}
        for partition in range(self.workload.partitions):
            owner = self.members[self.rng.randrange(len(self.members))].name
            share[owner].add(partition)
            self.kafka.owner[partition] = owner
        self.report.faults["rebalances"] += 1
        for member in self.members:
            member.next_assignment = (share[member.name], generation)
            late = (
                zombies
                and member.consumer.assigned()
                and self.rng.random() < (self.knobs.zombie_chance)
            )
            member.learns_at = self.step + (self.rng.randint(1, 30) if late else 0)
            if late:
                self.report.faults["zombies"] += 1
            else:
                self.learn(member)

    def learn(self, member: Member) -> None:
        """The member's side of the rebalance: revoke and assign, then Faust's
        recovery (on_rebalance_complete -> WorkerLoop.on_assigned, then
        perform_seek), concurrently with any batch still in hand."""
        if member.next_assignment is None:
            return
        partitions, generation = member.next_assignment
        member.next_assignment = None
        if member.recovery is not None and not member.recovery.done():
            member.recovery.cancel()  # Faust: "Recovery rebalancing again"
        member.consumer.revoke_and_assign(partitions, generation)

        async def recover() -> None:
            # streams.worker.app.Runtime.commit_positions
            waiting = member.intake.pending
            member.intake.retain(member.consumer.assigned())
            self.report.faults["revoked_while_gathered"] += waiting - member.intake.pending
            await member.loop.on_assigned()
            member.consumer.perform_seek()

        member.recovery = asyncio.ensure_future(recover())

    async def restart(self, member: Member) -> Member:
        """A crashed member: its tasks die, its unlanded commits are lost, and a
        fresh incarnation (nothing remembered) rejoins the group."""
        for task in member.tasks():
            task.cancel()
        await asyncio.gather(*member.tasks(), return_exceptions=True)
        self.report.faults["crashes"] += 1
        self.report.faults["lost_commits"] += member.consumer.crash()
        self._retire(member)
        fresh = Member(self, member.name)
        self.members[self.members.index(member)] = fresh
        self.rebalance(zombies=False)
        return fresh

    def _retire(self, member: Member) -> None:
        self.report.faults.update(member.consumer.stats)
        self.report.faults.update(member.seeks())
        self.report.faults["transient_errors"] += member.wire.transients
        self.report.faults["ended_transactions"] += member.wire.ended

    async def settle(self) -> None:
        """Crashed members restart; an error escaping a worker's task fails the
        run (it would crash the real worker)."""
        for member in list(self.members):
            for task in member.tasks():
                if task.done() and not task.cancelled():
                    exc = task.exception()
                    if isinstance(exc, IntakeStopped) and isinstance(exc.__cause__, WorkerCrash):
                        continue  # the agent learning that its applier died with the process
                    if exc is not None and not isinstance(exc, WorkerCrash):
                        raise self.fail(f"{member.name}'s task raised {exc!r}") from exc
            if member.wire.dead:
                await self.restart(member)
        if self.operator is not None and self.operator.done() and not self.operator.cancelled():
            exc = self.operator.exception()
            if exc is not None:
                raise self.fail(f"the operator's skip raised {exc!r}") from exc
        if self.violations:
            raise self.fail(self.violations[0])

    # -- steps --------------------------------------------------------------------------

    def publish(self, most: int) -> None:
        records = self.workload.records
        for record in records[self.published : self.published + most]:
            offset = self.kafka.append(record.partition, record.key, record.value)
            assert offset == record.offset, (record, offset)
            self.published += 1

    def take(self, member: Member, most: int) -> None:
        """The agent: take what the consumer queued and put it into the
        intake (one put at a time; a put waits while the intake is full)."""
        if member.feeding is not None and not member.feeding.done():
            return
        if not member.consumer.flow_active:
            return
        if member.applier is None:
            member.applier = member.intake.start()
        batch = member.consumer.take_events(most)
        if batch and member.intake.applying:
            self.report.faults["gathered_while_applying"] += 1
        if batch:
            member.feeding = asyncio.ensure_future(member.feed(batch, self.report))

    def operate(self, *, interrupted: bool = False) -> None:
        """An operator runs ``redstring skip`` (streams.ops.skip) on every
        partition at its stores' position, beside the workers and whatever
        they hold: its checks must refuse every record but one a worker
        pauses on. ``interrupted``: the command stops after the dead letter and
        the graph store's move (a second run must finish it)."""
        if self.operator is None or self.operator.done():
            self.operator = asyncio.ensure_future(self._skip_all(interrupted))

    async def _skip_all(self, interrupted: bool) -> None:
        folds = self.operator_folds
        for partition in range(self.workload.partitions):
            part = StreamPartition(TOPIC, partition, TOPIC_ID)
            offset = min(await self.positions(partition))
            log = self.kafka.read(partition, offset, 1)
            record = FetchedRecord(log[0].offset, log[0].key, log[0].value) if log else None
            try:
                skippable = await check_skip(folds, part, offset, record, self.workload.control_key)
            except SkipRefused:
                continue
            windowed = await self._in_own_window(part, offset, skippable.tenant)
            await skip(folds[:1] if interrupted else folds, self.dead_letters, skippable, "sim")
            self.report.faults[
                "operator_skips_interrupted" if interrupted else "operator_skips"
            ] += 1
            if not interrupted:
                self._check_skipped_once(part, offset, skippable.tenant, windowed)

    async def _in_own_window(self, part: StreamPartition, offset: int, tenant: str) -> bool:
        """Whether a store's rebuild window of ``tenant`` covers ``offset``."""
        for store in (self.graph, self.vector):
            for m in await store.rebuild_markers(part):
                if m.tenant_id == tenant and m.applied_through < offset < m.end_offset:
                    return True
        return False

    def _check_skipped_once(
        self, part: StreamPartition, offset: int, tenant: str, windowed: bool
    ) -> None:
        """A skipped record pauses its partition again only inside its own
        tenant's rebuild window (docs/operations.md, "A replay after a
        skip"): another tenant's window steps over it. ``windowed``: one
        covered it when the operator looked."""
        key = (part.partition, offset)
        if key in self.skipped:
            if not windowed:
                self.violations.append(
                    f"partition {part.partition} paused again on offset {offset} ({tenant}), "
                    "which an operator skipped before, outside any rebuild window of its tenant"
                )
        self.skipped.add(key)

    def tick(self, seconds: float) -> None:
        self.now += seconds
        for member in self.members:
            if member.timer is None or member.timer.done():
                member.timer = asyncio.ensure_future(member.loop.check_stalls())

    async def run_step(self, kind: str) -> None:
        rng, knobs = self.rng, self.knobs
        member = self.members[rng.randrange(len(self.members))]
        if kind == "publish":
            self.publish(rng.randint(1, 4))
        elif kind == "fetch":
            member.consumer.fetch(rng.randint(1, knobs.max_chunk))
        elif kind == "deliver":
            member.consumer.deliver(rng.randint(1, knobs.max_chunk))
        elif kind == "take":
            self.take(member, rng.randint(1, knobs.max_batch))
        elif kind == "run":
            # Mostly short runs, so that a batch is often still in flight when
            # the next one is taken (the pipelined intake), sometimes long ones.
            short = rng.random() < 0.6
            for _ in range(rng.randint(1, 4) if short else rng.randint(1, 20)):
                await asyncio.sleep(0)
        elif kind == "tick":
            self.tick(rng.uniform(0.5, 3.0))
        elif kind == "rebalance":
            self.rebalance(zombies=True)
        elif kind == "crash":
            member.wire.arm(rng.randint(1, 40))
            self.report.faults["crashes_armed"] += 1
        elif kind == "transient":
            member.wire.arm_transient(rng.randint(1, 20), ended=rng.random() < 0.5)
        elif kind == "duplicate":
            member.consumer.duplicate()
        elif kind == "lose_seek":
            member.consumer.lose_next_seek = True
        elif kind == "lose_record":
            member.consumer.lose_next_record = True
        elif kind == "skip":
            self.operate(interrupted=rng.random() < 0.25)
        for other in self.members:
            if other.next_assignment is not None and self.step >= other.learns_at:
                self.learn(other)

    # -- the run ------------------------------------------------------------------------

    async def run(self) -> Report:
        self.rebalance(zombies=False)
        kinds = list(self.knobs.weights)
        weights = [self.knobs.weights[k] for k in kinds]
        for step in range(self.knobs.fault_steps):
            self.step = step
            await self.run_step(self.rng.choices(kinds, weights)[0])
            await self.settle()
        await self.quiesce()
        await self.check_final()
        for member in self.members:
            self._retire(member)
        self.report.steps = self.step
        self.report.virtual_seconds = self.now
        return self.report

    async def quiesce(self) -> None:
        """Faults off, zombies told, everything published; the workers run until
        nothing is left to do, within a bound of rounds (1 virtual second each)."""
        for member in self.members:
            member.wire.disarm()
            self.learn(member)
        self.publish(len(self.workload.records))
        for rounds in range(self.quiesce_bound()):
            self.step += 1
            if self.operator is not None:
                await asyncio.gather(self.operator, return_exceptions=True)
            # Sometimes stopped midway: the next round's run must finish it.
            self.operate(interrupted=self.rng.random() < 0.2)
            for member in self.members:
                if member.recovery is not None:
                    await asyncio.gather(member.recovery, return_exceptions=True)
                member.consumer.fetch(self.knobs.max_chunk)
                member.consumer.deliver(self.knobs.max_chunk)
                self.take(member, self.knobs.max_batch)
                await self.drain(member)
                await member.intake.join()
            self.tick(1.0)
            for member in self.members:
                if member.timer is not None:
                    await asyncio.gather(member.timer, return_exceptions=True)
            if self.operator is not None:
                # The round's run of the operator ends within the round: its
                # store calls take turns, and a round whose members have
                # nothing left to do gives it too few for it to end on its
                # own before the check below, every round (a stall that was
                # the harness's, found by a soak).
                await asyncio.gather(self.operator, return_exceptions=True)
            await self.settle()
            if await self.quiet():
                self.report.rounds_to_quiesce = rounds
                # The watchdog's next passes, which clear what it reported.
                for _ in range(int(self.knobs.stall_after) + 2):
                    self.tick(1.0)
                    await asyncio.gather(*(m.timer for m in self.members if m.timer))
                await self.settle()
                return
        raise self.fail(await self.describe_stall())

    def quiesce_bound(self) -> int:
        """The rounds within which the workers must quiesce: a stall never
        does, and a live run needs one pass of the log, plus one per replay
        (each rescans its partition from the log start), at ``max_batch``
        records a round, twice over for the seeks between them."""
        records = len(self.workload.records)
        replays = sum(1 for r in self.workload.records if r.kind == "replay")
        passes = (1 + replays) * (records // self.knobs.max_batch + 1)
        return max(self.knobs.quiesce_rounds, 2 * passes)

    async def drain(self, member: Member) -> None:
        """Let the member's put finish. It waits only for the applier (room in
        the intake, or bytes given back to the read-ahead budget), so a put
        still waiting with the intake idle will never end: a stall that the
        round bound reports, not a hang of the test."""
        feeding = member.feeding
        while feeding is not None and not feeding.done():
            await member.intake.join()
            for _ in range(FEED_TURNS):
                if feeding.done() or not member.intake.idle():
                    break
                await asyncio.sleep(0)
            else:
                return
        if feeding is not None:
            await asyncio.gather(feeding, return_exceptions=True)

    async def quiet(self) -> bool:
        if any(m.busy() or not m.consumer.idle() for m in self.members):
            return False
        if self.operator is not None and not self.operator.done():
            return False
        for partition in range(self.workload.partitions):
            end = self.kafka.high_watermark(partition)
            if await self.positions(partition) != (end, end):
                return False
            if self.kafka.committed.get(partition, 0) != end:
                return False
        return True

    async def describe_stall(self) -> str:
        lines = [f"no quiescence after {self.quiesce_bound()} rounds (a stall):"]
        for partition in range(self.workload.partitions):
            graph, vector = await self.positions(partition)
            end = self.kafka.high_watermark(partition)
            owner = self.kafka.owner.get(partition)
            lines.append(
                f"  partition {partition}: graph needs {graph}, vector needs {vector}, "
                f"log end {end}, committed {self.kafka.committed.get(partition)}, owner {owner}"
            )
        return "\n".join([*lines, *self.describe_members()])

    def describe_members(self) -> list[str]:
        lines = []
        for member in self.members:
            c = member.consumer
            lines.append(
                f"  {member.name}: assigned {sorted(c.assigned())}, positions {c.position}, "
                f"read offsets {c.read_offset}, queued {len(c.queue)}, chunk {len(c.chunk)}, "
                f"health {member.projector.health.reasons()}, paused at "
                f"{member.loop.paused_at}, consumer paused {sorted(c.paused)}, read-ahead held "
                f"{member.read_ahead.held} of {member.read_ahead.max_bytes} bytes, "
                f"intake pending {member.intake.pending}"
            )
        return lines

    async def check_final(self) -> None:
        records = [r.oracle_record for r in self.workload.records]
        expected = self.workload.expected_states()
        actual = await folded_states(Stores(self.graph, self.vector, self.embedder), records)
        if actual != {t: expected.get(t) for t in actual}:
            raise self.fail(describe_difference("simulation", expected, actual))
        missing = set(self.workload.dead_letters()) - self.dead_letters.offsets()
        if missing:
            raise self.fail(f"never dead-lettered (partition, offset): {sorted(missing)}")
        for member in self.members:
            if not member.projector.health.ready:
                raise self.fail(
                    "\n".join(
                        [
                            f"{member.name} not ready: {member.projector.health.reasons()}",
                            *self.describe_members(),
                        ]
                    )
                )
            if member.read_ahead.held:
                # Everything admitted was taken or dropped: bytes still held
                # are a leak that would, in time, stop the consumer.
                raise self.fail(
                    f"{member.name}'s read-ahead budget still holds {member.read_ahead.held} bytes"
                )


def simulate(workload: Workload, seed: int, knobs: Knobs | None = None) -> Report:
    """Run one simulation; raises ``SimulationFailure`` with the seed on a failure."""
    return asyncio.run(Simulation(workload, seed, knobs).run())
