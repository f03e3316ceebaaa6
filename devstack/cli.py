"""``redstring dev``: the local stack (Kafka, Neo4j, Postgres+pgvector on 127.0.0.1).

Uses only click and the standard library at import time; the Kafka, Neo4j and
Postgres clients are imported when a server is checked.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from devstack import stack
from devstack.errors import DevstackError

F = TypeVar("F", bound=Callable[..., Any])


def _one_line_errors(func: F) -> F:
    """Turn a DevstackError into one line on stderr and exit status 1 (no traceback)."""
    import functools

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DevstackError as error:
            click.echo(f"redstring dev: error: {error}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _root(value: str | None) -> Path:
    return Path(value).resolve() if value else stack.default_root()


root_option = click.option(
    "--root",
    type=click.Path(file_okay=False),
    default=None,
    help="The checkout whose .devstack/ to use (default: the one around the cwd).",
)


@click.group(name="dev", short_help="The local stack: Kafka, Neo4j, Postgres+pgvector.")
def dev() -> None:
    """The local stack: Kafka 4 (KRaft), Neo4j 5.26 and Postgres+pgvector on 127.0.0.1.

    Data lives in .devstack/; jars are cached in ~/.m2 and ~/.cache/redstring.
    `eval "$(redstring dev up)"` sets the REDSTRING_* endpoints in your shell (and the
    DEVSTACK_KAFKA_* ones of Kafka's secured listeners: SSL, mTLS, SASL_SSL, SASL_PLAINTEXT).
    """


@dev.command(short_help="Start the stack; print its `export REDSTRING_*=...` lines.")
@root_option
@_one_line_errors
def up(root: str | None) -> None:
    """Start the stack (a no-op for what runs already); print `export REDSTRING_*=...` lines."""
    began = time.monotonic()
    env = stack.ensure_up(_root(root))
    click.echo(f"stack up in {time.monotonic() - began:.1f}s", err=True)
    click.echo(stack.export_lines(env))


@dev.command()
@root_option
@click.option("--purge", is_flag=True, help="Also delete .devstack/ (all data, logs, password).")
@_one_line_errors
def down(root: str | None, purge: bool) -> None:
    """Stop the processes `up` started (by recorded pid, never by name)."""
    stack.down(_root(root), purge=purge)


@dev.command(short_help="Each service's pid, port, memory and one real request.")
@root_option
@_one_line_errors
def status(root: str | None) -> None:
    """Show each service: pid, port, memory, and the answer to one real request."""
    statuses = stack.status(_root(root))
    for s in statuses:
        ports = ",".join(str(p) for p in s.ports.values())
        if not s.running:
            click.echo(f"{s.name:<9} stopped   port {ports}")
            continue
        memory = ""
        if s.rss_mib is not None:
            memory = f"  rss {s.rss_mib:.0f} MiB (peak {s.peak_rss_mib or 0:.0f} MiB)"
        click.echo(f"{s.name:<9} running   port {ports}  pid {s.pid}{memory}  {s.answer}")
    env = stack.read_env(_root(root))
    if env and all(s.running for s in statuses):
        click.echo(stack.export_lines(env))
    if not all(s.running and not s.answer.startswith("NOT") for s in statuses):
        sys.exit(3)


@dev.command(short_help="The last lines of a service's log, or of all three.")
@root_option
@click.argument("service", required=False, type=click.Choice(stack.SERVICE_NAMES))
@click.option("-n", "--lines", default=40, show_default=True, help="Lines to show per file.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C stops).")
@_one_line_errors
def logs(root: str | None, service: str | None, lines: int, follow: bool) -> None:
    """Print the last lines of the log files (of SERVICE, or of all three)."""
    files = stack.log_files(_root(root), service)
    positions: dict[Path, int] = {}
    for path in files:
        if not path.is_file():
            click.echo(f"==> {path} (not there yet)")
            continue
        data = path.read_bytes()
        positions[path] = len(data)
        click.echo(f"==> {path}")
        for line in data.decode(errors="replace").splitlines()[-lines:]:
            click.echo(line)
    if not follow:
        return
    try:
        while True:
            for path in files:
                if not path.is_file():
                    continue
                with path.open("rb") as handle:
                    handle.seek(positions.get(path, 0))
                    chunk = handle.read()
                    positions[path] = handle.tell()
                if chunk:
                    prefix = f"[{path.name}] " if len(files) > 1 else ""
                    for line in chunk.decode(errors="replace").splitlines():
                        click.echo(prefix + line)
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass


@dev.command()
@root_option
def env(root: str | None) -> None:
    """Print the `export REDSTRING_*=...` lines of the running stack."""
    values = stack.read_env(_root(root))
    if not values:
        click.echo("redstring dev: error: the stack is not up (run `redstring dev up`)", err=True)
        sys.exit(1)
    click.echo(stack.export_lines(values))
