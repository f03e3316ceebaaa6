"""Where each partition stands: the log end, the group's committed offset,
each store's checkpoint, the lag, and the open rebuild windows; and, from two
readings, how fast records arrive and are applied."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from functools import partial

from contracts.domain import StreamPartition
from streams.kafka.config import librdkafka_config
from streams.kafka.topics import TopicClients, TopicInfo, describe_topic
from streams.settings import Settings
from streams.wiring import Stores


@dataclass(frozen=True, slots=True)
class RebuildWindow:
    store: str  # "graph" or "vector"
    tenant: str
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    partition: int
    log_end: int
    committed: int  # -1: the group has committed nothing here
    graph: int
    vector: int
    rebuilding: list[RebuildWindow]

    @property
    def lag(self) -> int:
        return max(0, self.log_end - (min(self.graph, self.vector) + 1))


@dataclass(frozen=True, slots=True)
class Status:
    topic: str
    topic_id: str
    group_id: str
    partitions: list[PartitionStatus]
    #: time.monotonic() when read: what rates are measured against.
    read_at: float


@dataclass(frozen=True, slots=True)
class Throughput:
    """Records per second between two readings of one partition: appended to
    the log, and applied by both stores (the slower store's checkpoint)."""

    appended: float
    applied: float


def committed_offsets(
    settings: Settings, info: TopicInfo, clients: TopicClients | None = None
) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = (
        clients.consumer
        if clients is not None
        else Consumer({**librdkafka_config(settings), "group.id": settings.group_id})
    )
    try:
        return {
            tp.partition: tp.offset
            for tp in consumer.committed(
                [TopicPartition(info.name, p.partition) for p in info.partitions], timeout=10
            )
        }
    finally:
        if clients is None:
            consumer.close()


async def partition_status(
    stores: Stores, info: TopicInfo, committed: dict[int, int]
) -> list[PartitionStatus]:
    rows = []
    for p in info.partitions:
        part = StreamPartition(info.name, p.partition, info.topic_id)
        windows = [
            RebuildWindow(
                name,
                m.tenant_id,
                m.applied_through + 1 - m.start_offset,
                m.end_offset - m.start_offset,
            )
            for name, store in (("graph", stores.graph), ("vector", stores.vector))
            for m in await store.rebuild_markers(part)
        ]
        rows.append(
            PartitionStatus(
                partition=p.partition,
                log_end=p.high,
                committed=committed.get(p.partition, -1),
                graph=await stores.graph.checkpoint(part),
                vector=await stores.vector.checkpoint(part),
                rebuilding=windows,
            )
        )
    return rows


async def read_status(
    settings: Settings, stores: Stores, clients: TopicClients | None = None
) -> Status:
    """One reading of the events topic: Kafka's side (log ends, the group's
    commits) first, so that a store read after it is never behind what it saw.
    ``clients``: Kafka clients kept between readings (``--watch``)."""
    info = await asyncio.to_thread(partial(describe_topic, settings, clients=clients))
    committed = await asyncio.to_thread(committed_offsets, settings, info, clients)
    rows = await partition_status(stores, info, committed)
    return Status(info.name, info.topic_id, settings.group_id, rows, time.monotonic())


def throughput(before: Status, after: Status) -> dict[int, Throughput]:
    """Rates per partition between two readings; a partition in only one of
    them (none in practice: the count is fixed) has none."""
    seconds = after.read_at - before.read_at
    if seconds <= 0:
        return {}
    earlier = {p.partition: p for p in before.partitions}
    rates = {}
    for now in after.partitions:
        then = earlier.get(now.partition)
        if then is None:
            continue
        applied = min(now.graph, now.vector) - min(then.graph, then.vector)
        # A replay rewinds the checkpoints: a negative rate would only confuse.
        rates[now.partition] = Throughput(
            max(0, now.log_end - then.log_end) / seconds, max(0, applied) / seconds
        )
    return rates
