"""``redstring status``: lag per partition."""

from __future__ import annotations

import asyncio

import click

from streams.settings import Settings


@click.command("status")
def status_command() -> None:
    """Lag per partition: the log end, the group's committed offset and each
    store's checkpoint, plus open rebuild windows."""
    from streams.kafka.topics import TopicError, describe_topic
    from streams.ops.status import committed_offsets, partition_status
    from streams.wiring import open_stores

    settings = Settings()
    try:
        info = describe_topic(settings)
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None
    committed = committed_offsets(settings, info)

    async def run() -> None:
        stores = await open_stores(settings)
        try:
            rows = await partition_status(stores, info, committed)
        finally:
            await stores.aclose()
        click.echo(
            f"{'partition':>9} {'log end':>9} {'committed':>9} {'graph':>9} "
            f"{'vector':>9} {'lag':>7}  rebuilding"
        )
        for r in rows:
            c = r.committed if r.committed >= 0 else "-"
            click.echo(
                f"{r.partition:>9} {r.log_end:>9} {c:>9} {r.graph:>9} {r.vector:>9} "
                f"{r.lag:>7}  {', '.join(r.rebuilding)}"
            )

    asyncio.run(run())
