"""``redstring skip`` (streams.cli.skip) over the in-memory stores: what it
refuses, and what a skip leaves (a dead letter, both stores past the record)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner

from contracts import signing
from contracts.domain import StreamPartition
from contracts.events import SCHEMA_VERSION, event_to_json, make_event
from contracts.ids import EntityId, EventId, TenantId
from projections.fold import Fold
from streams.cli import main
from streams.ops import skip as skip_procedure
from streams.ops.skip import FetchedRecord, SkipRefused, check_skip, skip
from streams.worker.projector import Projector, RawRecord
from tests.unit.streams.test_projector import KEY, ListSink, doc, projector, raw

PART = StreamPartition("events", 0, "tid")


def newer_value(tenant: str = "a") -> bytes:
    future = json.loads(event_to_json(doc(tenant, "later")))
    future["schema_version"] = SCHEMA_VERSION + 1
    return json.dumps(future).encode()


async def paused_at_1(stores: Any) -> Sequence[Fold[Any]]:
    """Folds whose stores hold offset 0 and stopped at a newer record at 1."""
    p = projector(*stores, ListSink())
    decision = await p.handle(0, [raw(0, doc("a", "x")), RawRecord(1, b"a", newer_value())])
    assert decision.pause is not None
    return p.folds


async def test_the_paused_record_is_dead_lettered_and_both_stores_move_past_it(
    stores: Any,
) -> None:
    folds = await paused_at_1(stores)
    record = FetchedRecord(1, b"a", newer_value())
    skippable = await check_skip(folds, PART, 1, record, KEY)
    shown = skippable.describe()
    assert "DocumentExtracted" in shown and "tenant a" in shown
    assert f"schema_version {SCHEMA_VERSION + 1}" in shown
    sink = ListSink()
    after = await skip(folds, sink, skippable, "redstring-cli:ops")
    assert after == [2, 2]
    [letter] = sink.letters
    assert (letter.partition, letter.offset, letter.key, letter.value) == (
        0,
        1,
        b"a",
        record.value,
    )
    assert "skipped by an operator (redstring skip, redstring-cli:ops)" in letter.reason
    # Once is enough: the stores are past it now.
    with pytest.raises(SkipRefused, match="both stores are past 1 already"):
        await check_skip(folds, PART, 1, record, KEY)


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        (0, "both stores are past 0 already"),
        (2, "graph store needs 1, vector store needs 1; refusing to skip 2"),
        (5, "the record a paused partition waits on is the one at the stores' position, 1"),
    ],
)
async def test_an_offset_other_than_the_stores_position_is_refused(
    stores: Any, offset: int, expected: str
) -> None:
    folds = await paused_at_1(stores)
    with pytest.raises(SkipRefused) as refused:
        await check_skip(folds, PART, offset, FetchedRecord(offset, b"a", newer_value()), KEY)
    assert expected in str(refused.value)


async def test_stores_at_different_positions_are_refused(stores: Any) -> None:
    """A store behind the offset named: not the record a paused partition waits on."""
    folds = await paused_at_1(stores)
    await folds[0].skip_refused(PART, 1)  # the graph store alone is past 1
    with pytest.raises(SkipRefused, match="graph store needs 2, vector store needs 1") as refused:
        await check_skip(folds, PART, 2, FetchedRecord(2, b"a", newer_value()), KEY)
    assert "different positions" in str(refused.value)


async def test_a_skip_stopped_between_the_stores_is_finished_by_running_it_again(
    stores: Any,
) -> None:
    """The command was interrupted after the dead letter and the graph
    store's move (or the vector store failed): the partition stays paused,
    since the vector store needs the record, and running the command again
    must finish the skip, as docs/operations.md says, not refuse it."""
    folds = await paused_at_1(stores)
    await folds[0].skip_refused(PART, 1)  # the graph store alone is past it
    record = FetchedRecord(1, b"a", newer_value())
    skippable = await check_skip(folds, PART, 1, record, KEY)
    assert "the graph store skipped it already" in skippable.describe()
    assert await skip(folds, ListSink(), skippable, "ops") == [2, 2]


async def test_a_store_that_applied_the_newer_event_is_not_skipped_in_the_other(
    stores: Any,
) -> None:
    """A worker of a newer build applied the record to the graph store and
    stopped before the vector store: skipping it there would split them."""
    folds = await paused_at_1(stores)
    value = newer_value()
    event_id = EventId(json.loads(value)["event_id"])
    async with folds[0].store.unit_of_work(PART) as uow:
        await uow.record_applied_events(TenantId("a"), [event_id], datetime.now(UTC))
        await uow.advance_checkpoint(PART, 1)
    with pytest.raises(SkipRefused, match="the graph store applied this event") as refused:
        await check_skip(folds, PART, 1, FetchedRecord(1, b"a", value), KEY)
    assert "upgrade the workers" in str(refused.value)
    assert [await f.next_needed_offset(PART) for f in folds] == [2, 1]


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (FetchedRecord(1, b"a", event_to_json(doc("a", "y"))), "a DocumentExtracted of tenant a"),
        (FetchedRecord(1, b"a", b'{"oops"'), "a value the workers dead-letter themselves"),
        # A newer version under a key that is not its tenant is a dead letter too.
        (FetchedRecord(1, b"b", newer_value("a")), "does not match tenant_id"),
        (FetchedRecord(2, b"a", newer_value()), "holds no record at offset 1"),
        (None, "holds no record at offset 1"),
    ],
)
async def test_a_record_the_workers_do_not_pause_on_is_refused(
    stores: Any, record: FetchedRecord | None, expected: str
) -> None:
    folds = await paused_at_1(stores)
    with pytest.raises(SkipRefused) as refused:
        await check_skip(folds, PART, 1, record, KEY)
    assert expected in str(refused.value)
    assert [await f.next_needed_offset(PART) for f in folds] == [1, 1]


async def _skipped_then_replayed(
    stores: Any, newer_tenant: str
) -> tuple[Projector, ListSink, list[RawRecord]]:
    """Partition 0: a's record, a newer record of ``newer_tenant`` (skipped by
    an operator once the partition paused on it), a's record, a's replay
    request, a's record. Returns the projector after the skip, its sink and the log."""
    sink = ListSink()
    p = projector(*stores, sink)
    replay = signing.sign(
        make_event("TenantReplayRequested", "a", {"requested_by": "ops"}), KEY, topic_id="tid"
    )
    newer = RawRecord(1, newer_tenant.encode(), newer_value(newer_tenant))
    log = [raw(0, doc("a", "x")), newer, raw(2, doc("a", "y")), raw(3, replay)]
    log.append(raw(4, doc("a", "z")))
    assert (await p.handle(0, log)).pause is not None
    record = FetchedRecord(1, newer.key, newer.value)
    await skip(p.folds, sink, await check_skip(p.folds, PART, 1, record, KEY), "ops")
    p.health.paused.clear()  # the watchdog's resume (WorkerLoop.check_skipped)
    return p, sink, log


