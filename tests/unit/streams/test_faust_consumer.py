"""What the worker does on Faust's consumer thread (streams.worker.app.FaustConsumer).

Its commit: the thread decides what it still holds, so a rebalance
between the loop's look and the thread's never hands aiokafka an empty commit
(a ValueError that crashed the consumer), and a commit the group refuses
during a rebalance is dropped, not raised. The thread here is a stand-in that
runs the call at once; the real one is exercised by tests/e2e.

The fetch wait (FaustConsumer.set_fetch_wait) goes through the same thread, to
the aiokafka fetcher that Faust built with a 1500 ms wait.

The seek runs on a real thread with its own event loop, as Faust's consumer
thread does: aiokafka's seek called from the worker's thread raced the
fetcher's walk over its fetched records (ADR 0006)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from aiokafka.consumer.fetcher import Fetcher
from aiokafka.errors import CommitFailedError, IllegalStateError
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from faust.exceptions import ConsumerNotStarted
from faust.types import TP

from streams.worker import app as worker_app
from streams.worker.app import FaustConsumer
from tests.consumer_thread import ConsumerThread
from tests.unit.streams.conftest import BuildWorker


class AIOKafkaConsumer:
    def __init__(self, held: set[int], refuse: bool = False) -> None:
        self.held = {TopicPartition("events", p) for p in held}
        self.refuse = refuse
        self.commits: list[dict[TopicPartition, OffsetAndMetadata]] = []
        self._fetcher: Any = type("Fetcher", (), {"_fetch_max_wait_ms": 1500})()

    def assignment(self) -> set[TopicPartition]:
        return set(self.held)

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        if not offsets:
            raise ValueError(offsets)  # aiokafka's commit_structure_validate
        if self.refuse:
            raise CommitFailedError("the group has already rebalanced")
        self.commits.append(offsets)


class Thread:
    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer
        self.tp_last_committed_at: dict[TP, float] = {}

    def _ensure_consumer(self) -> AIOKafkaConsumer:
        return self.consumer

    async def call_thread(self, fun: Callable[[], Awaitable[Any]]) -> Any:
        return await fun()


def consumer(kafka: AIOKafkaConsumer) -> tuple[FaustConsumer, Thread]:
    thread = Thread(kafka)
    app: Any = type("App", (), {})()
    app.consumer = type("Consumer", (), {"_thread": thread})()
    return FaustConsumer(app, "events"), thread


async def test_only_what_the_thread_still_holds_is_committed_at_the_exact_offsets() -> None:
    kafka = AIOKafkaConsumer(held={0, 2})
    worker, thread = consumer(kafka)
    await worker.commit({0: 5, 1: 7, 2: 9})
    assert kafka.commits == [
        {
            TopicPartition("events", 0): OffsetAndMetadata(5, ""),
            TopicPartition("events", 2): OffsetAndMetadata(9, ""),
        }
    ]
    assert set(thread.tp_last_committed_at) == {TP("events", 0), TP("events", 2)}


async def test_a_commit_of_partitions_revoked_meanwhile_is_no_commit_at_all() -> None:
    kafka = AIOKafkaConsumer(held=set())
    worker, _ = consumer(kafka)
    await worker.commit({1: 7})  # the empty commit would raise ValueError
    assert kafka.commits == []


async def test_a_commit_the_group_refuses_in_a_rebalance_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kafka = AIOKafkaConsumer(held={0}, refuse=True)
    worker, thread = consumer(kafka)
    with caplog.at_level("INFO", logger="redstring.worker"):
        await worker.commit({0: 5})
    assert "commit dropped by a rebalance" in caplog.text
    assert thread.tp_last_committed_at == {}


async def test_the_fetch_wait_is_set_on_the_consumer_threads_fetcher() -> None:
    kafka = AIOKafkaConsumer(held={0})
    worker, _ = consumer(kafka)
    await worker.set_fetch_wait(200)
    assert kafka._fetcher._fetch_max_wait_ms == 200


async def test_a_fetcher_without_the_attribute_keeps_its_wait_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kafka = AIOKafkaConsumer(held={0})
    kafka._fetcher = object()
    worker, _ = consumer(kafka)
    with caplog.at_level("WARNING", logger="redstring.worker"):
        await worker.set_fetch_wait(200)
    assert "fetches keep Faust's 1500 ms" in caplog.text


def test_the_pinned_aiokafka_builds_each_fetch_request_from_the_attribute() -> None:
    # What set_fetch_wait relies on: the wait is read when a request is built,
    # not copied at start-up. An aiokafka that changes this fails here.
    assert "self._fetch_max_wait_ms" in inspect.getsource(Fetcher._get_actions_per_node)


async def test_a_consumer_not_started_leaves_the_assignment_path_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # set_fetch_wait runs when a rebalance completes, before the loop commits
    # and seeks the new assignment: it must not raise into that path.
    kafka = AIOKafkaConsumer(held={0})
    worker, thread = consumer(kafka)

    def not_started() -> AIOKafkaConsumer:
        raise ConsumerNotStarted("Consumer thread not yet started")

    thread._ensure_consumer = not_started  # type: ignore[method-assign]
    with caplog.at_level("INFO", logger="redstring.worker"):
        await worker.set_fetch_wait(200)
    assert "fetch wait not set" in caplog.text


class SeekingConsumer:
    """aiokafka's consumer, as far as a seek goes: where and on which thread."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.seeks: list[tuple[TopicPartition, int, int]] = []

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if self.refuse:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        self.seeks.append((tp, offset, threading.get_ident()))


