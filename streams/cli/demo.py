"""``redstring demo``: the whole pipeline on the local stack, end to end
(the steps: streams.ops.demo); it prints what the stores then answer."""

from __future__ import annotations

import asyncio
import time

import click

from streams.settings import Settings


@click.command("demo", short_help="Run the pipeline end to end on the local stack.")
@click.option("--keep-topic", is_flag=True, help="Leave the demo topic in place.")
def demo_command(keep_topic: bool) -> None:
    """Run the pipeline end to end on the local stack (start it first with
    `redstring dev up`, or use `make demo`, which does both)."""
    from streams.kafka.topics import TopicError, admin_client, create_topics, describe_topic
    from streams.ops import demo

    settings = demo.demo_settings(Settings())
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
    asyncio.run(demo.purge(settings))
    worker = demo.start_worker(settings)
    started = time.monotonic()
    try:
        positions = asyncio.run(demo.publish(settings, demo.history()))
        click.echo(f"published {len(positions)} events; waiting for both stores ...")
        try:
            asyncio.run(demo.wait_for(settings, positions, info.topic_id))
        except TimeoutError as exc:
            state = "exited" if worker.poll() is not None else "still running"
            raise click.ClickException(
                f"{exc} (the demo's worker {state}; its logs are above)"
            ) from None
        click.echo(f"projected in {time.monotonic() - started:.1f}s (worker start included)")
        asyncio.run(_show(settings))
    finally:
        demo.stop_worker(worker)
        if not keep_topic:
            admin_client(settings).delete_topics([settings.topic, settings.dlq_topic])


async def _show(settings: Settings) -> None:
    from adapters.embedding import HashingEmbedder
    from streams.ops.demo import TENANTS
    from streams.wiring import open_stores

    stores = await open_stores(settings)
    try:
        graph, vector = stores.graph, stores.vector
        for t in TENANTS:
            click.secho(f"\ntenant {t}", bold=True)
            for entity in await graph.find_entities(t):
                resolved = (await graph.resolve_entity_ids(t, [entity.id]))[entity.id]
                if resolved != entity.id:
                    click.echo(f"  {entity.id:<11} merged into {resolved}")
                    continue
                near = ", ".join(n.id for n in await graph.neighbors(t, entity.id)) or "-"
                aliases = ", ".join(a.alias_id for a in await graph.find_aliases(t, entity.id))
                extra = f"  aliases: {aliases}" if aliases else ""
                label = f":{entity.type}"
                click.echo(
                    f"  {entity.id:<11} {entity.name!r:<24} {label:<14} neighbours: {near}{extra}"
                )
                # Each edge as the native model stores it: a relationship of its own type.
                for edge in await graph.get_relationships(t, source_id=entity.id):
                    click.echo(f"  {'':<11} -[:{edge.type}]-> {edge.target_id}")
        query = "Ada Lovelace"
        embedder = stores.embedder
        if isinstance(embedder, HashingEmbedder):
            vec = await embedder.embed_query(query)
            hits = await vector.search(TENANTS[0], vec, 3)
            click.secho(f"\nvector search in acme for {query!r}", bold=True)
            for hit in hits:
                click.echo(f"  {hit.score:.3f}  {hit.record.id}  {hit.record.metadata.get('name')}")
    finally:
        await stores.aclose()
