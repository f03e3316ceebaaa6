"""Delivery modes: ways Kafka and a crashing fleet of agents may hand a log to
the folds, all of which must leave the state the oracle computes.

The consumer here behaves like the real agent (docs/design.md 5.2): it reads from the
lowest next needed offset of the two stores, tells the folds where it read
from, and seeks back whenever it finds itself reading past what the stores
need (after a resume from a Kafka commit that ran ahead, or a replay request).
Everything it knows about progress comes from the stores.
"""

from __future__ import annotations

import bisect
import inspect
import random
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from adapters.embedding import HashingEmbedder
from contracts.domain import StreamPartition
from contracts.events import (
    DocumentExtractedEvent,
    EntitiesMergedEvent,
    EntitiesUnmergedEvent,
    Event,
    TenantReplayRequestedEvent,
)
from contracts.ids import EntityId, TenantId
from contracts.ports.graph import ProjectedGraphStore
from contracts.ports.vector import ProjectedVectorStore
from projections.admission import next_needed_offset
from projections.graph import GraphProjection
from projections.records import FoldReport, LogRecord
from projections.snapshot import snapshot
from projections.vector import VectorProjection
from tests.scenarios import stores
from tests.scenarios.histories import LogBuilder, Record, Scenario
from tests.scenarios.oracle import Oracle

PARTITION = StreamPartition("events", 0, "topic-id-0001")
EMBED_DIMENSION = 16


class SimulatedCrash(BaseException):
    """The process died here (kill -9). Not an ``Exception``: no code of the
    worker handles it (an exception the fold meets while writing an event
    would be that event's refusal, docs/semantics.md "Failures")."""


# -- crash injection ----------------------------------------------------------


class Tripwire:
    """Counts store calls; raises ``SimulatedCrash`` at the armed call."""

    def __init__(self) -> None:
        self.calls = 0
        self.crash_at: int | None = None
        self.fired = 0

    def arm(self, after: int) -> None:
        self.crash_at = self.calls + max(1, after)

    def disarm(self) -> None:
        self.crash_at = None

    def tick(self, what: str) -> None:
        self.calls += 1
        if self.crash_at is not None and self.calls >= self.crash_at:
            self.crash_at = None
            self.fired += 1
            raise SimulatedCrash(f"crash at store call {self.calls} ({what})")

    async def turn(self) -> None:
        """After a call's tick, before the store answers: a real store's
        round trip, where other tasks run. None here."""


class _Tripping:
    """Passes attribute access through; async methods tick the tripwire first.
    ``hidden``: what the store offers that this one does not (a store without
    an optional capability)."""

    def __init__(self, inner: Any, trip: Tripwire, hidden: frozenset[str] = frozenset()) -> None:
        self._inner = inner
        self._trip = trip
        self._hidden = hidden

    def __getattr__(self, name: str) -> Any:
        if name in self._hidden:
            raise AttributeError(name)
        attr = getattr(self._inner, name)
        if inspect.iscoroutinefunction(attr):
            trip = self._trip

            async def tripping(*args: Any, **kwargs: Any) -> Any:
                trip.tick(name)
                await trip.turn()
                return await attr(*args, **kwargs)

            return tripping
        return attr


class CrashingStore(_Tripping):
    """A store whose calls (inside units of work too) can be made to crash."""

    def unit_of_work(self, partition: StreamPartition) -> AbstractAsyncContextManager[Any]:
        return self._tripping_unit("unit_of_work", partition)

    def unit_of_work_across(
        self, partitions: Sequence[StreamPartition]
    ) -> AbstractAsyncContextManager[Any]:
        return self._tripping_unit("unit_of_work_across", partitions)

    @asynccontextmanager
    async def _tripping_unit(self, opener: str, *args: Any) -> AsyncIterator[Any]:
        """The inner store's unit of work (opened by ``opener``), its calls tripping."""
        self._trip.tick(opener)
        await self._trip.turn()
        async with getattr(self._inner, opener)(*args) as real:
            yield _Tripping(real, self._trip, self._hidden)


# -- stores and workers ---------------------------------------------------------


@dataclass
class Stores:
    graph: ProjectedGraphStore
    vector: ProjectedVectorStore
    embedder: HashingEmbedder
    graph_trip: Tripwire = field(default_factory=Tripwire)
    vector_trip: Tripwire = field(default_factory=Tripwire)

    @classmethod
    async def fresh(cls) -> Stores:
        """Empty stores from the active factory (tests/scenarios/stores.py)."""
        embedder = HashingEmbedder(dimension=EMBED_DIMENSION)
        factory = stores.active()
        return cls(await factory.graph(), await factory.vector(embedder.identity), embedder)

    async def state(self, tenant: str, universe: Iterable[str]) -> dict[str, Any]:
        ids = [EntityId(i) for i in universe]
        return await snapshot(self.graph, self.vector, TenantId(tenant), ids)


