"""``redstring export``: one tenant from the live stores, as canonical JSON."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from contracts.domain import StreamPartition
from streams.cli.prompts import parse_tenant
from streams.settings import Settings


@click.command("export", short_help="One tenant from the real stores, as canonical JSON.")
@click.option("--tenant", "tenant", required=True, help="The tenant to export.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Default: stdout.")
def export_command(tenant: str, out: Path | None) -> None:
    """Read one tenant from both real stores and write the same canonical JSON
    as `redstring fold`, so a live projection compares byte for byte with a
    dry run of the same events."""
    from streams.kafka.partitioning import partition_for
    from streams.kafka.topics import TopicError, describe_topic
    from streams.ops.export import export_json
    from streams.wiring import open_stores

    settings = Settings()
    tenant_ = parse_tenant(tenant)
    try:
        info = describe_topic(settings)
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None
    part = StreamPartition(info.name, partition_for(tenant_, info.partition_count), info.topic_id)

    async def run() -> str:
        stores = await open_stores(settings)
        try:
            return await export_json(stores, tenant_, part)
        finally:
            await stores.aclose()

    text = asyncio.run(run())
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}", err=True)
