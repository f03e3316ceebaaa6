"""Where each partition stands: the log end, the group's committed offset,
each store's checkpoint, the lag, and the open rebuild windows."""

from __future__ import annotations

from dataclasses import dataclass

from contracts.domain import StreamPartition
from streams.kafka.config import librdkafka_config
from streams.kafka.topics import TopicInfo
from streams.settings import Settings
from streams.wiring import Stores


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    partition: int
    log_end: int
    committed: int  # -1: the group has committed nothing here
    graph: int
    vector: int
    rebuilding: list[str]

    @property
    def lag(self) -> int:
        return max(0, self.log_end - (min(self.graph, self.vector) + 1))


def committed_offsets(settings: Settings, info: TopicInfo) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**librdkafka_config(settings), "group.id": settings.group_id})
    try:
        return {
            tp.partition: tp.offset
            for tp in consumer.committed(
                [TopicPartition(info.name, p.partition) for p in info.partitions], timeout=10
            )
        }
    finally:
        consumer.close()


async def partition_status(
    stores: Stores, info: TopicInfo, committed: dict[int, int]
) -> list[PartitionStatus]:
    rows = []
    for p in info.partitions:
        part = StreamPartition(info.name, p.partition, info.topic_id)
        markers = [
            f"{m.tenant_id} {m.applied_through + 1 - m.start_offset}/"
            f"{m.end_offset - m.start_offset}"
            for store in (stores.graph, stores.vector)
            for m in await store.rebuild_markers(part)
        ]
        rows.append(
            PartitionStatus(
                partition=p.partition,
                log_end=p.high,
                committed=committed.get(p.partition, -1),
                graph=await stores.graph.checkpoint(part),
                vector=await stores.vector.checkpoint(part),
                rebuilding=markers,
            )
        )
    return rows
