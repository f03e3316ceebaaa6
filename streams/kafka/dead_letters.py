"""The dead-letter topic, ``<topic>.dlq``: its headers, reading letters back and
re-driving them (the worker writes them: streams.worker.sink).

A dead letter keeps the original key and value byte for byte, and says in its
headers why it was refused and where it came from, so that ``redstring dlq``
can show it and re-drive it after a fix.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from contracts.domain import Position
from streams.kafka.config import librdkafka_config
from streams.kafka.producer import AsyncProducer
from streams.kafka.topics import TopicError
from streams.settings import Settings

REASON = "redstring.reason"
SOURCE_TOPIC = "redstring.topic"
SOURCE_PARTITION = "redstring.partition"
SOURCE_OFFSET = "redstring.offset"
#: On a re-driven record: the dead letter it came from.
REDRIVEN_FROM = "redstring.redriven-from"


@dataclass(frozen=True)
class StoredLetter:
    dlq_offset: int
    key: bytes | None
    value: bytes | None
    reason: str
    source_partition: int | None
    source_offset: int | None


def _headers(raw: object) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for pair in raw if isinstance(raw, list) else []:
        name, value = pair
        if isinstance(value, bytes):
            found[str(name)] = value
    return found


def read_letters(settings: Settings, limit: int | None = None) -> list[StoredLetter]:
    """Every dead letter from the start of ``<topic>.dlq`` (no group, no commits)."""
    consumer = Consumer(
        {
            **librdkafka_config(settings),
            "group.id": "redstring-dlq-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        tp = TopicPartition(settings.dlq_topic, 0)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
        except KafkaException as exc:
            raise TopicError(
                f"could not read {settings.dlq_topic} on {settings.kafka_bootstrap}: "
                f"{exc.args[0].str()}"
            ) from None
        if high <= low:
            return []
        consumer.assign([TopicPartition(settings.dlq_topic, 0, low)])
        letters: list[StoredLetter] = []
        while len(letters) < high - low and (limit is None or len(letters) < limit):
            message = consumer.poll(5.0)
            if message is None:
                break
            if message.error():
                raise RuntimeError(f"reading {settings.dlq_topic}: {message.error()}")
            headers = _headers(message.headers())

            def text(name: str, headers: dict[str, bytes] = headers) -> str | None:
                raw = headers.get(name)
                return raw.decode("utf-8", "replace") if raw is not None else None

            part, off = text(SOURCE_PARTITION), text(SOURCE_OFFSET)
            letters.append(
                StoredLetter(
                    dlq_offset=message.offset() or 0,
                    key=message.key(),
                    value=message.value(),
                    reason=text(REASON) or "",
                    source_partition=int(part) if part else None,
                    source_offset=int(off) if off else None,
                )
            )
        return letters
    finally:
        consumer.close()


async def redrive(
    settings: Settings, letters: Sequence[StoredLetter]
) -> AsyncIterator[tuple[StoredLetter, Position]]:
    """Publish ``letters`` to the events topic again, key and value unchanged,
    yielding each with its new position as the broker takes it."""
    producer = AsyncProducer(settings)
    try:
        for letter in letters:
            yield (
                letter,
                await producer.send(
                    settings.topic,
                    letter.key,
                    letter.value,
                    [(REDRIVEN_FROM, str(letter.dlq_offset).encode())],
                ),
            )
    finally:
        await asyncio.to_thread(producer.close)
