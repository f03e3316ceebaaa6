"""Attaches the command groups to the ``redstring`` CLI."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def schema() -> None:
    """The event contract as JSON Schema, for producers not written in Python."""


@schema.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def schema_export(directory: Path) -> None:
    """Write <EventType>.schema.json for every event type into DIRECTORY."""
    from contracts.schema import export_schemas

    for path in export_schemas(directory):
        click.echo(f"wrote {path}")


def register(main: click.Group) -> None:
    from streams.demo import demo_command
    from streams.fold_cli import fold_command
    from streams.inspect_cli import dlq, export_command, status_command
    from streams.ops_cli import publish_command, topics
    from streams.replay_cli import erase_command, replay_command
    from streams.skip_cli import skip_command
    from streams.worker_cli import worker_command

    main.add_command(schema)
    main.add_command(fold_command)
    main.add_command(topics)
    main.add_command(publish_command)
    main.add_command(worker_command)
    main.add_command(status_command)
    main.add_command(dlq)
    main.add_command(export_command)
    main.add_command(demo_command)
    main.add_command(replay_command)
    main.add_command(erase_command)
    main.add_command(skip_command)
    try:
        from devstack.cli import dev
    except ImportError:  # devstack ships with the repository, not with every install
        pass
    else:
        main.add_command(dev)
