"""``redstring publish``: a file of events onto the events topic."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from streams.settings import Settings


@click.command("publish", short_help="Validate a file of events, then publish it.")
@click.argument("events", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def publish_command(events: Path) -> None:
    """Publish EVENTS (one JSON envelope per line) to the events topic, keyed by
    tenant, and print each event's position. Every line is validated first;
    nothing is sent if any line is invalid."""
    from streams.ops.event_files import EventFileError, read_events
    from streams.sdk.publisher import Publisher

    try:
        parsed = read_events(events)
    except EventFileError as exc:
        raise click.ClickException(str(exc)) from None
    settings = Settings()

    async def run() -> None:
        async with Publisher(settings) as publisher:
            with click.progressbar(
                length=len(parsed), label="publishing", file=click.get_text_stream("stderr")
            ) as bar:
                for start in range(0, len(parsed), 500):
                    chunk = parsed[start : start + 500]
                    positions = await publisher.publish_many(chunk)
                    for event, pos in zip(chunk, positions, strict=True):
                        where = f"{pos.topic}[{pos.partition}]@{pos.offset}"
                        click.echo(f"{event.event_id} {event.tenant_id} -> {where}")
                    bar.update(len(chunk))

    asyncio.run(run())
