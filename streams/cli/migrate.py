"""``redstring migrate``: run both stores' pending schema migrations."""

from __future__ import annotations

import asyncio

import click

from streams.settings import Settings


@click.command("migrate", short_help="Run both stores' pending schema migrations.")
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Rows per transaction of the graph's conversion.",
)
def migrate_command(batch: int) -> None:
    """Bring the Neo4j graph and the Postgres schema to this version's model.

    Stop the workers first: they refuse to start while the graph has a
    migration pending, but one already running older code would keep writing
    the old model. Converting the graph runs in batches that each commit on
    their own; if it is interrupted, run it again and it resumes. Running it
    on an up-to-date store changes nothing.
    """
    from adapters.neo4j.migrations import MigrationProgress
    from adapters.neo4j.schema import GraphSchemaVersionError
    from streams.ops.migrate import migrate_stores

    def progress(step: MigrationProgress) -> None:
        done = "entities labelled" if step.step == "labels" else "edges converted"
        click.echo(f"  graph: {step.rows} {done}")

    settings = Settings()
    try:
        report = asyncio.run(migrate_stores(settings, batch=batch, on_batch=progress))
    except GraphSchemaVersionError as exc:
        raise click.ClickException(str(exc)) from None
    graph, vector = report.graph, report.vector
    if graph.from_version == graph.to_version:
        click.echo(f"graph ({graph.database}): at version {graph.to_version}, nothing to do")
    elif graph.from_version == 0:
        click.echo(f"graph ({graph.database}): empty, stamped version {graph.to_version}")
    else:
        click.echo(
            f"graph ({graph.database}): version {graph.from_version} -> {graph.to_version}, "
            f"{graph.labelled} entities labelled, {graph.converted} edges converted"
        )
    applied = ", ".join(map(str, vector.applied)) or "none pending"
    click.echo(f"vectors (schema {vector.schema}): at version {vector.version}, applied {applied}")
