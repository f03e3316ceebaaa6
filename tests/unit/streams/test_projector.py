"""The projector's decisions for one partition, on the in-memory stores."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts import signing
from contracts.events import SCHEMA_VERSION, Event, event_to_json, make_event
from contracts.ids import EntityId, TenantId
from projections.graph import GraphProjection
from projections.vector import VectorProjection
from streams.worker.metrics import Metrics
from streams.worker.projector import DeadLetter, Probe, Projector, RawRecord

KEY = b"control-key"


class ListSink:
    """Dead letters kept in a list: the projector's side of the contract only."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    async def send(self, letters: Sequence[DeadLetter]) -> None:
        self.letters.extend(letters)


class Flaky:
    """Wraps a store; its units of work fail ``times`` times before working."""

    def __init__(self, inner: Any, times: int) -> None:
        self._inner, self.times = inner, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def unit_of_work(self, partition: Any) -> Any:
        if self.times > 0:
            self.times -= 1
            raise ConnectionError("store unavailable")
        return self._inner.unit_of_work(partition)


def doc(tenant: str, *ids: str) -> Event:
    return make_event(
        "DocumentExtracted",
        tenant,
        {
            "document_id": "d",
            "extraction_model": "m",
            "entities": [{"id": i, "name": i, "type": "Thing"} for i in ids],
        },
    )


def newer(offset: int, tenant: str = "a") -> RawRecord:
    """A well-formed envelope of a newer schema version, keyed by its tenant."""
    future = json.loads(event_to_json(doc(tenant, "later")))
    future["schema_version"] = SCHEMA_VERSION + 1
    return RawRecord(offset, tenant.encode(), json.dumps(future).encode())


def raw(offset: int, event: Event) -> RawRecord:
    return RawRecord(offset, event.tenant_id.encode(), event_to_json(event))


def projector(
    graph: Any,
    vector: Any,
    sink: ListSink,
    probe: Probe | None = None,
    log_start: Callable[[int], Awaitable[int]] | None = None,
) -> Projector:
    embedder = HashingEmbedder(dimension=16)
    return Projector(
        [GraphProjection(graph, embedding_dimension=16), VectorProjection(vector, embedder)],
        sink,
        topic="events",
        topic_id="tid",
        control_key=KEY,
        metrics=Metrics(),
        max_backoff=0.01,
        probe=probe,
        log_start=log_start,
    )


async def test_a_batch_is_applied_and_the_stores_position_committed(stores: Any) -> None:
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    decision = await p.handle(0, [raw(0, doc("a", "x")), raw(1, doc("b", "y"))])
    assert decision.commit == 2 and decision.seek is None
    assert await graph.get_entity(TenantId("b"), EntityId("y")) is not None
    assert await vector.get(TenantId("a"), EntityId("x")) is not None


async def test_a_poison_record_is_dead_lettered_and_the_rest_applied(stores: Any) -> None:
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    poison = RawRecord(1, b"a", b'{"event_type": "DocumentExtracted", "oops": true}')
    decision = await p.handle(0, [raw(0, doc("a", "x")), poison, raw(2, doc("a", "z"))])
    assert decision.commit == 3
    assert [(letter.offset, letter.value) for letter in sink.letters] == [(1, poison.value)]
    assert "invalid DocumentExtracted" in sink.letters[0].reason
    assert await graph.get_entity(TenantId("a"), EntityId("z")) is not None


async def test_a_batch_past_the_stores_position_is_dropped_and_sought_back(stores: Any) -> None:
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    decision = await p.handle(0, [raw(5, doc("a", "x"))])
    assert decision.seek == 0
    assert await graph.get_entity(TenantId("a"), EntityId("x")) is None


async def test_redelivered_records_are_skipped(stores: Any) -> None:
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    await p.handle(0, [raw(0, doc("a", "x"))])
    decision = await p.handle(0, [raw(0, doc("a", "x"))])
    assert decision.commit == 1 and decision.applied == 0


