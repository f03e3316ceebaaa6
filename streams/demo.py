"""``redstring demo``: the whole pipeline on the local stack, end to end.

Creates a fresh topic, starts a worker, publishes a small multi-tenant history
with merges and an unmerge, waits until both stores hold it (read-your-writes
on the positions the publisher returned), prints what the stores now answer,
and stops the worker it started.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import click

from contracts.domain import Position
from contracts.events import Event, parse_event
from contracts.ids import TenantId
from streams.projected import wait_until_projected
from streams.settings import Settings

HISTORY = Path(__file__).with_name("demo_history.jsonl")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fresh(events: list[Event]) -> list[Event]:
    """New event ids per run, so the stores' applied-event ledger of an earlier
    demo run does not skip them."""
    fresh = []
    for event in events:
        data = event.model_dump(mode="json", exclude_none=True)
        data["event_id"] = str(uuid.uuid4())
        fresh.append(parse_event(json.dumps(data)))
    return fresh


async def _show(settings: Settings) -> None:
    from adapters.embedding import HashingEmbedder
    from streams.stores import open_stores

    stores = await open_stores(settings)
    try:
        graph, vector = stores.graph, stores.vector
        for tenant in ("acme", "globex"):
            t = TenantId(tenant)
            click.secho(f"\ntenant {tenant}", bold=True)
            for entity in await graph.find_entities(t):
                resolved = (await graph.resolve_entity_ids(t, [entity.id]))[entity.id]
                if resolved != entity.id:
                    click.echo(f"  {entity.id:<11} merged into {resolved}")
                    continue
                near = ", ".join(n.id for n in await graph.neighbors(t, entity.id)) or "-"
                aliases = ", ".join(a.alias_id for a in await graph.find_aliases(t, entity.id))
                extra = f"  aliases: {aliases}" if aliases else ""
                click.echo(f"  {entity.id:<11} {entity.name!r:<24} neighbours: {near}{extra}")
        query = "Ada Lovelace"
        embedder = stores.embedder
        if isinstance(embedder, HashingEmbedder):
            vec = await embedder.embed_query(query)
            hits = await vector.search(TenantId("acme"), vec, 3)
            click.secho(f"\nvector search in acme for {query!r}", bold=True)
            for hit in hits:
                click.echo(f"  {hit.score:.3f}  {hit.record.id}  {hit.record.metadata.get('name')}")
    finally:
        await stores.aclose()


async def _purge(settings: Settings) -> None:
    from streams.stores import open_stores

    stores = await open_stores(settings)
    try:
        for tenant in ("acme", "globex"):
            for store in (stores.graph, stores.vector):
                await store.delete_by_tenant(TenantId(tenant))
                await store.forget_applied_events(TenantId(tenant))
    finally:
        await stores.aclose()


@click.command("demo")
@click.option("--keep-topic", is_flag=True, help="Leave the demo topic in place.")
def demo_command(keep_topic: bool) -> None:
    """Run the pipeline end to end on the local stack (start it first with
    `redstring dev up`, or use `make demo`, which does both)."""
    from streams.producer import Publisher
    from streams.topics import TopicError, admin_client, create_topics, describe_topic

    base = Settings()
    suffix = uuid.uuid4().hex[:8]
    settings = base.model_copy(
        update={
            "topic": f"redstring.demo-{suffix}",
            "group_id": f"redstring-demo-{suffix}",
            "partitions": 3,
            "http_port": _free_port(),
            "session_timeout_s": 10.0,
        }
    )
    try:
        create_topics(settings)
        info = describe_topic(settings)
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:
        raise click.ClickException(
            f"cannot reach Kafka at {settings.kafka_bootstrap} ({exc}); start the local stack "
            "with `redstring dev up` and export what it prints"
        ) from None
    click.echo(f"topic {settings.topic} ({info.partition_count} partitions)")
    asyncio.run(_purge(settings))

    env = {
        **os.environ,
        "REDSTRING_TOPIC": settings.topic,
        "REDSTRING_GROUP_ID": settings.group_id,
        "REDSTRING_HTTP_PORT": str(settings.http_port),
        "REDSTRING_HTTP_HOST": "127.0.0.1",
        "REDSTRING_SESSION_TIMEOUT_S": "10",
        "REDSTRING_LOG_LEVEL": "WARNING",
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "streams", "worker"], env=env, stdout=subprocess.DEVNULL
    )
    started = time.monotonic()
    try:
        events = _fresh([parse_event(line) for line in HISTORY.read_bytes().splitlines() if line])

        async def publish_and_wait() -> None:
            from streams.stores import open_stores

            async with Publisher(settings) as publisher:
                positions = await publisher.publish_many(events)
            click.echo(f"published {len(positions)} events; waiting for both stores ...")
            stores = await open_stores(settings)
            try:
                last: dict[int, Position] = {}
                for pos in positions:
                    last[pos.partition] = pos
                for pos in last.values():
                    await wait_until_projected(
                        pos,
                        [stores.graph, stores.vector],
                        topic_id=info.topic_id,
                        within=120,
                    )
            finally:
                await stores.aclose()

        try:
            asyncio.run(publish_and_wait())
        except TimeoutError as exc:
            state = "exited" if worker.poll() is not None else "still running"
            raise click.ClickException(
                f"{exc} (the demo's worker {state}; its logs are above)"
            ) from None
        click.echo(f"projected in {time.monotonic() - started:.1f}s (worker start included)")
        asyncio.run(_show(settings))
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
        if not keep_topic:
            admin_client(settings).delete_topics([settings.topic, settings.dlq_topic])