#: Entities per embedding call and store write in the scenarios.
SCENARIO_CHUNK = 2


class Worker:
    """One agent incarnation: its own projection objects over shared stores."""

    def __init__(self, stores: Stores, log_start: int) -> None:
        self.stores = stores
        self.log_start = log_start
        # Chunks of 2: every multi-entity run is embedded and written in
        # several calls, which must change nothing (projections.chunks).
        self.graph = GraphProjection(
            CrashingStore(stores.graph, stores.graph_trip),  # type: ignore[arg-type]
            chunk=SCENARIO_CHUNK,
        )
        self.vector = VectorProjection(
            CrashingStore(stores.vector, stores.vector_trip),  # type: ignore[arg-type]
            stores.embedder,
            chunk=SCENARIO_CHUNK,
        )

    async def needed(self) -> int:
        self.stores.graph_trip.disarm()
        self.stores.vector_trip.disarm()
        return min(
            await self.graph.next_needed_offset(PARTITION),
            await self.vector.next_needed_offset(PARTITION),
        )

    async def apply(
        self, records: Sequence[LogRecord], read_from: int
    ) -> tuple[FoldReport, FoldReport]:
        g = await self.graph.apply(
            PARTITION, records, log_start=self.log_start, read_from=read_from
        )
        v = await self.vector.apply(
            PARTITION, records, log_start=self.log_start, read_from=read_from
        )
        reports: list[FoldReport] = []
        for fold, store, report in (
            (self.graph, self.stores.graph, g),
            (self.vector, self.stores.vector, v),
        ):
            if report.halted is not None:
                raise AssertionError(f"a fold halted: {report.halted!r}")
            # As the agent does once the dead letter is written.
            if report.failed:
                for failure in report.failed:
                    await fold.skip_refused(PARTITION, failure.offset)
                needed = await fold.next_needed_offset(PARTITION)
                report = replace(report, next_needed_offset=needed)
            # The report's position comes from the fold's last unit of work,
            # not from a read: it must be what the store itself says.
            stored = await next_needed_offset(store, PARTITION)
            assert report.next_needed_offset == stored, (report.next_needed_offset, stored)
            reports.append(report)
        return reports[0], reports[1]


@dataclass
class Delivered:
    """One batch handed to both folds, and what they said."""

    read_from: int
    records: list[LogRecord]
    graph: FoldReport
    vector: FoldReport
    kind: str = "normal"  # normal | redelivery | zombie


@dataclass
class Run:
    stores: Stores
    log: list[LogRecord]
    delivered: list[Delivered] = field(default_factory=list)
    crashes: int = 0
    seeks_back: int = 0

    def failed_offsets(self) -> set[int]:
        return {f.offset for d in self.delivered for r in (d.graph, d.vector) for f in r.failed}

    def replays_started(self) -> set[int]:
        return {o for d in self.delivered for r in (d.graph, d.vector) for o in r.replays_started}


class Consumer:
    """Reads a log held in memory, the way a Kafka consumer does: from a position
    to the next records, whatever gaps the offsets have."""

    def __init__(self, log: Sequence[LogRecord]) -> None:
        self.log = list(log)
        self.offsets = [r.offset for r in self.log]

    def read(self, position: int, size: int) -> list[LogRecord]:
        start = bisect.bisect_left(self.offsets, position)
        return self.log[start : start + size]

    @property
    def end(self) -> int:
        return self.offsets[-1] + 1 if self.offsets else 0


BatchSize = Callable[[], int]