async def test_a_newer_schema_version_pauses_the_partition_after_the_prefix(stores: Any) -> None:
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    future = json.loads(event_to_json(doc("a", "later")))
    future["schema_version"] = SCHEMA_VERSION + 1
    records = [raw(0, doc("a", "x")), RawRecord(1, b"a", json.dumps(future).encode())]
    decision = await p.handle(0, records)
    assert decision.pause is not None and "Upgrade the workers" in decision.pause
    assert not p.health.ready and sink.letters == []
    assert await graph.get_entity(TenantId("a"), EntityId("x")) is not None
    assert await p.next_needed(0) == 1  # the newer event is still needed
    assert (await p.handle(0, [raw(1, doc("a", "y"))])).commit is None


async def test_a_replay_request_seeks_back_to_the_log_start(stores: Any) -> None:
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    await p.handle(0, [raw(0, doc("a", "x")), raw(1, doc("b", "y"))])
    replay = signing.sign(
        make_event("TenantReplayRequested", "a", {"requested_by": "ops"}), KEY, topic_id="tid"
    )
    decision = await p.handle(0, [raw(2, replay), raw(3, doc("b", "z"))])
    assert decision.seek == 0
    assert await graph.get_entity(TenantId("a"), EntityId("x")) is None  # deleted, to be rebuilt
    decision = await p.handle(
        0, [raw(0, doc("a", "x")), raw(1, doc("b", "y")), raw(2, replay), raw(3, doc("b", "z"))]
    )
    assert decision.commit == 4
    assert await graph.get_entity(TenantId("a"), EntityId("x")) is not None
    assert await graph.get_entity(TenantId("b"), EntityId("z")) is not None


async def test_the_log_start_is_asked_only_for_a_batch_with_a_control_event(stores: Any) -> None:
    """The log's start is a round trip through the consumer's thread, which
    waits behind its fetches under a backlog (about a second per batch was
    measured): only a replay request or an erasure needs it, for the window
    it opens, and a replay is then read from it."""
    graph, vector = stores
    asked: list[int] = []

    async def log_start(partition: int) -> int:
        asked.append(partition)
        return 1  # record 0 was deleted by retention

    p = projector(graph, vector, ListSink(), log_start=log_start)
    assert (await p.handle(0, [raw(1, doc("a", "x")), raw(2, doc("b", "y"))])).commit is None
    assert (await p.handle(0, [raw(0, doc("a", "w")), raw(1, doc("a", "x"))])).commit == 2
    assert (await p.handle(0, [raw(2, doc("b", "y"))])).commit == 3
    assert asked == []
    replay = signing.sign(
        make_event("TenantReplayRequested", "a", {"requested_by": "ops"}), KEY, topic_id="tid"
    )
    decision = await p.handle(0, [raw(3, replay), raw(4, doc("b", "z"))])
    assert asked == [0] and decision.seek == 1  # from the log's start, not offset 0


async def test_replay_progress_follows_the_rebuild_window(stores: Any) -> None:
    """redstring_rebuild_progress_ratio: 0 when a replay request has opened the window,
    the scanned fraction while it is rescanned, 1.0 once both stores closed it."""
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    await p.handle(0, [raw(o, doc("a", f"x{o}")) for o in range(4)])
    assert await p.replay_progress(0) == 1.0
    replay = signing.sign(
        make_event("TenantReplayRequested", "a", {"requested_by": "ops"}), KEY, topic_id="tid"
    )
    assert (await p.handle(0, [raw(4, replay)])).seek == 0
    assert await p.replay_progress(0) == 0.0
    await p.handle(0, [raw(0, doc("a", "x0"))])
    assert await p.replay_progress(0) == 0.25
    await p.handle(0, [raw(o, doc("a", f"x{o}")) for o in range(1, 4)] + [raw(4, replay)])
    assert await p.replay_progress(0) == 1.0


