"""Bounds (issue 15): sub-batches cut by records, bytes and entities and
handled in turn; the configurable caps decode applies; the alias chain limit
refused by both folds alike; chunked embedding calls."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import StreamPartition
from contracts.events import event_to_json, make_event
from contracts.limits import EventLimits
from projections.driver import drive
from projections.graph import GraphProjection
from projections.records import LogRecord
from projections.vector import VectorProjection
from streams.worker.bounds import (
    BatchBounds,
    InFlight,
    ReadAhead,
    entity_bound,
    handle_bounded,
    sub_batches,
)
from streams.worker.decode import decode
from streams.worker.intake import Intake
from streams.worker.projector import Decision, RawRecord

PART = StreamPartition("events", 0, "topic-id")


def raw(offset: int, size: int = 10, objects: int = 0) -> RawRecord:
    return RawRecord(offset, b"acme", b"{" * objects + b"x" * (size - objects))


def offsets(batches: Sequence[Sequence[RawRecord]]) -> list[list[int]]:
    return [[r.offset for r in batch] for batch in batches]


def test_sub_batches_are_consecutive_and_within_every_bound() -> None:
    records = [raw(o) for o in range(7)]
    assert offsets(sub_batches(records, BatchBounds(max_records=3))) == [
        [0, 1, 2],
        [3, 4, 5],
        [6],
    ]
    assert offsets(sub_batches(records, BatchBounds(max_bytes=25))) == [
        [0, 1],
        [2, 3],
        [4, 5],
        [6],
    ]
    heavy = [raw(0, objects=3), raw(1, objects=3), raw(2, objects=9), raw(3, objects=1)]
    assert offsets(sub_batches(heavy, BatchBounds(max_entities=6))) == [[0, 1], [2], [3]]


def test_sub_batches_keep_offset_order_and_one_copy_of_each_offset() -> None:
    records = [raw(3), raw(1), raw(2), raw(1), raw(0)]
    assert offsets(sub_batches(records, BatchBounds(max_records=2))) == [[0, 1], [2, 3]]
    assert sub_batches([], BatchBounds(max_records=2)) == []


def test_entities_are_never_undercounted() -> None:
    event = make_event(
        "DocumentExtracted",
        "acme",
        {
            "document_id": "d",
            "extraction_model": "m",
            "entities": [{"id": f"e{i}", "name": "n", "type": "T"} for i in range(5)],
        },
    )
    assert entity_bound(event_to_json(event)) >= 5
    # A member name may be escaped; a structural brace cannot be.
    escaped = event_to_json(event).replace(b'"name"', b'"\\u006eame"')
    assert entity_bound(escaped) >= 5


class Projector:
    def __init__(self, decisions: list[Decision]) -> None:
        self.decisions = decisions
        self.handed: list[list[int]] = []

    async def handle(self, partition: int, records: Sequence[RawRecord]) -> Decision:
        self.handed.append([r.offset for r in records])
        return self.decisions.pop(0)


async def test_sub_batches_are_handed_in_turn_and_the_last_commit_wins() -> None:
    projector = Projector([Decision(commit=2, applied=2), Decision(commit=4, applied=2)])
    records = [raw(o) for o in range(4)]
    decision = await handle_bounded(projector, 0, records, BatchBounds(max_records=2))
    assert projector.handed == [[0, 1], [2, 3]]
    assert decision == Decision(commit=4, applied=4)


async def test_a_seek_or_a_pause_drops_the_rest_of_the_batch() -> None:
    for stop in (Decision(seek=1, applied=1, reason="ahead"), Decision(pause="why")):
        projector = Projector([Decision(commit=2, applied=2), stop, Decision(commit=9)])
        records = [raw(o) for o in range(6)]
        decision = await handle_bounded(projector, 0, records, BatchBounds(max_records=2))
        assert projector.handed == [[0, 1], [2, 3]]
        # The reason too: the loop tells a seek's remnants by it.
        assert (decision.seek, decision.pause, decision.reason) == (
            stop.seek,
            stop.pause,
            stop.reason,
        )
        assert decision.applied == 2 + stop.applied


class SlowProjector:
    """Applies each sub-batch over a drawn number of scheduler turns, and
    records the bytes of values in flight across partitions."""

    def __init__(self, turns: Sequence[int]) -> None:
        self.turns = turns
        self.calls = 0
        self.in_flight = 0
        self.most = 0
        self.handed: dict[int, list[int]] = {}

    async def handle(self, partition: int, records: Sequence[RawRecord]) -> Decision:
        size = sum(len(r.value or b"") for r in records)
        self.in_flight += size
        self.most = max(self.most, self.in_flight)
        self.calls += 1
        for _ in range(self.turns[self.calls % len(self.turns)]):
            await asyncio.sleep(0)
        self.in_flight -= size
        self.handed.setdefault(partition, []).extend(r.offset for r in records)
        return Decision(commit=records[-1].offset + 1, applied=len(records))


@given(
    st.lists(st.lists(st.integers(1, 60), min_size=1, max_size=12), min_size=1, max_size=8),
    st.lists(st.integers(0, 4), min_size=1, max_size=10),
)
def test_partitions_applied_at_once_share_the_in_flight_budget(
    partitions: list[list[int]], turns: list[int]
) -> None:
    bounds = BatchBounds(max_bytes=50, in_flight=InFlight(100))
    batch = {
        p: [raw(o, size) for o, size in enumerate(sizes)] for p, sizes in enumerate(partitions)
    }
    projector = SlowProjector(turns)

    async def run() -> list[Decision]:
        # As the loop applies a batch: every partition at once.
        return await asyncio.gather(
            *(handle_bounded(projector, p, records, bounds) for p, records in batch.items())
        )

    decisions = asyncio.run(asyncio.wait_for(run(), 10))
    largest = max(size for sizes in partitions for size in sizes)
    # Over the budget only by a sub-batch over it alone.
    assert projector.most <= max(100, largest)
    for p, records in batch.items():
        assert projector.handed.get(p, []) == [r.offset for r in records]
        assert decisions[p].applied == len(records)
    assert bounds.in_flight is not None and bounds.in_flight.held == 0


def document(entities: int, keys: int = 0, rels: int = 0) -> bytes:
    props = {f"k{i}": i for i in range(keys)}
    payload = {
        "document_id": "d",
        "extraction_model": "m",
        "entities": [
            {"id": f"e{i}", "name": f"n{i}", "type": "T", "properties": props}
            for i in range(entities)
        ],
        "relationships": [
            {"source": "e0", "target": f"e{i + 1}", "type": "R"} for i in range(rels)
        ],
    }
    return event_to_json(make_event("DocumentExtracted", "acme", payload))


def test_decode_applies_the_configured_caps_and_keeps_its_signature() -> None:
    limits = EventLimits(max_entities=3, max_relationships=1, max_property_keys=2)
    assert decode(0, b"acme", document(4), None).dead_letter_reason is None
    cases = {
        document(4): "4 entities in one event; the limit is 3",
        document(3, rels=2): "2 relationships in one event; the limit is 1",
        document(1, keys=3): "3 property keys; the limit is 2",
    }
    for value, reason in cases.items():
        decoded = decode(0, b"acme", value, None, limits=limits)
        assert decoded.dead_letter_reason is not None
        assert reason in decoded.dead_letter_reason
        assert decoded.record.event is None
    assert decode(0, b"acme", document(3, keys=2, rels=1), None, limits=limits).record.event


def merge(tenant: str, canonical: str, absorbed: str) -> bytes:
    payload = {"canonical_id": canonical, "absorbed_ids": [absorbed]}
    return event_to_json(make_event("EntitiesMerged", tenant, payload))


async def test_a_merge_making_a_chain_too_deep_is_refused_by_both_folds() -> None:
    """A chain of merges n1 -> n0, n2 -> n1, ...: with a limit of 3 hops the
    fourth merge (n4 -> n3) is refused by both stores and dead-lettered; the
    fifth (n5 -> n4) then makes a chain of one hop and applies."""
    embedder = HashingEmbedder(dimension=8)
    graph = InMemoryGraphStore(max_alias_depth=3)
    vector = InMemoryVectorStore(embedder.identity, max_alias_depth=3)
    folds: list[Any] = [
        GraphProjection(graph, embedding_dimension=8),
        VectorProjection(vector, embedder),
    ]
    log = []
    for offset in range(5):
        value = merge("acme", f"n{offset}", f"n{offset + 1}")
        log.append(decode(offset, b"acme", value, None).record)
    result = await drive(folds, PART, log)
    assert sorted(result.failed) == [3]
    assert "REDSTRING_MAX_ALIAS_DEPTH" in result.failed[3].reason
    for fold in folds:
        assert await fold.store.checkpoint(PART) == 4
    tenant = log[0].tenant_id
    assert tenant is not None
    for store in (graph, vector):
        resolved = await store.resolve_entity_ids(tenant, ["n3", "n4", "n5"])  # type: ignore[list-item]
        assert resolved == {"n3": "n0", "n4": "n4", "n5": "n4"}


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(dimension=8)
        self.calls: list[int] = []

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return await super().embed_documents(texts)


async def test_the_vector_fold_embeds_and_writes_in_chunks_with_the_same_result() -> None:
    log: list[LogRecord] = [
        decode(o, b"acme", document(5 + o, keys=1), None).record for o in range(3)
    ]
    states = []
    for chunk in (1000, 4):
        embedder = CountingEmbedder()
        vector = InMemoryVectorStore(embedder.identity)
        fold = VectorProjection(vector, embedder, chunk=chunk)
        await drive([fold], PART, log)
        assert max(embedder.calls) <= chunk
        assert sum(embedder.calls) == 5 + 6 + 7
        tenant = log[0].tenant_id
        assert tenant is not None
        states.append(
            json.dumps(
                [
                    (await vector.get(tenant, f"e{i}")).__repr__()  # type: ignore[arg-type]
                    for i in range(8)
                ]
            )
        )
    assert states[0] == states[1]


BUDGET = 1000


async def gather_batches(sizes: Sequence[int], pauses: Sequence[int]) -> list[list[int]]:
    """The worker's intake in miniature, both of its stages: a reader admits
    each value as it arrives (after a drawn number of scheduler turns) and
    adds it to the batch Faust's ``take_events`` gathers; after a drawn number
    of turns (its timeout) that batch is put into the real Intake, whether or
    not a batch is being written; the applier takes everything put so far and
    writes it for a drawn number of turns. So values are admitted while a
    batch is put and while one is taken, as in the worker. Returns the sizes
    of each batch the applier took."""
    read_ahead = ReadAhead(BUDGET)
    turns = itertools.cycle(pauses)
    taken: list[list[int]] = []

    class Writer:
        async def on_batch(self, batch: Mapping[int, Sequence[RawRecord]]) -> None:
            for _ in range(next(turns)):
                await asyncio.sleep(0)

    def on_taken(batch: Mapping[int, Sequence[RawRecord]]) -> None:
        taken.append([len(r.value or b"") for r in batch[0]])
        read_ahead.give_back(batch)

    intake = Intake(Writer(), max_records=len(sizes) + 1, on_taken=on_taken)
    intake.start()
    gathering: list[RawRecord] = []

    async def reader() -> None:
        for offset, size in enumerate(sizes):
            for _ in range(next(turns) % 2):  # the next value is still being fetched
                await asyncio.sleep(0)
            await read_ahead.admit(size)
            gathering.append(RawRecord(offset, b"acme", b"x" * size))

    task = asyncio.ensure_future(reader())
    while not task.done() or gathering:
        for _ in range(1 + next(turns)):
            await asyncio.sleep(0)
        if gathering:
            batch = list(gathering)
            gathering.clear()
            await intake.put({0: batch})
    await task
    await intake.join()
    await intake.close()
    return taken


@given(
    st.lists(st.integers(0, 2 * BUDGET), max_size=60),
    st.lists(st.integers(0, 5), min_size=1, max_size=10),
)
def test_read_ahead_holds_a_batch_within_its_budget_and_loses_nothing(
    sizes: list[int], pauses: list[int]
) -> None:
    batches = asyncio.run(asyncio.wait_for(gather_batches(sizes, pauses), 10))
    assert [size for batch in batches for size in batch] == sizes
    for batch in batches:
        # Over the budget only by a value over it alone (one such record still
        # moves; empty values, tombstones, weigh nothing).
        assert sum(batch) <= max(BUDGET, max(batch)), batch


async def test_read_ahead_waits_for_the_batch_to_be_taken() -> None:
    read_ahead = ReadAhead(BUDGET)
    await read_ahead.admit(BUDGET + 1)  # the first value always passes
    waiting = asyncio.ensure_future(read_ahead.admit(1))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    read_ahead.release(BUDGET + 1)
    await asyncio.wait_for(waiting, 1)
    assert read_ahead.held == 1


def test_the_fold_command_applies_the_caps_the_settings_give(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """`redstring fold` judges events with the workers' REDSTRING_MAX_* caps,
    not the built-in defaults: the dry run refuses what the workers would."""
    from click.testing import CliRunner

    from streams.cli.fold import fold_command

    events = tmp_path / "events.jsonl"
    lines = [document(3)] + [merge("acme", f"n{i}", f"n{i + 1}") for i in range(3)]
    events.write_bytes(b"\n".join(lines) + b"\n")

    def dead_letters(**env: str) -> list[str]:
        for name in ("REDSTRING_MAX_ENTITIES_PER_EVENT", "REDSTRING_MAX_ALIAS_DEPTH"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        result = CliRunner().invoke(
            fold_command, [str(events), "--out", str(tmp_path / "s"), "--allow-dead-letters"]
        )
        assert result.exit_code == 0, result.output
        return [line for line in result.stderr.splitlines() if line.startswith("dead letter")]

    assert dead_letters() == []
    capped = dead_letters(REDSTRING_MAX_ENTITIES_PER_EVENT="2", REDSTRING_MAX_ALIAS_DEPTH="2")
    assert len(capped) == 2, capped
    assert capped[0].startswith("dead letter: line 1:") and "entities" in capped[0]
    assert capped[1].startswith("dead letter: line 4:") and "REDSTRING_MAX_ALIAS_DEPTH" in capped[1]
