"""Kafka smoke tests: a keyed message produced with confluent-kafka is consumed in a
consumer group, by aiokafka directly and by a faust-streaming worker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

pytestmark = pytest.mark.services


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Topics are created explicitly: the broker has auto.create.topics.enable=false."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    for future in futures.values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            errors.append(error)

    producer.produce(topic, key=key, value=value, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert not errors


def test_auto_topic_creation_is_off(kafka_bootstrap: str, topic_name: str) -> None:
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "message.timeout.ms": 3000})
    errors: list[object] = []
    producer.produce(topic_name, value=b"x", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(10)
    assert errors and errors[0] is not None
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    assert topic_name not in metadata.topics


async def test_keyed_message_consumed_in_a_group_by_aiokafka(
    kafka_bootstrap: str, topic_name: str, unique_name: Callable[[str], str]
) -> None:
    create_topic(kafka_bootstrap, topic_name)
    produce(kafka_bootstrap, topic_name, b"tenant-1:entity-7", b'{"kind": "smoke"}')

    group = unique_name("group")
    consumer = AIOKafkaConsumer(
        topic_name,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        message = await asyncio.wait_for(consumer.getone(), timeout=60)
        assert (message.key, message.value) == (b"tenant-1:entity-7", b'{"kind": "smoke"}')
        await consumer.commit()
        partition = TopicPartition(topic_name, 0)
        assert partition in consumer.assignment()
        assert await consumer.committed(partition) == 1
    finally:
        await consumer.stop()

    # The broker knows the group and its committed offset.
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    offsets = futures[group].result(timeout=30).topic_partitions
    assert [(tp.topic, tp.partition, tp.offset) for tp in offsets] == [(topic_name, 0, 1)]


def test_faust_worker_consumes_in_a_group(
    kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_bootstrap, topic_name)
    produce(kafka_bootstrap, topic_name, b"k1", b"hello faust")
    app = Path(__file__).with_name("faust_app.py")
    env = dict(os.environ, SMOKE_BOOTSTRAP=kafka_bootstrap, SMOKE_TOPIC=topic_name)
    done = subprocess.run(
        [sys.executable, str(app), "worker", "--loglevel", "warn"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "SMOKE-RECEIVED key=b'k1' value=b'hello faust'" in output, output[-4000:]