async def test_a_replay_steps_over_another_tenants_skipped_newer_record(stores: Any) -> None:
    """A's rebuild window rescans the partition from the log start and meets
    b's newer record, which no store would apply (the window applies a's
    events only, and the stores are past it): it must not pause the
    partition again (every tenant on it waited for a second skip)."""
    p, sink, log = await _skipped_then_replayed(stores, "b")
    decision = await p.handle(0, log[2:])
    assert decision.seek == 0 and decision.reason == "replay"
    decision = await p.handle(0, log)
    assert decision.pause is None and decision.commit == 5, decision
    assert p.health.ready
    graph = stores[0]
    for entity in ("x", "y", "z"):
        assert await graph.get_entity(TenantId("a"), EntityId(entity)) is not None
    assert [letter.offset for letter in sink.letters] == [1]  # not dead-lettered again


async def test_a_record_no_store_would_apply_is_not_skipped(stores: Any) -> None:
    """A's rebuild window has reached b's skipped newer record: the stores
    need its offset, but the workers step over it, so the command refuses
    (it would dead-letter it a second time for nothing)."""
    p, sink, log = await _skipped_then_replayed(stores, "b")
    assert (await p.handle(0, log[2:])).seek == 0
    await p.handle(0, log[:1])
    assert [await f.next_needed_offset(PART) for f in p.folds] == [1, 1]
    record = FetchedRecord(1, b"b", newer_value("b"))
    with pytest.raises(SkipRefused, match="no store would apply this record now"):
        await check_skip(p.folds, PART, 1, record, KEY)
    assert [letter.offset for letter in sink.letters] == [1]


