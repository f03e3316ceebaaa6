"""Control events bound to their topic, key and time, and records bound to
their partition (issue 15, items 3 and 5; docs/adr/0008-control-event-binding.md)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr

from contracts import signing
from contracts.domain import ErasureTombstone, StreamPartition
from contracts.errors import SchemaVersionTooNewError, SignatureError
from contracts.events import SCHEMA_VERSION, Event, event_to_json, make_event
from contracts.ids import EntityId, TenantId
from contracts.signing import DEFAULT_KEY_ID, ControlKeys
from projections.graph import GraphProjection
from projections.records import LogRecord
from streams.kafka.partitioning import partition_for
from streams.ops.dry_run import fold_lines
from streams.settings import Settings
from streams.worker.app import _logged_at
from streams.worker.decode import decode
from streams.worker.projector import RawRecord
from tests.scenarios.oracle import Oracle
from tests.unit.streams.test_projector import ListSink, doc, projector, raw

TOPIC = "4q0mNnUeQq2f9uYc0xq6Kw"
WHEN = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(hours=24)
OLD = ControlKeys({"2026-05": b"old secret"})
ROTATED = ControlKeys({"2026-05": b"old secret", "2026-11": b"new secret"})


def erase(tenant: str = "acme", when: datetime = WHEN) -> Event:
    return make_event("TenantErased", tenant, {"requested_by": "ops"}, occurred_at=when)


# -- signing and verification -----------------------------------------------------


def test_the_signature_names_its_key_and_verifies_for_its_topic_only() -> None:
    signed = signing.sign(erase(), ROTATED, topic_id=TOPIC)
    assert signed.key_id == "2026-11"  # the newest signs
    signing.verify(signed, ROTATED, topic_id=TOPIC)
    for other in ("", "another-topic", TOPIC.lower()):
        with pytest.raises(SignatureError, match="signed for another topic"):
            signing.verify(signed, ROTATED, topic_id=other)


def test_the_key_id_is_covered() -> None:
    signed = signing.sign(erase(), ROTATED, topic_id=TOPIC)
    moved = signed.model_copy(update={"key_id": "2026-05"})
    with pytest.raises(SignatureError, match="bad signature"):
        signing.verify(moved, ROTATED, topic_id=TOPIC)
    unknown = signed.model_copy(update={"key_id": "2027-01"})
    with pytest.raises(SignatureError, match="which no worker key has"):
        signing.verify(unknown, ROTATED, topic_id=TOPIC)
    bare = signed.model_copy(update={"key_id": None})
    with pytest.raises(SignatureError, match="names no key_id"):
        signing.verify(bare, ROTATED, topic_id=TOPIC)


def test_rotation_keeps_what_the_old_key_signed_valid() -> None:
    before = signing.sign(erase(), OLD, topic_id=TOPIC)
    assert before.key_id == "2026-05"
    signing.verify(before, ROTATED, topic_id=TOPIC)
    after = signing.sign(erase(), ROTATED, topic_id=TOPIC)
    with pytest.raises(SignatureError, match="which no worker key has"):
        signing.verify(after, OLD, topic_id=TOPIC)  # workers first, then signers


def test_a_chosen_key_signs() -> None:
    chosen = ControlKeys(ROTATED.keys, signing_id="2026-05")
    assert signing.sign(erase(), chosen, topic_id=TOPIC).key_id == "2026-05"
    assert signing.sign(erase(), ROTATED, topic_id=TOPIC, key_id="2026-05").key_id == "2026-05"
    with pytest.raises(ValueError, match="not among the keys"):
        ControlKeys(ROTATED.keys, signing_id="nope")
    with pytest.raises(ValueError, match="no control key has the id"):
        signing.sign(erase(), ROTATED, topic_id=TOPIC, key_id="nope")


def test_one_key_alone_is_the_default_id() -> None:
    signed = signing.sign(erase(), b"secret", topic_id=TOPIC)
    assert signed.key_id == DEFAULT_KEY_ID
    signing.verify(signed, ControlKeys({DEFAULT_KEY_ID: b"secret"}), topic_id=TOPIC)


def test_re_signing_replaces_the_key_id_and_signature() -> None:
    once = signing.sign(erase(), OLD, topic_id=TOPIC)
    again = signing.sign(once, ROTATED, topic_id="elsewhere")
    assert again.key_id == "2026-11" and again.signature != once.signature
    signing.verify(again, ROTATED, topic_id="elsewhere")


def test_the_key_list_is_parsed_strictly() -> None:
    assert ControlKeys.parse(" a:x , b:y:z ,") == {"a": b"x", "b": b"y:z"}
    assert ControlKeys.parse("") == {}
    for bad, why in (
        ("a", "id:secret"),
        ("a:", "id:secret"),
        ("a:x,a:y", "given twice"),
        ("-a:x", "must be 1-64"),
        ("a b:x", "must be 1-64"),
    ):
        with pytest.raises(ValueError, match=why):
            ControlKeys.parse(bad)


def test_settings_build_the_key_set() -> None:
    def keys(**values: Any) -> ControlKeys:
        update = {k: SecretStr(v) if k != "control_key_id" else v for k, v in values.items()}
        return Settings().model_copy(update=update).control_keyring()

    assert not keys(control_key="", control_keys="")
    single = keys(control_key="s", control_keys="")
    assert dict(single.keys) == {DEFAULT_KEY_ID: b"s"} and single.signer()[0] == DEFAULT_KEY_ID
    both = keys(control_key="s", control_keys="2026-11:t")
    assert dict(both.keys) == {DEFAULT_KEY_ID: b"s", "2026-11": b"t"}
    assert both.signer() == ("2026-11", b"t")
    chosen = keys(control_key="s", control_keys="2026-11:t", control_key_id=DEFAULT_KEY_ID)
    assert chosen.signer() == (DEFAULT_KEY_ID, b"s")
    with pytest.raises(ValueError, match="different secrets"):
        keys(control_key="s", control_keys="default:t")
    assert Settings().control_max_age == DAY  # the documented default


# -- the age window ---------------------------------------------------------------


def test_the_window_is_judged_against_the_record_timestamp() -> None:
    event = signing.sign(erase(), OLD, topic_id=TOPIC)
    signing.check_age(event, WHEN + DAY, DAY)  # at the edge
    signing.check_age(event, WHEN - signing.MAX_FUTURE, DAY)
    with pytest.raises(SignatureError, match="too old"):
        signing.check_age(event, WHEN + DAY + timedelta(seconds=1), DAY)
    with pytest.raises(SignatureError, match="from the future"):
        signing.check_age(event, WHEN - signing.MAX_FUTURE - timedelta(seconds=1), DAY)
    signing.check_age(event, None, DAY)  # no timestamp (a file): not judged
    signing.check_age(event, WHEN + 100 * DAY, None)  # no window
    document = make_event(
        "DocumentExtracted",
        "acme",
        {"document_id": "d", "extraction_model": "m", "entities": []},
        occurred_at=WHEN,
    )
    signing.check_age(document, WHEN + 100 * DAY, DAY)  # ordinary events: never


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (None, None),
        (-0.001, None),  # Kafka's "no timestamp" is -1 ms
        (0, None),
        (WHEN.timestamp(), WHEN),
        (253402300800.0, datetime.max.replace(tzinfo=UTC)),  # the year 10000
        (2.0**62 / 1000, datetime.max.replace(tzinfo=UTC)),
    ],
)
def test_a_record_timestamp_past_the_year_9999_is_the_latest_time_there_is(
    seconds: float | None, expected: datetime | None
) -> None:
    # A producer sets it on a CreateTime topic, up to what the broker allows;
    # datetime.fromtimestamp raised past 9999, in the agent (streams.worker.app).
    message = type("Message", (), {"timestamp": seconds})()
    logged_at = _logged_at(message)
    assert logged_at == expected
    if expected is not None and expected.year == 9999:
        event = signing.sign(erase(), OLD, topic_id=TOPIC)
        with pytest.raises(SignatureError, match="too old"):  # judged, and refused
            signing.check_age(event, logged_at, DAY)


def test_a_rebuild_years_later_reaches_the_verdicts_of_the_first_read() -> None:
    """The verdict depends on the record alone: an erasure acted on when new
    is honoured by a fresh store built later with the rotated keys; a copy
    re-published a day later is refused both times."""
    erased = signing.sign(erase(), OLD, topic_id=TOPIC)
    extract = doc("acme", "x")
    values = [event_to_json(extract), event_to_json(erased), event_to_json(erased)]
    stamps = [WHEN, WHEN + timedelta(minutes=1), WHEN + DAY + timedelta(minutes=2)]

    def run(keys: ControlKeys) -> Any:
        return asyncio.run(
            fold_lines(
                values,
                keys=[b"acme"] * 3,
                control_key=keys,
                trust_unsigned=False,
                batch_size=10,
                topic_id=TOPIC,
                logged_at=stamps,
                max_age=DAY,
            )
        )

    first, rebuilt = run(OLD), run(ROTATED)
    for result in (first, rebuilt):
        assert [offset for offset, _ in result.dead_letters] == [2]
        assert "too old" in result.dead_letters[0][1]
        assert result.state["tenants"]["acme"]["entities"] == []
    assert first.state == rebuilt.state


# -- partitions -------------------------------------------------------------------


def test_a_record_on_the_wrong_partition_is_dead_lettered() -> None:
    value = event_to_json(doc("acme", "x"))
    right = partition_for("acme", 12)
    ok = decode(0, b"acme", value, None, partition=right, partitions=12)
    assert ok.dead_letter_reason is None and ok.record.event is not None
    wrong = decode(0, b"acme", value, None, partition=(right + 1) % 12, partitions=12)
    assert wrong.record.event is None and wrong.record.tenant_id == "acme"
    assert f"belongs on partition {right} of 12" in str(wrong.dead_letter_reason)
    unknown = decode(0, b"acme", value, None, partition=(right + 1) % 12)
    assert unknown.dead_letter_reason is None  # no partition count: not judged


def test_a_newer_version_on_the_wrong_partition_does_not_pause() -> None:
    value = event_to_json(doc("acme", "x")).replace(
        b'"schema_version":1', f'"schema_version":{SCHEMA_VERSION + 1}'.encode()
    )
    right = partition_for("acme", 4)
    with pytest.raises(SchemaVersionTooNewError):
        decode(0, b"acme", value, None, partition=right, partitions=4)
    wrong = decode(0, b"acme", value, None, partition=(right + 1) % 4, partitions=4)
    assert "belongs on partition" in str(wrong.dead_letter_reason)


async def test_the_projector_dead_letters_a_record_on_the_wrong_partition(stores: Any) -> None:
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    p.partitions = 4
    right = partition_for("acme", 4)
    wrong = (right + 1) % 4
    assert (await p.handle(wrong, [raw(0, doc("acme", "x"))])).commit == 1
    assert [letter.offset for letter in sink.letters] == [0]
    assert "belongs on partition" in sink.letters[0].reason
    assert await graph.get_entity(TenantId("acme"), EntityId("x")) is None
    await p.handle(right, [raw(0, doc("acme", "x"))])
    assert await graph.get_entity(TenantId("acme"), EntityId("x")) is not None


async def test_the_projector_verifies_for_its_topic_and_age(stores: Any) -> None:
    graph, vector = stores
    sink = ListSink()
    p = projector(graph, vector, sink)
    p.control_max_age = DAY
    now = datetime.now(UTC)
    fresh = signing.sign(erase(when=now), b"control-key", topic_id="tid")
    foreign = signing.sign(erase(when=now), b"control-key", topic_id="other")
    await p.handle(
        0,
        [
            raw(0, doc("acme", "x")),
            RawRecord(1, b"acme", event_to_json(foreign), now),
            RawRecord(2, b"acme", event_to_json(fresh), now + 2 * DAY),
        ],
    )
    assert [letter.offset for letter in sink.letters] == [1, 2]
    assert "signed for another topic" in sink.letters[0].reason
    assert "too old" in sink.letters[1].reason
    assert await graph.get_entity(TenantId("acme"), EntityId("x")) is not None


# -- tombstones within one partition ------------------------------------------------


async def test_a_tombstone_judges_only_its_own_partition() -> None:
    """An erasure at offset 5 of partition 0 does not hide the tenant's records
    below offset 5 on partition 1: offsets of two partitions are not comparable.
    The store and the oracle (one per store, fed both partitions) agree."""
    from adapters.memory.graph import InMemoryGraphStore

    graph = InMemoryGraphStore()
    fold = GraphProjection(graph, embedding_dimension=16)
    p0, p1 = (StreamPartition("events", n, "tid") for n in (0, 1))
    erased = signing.sign(erase(), b"k", topic_id="tid")
    log0 = [LogRecord(o, TenantId("acme"), doc("acme", f"a{o}")) for o in range(5)]
    log0.append(LogRecord(5, TenantId("acme"), erased))
    log1 = [LogRecord(o, TenantId("acme"), doc("acme", f"b{o}")) for o in range(3)]
    await fold.apply(p0, log0)
    assert await graph.erasure_tombstone(TenantId("acme")) == ErasureTombstone(
        TenantId("acme"), p0, 5
    )
    await fold.apply(p1, log1)
    oracle = Oracle()
    for record in log0:
        oracle.feed(record.offset, "acme", record.event, partition=0)
    for record in log1:
        oracle.feed(record.offset, "acme", record.event, partition=1)
    expected = sorted(e["id"] for e in oracle.states()["acme"]["entities"])
    assert expected == ["b0", "b1", "b2"]
    stored = await graph.find_entities(TenantId("acme"))
    assert sorted(str(e.id) for e in stored) == expected