async def consume(
    run: Run,
    worker: Worker,
    batch_size: BatchSize,
    *,
    position: int | None = None,
    max_batches: int | None = None,
    after_batch: Callable[[Delivered], Any] | None = None,
    before_apply: Callable[[list[LogRecord]], Any] | None = None,
    learn_from_folds: bool = False,
) -> bool:
    """The agent's loop. Returns True when the stores need nothing more of the
    log, False when ``max_batches`` ran out first. ``position`` is where the
    consumer starts reading (a Kafka committed offset, possibly ahead).

    The agent seeks back when it reads past what the stores need. With
    ``learn_from_folds`` its first batch goes to the folds unchecked, as when
    Faust's recovery re-seeked after the assignment callbacks: the folds must
    refuse a batch read past their next needed offset and say where to read."""
    consumer = Consumer(run.log)
    if position is None:
        position = await worker.needed()
    limit = 20 * (len(run.log) + 5)
    batches = 0
    while True:
        needed = await worker.needed()
        unchecked = learn_from_folds and batches == 0
        if position > needed and not unchecked:
            # The stores need something earlier: seek back (docs/design.md 5.2).
            position = needed
            run.seeks_back += 1
        batch = consumer.read(position, batch_size())
        if not batch:
            if position > needed:
                # Nothing arrives past the end of the log, so no fold can refuse
                # a batch: an idle agent must compare its position with the
                # stores' itself, or it would sit ahead of them forever.
                position = needed
                run.seeks_back += 1
                continue
            return True
        if max_batches is not None and batches >= max_batches:
            return False
        batches += 1
        assert batches <= limit, "the consumer does not make progress"
        if before_apply is not None:
            before_apply(batch)
        g, v = await worker.apply(batch, position)
        delivered = Delivered(position, batch, g, v)
        run.delivered.append(delivered)
        if position <= needed and not (g.replays_started or v.replays_started):
            assert min(g.next_needed_offset, v.next_needed_offset) >= position, (
                f"a fold asked to go back below {position} without a replay request"
            )
        if min(g.next_needed_offset, v.next_needed_offset) < position and position > needed:
            run.seeks_back += 1
        position = min(g.next_needed_offset, v.next_needed_offset)
        if after_batch is not None:
            await _maybe_await(after_batch(delivered))


async def _maybe_await(value: Any) -> None:
    if inspect.isawaitable(value):
        await value


# -- delivery modes ---------------------------------------------------------------


def to_log(records: Sequence[Record]) -> list[LogRecord]:
    return [LogRecord(o, TenantId(t) if t is not None else None, e) for o, t, e in records]


def sizes(rng: random.Random, low: int = 1, high: int = 5) -> BatchSize:
    return lambda: rng.randint(low, high)


def fixed(n: int) -> BatchSize:
    return lambda: n


async def once(log: list[LogRecord], log_start: int, seed: int) -> Run:
    run = Run(await Stores.fresh(), log)
    await consume(run, Worker(run.stores, log_start), fixed(1))
    return run


async def whole_log(log: list[LogRecord], log_start: int, seed: int) -> Run:
    run = Run(await Stores.fresh(), log)
    await consume(run, Worker(run.stores, log_start), fixed(len(log) + 1))
    return run


async def random_batches(log: list[LogRecord], log_start: int, seed: int) -> Run:
    run = Run(await Stores.fresh(), log)
    await consume(run, Worker(run.stores, log_start), sizes(random.Random(seed), 1, 6))
    return run


async def every_event_twice(log: list[LogRecord], log_start: int, seed: int) -> Run:
    run = Run(await Stores.fresh(), log)
    worker = Worker(run.stores, log_start)

    async def again(d: Delivered) -> None:
        g, v = await worker.apply(d.records, d.read_from)
        run.delivered.append(Delivered(d.read_from, d.records, g, v, "redelivery"))

    await consume(run, worker, fixed(1), after_batch=again)
    return run


async def interleaved_redelivery(log: list[LogRecord], log_start: int, seed: int) -> Run:
    """Whole batches delivered again, duplicated and out of turn: the same batch
    twice, and earlier batches interleaved with newer ones."""
    rng = random.Random(seed)
    run = Run(await Stores.fresh(), log)
    worker = Worker(run.stores, log_start)
    history: list[Delivered] = []

    async def redeliver(d: Delivered) -> None:
        history.append(d)
        for _ in range(rng.choice([0, 1, 1, 2])):
            old = rng.choice(history[-4:])
            g, v = await worker.apply(old.records, old.read_from)
            run.delivered.append(Delivered(old.read_from, old.records, g, v, "redelivery"))

    await consume(run, worker, sizes(rng, 1, 4), after_batch=redeliver)
    return run


async def zombie_batch(log: list[LogRecord], log_start: int, seed: int) -> Run:
    """A worker that lost the partition applies a batch it read long ago, after
    its successor has applied newer ones."""
    rng = random.Random(seed)
    run = Run(await Stores.fresh(), log)
    worker = Worker(run.stores, log_start)
    history: list[Delivered] = []

    async def zombie(d: Delivered) -> None:
        history.append(d)
        if len(history) >= 2 and rng.random() < 0.6:
            old = rng.choice(history[:-1])
            ghost = Worker(run.stores, log_start)
            g, v = await ghost.apply(old.records, old.read_from)
            run.delivered.append(Delivered(old.read_from, old.records, g, v, "zombie"))

    await consume(run, worker, sizes(rng, 1, 4), after_batch=zombie)
    # Every old batch, once more, at the very end.
    for old in history:
        ghost = Worker(run.stores, log_start)
        g, v = await ghost.apply(old.records, old.read_from)
        run.delivered.append(Delivered(old.read_from, old.records, g, v, "zombie"))
    return run


