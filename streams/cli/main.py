"""The ``redstring`` group: which command lives in which module.

Commands load when they are named, not when this module is imported, so that
``redstring --help`` lists every command without a registration step run as an
import side effect, and a command whose optional dependency is missing
(``dev``, from the repository's devstack) is left out instead of breaking the
others.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

import click

#: name -> (module, attribute). One module per command group, each a thin click
#: layer over streams.ops, streams.kafka and streams.worker.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("streams.cli.demo", "demo_command"),
    "dlq": ("streams.cli.dlq", "dlq"),
    "erase": ("streams.cli.replay", "erase_command"),
    "export": ("streams.cli.export", "export_command"),
    "fold": ("streams.cli.fold", "fold_command"),
    "migrate": ("streams.cli.migrate", "migrate_command"),
    "publish": ("streams.cli.publish", "publish_command"),
    "replay": ("streams.cli.replay", "replay_command"),
    "schema": ("streams.cli.schema", "schema"),
    "serve": ("streams.cli.serve", "serve_command"),
    "skip": ("streams.cli.skip", "skip_command"),
    "status": ("streams.cli.status", "status_command"),
    "topics": ("streams.cli.topics", "topics"),
    "worker": ("streams.cli.worker", "worker_command"),
    # devstack ships with the repository, not with every install.
    "dev": ("devstack.cli", "dev"),
}


class Main(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._load(name) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name]
        try:
            loaded = importlib.import_module(module)
        except ImportError:
            if module.startswith("devstack."):
                return None
            raise
        command = getattr(loaded, attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}.{attribute} is not a click command")
        return command

    def main(self, *args: Any, **kwargs: Any) -> Any:
        from streams.packaging import check_own_packages

        # Before a command imports a layer that a foreign distribution may have
        # shadowed (docs/adr/0002-top-level-package-names.md).
        check_own_packages()
        return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        from streams.kafka.config import KafkaConfigError, KafkaConnectError
        from streams.kafka.topics import TopicError

        try:
            return super().invoke(ctx)
        except (KafkaConfigError, KafkaConnectError, TopicError) as exc:
            # Settings that cannot work: one line naming them, not a traceback.
            raise click.ClickException(str(exc)) from None


#: Commands that run as services and set up their own logging (JSON lines).
SERVICES = {"worker", "serve"}


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="redstring-projector")
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Show log lines on stderr, the Kafka client's included (-vv: debug).",
)
@click.pass_context
def main(ctx: click.Context, verbose: int) -> None:
    """redstring keeps a multi-tenant knowledge graph in Neo4j and Postgres/pgvector
    in sync with a Kafka event log.

    Configuration comes from REDSTRING_* environment variables (docs/deploy.md
    lists them; one that names no setting is refused); every command below
    explains itself with --help.
    """
    from streams.settings import UnknownSettingError, check_environment

    try:
        check_environment(os.environ)
    except UnknownSettingError as exc:
        raise click.UsageError(str(exc)) from None
    if ctx.invoked_subcommand not in SERVICES:
        _terminal_logging(verbose)


def _terminal_logging(verbose: int) -> None:
    from streams.kafka.config import CLIENT_LOG

    if verbose:
        level = logging.DEBUG if verbose > 1 else logging.INFO
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    else:
        # A command says in its own words what failed (KafkaConnectError); the
        # client's retries would bury that under lines of the same error.
        CLIENT_LOG.setLevel(logging.CRITICAL)
