"""``-o json`` of the commands that report (streams.cli.output): one document on
stdout with the keys docs/operations.md lists, notes on stderr, and the tables
unchanged; over the in-memory stores with Kafka's side stood in for."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from typing import Any

import pytest
from click.testing import CliRunner, Result

from adapters.embedding import HashingEmbedder
from contracts.domain import Position, RebuildMarker, StreamPartition
from contracts.ids import TenantId
from streams.cli import main
from streams.kafka import dead_letters, topics
from streams.kafka.dead_letters import StoredLetter
from streams.kafka.topics import PartitionInfo, TopicInfo
from streams.ops import replay, status
from streams.ops.replay import Target
from streams.wiring import Stores
from tests.unit.streams.test_projector import ListSink, doc, projector, raw

INFO = TopicInfo("events", "tid", [PartitionInfo(0, 0, 5), PartitionInfo(1, 3, 3)], "-1")
PART = StreamPartition("events", 0, "tid")


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def document(result: Result) -> Any:
    """stdout as exactly one JSON document (json.loads refuses anything else)."""
    return json.loads(result.stdout)


@pytest.fixture
def memory_stores(stores: Any, monkeypatch: pytest.MonkeyPatch) -> Stores:
    """Both memory stores at offset 1 of partition 0, with a rebuild window of
    tenant b open in the graph store; `open_stores` hands them out."""
    graph, vector = stores

    async def fill() -> None:
        await projector(graph, vector, ListSink()).handle(
            0, [raw(0, doc("a", "x")), raw(1, doc("a", "y"))]
        )
        async with graph.unit_of_work(PART) as uow:
            await uow.put_rebuild_marker(RebuildMarker(TenantId("b"), PART, 0, 4, 1))

    asyncio.run(fill())
    opened = Stores(graph, vector, HashingEmbedder(dimension=16), AsyncExitStack())

    async def open_stores(settings: Any) -> Stores:
        return opened

    monkeypatch.setattr("streams.wiring.open_stores", open_stores)
    return opened


@pytest.fixture
def kafka_status(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status, "describe_topic", lambda settings, clients=None: INFO)
    monkeypatch.setattr(
        status, "committed_offsets", lambda settings, info, clients=None: {0: 2, 1: -1001}
    )


@pytest.mark.usefixtures("memory_stores", "kafka_status")
def test_status_json() -> None:
    shown = document(run("status", "-o", "json"))
    assert shown["topic"] == "events" and shown["topic_id"] == "tid"
    first, second = shown["partitions"]
    assert first == {
        "partition": 0,
        "log_end": 5,
        "committed": 2,
        "graph": 1,
        "vector": 1,
        "lag": 3,
        "rebuilding": [{"store": "graph", "tenant": "b", "done": 2, "total": 4}],
        "throughput": None,
    }
    # Nothing committed: Kafka's -1001 stands for "none", shown as null.
    assert second["committed"] is None and second["lag"] == 3
    table = run("status").stdout.splitlines()
    assert table[0].split() == [
        "partition", "log", "end", "committed", "graph", "vector", "lag", "rebuilding"
    ]  # fmt: skip
    assert table[1].split() == ["0", "5", "2", "1", "1", "3", "b", "2/4"]


def test_dlq_list_and_show_json(monkeypatch: pytest.MonkeyPatch) -> None:
    letters = [
        StoredLetter(0, b"acme", b'{"event_type": "Nope"}', "unknown event_type", 2, 17),
        StoredLetter(1, None, b"\xff not json", "value is not JSON", 0, 3),
    ]
    monkeypatch.setattr(dead_letters, "read_letters", lambda settings, limit=None: letters)
    monkeypatch.setenv("REDSTRING_TOPIC", "events")
    listed = document(run("dlq", "list", "-o", "json"))
    assert listed == {
        "topic": "events.dlq",
        "letters": [
            {
                "dlq_offset": 0,
                "source_partition": 2,
                "source_offset": 17,
                "key": "acme",
                "reason": "unknown event_type",
            },
            {
                "dlq_offset": 1,
                "source_partition": 0,
                "source_offset": 3,
                "key": None,
                "reason": "value is not JSON",
            },
        ],
    }
    shown = document(run("dlq", "show", "0", "-o", "json"))
    assert shown["value"] == '{"event_type": "Nope"}'
    assert shown["value_json"] == {"event_type": "Nope"}
    assert shown["reason"] == "unknown event_type" and shown["source_offset"] == 17
    raw_value = document(run("dlq", "show", "1", "-o", "json"))
    assert raw_value["value"] == "\ufffd not json" and raw_value["value_json"] is None
    assert "reason: unknown event_type" in run("dlq", "show", "0").stdout


def test_topics_describe_json(monkeypatch: pytest.MonkeyPatch) -> None:
    dlq = TopicInfo("events.dlq", "did", [PartitionInfo(0, 0, 2)], "unknown")
    monkeypatch.setattr(
        topics, "describe_topic", lambda settings, name=None: dlq if name.endswith("dlq") else INFO
    )
    shown = document(run("topics", "describe", "-o", "json"))
    assert shown == {
        "topics": [
            {
                "name": "events",
                "topic_id": "tid",
                "partition_count": 2,
                "retention_ms": -1,
                "partitions": [
                    {"partition": 0, "low": 0, "high": 5},
                    {"partition": 1, "low": 3, "high": 3},
                ],
            },
            {
                "name": "events.dlq",
                "topic_id": "did",
                "partition_count": 1,
                "retention_ms": None,
                "partitions": [{"partition": 0, "low": 0, "high": 2}],
            },
        ]
    }
    assert "  [0] offsets 0..5" in run("topics", "describe").stdout


@pytest.fixture
def control(memory_stores: Stores, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replay and erase with the control events, the rebuild and the waiting
    stood in for; the list records the control events published."""
    published: list[str] = []

    async def publish(settings: Any, event_type: str, tenant: Any, who: str) -> Position:
        published.append(event_type)
        return Position("events", 0, 9)

    async def done(*args: Any, **kwargs: Any) -> Any:
        return replay.Progress(9, 9, True)

    async def counts(*args: Any) -> dict[str, int]:
        return {"entities": 2, "relationships": 0, "aliases": 0, "vectors": 2}

    def locate(settings: Any, tenant: TenantId) -> Target:
        return Target(tenant, INFO, PART, 0, 5)

    monkeypatch.setattr(replay, "locate", locate)
    monkeypatch.setattr(replay, "publish_control", publish)
    for name in ("window_progress", "wait_for_erasure", "offline_rebuild"):
        monkeypatch.setattr(replay, name, done)
    monkeypatch.setattr(replay, "summary", counts)
    return published