async def rebuild_into_fresh_stores(log: list[LogRecord], log_start: int, seed: int) -> Run:
    """Wipe and replay: fold the log, then fold it again into brand-new stores
    (the procedure for a new embedding model or partition count)."""
    first = await random_batches(log, log_start, seed)
    run = Run(await Stores.fresh(), log)
    await consume(run, Worker(run.stores, log_start), sizes(random.Random(seed + 1), 1, 6))
    run.delivered = [*first.delivered, *run.delivered]
    return run


async def crash_at_each_boundary(log: list[LogRecord], log_start: int, seed: int) -> Run:
    """Every worker folds one batch and dies: at every batch boundary the
    projection objects are abandoned, and in about half of the batches an
    exception is raised from inside a unit of work (or the replay deletion)
    part-way through. A new worker over the same stores resumes from the
    stores' position."""
    return await _crashing(log, log_start, seed, lambda _run: 0.5)


async def crash_in_replay_window(log: list[LogRecord], log_start: int, seed: int) -> Run:
    """Crashes concentrated where a rebuild window is open or about to open:
    inside the deletion, inside the window's units of work, and between them.
    The caller makes sure the log has replay requests."""

    async def chance(run: Run) -> float:
        markers = [
            *await run.stores.graph.rebuild_markers(PARTITION),
            *await run.stores.vector.rebuild_markers(PARTITION),
        ]
        needed = min(
            await GraphProjection(run.stores.graph).next_needed_offset(PARTITION),
            await VectorProjection(run.stores.vector, run.stores.embedder).next_needed_offset(
                PARTITION
            ),
        )
        upcoming = Consumer(run.log).read(needed, 3)
        near = any(isinstance(r.event, TenantReplayRequestedEvent) for r in upcoming)
        return 0.8 if markers or near else 0.0

    return await _crashing(log, log_start, seed, chance)


async def _crashing(
    log: list[LogRecord], log_start: int, seed: int, chance: Callable[[Run], Any]
) -> Run:
    rng = random.Random(seed)
    run = Run(await Stores.fresh(), log)
    for _ in range(50 * (len(log) + 5)):
        worker = Worker(run.stores, log_start)
        p = chance(run)
        if inspect.isawaitable(p):
            p = await p
        inside = rng.random() < p

        def arm(_batch: list[LogRecord], inside: bool = inside) -> None:
            if inside:
                trip = rng.choice([run.stores.graph_trip, run.stores.vector_trip])
                trip.arm(rng.randint(1, 12))

        try:
            done = await consume(run, worker, sizes(rng, 1, 3), max_batches=1, before_apply=arm)
        except SimulatedCrash:
            run.crashes += 1
            continue
        if done:
            return run
        run.crashes += 1  # abandoned between two units of work
    raise AssertionError("no progress under crashes")


async def resume_ahead(log: list[LogRecord], log_start: int, seed: int) -> Run:
    """After each batch the worker dies, and its successor starts reading from a
    Kafka commit that ran ahead of the stores: it must notice and seek back."""
    rng = random.Random(seed)
    run = Run(await Stores.fresh(), log)
    end = Consumer(log).end
    position: int | None = None
    for _ in range(50 * (len(log) + 5)):
        worker = Worker(run.stores, log_start)
        done = await consume(
            run,
            worker,
            sizes(rng, 1, 4),
            position=position,
            max_batches=2,
            learn_from_folds=position is not None and rng.random() < 0.5,
        )
        if done:
            return run
        run.crashes += 1
        position = rng.randint(await worker.needed(), end + 2)
    raise AssertionError("no progress when resuming ahead")


MODES: dict[str, Callable[[list[LogRecord], int, int], Any]] = {
    "once": once,
    "whole_log": whole_log,
    "random_batches": random_batches,
    "every_event_twice": every_event_twice,
    "interleaved_redelivery": interleaved_redelivery,
    "zombie_batch": zombie_batch,
    "rebuild_into_fresh_stores": rebuild_into_fresh_stores,
    "crash_at_each_boundary": crash_at_each_boundary,
    "resume_ahead": resume_ahead,
    "crash_in_replay_window": crash_in_replay_window,
}


