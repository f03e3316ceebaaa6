"""The worker's record probe (streams.kafka.probe.RecordProbe) on the real
broker: the log's start, which a replay rescans from, is the partition's low
watermark once retention (here an explicit delete of records) moved it. It
is asked of the broker directly, not through Faust's consumer thread, which
under a backlog answered about a second late."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streams.kafka.probe import RecordProbe
from streams.settings import Settings
from tests.smoke.test_kafka import create_topic


async def test_the_log_start_follows_deleted_records(
    stack_environ: dict[str, str], unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("probe")
    bootstrap = stack_environ["REDSTRING_KAFKA_BOOTSTRAP"]
    create_topic(bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, value=f"r{i}".encode(), partition=1)
    assert producer.flush(30) == 0
    probe = RecordProbe(Settings(topic=topic))
    try:
        assert await probe.log_start(1) == 0
        assert await probe.log_start(0) == 0  # an empty partition starts at 0
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.delete_records([TopicPartition(topic, 1, 4)]).values():
            future.result(timeout=30)
        assert await probe.log_start(1) == 4
        assert await probe.first_record_at(1, 4) == 4
        assert await probe.first_record_at(1, 10) is None  # past the end
    finally:
        probe.close()
