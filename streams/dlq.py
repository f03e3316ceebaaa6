"""Reading and re-driving the dead-letter topic."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from streams.deadletters import REASON, SOURCE_OFFSET, SOURCE_PARTITION
from streams.settings import Settings


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
            **settings.kafka_client_config(),
            "group.id": "redstring-dlq-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        tp = TopicPartition(settings.dlq_topic, 0)
        low, high = consumer.get_watermark_offsets(tp, timeout=10)
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