# -- comparing with the oracle -------------------------------------------------------


def with_replays_of_every_tenant(scenario: Scenario) -> list[Record]:
    """The scenario's records followed by a signed replay request per tenant."""
    builder = LogBuilder(f"{scenario.name}/replay-all", start=scenario.records[-1][0] + 1)
    for tenant in scenario.tenants():
        builder.replay(tenant)
    return [*scenario.records, *builder.records]


def universe(records: Iterable[Record]) -> dict[str, set[str]]:
    """Every entity id a tenant's events mention: the snapshot's id universe."""
    out: dict[str, set[str]] = {}
    for _, key, event in records:
        if key is not None:
            out.setdefault(key, set())
        if event is None:
            continue
        ids = out.setdefault(str(event.tenant_id), set())
        ids.update(_mentioned(event))
    return out


def _mentioned(event: Event) -> set[str]:
    ids: set[str] = set()
    if isinstance(event, DocumentExtractedEvent):
        ids.update(e.id for e in event.payload.entities)
        for rel in event.payload.relationships:
            ids.update((rel.source, rel.target))
    elif isinstance(event, EntitiesMergedEvent):
        ids.add(event.payload.canonical_id)
        ids.update(event.payload.absorbed_ids)
        for ref in [*event.payload.edges_to_remove, *event.payload.edges_to_add]:
            ids.update((ref.source, ref.target))
    elif isinstance(event, EntitiesUnmergedEvent):
        ids.add(event.payload.canonical_id)
        ids.update(event.payload.restored_ids)
        for ref in [*event.payload.edges_to_remove, *event.payload.edges_to_restore]:
            ids.update((ref.source, ref.target))
    return ids


async def folded_states(stores: Stores, records: Sequence[Record]) -> dict[str, dict[str, Any]]:
    return {
        tenant: await stores.state(tenant, ids) for tenant, ids in sorted(universe(records).items())
    }


async def run_mode(
    mode: str, records: Sequence[Record], log_start: int = 0, seed: int = 0
) -> tuple[Run, Oracle]:
    """Fold ``records`` under ``mode`` and assert the result equals the oracle's."""
    oracle = Oracle(log_start).feed_all(records)
    run = await MODES[mode](to_log(records), log_start, seed)
    actual = await folded_states(run.stores, records)
    expected = {t: oracle.state(t) for t in actual}
    assert set(oracle.states()) <= set(actual)
    if actual != expected:
        raise AssertionError(describe_difference(mode, expected, actual))
    refused = oracle_refused_offsets(records, log_start)
    unexpected = run.failed_offsets() - refused
    assert not unexpected, f"{mode}: folds reported failures the oracle does not: {unexpected}"
    # Control events act once: a fold starts a rebuild only at a replay request
    # the oracle acts on, never at a copy of one (the state alone cannot tell:
    # a second rebuild re-applies the same history).
    replays = {o.offset for o in oracle.outcomes if o.kind == "replay"}
    started = run.replays_started()
    assert started <= replays, f"{mode}: folds started rebuilds at {sorted(started - replays)}"
    return run, oracle


def oracle_refused_offsets(records: Sequence[Record], log_start: int = 0) -> set[int]:
    """Offsets of merges the semantics refuse, live or while re-applied in a replay."""
    refused: set[int] = set()
    oracle = Oracle(log_start)
    original = oracle._apply

    def spy(tenant: str, offset: int, event: Event) -> Any:
        outcome = original(tenant, offset, event)
        if outcome.kind == "refused":
            refused.add(offset)
        return outcome

    oracle._apply = spy  # type: ignore[method-assign]
    oracle.feed_all(records)
    return refused


def describe_difference(
    mode: str, expected: dict[str, dict[str, Any]], actual: dict[str, dict[str, Any]]
) -> str:
    lines = [f"mode {mode}: the folded state differs from the oracle"]
    for tenant in sorted(set(expected) | set(actual)):
        exp, act = expected.get(tenant, {}), actual.get(tenant, {})
        for part in sorted(set(exp) | set(act)):
            e, a = exp.get(part), act.get(part)
            if e != a:
                e_items = e if isinstance(e, list) else [e]
                a_items = a if isinstance(a, list) else [a]
                missing = [x for x in e_items if x not in a_items]
                extra = [x for x in a_items if x not in e_items]
                lines.append(f"  {tenant}.{part}: missing {missing} unexpected {extra}")
    return "\n".join(lines)