async def test_an_unsigned_control_event_is_dead_lettered_and_deletes_nothing(stores: Any) -> None:
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    await p.handle(0, [raw(0, doc("a", "x"))])
    forged = make_event("TenantErased", "a", {"requested_by": "mallory"})
    decision = await p.handle(0, [raw(1, forged)])
    assert decision.commit == 2
    assert "unsigned" in sink.letters[0].reason
    assert await graph.get_entity(TenantId("a"), EntityId("x")) is not None


async def test_store_errors_are_retried_until_the_store_answers(stores: Any) -> None:
    graph, vector = stores
    p = projector(Flaky(graph, times=4), vector, ListSink())
    decision = await p.handle(0, [raw(0, doc("a", "x"))])
    assert decision.commit == 1
    assert p.health.ready  # recovered
    assert p.metrics.store_retries._value.get() == 4


async def test_a_merge_closing_a_cycle_is_dead_lettered(stores: Any) -> None:
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    merge = make_event("EntitiesMerged", "a", {"canonical_id": "x", "absorbed_ids": ["y"]})
    cycle = make_event("EntitiesMerged", "a", {"canonical_id": "y", "absorbed_ids": ["x"]})
    decision = await p.handle(0, [raw(0, doc("a", "x", "y")), raw(1, merge), raw(2, cycle)])
    assert decision.commit == 3
    assert [letter.offset for letter in sink.letters] == [2]
    assert "cycle" in sink.letters[0].reason


async def test_a_rescan_for_a_replay_does_not_dead_letter_a_record_again(stores: Any) -> None:
    """Found end to end: a batch holding a replay request and, after it, a poison
    value dead-lettered the poison, ended at the request, rescanned from the log
    start and met the poison again. Nothing past an unseen request is judged in
    that batch, and nothing at or below both checkpoints is dead-lettered again."""
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    replay = signing.sign(
        make_event("TenantReplayRequested", "a", {"requested_by": "ops"}), KEY, topic_id="tid"
    )
    log = [
        raw(0, doc("a", "x")),
        RawRecord(1, b"b", b"not json"),
        raw(2, replay),
        RawRecord(3, b"b", b"not json either"),
    ]
    await p.handle(0, log[:2])
    assert [letter.offset for letter in sink.letters] == [1]
    decision = await p.handle(0, log[2:])
    assert decision.seek == 0
    assert [letter.offset for letter in sink.letters] == [1]
    decision = await p.handle(0, log)
    assert decision.commit == 4
    assert [letter.offset for letter in sink.letters] == [1, 3]


class DiesOnFirstSend(ListSink):
    """The worker is killed while the dead letter is being written."""

    def __init__(self) -> None:
        super().__init__()
        self.died = False

    async def send(self, letters: Sequence[DeadLetter]) -> None:
        if not self.died:
            self.died = True
            raise asyncio.CancelledError
        await super().send(letters)


async def test_a_refused_event_is_not_skipped_before_its_dead_letter_is_written(
    stores: Any,
) -> None:
    graph, vector = stores
    merge = make_event("EntitiesMerged", "a", {"canonical_id": "x", "absorbed_ids": ["y"]})
    cycle = make_event("EntitiesMerged", "a", {"canonical_id": "y", "absorbed_ids": ["x"]})
    batch = [raw(0, doc("a", "x", "y")), raw(1, merge), raw(2, cycle), raw(3, doc("a", "z"))]
    sink = DiesOnFirstSend()
    with pytest.raises(asyncio.CancelledError):
        await projector(graph, vector, sink).handle(0, batch)
    # Killed before the letter was written: neither store moved past the event.
    restarted = projector(graph, vector, sink)
    assert await restarted.next_needed(0) == 2
    decision = await restarted.handle(0, batch[2:])
    assert [letter.offset for letter in sink.letters] == [2]
    # The records after it are in hand: applied without reading them again.
    assert decision.commit == 4
    assert await graph.get_entity(TenantId("a"), EntityId("z")) is not None
    assert await vector.get(TenantId("a"), EntityId("z")) is not None


