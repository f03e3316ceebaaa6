"""Operator commands that read the stores: status, dead letters, export."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from contracts.domain import StreamPartition
from contracts.ids import tenant_id
from streams.settings import Settings


@click.command("status")
def status_command() -> None:
    """Lag per partition: the log end, the group's committed offset and each
    store's checkpoint, plus open rebuild windows."""
    from confluent_kafka import Consumer, TopicPartition

    from streams.stores import open_stores
    from streams.topics import TopicError, describe_topic

    settings = Settings()
    try:
        info = describe_topic(settings)
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None
    consumer = Consumer({**settings.kafka_client_config(), "group.id": settings.group_id})
    try:
        committed = {
            tp.partition: tp.offset
            for tp in consumer.committed(
                [TopicPartition(info.name, p.partition) for p in info.partitions], timeout=10
            )
        }
    finally:
        consumer.close()

    async def run() -> None:
        stores = await open_stores(settings)
        try:
            click.echo(
                f"{'partition':>9} {'log end':>9} {'committed':>9} {'graph':>9} "
                f"{'vector':>9} {'lag':>7}  rebuilding"
            )
            for p in info.partitions:
                part = StreamPartition(info.name, p.partition, info.topic_id)
                g = await stores.graph.checkpoint(part)
                v = await stores.vector.checkpoint(part)
                markers = [
                    f"{m.tenant_id} {m.applied_through + 1 - m.start_offset}/"
                    f"{m.end_offset - m.start_offset}"
                    for store in (stores.graph, stores.vector)
                    for m in await store.rebuild_markers(part)
                ]
                lag = max(0, p.high - (min(g, v) + 1))
                c = committed.get(p.partition, -1)
                click.echo(
                    f"{p.partition:>9} {p.high:>9} {c if c >= 0 else '-':>9} {g:>9} {v:>9} "
                    f"{lag:>7}  {', '.join(markers)}"
                )
        finally:
            await stores.aclose()

    asyncio.run(run())


@click.group()
def dlq() -> None:
    """List, show and re-drive dead letters (<topic>.dlq)."""


@dlq.command("list")
@click.option("--limit", type=int, default=None, help="Show at most this many.")
def dlq_list(limit: int | None) -> None:
    """One line per dead letter: its DLQ offset, where it came from, and why."""
    from streams.dlq import read_letters

    for letter in read_letters(Settings(), limit):
        source = f"[{letter.source_partition}]@{letter.source_offset}"
        key = (letter.key or b"").decode("utf-8", "replace")
        click.echo(f"{letter.dlq_offset:>6}  {source:<14} key={key:<20} {letter.reason}")


@dlq.command("show")
@click.argument("dlq_offset", type=int)
def dlq_show(dlq_offset: int) -> None:
    """Print one dead letter's reason and value."""
    from streams.dlq import read_letters

    for letter in read_letters(Settings()):
        if letter.dlq_offset == dlq_offset:
            click.echo(f"reason: {letter.reason}")
            click.echo(f"from: partition {letter.source_partition} offset {letter.source_offset}")
            value = letter.value or b""
            try:
                click.echo(json.dumps(json.loads(value), indent=2, ensure_ascii=False))
            except ValueError:
                click.echo(value.decode("utf-8", "replace"))
            return
    raise click.ClickException(f"no dead letter at offset {dlq_offset}; see `redstring dlq list`")


@dlq.command("redrive")
@click.argument("dlq_offsets", type=int, nargs=-1, required=True)
def dlq_redrive(dlq_offsets: tuple[int, ...]) -> None:
    """Publish the given dead letters to the events topic again, key and value
    unchanged (after fixing whatever refused them: a worker upgrade, a store
    setting). A still-invalid value is dead-lettered again."""
    from streams.dlq import read_letters
    from streams.kafka_producer import AsyncProducer

    settings = Settings()
    wanted = set(dlq_offsets)
    letters = [letter for letter in read_letters(settings) if letter.dlq_offset in wanted]
    missing = wanted - {letter.dlq_offset for letter in letters}
    if missing:
        raise click.ClickException(f"no dead letter at offset(s) {sorted(missing)}")

    async def run() -> None:
        producer = AsyncProducer(settings)
        try:
            for letter in letters:
                pos = await producer.send(
                    settings.topic,
                    letter.key,
                    letter.value,
                    [("redstring.redriven-from", str(letter.dlq_offset).encode())],
                )
                click.echo(
                    f"re-drove {letter.dlq_offset} -> {pos.topic}[{pos.partition}]@{pos.offset}"
                )
        finally:
            await asyncio.to_thread(producer.close)

    asyncio.run(run())


@click.command("export")
@click.option("--tenant", "tenant", required=True, help="The tenant to export.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Default: stdout.")
def export_command(tenant: str, out: Path | None) -> None:
    """Read one tenant from both real stores and write the same canonical JSON
    as `redstring fold`, so a live projection compares byte for byte with a
    dry run of the same events."""
    from projections.snapshot import canonical_json
    from streams.partitioning import partition_for
    from streams.projected import export_tenant
    from streams.stores import open_stores
    from streams.topics import TopicError, describe_topic

    settings = Settings()
    try:
        tenant_ = tenant_id(tenant)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--tenant") from None
    try:
        info = describe_topic(settings)
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None
    part = StreamPartition(info.name, partition_for(tenant_, info.partition_count), info.topic_id)

    async def run() -> str:
        stores = await open_stores(settings)
        try:
            state = await export_tenant(stores.graph, stores.vector, tenant_, part)
        finally:
            await stores.aclose()
        return canonical_json({"tenants": {tenant_: state}})

    text = asyncio.run(run())
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}", err=True)
