"""``redstring fold``: the producers' dry run, from a file of events."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from projections.snapshot import canonical_json
from streams.ops.dry_run import DryRunRefused, fold_lines
from streams.settings import Settings


@click.command("fold")
@click.argument("events", type=click.Path(exists=True, dir_okay=False, path_type=Path))
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
@click.option("--batch-size", default=500, show_default=True, help="Events per batch.")
@click.option(
    "--topic-id",
    default="",
    show_default=True,
    help="The Kafka topic id control events were signed for ('redstring topics describe' "
    "shows it; empty: events signed without a topic, as tests and demos sign them).",
)
def fold_command(
    events: Path, out: Path | None, trust_unsigned: bool, batch_size: int, topic_id: str
) -> None:
    """Apply EVENTS (one JSON envelope per line) to fresh in-memory stores and
    print the resulting state as canonical JSON.

    Positions are assigned in file order on one partition. Values that would be
    dead-lettered are listed on stderr with their reasons. Control events are
    verified with REDSTRING_CONTROL_KEYS and REDSTRING_CONTROL_KEY, for the
    topic id --topic-id, as the workers verify them. A file has no Kafka
    timestamps, so their age (REDSTRING_CONTROL_MAX_AGE_S) is not judged. The
    caps (REDSTRING_MAX_*) are the workers' settings.
    """
    lines = [line for line in events.read_bytes().splitlines() if line.strip()]
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