async def test_refusals_in_one_batch_are_each_dead_lettered_and_the_rest_applied(
    stores: Any,
) -> None:
    """Every refused merge of a batch is dead-lettered and skipped, and the
    records between and after them are applied in the same call: a refusal
    costs no round trip to Kafka (issue 14: a backlog with many refusals seeked
    back once per refusal)."""
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    merge = make_event("EntitiesMerged", "a", {"canonical_id": "x", "absorbed_ids": ["y"]})
    cycle = make_event("EntitiesMerged", "a", {"canonical_id": "y", "absorbed_ids": ["x"]})
    again = make_event("EntitiesMerged", "a", {"canonical_id": "y", "absorbed_ids": ["x"]})
    batch = [
        raw(0, doc("a", "x", "y")),
        raw(1, merge),
        raw(2, cycle),
        raw(3, doc("a", "u")),
        raw(4, again),
        raw(5, doc("a", "v")),
    ]
    decision = await p.handle(0, batch)
    assert decision.commit == 6 and decision.seek is None
    assert [letter.offset for letter in sink.letters] == [2, 4]
    for entity in ("u", "v"):
        assert await graph.get_entity(TenantId("a"), EntityId(entity)) is not None
        assert await vector.get(TenantId("a"), EntityId(entity)) is not None


async def test_records_read_again_after_a_refusal_are_not_dead_lettered_twice(
    stores: Any,
) -> None:
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    merge = make_event("EntitiesMerged", "a", {"canonical_id": "x", "absorbed_ids": ["y"]})
    cycle = make_event("EntitiesMerged", "a", {"canonical_id": "y", "absorbed_ids": ["x"]})
    poison = RawRecord(3, b"a", b"not json")
    batch = [raw(0, doc("a", "x", "y")), raw(1, merge), raw(2, cycle), poison]
    assert (await p.handle(0, batch)).commit == 4
    # Delivered again (a seek back, a restart): nothing is dead-lettered twice.
    assert (await p.handle(0, batch)).commit == 4
    assert sorted(letter.offset for letter in sink.letters) == [2, 3]


