"""The demo's steps (``redstring demo``): a fresh topic and group, a worker
started for it, a small multi-tenant history with merges and an unmerge
published, and a read-your-writes wait on the positions the publisher
returned."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from contracts.domain import Position
from contracts.events import Event, parse_event
from contracts.ids import TenantId
from streams.sdk.publisher import Publisher
from streams.sdk.read_your_writes import wait_until_projected
from streams.settings import Settings
from streams.wiring import open_stores

HISTORY = Path(__file__).with_name("demo_history.jsonl")
TENANTS = (TenantId("acme"), TenantId("globex"))


def demo_settings(base: Settings) -> Settings:
    """A topic and group of the demo's own, so that it never touches real data."""
    suffix = uuid.uuid4().hex[:8]
    return base.model_copy(
        update={
            "topic": f"redstring.demo-{suffix}",
            "group_id": f"redstring-demo-{suffix}",
            "partitions": 3,
            "http_port": _free_port(),
            "session_timeout_s": 10.0,
        }
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def history() -> list[Event]:
    """The demo history with new event ids per run, so the stores'
    applied-event ledger of an earlier demo run does not skip them."""
    fresh = []
    for line in HISTORY.read_bytes().splitlines():
        if not line:
            continue
        data = parse_event(line).model_dump(mode="json", exclude_none=True)
        data["event_id"] = str(uuid.uuid4())
        fresh.append(parse_event(json.dumps(data)))
    return fresh


async def purge(settings: Settings) -> None:
    """Forget the demo tenants, so that a run starts from empty stores."""
    stores = await open_stores(settings)
    try:
        for tenant in TENANTS:
            for store in (stores.graph, stores.vector):
                await store.delete_by_tenant(tenant)
                await store.forget_applied_events(tenant)
    finally:
        await stores.aclose()


def start_worker(settings: Settings) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "REDSTRING_TOPIC": settings.topic,
        "REDSTRING_GROUP_ID": settings.group_id,
        "REDSTRING_HTTP_PORT": str(settings.http_port),
        "REDSTRING_HTTP_HOST": "127.0.0.1",
        "REDSTRING_SESSION_TIMEOUT_S": "10",
        "REDSTRING_LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "streams", "worker"], env=env, stdout=subprocess.DEVNULL
    )


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=60)
    except subprocess.TimeoutExpired:
        worker.kill()


async def publish(settings: Settings, events: Sequence[Event]) -> list[Position]:
    async with Publisher(settings) as publisher:
        return await publisher.publish_many(events)


async def wait_for(settings: Settings, positions: Sequence[Position], topic_id: str) -> None:
    """Until both stores hold every position (the last one per partition)."""
    last: dict[int, Position] = {}
    for pos in positions:
        last[pos.partition] = pos
    stores = await open_stores(settings)
    try:
        for pos in last.values():
            await wait_until_projected(
                pos, [stores.graph, stores.vector], topic_id=topic_id, within=120
            )
    finally:
        await stores.aclose()