def test_replay_json(control: list[str]) -> None:
    online = run("replay", "--tenant", "a", "--yes", "-o", "json")
    shown = document(online)
    assert {k: v for k, v in shown.items() if k != "seconds"} == {
        "tenant": "a",
        "mode": "online",
        "topic": "events",
        "partition": 0,
        "log_start": 0,
        "log_end": 5,
        "request_offset": 9,
        "counts": {"entities": 2, "relationships": 0, "aliases": 0, "vectors": 2},
    }
    assert isinstance(shown["seconds"], float)
    assert "replay requested at events[0]@9" in online.stderr
    offline = document(run("replay", "--tenant", "a", "--offline", "--yes", "-o", "json"))
    assert offline["mode"] == "offline"
    assert offline["request_offset"] is None and offline["counts"] is None
    assert control == ["TenantReplayRequested"]
    table = run("replay", "--tenant", "a", "--yes")
    assert "replay requested at events[0]@9" in table.stdout
    assert "rebuilt a in" in table.stdout and "2 entities" in table.stdout


def test_erase_json(control: list[str]) -> None:
    erased = run("erase", "--tenant", "a", "--yes", "-o", "json")
    assert document(erased) == {
        "tenant": "a",
        "topic": "events",
        "partition": 0,
        "request_offset": 9,
        "erased": True,
    }
    assert "erasure requested at events[0]@9" in erased.stderr
    assert control == ["TenantErased"]
    assert "tenant a erased from both stores." in run("erase", "--tenant", "a", "--yes").stdout


def test_throughput_is_records_per_second_between_two_readings() -> None:
    def reading(at: float, log_end: int, graph: int, vector: int) -> status.Status:
        row = status.PartitionStatus(0, log_end, -1, graph, vector, [])
        return status.Status("events", "tid", "g", [row], at)

    [(partition, rate)] = status.throughput(
        reading(10, 100, 40, 50), reading(12, 120, 60, 44)
    ).items()
    # Applied: the slower store's checkpoint, 40 -> 44, over 2 s.
    assert (partition, rate) == (0, status.Throughput(appended=10.0, applied=2.0))
    # A replay rewinds the checkpoints: no negative rate.
    assert status.throughput(reading(0, 5, 4, 4), reading(1, 5, -1, -1))[0].applied == 0
    assert status.throughput(reading(1, 5, 4, 4), reading(1, 5, 4, 4)) == {}


@pytest.mark.usefixtures("memory_stores", "kafka_status")
@pytest.mark.parametrize("output", ["table", "json"])
def test_watch_redraws_with_rates_until_ctrl_c(
    monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    from streams.cli import status as command

    ends = iter([5, 9, 13])
    made: list[object] = []
    closed: list[object] = []
    used: list[object] = []

    class Clients:
        """streams.kafka.topics.TopicClients without a broker."""

        def __init__(self, settings: Any) -> None:
            made.append(self)

        def close(self) -> None:
            closed.append(self)

    def describe(settings: Any, clients: Any = None) -> TopicInfo:
        used.append(clients)
        return TopicInfo("events", "tid", [PartitionInfo(0, 0, next(ends))], "-1")

    monkeypatch.setattr("streams.kafka.topics.TopicClients", Clients)
    monkeypatch.setattr(status, "describe_topic", describe)
    waits: list[float] = []

    async def pause(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(command, "pause", pause)
    cleared: list[None] = []
    monkeypatch.setattr("click.clear", lambda: cleared.append(None))
    result = run("status", "--watch", "--interval", "0.5", "-o", output)
    assert waits == [0.5, 0.5, 0.5]
    # One pair of Kafka clients for every reading, closed at Ctrl-C.
    assert len(made) == 1 and used == made * 3 and closed == made
    if output == "json":
        readings = [json.loads(line) for line in result.stdout.splitlines()]
        rates = [r["partitions"][0]["throughput"] for r in readings]
        assert rates[0] is None and all(r["appended_per_s"] > 0 for r in rates[1:])
        assert [r["partitions"][0]["log_end"] for r in readings] == [5, 9, 13]
        assert cleared == []
    else:
        assert len(cleared) == 3
        assert result.stdout.count("Ctrl-C to stop") == 3
        headers = [line for line in result.stdout.splitlines() if line.startswith("partition")]
        assert len(headers) == 3 and all("in/s" in h and "applied/s" in h for h in headers)
        first = result.stdout.split("Ctrl-C to stop")[1].splitlines()[3].split()
        assert first[:6] == ["0", "5", "2", "1", "1", "3"] and first[6:8] == ["-", "-"]


def test_the_interval_has_a_floor() -> None:
    refused = CliRunner().invoke(main, ["status", "--watch", "--interval", "0"])
    assert refused.exit_code == 2 and "x>=0.5" in refused.stderr
