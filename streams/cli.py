"""The ``redstring`` command line: the operator's and producer's entry point."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="redstring-projector")
def main() -> None:
    """redstring keeps a multi-tenant knowledge graph in Neo4j and Postgres/pgvector
    in sync with a Kafka event log.

    Configuration comes from REDSTRING_* environment variables; every command
    below explains itself with --help.
    """


def _register_subcommands() -> None:
    # Imported here so that a missing optional dependency of one command group
    # does not break `redstring --help` for the others.
    from streams import cli_commands
    from streams.packaging import check_own_packages

    check_own_packages()
    cli_commands.register(main)


_register_subcommands()
