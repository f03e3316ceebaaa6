"""FaustConsumer.seek against a real broker and a real aiokafka consumer that
fetches on a thread of its own, as Faust's does.

aiokafka's seek deletes the partition's fetched records, and its
``fetched_records`` walks them on the consumer's thread: a seek made from
another thread crashed that walk with a KeyError within a handful of seeks
(ADR 0006, "Seeks run on the consumer's thread too"). Hundreds of seeks
here, each while the thread is draining buffers of every partition, must
leave the fetching unharmed and land where they were asked to."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from streams.worker.app import FaustConsumer
from tests.consumer_thread import ConsumerThread

pytestmark = pytest.mark.services

PARTITIONS = 8
PER_PARTITION = 4000
SEEKS = 400


def fill_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(PARTITIONS * PER_PARTITION):
        producer.produce(topic, value=b"x" * 64, partition=i % PARTITIONS)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


class Fetching:
    """The consumer thread's work: getmany over and over, as Faust's fetcher
    does, remembering what it raised."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer
        self.errors: list[BaseException] = []
        self.records = 0
        self.stop = False

    async def run(self) -> None:
        while not self.stop:
            try:
                batches = await self.consumer.getmany(timeout_ms=20)
            except Exception as exc:  # the crash this test is about
                self.errors.append(exc)
                return
            self.records += sum(len(records) for records in batches.values())


async def test_seeks_from_the_workers_thread_never_break_the_consumer_threads_fetch(
    kafka_bootstrap: str, topic_name: str, unique_name: Callable[[str], str]
) -> None:
    fill_topic(kafka_bootstrap, topic_name)
    tps = [TopicPartition(topic_name, p) for p in range(PARTITIONS)]
    thread = ConsumerThread(None)
    try:

        async def start() -> Fetching:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=kafka_bootstrap,
                group_id=unique_name("group"),
                enable_auto_commit=False,
            )
            await consumer.start()
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
            thread.consumer = consumer
            return Fetching(consumer)

        fetching = thread.submit(start()).result(timeout=60)
        running = thread.submit(fetching.run())
        app = thread.app()
        worker = FaustConsumer(app, topic_name)
        for n in range(SEEKS):
            await worker.seek(n % PARTITIONS, (n * 7) % PER_PARTITION)
            await asyncio.sleep(0.002)  # let the thread fetch and walk between seeks
            assert not fetching.errors, fetching.errors
        fetching.stop = True
        running.result(timeout=30)
        assert not fetching.errors, fetching.errors
        assert fetching.records > SEEKS  # the thread really fetched throughout
        # And a seek lands where it was asked to: the next records fetched
        # start exactly there, and Faust's read offset says the same.
        targets = {p: 1000 + 37 * p for p in range(PARTITIONS)}
        for partition, offset in targets.items():
            await worker.seek(partition, offset)
        firsts: dict[int, int] = {}

        async def fetch_firsts() -> None:
            while len(firsts) < PARTITIONS:
                for tp, records in (await fetching.consumer.getmany(timeout_ms=100)).items():
                    firsts.setdefault(tp.partition, records[0].offset)

        thread.submit(fetch_firsts()).result(timeout=60)
        assert firsts == targets
        assert {tp.partition: o for tp, o in app.consumer._read_offset.items()} == targets
        thread.submit(fetching.consumer.stop()).result(timeout=30)
    finally:
        thread.stop()
