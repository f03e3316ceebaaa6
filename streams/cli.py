"""The ``redstring`` command line: the operator's and producer's entry point."""

from __future__ import annotations

import click


class Main(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        from streams.kafka_config import KafkaConfigError, KafkaConnectError

        try:
            return super().invoke(ctx)
        except (KafkaConfigError, KafkaConnectError) as exc:
            # Settings that cannot work: one line naming them, not a traceback.
            raise click.ClickException(str(exc)) from None


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="redstring-projector")
def main() -> None:
    """redstring keeps a multi-tenant knowledge graph in Neo4j and Postgres/pgvector
    in sync with a Kafka event log.

    Configuration comes from REDSTRING_* environment variables (docs/deploy.md
    lists them; one that names no setting is refused); every command below
    explains itself with --help.
    """
    import os

    from streams.settings import UnknownSettingError, check_environment

    try:
        check_environment(os.environ)
    except UnknownSettingError as exc:
        raise click.UsageError(str(exc)) from None


def _register_subcommands() -> None:
    # Imported here so that a missing optional dependency of one command group
    # does not break `redstring --help` for the others.
    from streams import cli_commands
    from streams.packaging import check_own_packages

    check_own_packages()
    cli_commands.register(main)


_register_subcommands()