async def test_a_replay_of_the_tenant_pauses_again_on_its_own_newer_record(
    stores: Any,
) -> None:
    """The rebuilt tenant's own newer record is one its window would apply:
    the rebuild pauses on it, and an operator's second skip lets it finish
    (a build that cannot read a tenant's event never drops it unasked)."""
    p, sink, log = await _skipped_then_replayed(stores, "a")
    assert (await p.handle(0, log[2:])).seek == 0
    decision = await p.handle(0, log)
    assert decision.pause is not None and "Upgrade the workers" in decision.pause
    assert [await f.next_needed_offset(PART) for f in p.folds] == [1, 1]
    record = FetchedRecord(1, b"a", newer_value("a"))
    await skip(p.folds, sink, await check_skip(p.folds, PART, 1, record, KEY), "ops")
    p.health.paused.clear()
    decision = await p.handle(0, log[2:])
    assert decision.pause is None and decision.commit == 5, decision
    assert [letter.offset for letter in sink.letters] == [1, 1]


class _Closing(ListSink):
    def close(self) -> None:
        pass


def _stand_in(monkeypatch: pytest.MonkeyPatch, folds: Sequence[Fold[Any]]) -> _Closing:
    """The command over memory stores and a list sink instead of Kafka."""
    sink = _Closing()

    class _NoStores:
        async def aclose(self) -> None:
            pass

    async def open_folds(settings: Any) -> tuple[Any, Sequence[Fold[Any]]]:
        return _NoStores(), folds

    monkeypatch.setattr(skip_procedure, "topic_partition", lambda settings, partition: PART)
    monkeypatch.setattr(
        skip_procedure,
        "fetch_record",
        lambda settings, partition, offset: FetchedRecord(1, b"a", newer_value()),
    )
    monkeypatch.setattr(skip_procedure, "open_folds", open_folds)
    monkeypatch.setattr(skip_procedure, "dead_letter_sink", lambda settings: sink)
    monkeypatch.setenv("REDSTRING_CONTROL_KEY", KEY.decode())
    return sink


def test_the_command_refuses_without_a_terminal_unless_yes(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Synchronous: the command runs its own event loop.
    folds = asyncio.run(paused_at_1(stores))

    def needed() -> list[int]:
        async def ask() -> list[int]:
            return [await f.next_needed_offset(PART) for f in folds]

        return asyncio.run(ask())

    sink = _stand_in(monkeypatch, folds)
    runner = CliRunner()
    refused = runner.invoke(main, ["skip", "--partition", "0", "--offset", "1"])
    assert refused.exit_code == 1
    assert "DocumentExtracted of tenant a" in refused.output
    assert "Refusing without a terminal; pass --yes" in refused.output
    assert sink.letters == []
    assert needed() == [1, 1]

    wrong = runner.invoke(main, ["skip", "--partition", "0", "--offset", "0", "--yes"])
    assert wrong.exit_code == 1 and "both stores are past 0 already" in wrong.output
    assert sink.letters == []

    done = runner.invoke(main, ["skip", "--partition", "0", "--offset", "1", "--yes"])
    assert done.exit_code == 0, done.output
    assert "the stores now need 2" in done.output
    assert [letter.offset for letter in sink.letters] == [1]
    assert needed() == [2, 2]
