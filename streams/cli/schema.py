"""``redstring schema``: the event contract as JSON Schema."""

from __future__ import annotations

from pathlib import Path

import click


@click.group(short_help="The event contract as JSON Schema.")
def schema() -> None:
    """The event contract as JSON Schema, for producers not written in Python."""


@schema.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def schema_export(directory: Path) -> None:
    """Write <EventType>.schema.json for every event type into DIRECTORY."""
    from contracts.schema import export_schemas

    for path in export_schemas(directory):
        click.echo(f"wrote {path}")