@pytest.fixture
def seeker() -> Iterator[tuple[FaustConsumer, ConsumerThread, dict[TP, int | None]]]:
    thread = ConsumerThread(SeekingConsumer())
    app = thread.app()
    yield FaustConsumer(app, "events"), thread, app.consumer._read_offset
    thread.stop()


async def test_a_seek_runs_on_the_consumer_thread_then_sets_fausts_read_offset(
    seeker: tuple[FaustConsumer, ConsumerThread, dict[TP, int | None]],
) -> None:
    worker, thread, read_offset = seeker
    await worker.seek(3, 42)
    await worker.seek(1, 0)
    assert [(tp, offset) for tp, offset, _ in thread.consumer.seeks] == [
        (TP("events", 3), 42),
        (TP("events", 1), 0),
    ]
    assert {ident for _, _, ident in thread.consumer.seeks} == {thread.ident}
    assert thread.ident != threading.get_ident()
    # Faust's Consumer.seek: a read offset of 0 is None, no floor at all.
    assert read_offset == {TP("events", 3): 42, TP("events", 1): None}


async def test_a_seek_of_a_partition_revoked_meanwhile_is_logged_and_sets_nothing(
    seeker: tuple[FaustConsumer, ConsumerThread, dict[TP, int | None]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker, thread, read_offset = seeker
    thread.consumer.refuse = True
    with caplog.at_level("INFO", logger="redstring.worker"):
        await worker.seek(3, 42)
    assert "seek of a partition no longer held" in caplog.text
    assert read_offset == {}


async def test_a_consumer_thread_that_never_runs_the_seek_fails_it_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A loop that is not running takes the callback and never runs it.
    thread = ConsumerThread(SeekingConsumer(), run=False)
    app = thread.app()
    monkeypatch.setattr(worker_app, "SEEK_TIMEOUT_S", 0.05)
    try:
        with pytest.raises(RuntimeError, match="did not seek partition 3 to 42"):
            await FaustConsumer(app, "events").seek(3, 42)
        thread.thread_loop.close()  # and a closed one refuses it at once
        with pytest.raises(RuntimeError, match="did not seek partition 3 to 42"):
            await FaustConsumer(app, "events").seek(3, 42)
    finally:
        thread.stop()
    assert thread.consumer.seeks == []


def test_the_pinned_faust_has_what_the_seek_uses(build_worker: BuildWorker) -> None:
    # FaustConsumer.seek reaches past Faust's API: its consumer thread's event
    # loop and aiokafka consumer, and the read offsets Consumer.seek sets. A
    # Faust that renames them fails here, not in a worker.
    app, _runtime = build_worker()
    consumer: Any = app.consumer
    assert isinstance(consumer._thread.thread_loop, asyncio.AbstractEventLoop)
    assert callable(consumer._thread._ensure_consumer)
    assert isinstance(consumer._read_offset, dict)
    assert "self._read_offset[ensure_TP(partition)]" in inspect.getsource(type(consumer).seek)
