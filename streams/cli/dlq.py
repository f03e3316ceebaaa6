"""``redstring dlq``: list, show and re-drive dead letters."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from streams.cli.output import Format, output_option, print_json, text
from streams.settings import Settings

if TYPE_CHECKING:
    from streams.kafka.dead_letters import StoredLetter


@click.group()
def dlq() -> None:
    """List, show and re-drive dead letters (<topic>.dlq)."""


def _letter(letter: StoredLetter) -> dict[str, Any]:
    """A dead letter's JSON form, without its value (docs/operations.md)."""
    fields = asdict(letter)
    del fields["value"]
    return {**fields, "key": text(letter.key)}


@dlq.command("list", short_help="One line per dead letter: offset, origin, reason.")
@click.option("--limit", type=int, default=None, help="Show at most this many.")
@output_option
def dlq_list(limit: int | None, output: Format) -> None:
    """One line per dead letter: its DLQ offset, where it came from, and why."""
    from streams.kafka.dead_letters import read_letters

    settings = Settings()
    letters = read_letters(settings, limit)
    if output == "json":
        print_json({"topic": settings.dlq_topic, "letters": [_letter(x) for x in letters]})
        return
    for letter in letters:
        source = f"[{letter.source_partition}]@{letter.source_offset}"
        key = (letter.key or b"").decode("utf-8", "replace")
        click.echo(f"{letter.dlq_offset:>6}  {source:<14} key={key:<20} {letter.reason}")


@dlq.command("show")
@click.argument("dlq_offset", type=int)
@output_option
def dlq_show(dlq_offset: int, output: Format) -> None:
    """Print one dead letter's reason and value."""
    from streams.kafka.dead_letters import read_letters

    for letter in read_letters(Settings()):
        if letter.dlq_offset != dlq_offset:
            continue
        value = _parsed(letter)
        if output == "json":
            print_json({**_letter(letter), "value": text(letter.value), "value_json": value})
            return
        click.echo(f"reason: {letter.reason}")
        click.echo(f"from: partition {letter.source_partition} offset {letter.source_offset}")
        if value is None:
            click.echo(text(letter.value) or "")
        else:
            click.echo(json.dumps(value, indent=2, ensure_ascii=False))
        return
    raise click.ClickException(f"no dead letter at offset {dlq_offset}; see `redstring dlq list`")


def _parsed(letter: StoredLetter) -> Any:
    """The value parsed when it is JSON (most dead letters are), else None."""
    try:
        return json.loads(letter.value or b"")
    except ValueError:
        return None


@dlq.command("redrive", short_help="Publish dead letters to the events topic again.")
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