class CountingLedger:
    """Wraps a store; counts direct ledger reads (outside units of work)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name in {"checkpoint", "rebuild_markers"}:

            async def counted(*args: Any, **kwargs: Any) -> Any:
                self.reads += 1
                return await attr(*args, **kwargs)

            return counted
        return attr


async def test_a_steady_batch_reads_no_position_outside_its_units_of_work(stores: Any) -> None:
    graph, vector = stores
    counted = CountingLedger(graph), CountingLedger(vector)
    p = projector(counted[0], counted[1], ListSink())
    assert (await p.handle(0, [raw(0, doc("a", "x"))])).commit == 1
    before = [c.reads for c in counted]
    decision = await p.handle(0, [raw(1, doc("a", "y")), raw(2, doc("b", "z"))])
    assert decision.commit == 3
    assert [c.reads for c in counted] == before  # the position came from the folds


async def test_a_worker_whose_remembered_position_is_stale_still_fences(stores: Any) -> None:
    """Another worker moved the stores on since this one's last batch: records
    already applied are skipped, and records past the stores' position are
    refused and sought back from, as if nothing were remembered."""
    graph, vector = stores
    first, second = projector(graph, vector, ListSink()), projector(graph, vector, ListSink())
    assert (await first.handle(0, [raw(0, doc("a", "x"))])).commit == 1
    # The partition moves to another worker, which applies 1 and 2.
    assert (await second.handle(0, [raw(1, doc("a", "y")), raw(2, doc("a", "z"))])).commit == 3
    # The first worker, remembering 1, is handed 1..3 again (a zombie batch).
    decision = await first.handle(
        0, [raw(1, doc("a", "y")), raw(2, doc("a", "z")), raw(3, doc("a", "w"))]
    )
    assert decision.commit == 4 and decision.applied == 1
    # A stale position that is ahead: the stores were rebuilt from 0 meanwhile.
    fresh_graph, fresh_vector = (
        InMemoryGraphStore(),
        InMemoryVectorStore(HashingEmbedder(dimension=16).identity),
    )
    ahead = projector(fresh_graph, fresh_vector, ListSink())
    ahead._needed[0] = 4  # what it remembered from the old stores
    decision = await ahead.handle(0, [raw(4, doc("a", "v"))])
    assert decision.seek == 0
    assert await fresh_graph.get_entity(TenantId("a"), EntityId("v")) is None


@pytest.mark.parametrize("start", [2, 3, 4])
async def test_a_stale_position_does_not_pause_on_a_newer_record_the_stores_do_not_wait_on(
    stores: Any, start: int
) -> None:
    """Found by ``make soak`` (simulation seed 5303): another worker applied a
    replay request, so the stores need the log from its start again, while
    this worker remembers a position past the request. Handed the rest of the
    log, up to a newer schema version's record, it paused on that record;
    the stores did not wait on it, so neither the watchdog nor ``redstring
    skip`` (which wants both stores at it) could ever release the partition.
    A newer record pauses only a partition whose stores wait on it: this one
    seeks back to the rebuild window."""
    graph, vector = stores
    first, second = projector(graph, vector, ListSink()), projector(graph, vector, ListSink())
    replay = signing.sign(
        make_event("TenantReplayRequested", "a", {"requested_by": "ops"}), KEY, topic_id="tid"
    )
    log = [
        raw(0, doc("a", "x")),
        raw(1, doc("b", "y")),
        raw(2, replay),
        RawRecord(3, b"b", b"not json"),
        newer(4, "b"),
    ]
    assert (await first.handle(0, log[:2])).commit == 2
    assert (await second.handle(0, log[2:3])).seek == 0
    first._needed[0] = start  # what it remembers from batches of its own
    decision = await first.handle(0, log[start:])
    assert decision.pause is None and decision.seek == 0, decision
    assert first.health.ready, first.health.reasons()
    assert await first.next_needed(0) == 0


async def test_a_partition_starts_writing_while_the_next_one_decodes(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoding is CPU work on the event loop: the stores should be writing one
    partition's records while the next partition's are decoded, not wait until
    the whole batch is decoded."""
    import streams.worker.projector as module

    graph, vector = stores
    trace: list[tuple[str, bytes | None]] = []
    real_decode = module.decode

    def traced_decode(offset: int, key: bytes | None, *args: Any, **kwargs: Any) -> Any:
        trace.append(("decode", key))
        return real_decode(offset, key, *args, **kwargs)

    monkeypatch.setattr(module, "decode", traced_decode)
    p = projector(graph, vector, ListSink())
    for fold in p.folds:
        real_apply = fold.apply

        async def traced_apply(
            partition: Any, records: Any, _real: Any = real_apply, **kw: Any
        ) -> Any:
            trace.append(("apply", records[0].tenant_id.encode()))
            return await _real(partition, records, **kw)

        monkeypatch.setattr(fold, "apply", traced_apply)
    batches = {
        0: [raw(i, doc("a", f"x{i}")) for i in range(40)],
        1: [raw(i, doc("b", f"y{i}")) for i in range(40)],
    }
    await asyncio.gather(*(p.handle(part, records) for part, records in batches.items()))
    first_apply = trace.index(("apply", b"a"))
    last_decode_of_b = max(i for i, step in enumerate(trace) if step == ("decode", b"b"))
    assert first_apply < last_decode_of_b, trace
    assert await graph.get_entity(TenantId("b"), EntityId("y39")) is not None


async def test_a_remembered_position_ahead_of_records_already_applied_is_checked(
    stores: Any,
) -> None:
    """Records that all lie below the remembered position never reach a fold,
    so the projector asks the stores before committing that position."""
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    p._needed[0] = 5  # remembered, but the stores hold nothing yet
    decision = await p.handle(0, [raw(0, doc("a", "x")), raw(1, doc("a", "y"))])
    assert decision.commit == 2
    assert await graph.get_entity(TenantId("a"), EntityId("y")) is not None


