"""Rebuilding and erasing one tenant (docs/design.md 6).

Online replay publishes a signed ``TenantReplayRequested`` keyed by the tenant;
the running workers delete the tenant, open a rebuild window and rescan its
partition. Offline replay does the same work itself while the workers are
stopped. Erasure publishes a signed ``TenantErased``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from contracts import signing
from contracts.domain import Position, RebuildMarker, StreamPartition
from contracts.events import make_event
from contracts.ids import TenantId
from contracts.ports.graph import ProjectedGraphStore
from contracts.ports.vector import ProjectedVectorStore
from streams.kafka.partitioning import partition_for
from streams.kafka.topics import TopicInfo, admin_client, describe_topic
from streams.ops.export import tenant_universe
from streams.sdk.publisher import Publisher
from streams.settings import Settings
from streams.wiring import Stores


class ReplayRefused(RuntimeError):
    """Replay cannot go ahead; the message says why and what to do."""


@dataclass(frozen=True)
class Target:
    tenant: TenantId
    topic: TopicInfo
    partition: StreamPartition
    log_start: int
    log_end: int


def locate(settings: Settings, tenant: TenantId) -> Target:
    info = describe_topic(settings)
    number = partition_for(tenant, info.partition_count)
    part = info.partitions[number]
    return Target(
        tenant,
        info,
        StreamPartition(info.name, number, info.topic_id),
        part.low,
        part.high,
    )


async def publish_control(
    settings: Settings, event_type: str, tenant: TenantId, who: str
) -> Position:
    """Sign (for the events topic's id, with the signing key's id) and publish
    a control event for ``tenant``."""
    keys = settings.control_keyring()
    if not keys:
        raise ReplayRefused(
            "no control key is set (REDSTRING_CONTROL_KEYS or REDSTRING_CONTROL_KEY): "
            "control events must be signed with one of the workers' keys"
        )
    info = await asyncio.to_thread(describe_topic, settings)
    event = signing.sign(
        make_event(event_type, tenant, {"requested_by": who}), keys, topic_id=info.topic_id
    )
    async with Publisher(settings) as publisher:
        return await publisher.publish(event)


@dataclass
class Progress:
    """How far both stores are through a rebuild window."""

    done: int
    total: int
    finished: bool


async def window_progress(stores: Stores, target: Target, request: Position) -> Progress:
    total = max(1, request.offset - target.log_start)
    done = total
    finished = True
    for store in (stores.graph, stores.vector):
        checkpoint = await store.checkpoint(target.partition)
        markers = [
            m for m in await store.rebuild_markers(target.partition) if m.tenant_id == target.tenant
        ]
        if checkpoint < request.offset:
            # Not yet reached the request (or still deleting).
            done, finished = 0, False
        elif markers:
            marker = markers[0]
            scanned = (
                0
                if marker.state == "deleting"
                else marker.applied_through + 1 - marker.start_offset
            )
            done, finished = min(done, max(0, scanned)), False
    return Progress(done, total, finished)


async def summary(
    graph: ProjectedGraphStore, vector: ProjectedVectorStore, tenant: TenantId
) -> dict[str, int]:
    entities = await graph.find_entities(tenant, limit=10_000_000)
    ids = sorted(await tenant_universe(graph, tenant))
    relationships = await graph.get_relationships_for(tenant, ids) if ids else []
    aliases = [a for e in ids for a in await graph.find_aliases(tenant, e)]
    vectors = [i for i in ids if await vector.get(tenant, i) is not None]
    return {
        "entities": len(entities),
        "relationships": len(relationships),
        "aliases": len(aliases),
        "vectors": len(vectors),
    }


def group_members(settings: Settings) -> int:
    admin = admin_client(settings)
    future = admin.describe_consumer_groups([settings.group_id], request_timeout=30)[
        settings.group_id
    ]
    description: Any = future.result()
    return len(description.members)


async def offline_rebuild(settings: Settings, stores: Stores, target: Target) -> None:
    """Delete the tenant in both stores, verify, mark, and rewind the group."""
    if group_members(settings) > 0:
        raise ReplayRefused(
            f"consumer group {settings.group_id!r} has active members: stop the workers "
            "first, or use online replay (without --offline)"
        )
    for store in (stores.graph, stores.vector):
        sweep = await store.delete_by_tenant(target.tenant)
        if not sweep.complete:
            raise ReplayRefused(
                f"tenant {target.tenant} still holds {sweep.outstanding} after deletion; "
                "nothing was rewound"
            )
        await store.forget_applied_events(target.tenant)
    for store in (stores.graph, stores.vector):
        async with store.unit_of_work(target.partition) as uow:
            end = await uow.checkpoint(target.partition) + 1
            if end > target.log_start:
                await uow.put_rebuild_marker(
                    RebuildMarker(
                        target.tenant,
                        target.partition,
                        target.log_start,
                        end,
                        target.log_start - 1,
                    )
                )
    admin = admin_client(settings)
    request = ConsumerGroupTopicPartitions(
        settings.group_id,
        [TopicPartition(target.partition.topic, target.partition.partition, target.log_start)],
    )
    for future in admin.alter_consumer_group_offsets([request]).values():
        await asyncio.to_thread(future.result)


async def wait_for_erasure(
    stores: Stores, tenant: TenantId, request: Position, within: float = 600.0
) -> None:
    deadline = time.monotonic() + within
    while True:
        stones = [await s.erasure_tombstone(tenant) for s in (stores.graph, stores.vector)]
        if all(s is not None and s.offset >= request.offset for s in stones):
            if not await stores.graph.find_entities(tenant, limit=1):
                return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"tenant {tenant} not erased within {within:.0f}s; are the workers running?"
            )
        await asyncio.sleep(0.5)
