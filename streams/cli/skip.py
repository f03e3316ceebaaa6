"""``redstring skip``: move a paused partition past the one record it waits on
(the procedure and its refusals: streams.ops.skip)."""

from __future__ import annotations

import asyncio

import click

from streams.cli.prompts import confirm, operator
from streams.ops import skip as procedure
from streams.settings import Settings


@click.command("skip", short_help="Skip the record a paused partition waits on.")
@click.option("--partition", type=int, required=True, help="The paused partition.")
@click.option("--offset", type=int, required=True, help="The offset of the record it waits on.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def skip_command(partition: int, offset: int, yes: bool) -> None:
    """Skip the one record a partition is paused on (a newer schema_version).

    Refuses unless both stores' next needed offset for PARTITION is exactly
    OFFSET and the record there is one the workers pause on. Shows the record
    and asks for confirmation, writes it to the dead-letter topic (re-drive it
    with `redstring dlq redrive` once the workers are upgraded), then moves
    both stores past it. A running worker resumes the partition within a few
    seconds, without a restart.
    """
    settings = Settings()

    async def run() -> None:
        part = procedure.topic_partition(settings, partition)
        record = await asyncio.to_thread(procedure.fetch_record, settings, partition, offset)
        stores, folds = await procedure.open_folds(settings)
        try:
            skippable = await procedure.check_skip(
                folds,
                part,
                offset,
                record,
                settings.control_keyring(),
                limits=settings.event_limits(),
            )
            click.echo(skippable.describe())
            confirm(
                f"Dead-letter this record and move both stores past "
                f"{part.topic}[{partition}]@{offset}?",
                yes,
            )
            sink = procedure.dead_letter_sink(settings)
            try:
                after = await procedure.skip(folds, sink, skippable, operator())
            finally:
                await asyncio.to_thread(sink.close)
        finally:
            await stores.aclose()
        click.echo(
            f"dead-lettered {part.topic}[{partition}]@{offset} to {settings.dlq_topic}; "
            f"the stores now need {min(after)}. A running worker resumes the partition "
            "within a few seconds."
        )

    try:
        asyncio.run(run())
    except procedure.SkipRefused as exc:
        raise click.ClickException(str(exc)) from None