async def test_a_batch_with_a_hole_applies_only_up_to_the_hole(stores: Any) -> None:
    """Faust can hand the agent records from before and after one of its own
    seeks in one batch (issue 14: a seek to the committed offset while records
    were buffered). The stores must never move past records nobody applied."""
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    batch = [raw(0, doc("a", "x")), raw(1, doc("b", "y")), raw(4, doc("c", "z"))]
    decision = await p.handle(0, batch)
    assert decision.seek == 2 and decision.commit is None
    assert await graph.get_entity(TenantId("c"), EntityId("z")) is None
    assert await vector.get(TenantId("c"), EntityId("z")) is None
    assert await p.next_needed(0) == 2
    # The gap read at last: everything lands, nothing twice.
    decision = await p.handle(0, [raw(2, doc("d", "u")), raw(3, doc("e", "v")), batch[2]])
    assert decision.commit == 5
    for tenant, entity in (("d", "u"), ("e", "v"), ("c", "z")):
        assert await graph.get_entity(TenantId(tenant), EntityId(entity)) is not None


async def test_records_repeated_inside_a_batch_are_read_once(stores: Any) -> None:
    """A seek back while records were buffered delivers some offsets twice."""
    graph, vector = stores
    p = projector(graph, vector, ListSink())
    a, b, c = raw(0, doc("a", "x")), raw(1, doc("b", "y")), raw(2, doc("c", "z"))
    decision = await p.handle(0, [a, b, a, b, c])
    assert decision.commit == 3
    assert await graph.get_entity(TenantId("c"), EntityId("z")) is not None


async def test_offsets_the_broker_says_hold_no_record_are_not_a_hole(stores: Any) -> None:
    """A transactional producer's commit markers take offsets that no consumer
    is handed: the broker, asked about the hole, tells them from a lost record."""
    graph, vector = stores
    log = {0: doc("a", "x"), 1: doc("a", "y"), 3: doc("b", "z"), 6: doc("c", "w")}
    asked: list[int] = []

    async def first_record_at(partition: int, offset: int) -> int | None:
        asked.append(offset)
        return min((o for o in log if o >= offset), default=None)

    p = projector(graph, vector, ListSink(), probe=first_record_at)
    decision = await p.handle(0, [raw(o, e) for o, e in log.items()])
    assert decision.commit == 7
    assert asked == [2, 4]
    assert await graph.get_entity(TenantId("c"), EntityId("w")) is not None
    # A record the consumer did not hand over is not stepped over.
    log[7], log[8] = doc("d", "v"), doc("e", "u")
    decision = await p.handle(0, [raw(8, log[8])])
    assert decision.seek == 7
    assert await graph.get_entity(TenantId("e"), EntityId("u")) is None


class Counting:
    """Wraps a store; counts its ledger reads."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def rebuild_markers(self, partition: Any) -> Any:
        self.reads.append("rebuild_markers")
        return await self._inner.rebuild_markers(partition)

    async def checkpoint(self, partition: Any) -> int:
        self.reads.append("checkpoint")
        return int(await self._inner.checkpoint(partition))


async def test_the_lag_view_reads_each_store_twice_a_partition(stores: Any) -> None:
    """The lag timer asks every held partition's stores on each tick: the
    markers once (the position is computed from them) and the checkpoint only
    when no rebuild window is open."""
    graph, vector = (Counting(store) for store in stores)
    p = projector(graph, vector, ListSink())
    await p.handle(0, [raw(0, doc("a", "x")), raw(1, doc("b", "y"))])
    graph.reads.clear()
    vector.reads.clear()
    view = await p.stores_view(0)
    assert view == {"graph": (2, []), "vector": (2, [])}
    assert graph.reads == vector.reads == ["rebuild_markers", "checkpoint"]
    replay = signing.sign(
        make_event("TenantReplayRequested", "a", {"requested_by": "ops"}), KEY, topic_id="tid"
    )
    await p.handle(0, [raw(2, replay)])
    graph.reads.clear()
    view = await p.stores_view(0)
    assert view["graph"][0] == 0 and len(view["graph"][1]) == 1
    assert graph.reads == ["rebuild_markers"]
