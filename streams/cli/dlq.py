"""``redstring dlq``: list, show and re-drive dead letters."""

from __future__ import annotations

import asyncio
import json

import click

from streams.settings import Settings


@click.group()
def dlq() -> None:
    """List, show and re-drive dead letters (<topic>.dlq)."""


@dlq.command("list")
@click.option("--limit", type=int, default=None, help="Show at most this many.")
def dlq_list(limit: int | None) -> None:
    """One line per dead letter: its DLQ offset, where it came from, and why."""
    from streams.kafka.dead_letters import read_letters

    for letter in read_letters(Settings(), limit):
        source = f"[{letter.source_partition}]@{letter.source_offset}"
        key = (letter.key or b"").decode("utf-8", "replace")
        click.echo(f"{letter.dlq_offset:>6}  {source:<14} key={key:<20} {letter.reason}")


@dlq.command("show")
@click.argument("dlq_offset", type=int)
def dlq_show(dlq_offset: int) -> None:
    """Print one dead letter's reason and value."""
    from streams.kafka.dead_letters import read_letters

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
    from streams.kafka.dead_letters import read_letters, redrive

    settings = Settings()
    wanted = set(dlq_offsets)
    letters = [letter for letter in read_letters(settings) if letter.dlq_offset in wanted]
    missing = wanted - {letter.dlq_offset for letter in letters}
    if missing:
        raise click.ClickException(f"no dead letter at offset(s) {sorted(missing)}")

    async def run() -> None:
        async for letter, pos in redrive(settings, letters):
            click.echo(f"re-drove {letter.dlq_offset} -> {pos.topic}[{pos.partition}]@{pos.offset}")

    asyncio.run(run())
