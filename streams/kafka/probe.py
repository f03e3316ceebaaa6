"""Asks the broker which offset holds the next record of a partition, and
where a partition's log starts.

Offsets are not contiguous in every log: a transactional producer's commit
and abort markers take offsets that no consumer is handed. The worker loop
applies only records that continue the stores' position without a hole
(streams.worker.projector.contiguous_run), so before it calls a hole a lost delivery
it asks here whether the missing offsets hold any record at all.

The log's start (where a replay rescans from) is asked here too, not through
Faust's consumer: its thread serves such calls between fetches, and under a
backlog a call waited about a second.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from streams.kafka.config import librdkafka_config
from streams.settings import Settings


class RecordProbe:
    """One consumer outside the group (no commits), used from a thread."""

    def __init__(self, settings: Settings, *, timeout: float = 5.0) -> None:
        self._settings = settings
        self._timeout = timeout
        self._consumer: Any = None
        self._lock = threading.Lock()

    async def first_record_at(self, partition: int, offset: int) -> int | None:
        return await asyncio.to_thread(self._first_record_at, partition, offset)

    async def log_start(self, partition: int) -> int:
        """The partition's first offset (its low watermark, from the broker)."""
        return await asyncio.to_thread(self._log_start, partition)

    def _log_start(self, partition: int) -> int:
        with self._lock:
            low, _high = self._ensure().get_watermark_offsets(
                TopicPartition(self._settings.topic, partition), timeout=self._timeout, cached=False
            )
            return int(low)

    def _ensure(self) -> Any:
        if self._consumer is None:
            self._consumer = Consumer(
                {
                    **librdkafka_config(self._settings),
                    "group.id": f"{self._settings.group_id}.probe",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    # What the workers read (aiokafka's default): aborted
                    # records are handed over, only markers are not.
                    "isolation.level": "read_uncommitted",
                    "fetch.max.bytes": 1 << 20,
                }
            )
        return self._consumer

    def _first_record_at(self, partition: int, offset: int) -> int | None:
        with self._lock:
            consumer = self._ensure()
            consumer.assign([TopicPartition(self._settings.topic, partition, offset)])
            try:
                message = consumer.poll(self._timeout)
            finally:
                consumer.unassign()
            if message is None:
                return None
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return None  # nothing at or after the offset yet
                raise RuntimeError(f"probing {self._settings.topic}[{partition}]: {error}")
            found = message.offset()
            return int(found) if found is not None else None

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
