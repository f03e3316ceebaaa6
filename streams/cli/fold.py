"""``redstring fold``: the producers' dry run, from a file of events."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import BinaryIO

import click

from projections.snapshot import canonical_json
from streams.ops.dry_run import DryRunRefused, fold_lines
from streams.ops.event_files import format_hint
from streams.settings import Settings

#: The exit status when lines were dead-lettered (without --allow-dead-letters):
#: apart from 1 (refused, or the command failed) so that a producer's CI can
#: tell "these events are wrong" from "the check did not run".
DEAD_LETTERS_EXIT = 3


@click.command("fold", short_help="Dry-run a file of events into in-memory stores.")
@click.argument("events", type=click.File("rb"))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the state here (default: stdout).",
)
@click.option(
    "--trust-unsigned",
    is_flag=True,
    help="Accept unsigned control events (a dry run without the control key).",
)
@click.option("--batch-size", type=click.IntRange(1), default=500, help="Events per batch [500].")
@click.option(
    "--allow-dead-letters",
    is_flag=True,
    help=f"Exit 0 even when lines are dead-lettered (otherwise {DEAD_LETTERS_EXIT}).",
)
@click.option(
    "--topic-id",
    default="",
    show_default=True,
    help="The Kafka topic id control events were signed for ('redstring topics describe' "
    "shows it; empty: events signed without a topic, as tests and demos sign them).",
)
def fold_command(
    events: BinaryIO,
    out: Path | None,
    trust_unsigned: bool,
    batch_size: int,
    allow_dead_letters: bool,
    topic_id: str,
) -> None:
    """Apply EVENTS (one JSON envelope per line; - reads stdin) to fresh
    in-memory stores and print the resulting state as canonical JSON.

    Positions are assigned in file order on one partition. Values that would
    be dead-lettered are listed on stderr with their reasons, and the command
    exits 3 unless --allow-dead-letters (the state is written either way).
    Control events are
    verified with REDSTRING_CONTROL_KEYS and REDSTRING_CONTROL_KEY, for the
    topic id --topic-id, as the workers verify them. A file has no Kafka
    timestamps, so their age (REDSTRING_CONTROL_MAX_AGE_S) is not judged. The
    caps (REDSTRING_MAX_*) are the workers' settings.
    """
    lines = [line for line in events.read().splitlines() if line.strip()]
    settings = Settings()
    try:
        result = asyncio.run(
            fold_lines(
                lines,
                control_key=settings.control_keyring(),
                trust_unsigned=trust_unsigned,
                batch_size=batch_size,
                topic_id=topic_id,
                limits=settings.event_limits(),
                max_alias_depth=settings.max_alias_depth,
            )
        )
    except DryRunRefused as exc:
        raise click.ClickException(str(exc)) from None
    for offset, reason in result.dead_letters:
        click.echo(f"dead letter: line {offset + 1}: {reason}", err=True)
    text = canonical_json(result.state)
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        tenants = result.state["tenants"]
        click.echo(
            f"folded {len(lines)} events for {len(tenants)} tenant(s) into {out}; "
            f"{len(result.dead_letters)} dead letter(s)",
            err=True,
        )
    hint = format_hint(lines) if result.dead_letters else None
    if hint is not None:
        click.echo(f"hint: {hint}", err=True)
    if result.dead_letters and not allow_dead_letters:
        click.echo(
            f"error: {len(result.dead_letters)} of {len(lines)} line(s) dead-lettered "
            "(--allow-dead-letters to accept that)",
            err=True,
        )
        raise click.exceptions.Exit(DEAD_LETTERS_EXIT)
