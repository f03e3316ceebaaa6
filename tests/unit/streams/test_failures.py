"""Store failures through ``Projector.handle`` over the memory stores (issue 15
items 1 and 7, docs/semantics.md "Failures"): every call returns, nothing is
retried forever, every record ends applied or dead-lettered, both stores reach
the same verdict for every event, and readiness and metrics name no tenant or
entity."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import StreamPartition
from contracts.errors import (
    AliasCycleError,
    PermanentStoreError,
    TransactionEndedError,
    TransientStoreError,
    is_transient,
)
from contracts.events import Event, event_to_json, make_event
from contracts.ids import EntityId, EventId, TenantId
from projections.graph import GraphProjection
from projections.vector import VectorProjection
from streams.worker.loop import pause_reason
from streams.worker.metrics import Metrics
from streams.worker.projector import DeadLetter, Decision, Projector, RawRecord
from tests.data import hostile
from tests.data.hostile import CONTROL_KEY, HostileCase, load_cases

TENANTS = ("acme", "globex")
PART = StreamPartition("events", 0, "")
#: More than any run below needs; a run that reaches it was looping.
MAX_ROUNDS = 60


class ListSink:
    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    async def send(self, letters: Sequence[DeadLetter]) -> None:
        self.letters.extend(letters)


@dataclass
class Fault:
    """Raise ``error`` from a write that names ``marker``; ``times`` None: always."""

    marker: str
    error: type[Exception]
    times: int | None = None


@dataclass
class Faults:
    writes: list[Fault] = field(default_factory=list)
    #: Raised when a unit of work opens (a failure no event can be blamed for).
    on_open: type[Exception] | None = None
    open_times: int | None = None
    #: A unit of work that writes more entities than this is ended by the
    #: store, as a server ends a transaction that outlives its timeout.
    max_entities_per_unit: int | None = None
    attempts: int = 0
    ended: int = 0

    def check_open(self) -> None:
        self.attempts += 1
        if self.on_open is not None and (self.open_times is None or self.open_times > 0):
            if self.open_times is not None:
                self.open_times -= 1
            raise self.on_open("the store is unavailable for tenant 'acme' entity 'e0'")

    def check_write(self, name: str, args: Any) -> None:
        self.attempts += 1
        text = repr(args)
        for fault in self.writes:
            if f"'{fault.marker}'" in text and (fault.times is None or fault.times > 0):
                if fault.times is not None:
                    fault.times -= 1
                raise fault.error(f"{name} refused {fault.marker} of tenant 'acme'")


class FaultyUnit:
    def __init__(self, inner: Any, faults: Faults) -> None:
        self._inner, self._faults = inner, faults
        self._entities = 0

    def _count(self, name: str, args: Any) -> None:
        limit = self._faults.max_entities_per_unit
        if limit is None or not name.startswith("upsert"):
            return
        for a in args:
            # upsert_by_tenant's arguments map tenants to lists of values.
            for values in a.values() if isinstance(a, dict) else [a]:
                self._entities += len(values) if isinstance(values, list | tuple) else 0
        if self._entities > limit:
            self._faults.ended += 1
            raise TransactionEndedError(f"{name}: the unit of work outlived its timeout")

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not name.startswith(("upsert", "hide", "unhide", "remove", "delete_relationship")):
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            self._faults.check_write(name, args)
            self._count(name, args)
            return await attr(*args, **kwargs)

        return write


class Faulty:
    """A memory store whose units of work fail as ``faults`` says."""

    def __init__(self, inner: Any, faults: Faults) -> None:
        self._inner, self.faults = inner, faults

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def unit_of_work(self, partition: Any) -> Any:
        inner, faults = self._inner, self.faults

        class Unit:
            async def __aenter__(self) -> FaultyUnit:
                faults.check_open()
                self._cm = inner.unit_of_work(partition)
                return FaultyUnit(await self._cm.__aenter__(), faults)

            async def __aexit__(self, *exc: Any) -> Any:
                return await self._cm.__aexit__(*exc)

        return Unit()


async def no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


async def until(condition: Callable[[], bool], pause: float = 0.0) -> None:
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(pause)
    raise AssertionError("the condition never held")


def build(
    graph_faults: Faults | None = None, vector_faults: Faults | None = None, **kwargs: Any
) -> tuple[Projector, ListSink, InMemoryGraphStore, InMemoryVectorStore]:
    embedder = HashingEmbedder(dimension=16)
    graph, vector = InMemoryGraphStore(), InMemoryVectorStore(embedder.identity)
    sink = ListSink()
    g: Any = Faulty(graph, graph_faults) if graph_faults else graph
    v: Any = Faulty(vector, vector_faults) if vector_faults else vector
    p = Projector(
        [GraphProjection(g, embedding_dimension=16), VectorProjection(v, embedder)],
        sink,
        topic="events",
        topic_id="",
        control_key=CONTROL_KEY,
        metrics=Metrics(),
        sleep=no_sleep,
        **kwargs,
    )
    return p, sink, graph, vector


def doc(index: int, tenant: str) -> Event:
    """Event ``index`` extracts entity ``e<index>`` (and names the one before)."""
    entities = [{"id": f"e{index}", "name": f"Entity {index}", "type": "Thing"}]
    return make_event(
        "DocumentExtracted",
        tenant,
        {"document_id": f"d{index}", "extraction_model": "m", "entities": entities},
    )


def raw(offset: int, event: Event) -> RawRecord:
    return RawRecord(offset, event.tenant_id.encode(), event_to_json(event))


async def drive(p: Projector, records: Sequence[RawRecord]) -> tuple[list[Decision], int]:
    """Hand the records over as the loop would (from where each decision says)
    until the partition is committed through the last one or paused. Returns
    the decisions and the number of rounds."""
    end = records[-1].offset + 1
    start = records[0].offset
    decisions: list[Decision] = []
    for rounds in range(1, MAX_ROUNDS + 1):
        handed = [r for r in records if r.offset >= start]
        decision = await asyncio.wait_for(p.handle(0, handed), timeout=20)
        decisions.append(decision)
        if decision.pause is not None or decision.commit == end:
            return decisions, rounds
        if decision.seek is not None:
            start = decision.seek
        elif decision.commit is not None:
            start = decision.commit
        else:
            return decisions, rounds
    raise AssertionError(f"no end after {MAX_ROUNDS} rounds: {decisions[-3:]}")


async def applied_ids(store: Any, events: Sequence[Event]) -> set[str]:
    found: set[str] = set()
    for tenant in TENANTS:
        ids = [EventId(str(e.event_id)) for e in events if e.tenant_id == tenant]
        if ids:
            async with store.unit_of_work(PART) as uow:
                found |= {str(i) for i in await uow.applied_event_ids(TenantId(tenant), ids)}
    return found


async def assert_same_verdicts(graph: Any, vector: Any, events: Sequence[Event]) -> set[str]:
    in_graph, in_vector = await applied_ids(graph, events), await applied_ids(vector, events)
    assert in_graph == in_vector, "the stores applied different events"
    assert await graph.checkpoint(PART) == await vector.checkpoint(PART)
    return in_graph


# -- the property -------------------------------------------------------------

PER_EVENT = (PermanentStoreError, ValueError, KeyError, RuntimeError, TypeError, ZeroDivisionError)
TRANSIENT = (TransientStoreError, ConnectionError, TimeoutError)


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[Event], Faults, Faults]:
    count = draw(st.integers(1, 8))
    events = [doc(i, draw(st.sampled_from(TENANTS))) for i in range(count)]
    faults = (Faults(), Faults())
    for i in range(count):
        kind = draw(st.sampled_from(["none", "none", "permanent", "transient"]))
        if kind == "none":
            continue
        store = draw(st.sampled_from([0, 1]))
        if kind == "permanent":
            faults[store].writes.append(Fault(f"e{i}", draw(st.sampled_from(PER_EVENT))))
        else:
            error = draw(st.sampled_from(TRANSIENT))
            faults[store].writes.append(Fault(f"e{i}", error, times=draw(st.integers(1, 4))))
    # A store that ends every unit of work past a size: the batch must still
    # be applied, in smaller units (docs/adr/0021-transaction-bounds.md).
    faults[draw(st.sampled_from([0, 1]))].max_entities_per_unit = draw(
        st.none() | st.integers(1, 4)
    )
    return events, faults[0], faults[1]


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_every_record_ends_applied_or_dead_lettered_alike_in_both_stores(
    run: tuple[list[Event], Faults, Faults],
) -> None:
    events, graph_faults, vector_faults = run

    async def scenario() -> None:
        p, sink, graph, vector = build(graph_faults, vector_faults)
        records = [raw(i, e) for i, e in enumerate(events)]
        decisions, rounds = await drive(p, records)
        assert decisions[-1].commit == len(events), decisions
        refused = {
            f.marker
            for f in graph_faults.writes + vector_faults.writes
            if f.times is None and not is_transient(f.error("x"))
        }
        expected_letters = sorted(int(marker[1:]) for marker in refused)
        assert sorted(letter.offset for letter in sink.letters) == expected_letters
        applied = await assert_same_verdicts(graph, vector, events)
        assert applied == {
            str(e.event_id) for i, e in enumerate(events) if i not in expected_letters
        }
        assert await graph.checkpoint(PART) == len(events) - 1
        for i, event in enumerate(events):
            entity = await graph.get_entity(TenantId(event.tenant_id), EntityId(f"e{i}"))
            vec = await vector.get(TenantId(event.tenant_id), EntityId(f"e{i}"))
            assert (entity is None) == (vec is None) == (i in expected_letters)
        assert p.health.ready, p.health.reasons()
        # Attempts are bounded: each event costs a handful of units of work.
        assert graph_faults.attempts + vector_faults.attempts < 200 * len(events)
        assert rounds <= len(events) + 1

    asyncio.run(scenario())


# -- chosen cases -------------------------------------------------------------


@pytest.mark.parametrize("store", ["graph", "vector"])
async def test_units_of_work_a_store_ends_for_their_size_are_applied_smaller(store: str) -> None:
    """A store ends every unit of work that writes more than 3 entities, as a
    server ends a transaction that outlives REDSTRING_TRANSACTION_TIMEOUT_S:
    retrying the same unit would be ended for ever, so the partition's passes
    take fewer records until they fit, and grow again once they pass (ADR
    0021). Everything is applied, from the records in hand."""
    faults = Faults(max_entities_per_unit=3)
    p, sink, graph, vector = build(**{f"{store}_faults": faults})
    events = [doc(i, TENANTS[i % 2]) for i in range(40)]
    decisions, rounds = await drive(p, [raw(i, e) for i, e in enumerate(events)])
    assert decisions[-1].commit == 40 and rounds == 1, decisions
    assert sink.letters == []
    applied = await assert_same_verdicts(graph, vector, events)
    assert applied == {str(e.event_id) for e in events}
    assert faults.ended > 0, "no unit of work was ended: nothing was shown"
    assert p.health.ready, p.health.reasons()
    # Halved at each end and doubled after each pass that fits: a few ends
    # per size probed, never one per record.
    assert faults.ended < 20


async def test_an_event_one_store_refuses_is_refused_by_both() -> None:
    """What was seen: NaN in an embedding, the vector store refused the event
    while the graph applied it (and everything after it)."""
    vector_faults = Faults(writes=[Fault("e1", ValueError)])
    p, sink, graph, vector = build(vector_faults=vector_faults)
    events = [doc(0, "acme"), doc(1, "acme"), doc(2, "acme")]
    decisions, _ = await drive(p, [raw(i, e) for i, e in enumerate(events)])
    assert decisions[-1].commit == 3
    assert [letter.offset for letter in sink.letters] == [1]
    assert sink.letters[0].reason.startswith("ValueError: ")
    applied = await assert_same_verdicts(graph, vector, events)
    assert applied == {str(events[0].event_id), str(events[2].event_id)}
    assert await graph.get_entity(TenantId("acme"), EntityId("e1")) is None
    assert await graph.get_entity(TenantId("acme"), EntityId("e2")) is not None


async def test_a_store_error_no_event_is_blamed_for_pauses_after_bounded_attempts() -> None:
    graph_faults = Faults(on_open=RuntimeError)
    p, sink, graph, vector = build(graph_faults=graph_faults, max_attempts=4)
    events = [doc(0, "acme"), doc(1, "acme")]
    decisions, _ = await drive(p, [raw(i, e) for i, e in enumerate(events)])
    assert decisions[-1].pause is not None
    assert "RuntimeError, which is not transient" in decisions[-1].pause
    assert pause_reason(decisions[-1].pause) == "store_failed"
    assert graph_faults.attempts == 4
    assert not p.health.ready and sink.letters == []
    await assert_same_verdicts(graph, vector, events)
    assert await vector.checkpoint(PART) == -1  # the other store did not run ahead


async def test_transient_errors_are_retried_until_they_pass() -> None:
    graph_faults = Faults(on_open=TransientStoreError, open_times=12)
    p, sink, graph, vector = build(graph_faults=graph_faults, max_attempts=2)
    events = [doc(0, "acme")]
    decisions, _ = await drive(p, [raw(0, events[0])])
    assert decisions[-1].commit == 1 and sink.letters == []
    assert await assert_same_verdicts(graph, vector, events) == {str(events[0].event_id)}
    assert p.health.ready


async def test_a_stopping_worker_abandons_a_batch_whose_store_keeps_failing() -> None:
    """SIGTERM could not stop a worker whose batch never finished."""
    graph_faults = Faults(on_open=TransientStoreError)
    p, _, graph, vector = build(graph_faults=graph_faults)
    task = asyncio.ensure_future(p.handle(0, [raw(0, doc(0, "acme"))]))
    await until(lambda: graph_faults.attempts >= 5)
    p.stop()
    decision = await asyncio.wait_for(task, timeout=5)
    assert decision == Decision()
    assert await graph.checkpoint(PART) == await vector.checkpoint(PART) == -1


async def test_a_stopping_worker_leaves_a_real_backoff_at_once() -> None:
    graph_faults = Faults(on_open=TransientStoreError)
    embedder = HashingEmbedder(dimension=16)
    g: Any = Faulty(InMemoryGraphStore(), graph_faults)
    p = Projector(
        [
            GraphProjection(g, embedding_dimension=16),
            VectorProjection(InMemoryVectorStore(embedder.identity), embedder),
        ],
        ListSink(),
        topic="events",
        topic_id="",
        control_key=CONTROL_KEY,
        metrics=Metrics(),
        max_backoff=3600.0,
    )
    task = asyncio.ensure_future(p.handle(0, [raw(0, doc(0, "acme"))]))
    await until(lambda: graph_faults.attempts >= 3, pause=0.05)  # 0.1 s + 0.2 s of backoff
    p.stop()
    assert await asyncio.wait_for(task, timeout=1.0) == Decision()


# -- readiness and metrics name no tenant or entity (item 7) --------------------

SECRETS = ("acme", "globex", "e0", "e1", "e2")


def assert_anonymous(p: Projector) -> None:
    for reason in p.health.reasons():
        for secret in SECRETS:
            assert secret not in reason, reason
    for metric in p.metrics.registry.collect():
        # The build's and the Python runtime's families carry versions, not data.
        ours = metric.name.startswith("redstring_") and metric.name != "redstring_build_info"
        for sample in metric.samples:
            assert not ours or set(sample.labels) <= {
                "store",
                "reason",
                "partition",
                "outcome",
                "le",
            }
            for value in sample.labels.values():
                for secret in SECRETS:
                    assert secret not in value, sample


async def test_readiness_names_no_tenant_or_entity_of_a_corrupt_store() -> None:
    class Unit:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            if name == "resolve_entity_ids":

                async def cycle(tenant_id: Any, ids: Any) -> Any:
                    raise AliasCycleError(tenant_id, EntityId("e1"))

                return cycle
            return getattr(self._inner, name)

    class Corrupt(Faulty):
        def unit_of_work(self, partition: Any) -> Any:
            cm = self._inner.unit_of_work(partition)

            class Wrapped:
                async def __aenter__(self) -> Any:
                    return Unit(await cm.__aenter__())

                async def __aexit__(self, *exc: Any) -> Any:
                    return await cm.__aexit__(*exc)

            return Wrapped()

    embedder = HashingEmbedder(dimension=16)
    graph = InMemoryGraphStore()
    corrupt: Any = Corrupt(graph, Faults())
    vector = InMemoryVectorStore(embedder.identity)
    p = Projector(
        [GraphProjection(corrupt, embedding_dimension=16), VectorProjection(vector, embedder)],
        ListSink(),
        topic="events",
        topic_id="",
        control_key=CONTROL_KEY,
        metrics=Metrics(),
        sleep=no_sleep,
    )
    merge = make_event("EntitiesMerged", "acme", {"canonical_id": "e0", "absorbed_ids": ["e1"]})
    decision = await p.handle(0, [raw(0, doc(0, "acme")), raw(1, merge)])
    assert decision.pause is not None and "AliasCycleError" in decision.pause
    assert pause_reason(decision.pause) == "store_corrupt"
    assert not p.health.ready
    assert_anonymous(p)
    # The stores stopped at the same event.
    assert await graph.checkpoint(PART) == await vector.checkpoint(PART) == 0


async def test_readiness_names_no_tenant_or_entity_while_retrying_or_paused() -> None:
    graph_faults = Faults(on_open=TransientStoreError)
    p, _, _, _ = build(graph_faults=graph_faults)
    task = asyncio.ensure_future(p.handle(0, [raw(0, doc(0, "acme"))]))
    await until(lambda: graph_faults.attempts >= 5)
    assert not p.health.ready
    assert "TransientStoreError" in p.health.reasons()[0]
    assert_anonymous(p)
    p.stop()
    await task

    p, _, _, _ = build(graph_faults=Faults(on_open=KeyError), max_attempts=3)
    await p.handle(0, [raw(0, doc(0, "acme"))])
    assert not p.health.ready and "KeyError" in p.health.reasons()[0]
    assert_anonymous(p)

    p, _, _, _ = build(vector_faults=Faults(writes=[Fault("e1", KeyError)]))
    await drive(p, [raw(0, doc(0, "acme")), raw(1, doc(1, "globex")), raw(2, doc(2, "acme"))])
    assert p.health.ready
    assert_anonymous(p)


# -- the hostile corpus through the worker's projector ------------------------

CASES = load_cases()


def _ids(case: HostileCase) -> str:
    return f"{case.cls}: {case.name}"


def corpus_projector(
    case: HostileCase,
) -> tuple[Projector, ListSink, InMemoryGraphStore, InMemoryVectorStore]:
    """Over memory stores, configured as the corpus says (its keys, topic id,
    partition count and age window, where this build has them; the placement
    of a record is judged only for a case that gives its partition)."""
    embedder = HashingEmbedder(dimension=384)
    graph, vector = InMemoryGraphStore(), InMemoryVectorStore(embedder.identity)
    sink = ListSink()
    params = inspect.signature(Projector).parameters
    extra: dict[str, Any] = {}
    if "partitions" in params and getattr(case, "partition", None) is not None:
        extra["partitions"] = getattr(hostile, "PARTITIONS", None)
    if "control_max_age" in params:
        extra["control_max_age"] = getattr(hostile, "MAX_AGE", None)
    p = Projector(
        [GraphProjection(graph, embedding_dimension=384), VectorProjection(vector, embedder)],
        sink,
        topic="events",
        topic_id=getattr(hostile, "TOPIC_ID", ""),
        control_key=getattr(hostile, "CONTROL_KEYS", CONTROL_KEY),
        metrics=Metrics(),
        sleep=no_sleep,
        **extra,
    )
    return p, sink, graph, vector


def corpus_record(case: HostileCase) -> RawRecord:
    record = RawRecord(0, case.key, case.value)
    if "logged_at" in {f.name for f in dataclasses.fields(RawRecord)}:
        record = dataclasses.replace(record, logged_at=case.logged_at_time)  # type: ignore[attr-defined]
    return record


async def through_projector(case: HostileCase) -> list[str]:
    p, sink, graph, vector = corpus_projector(case)
    number = getattr(case, "partition", None) or 0
    part = StreamPartition("events", number, getattr(hostile, "TOPIC_ID", ""))
    decision = await asyncio.wait_for(p.handle(number, [corpus_record(case)]), timeout=60)
    found: list[str] = []
    checkpoints = (await graph.checkpoint(part), await vector.checkpoint(part))
    if checkpoints[0] != checkpoints[1]:
        found.append(f"the stores' checkpoints differ: {checkpoints}")
    if case.expect == "pause":
        if decision.pause is None or checkpoints != (-1, -1):
            found.append(f"expected a pause, got {decision} at {checkpoints}")
        return found
    if decision.commit != 1 and decision.seek != 1:  # a replay request seeks
        found.append(f"expected the partition committed through 0, got {decision}")
    reasons = [letter.reason for letter in sink.letters]
    if case.expect == "dead_letter":
        if len(reasons) != 1 or str(case.reason) not in reasons[0]:
            found.append(f"expected one dead letter with {case.reason!r}, got {reasons}")
        for tenant in ("acme", *([case.tenant] if case.tenant else [])):
            held = await graph.find_entities(TenantId(tenant))
            if held:
                found.append(f"the graph holds entities of {tenant!r}: {held}")
        return found
    if reasons:
        found.append(f"unexpected dead letters: {reasons}")
    assert case.tenant is not None
    tenant = TenantId(case.tenant)
    ids = sorted(str(e.id) for e in await graph.find_entities(tenant))
    if ids != sorted(case.entities):
        found.append(f"graph entities {ids}, expected {sorted(case.entities)}")
    for entity in case.entities:
        if await vector.get(tenant, EntityId(entity)) is None:
            found.append(f"no vector for {entity!r}")
    return found


@pytest.mark.parametrize("case", CASES, ids=_ids)
async def test_every_hostile_case_ends_as_expected_in_both_stores(case: HostileCase) -> None:
    found = await through_projector(case)
    assert not found, found
