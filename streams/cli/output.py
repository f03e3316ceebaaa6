"""``-o json|table``, as the commands that report something offer it.

A table is for people; JSON is for scripts, so it is one document on stdout
and everything else a command says (notes, warnings, progress bars, prompts)
goes to stderr, where it cannot break a ``| jq``. The documents' keys are
listed in docs/operations.md and only ever gain new ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import click

Format = Literal["table", "json"]
F = TypeVar("F", bound=Callable[..., Any])


def output_option(command: F) -> F:
    """Add ``-o/--output table|json`` to ``command`` (as its ``output`` argument)."""
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="json: one document on stdout (keys in docs/operations.md), the rest on stderr.",
    )(command)


def note(output: Format, message: str) -> None:
    """A line for the person at the terminal: on stdout beside a table, on
    stderr beside a JSON document."""
    click.echo(message, err=output == "json")


def print_json(document: Any, *, compact: bool = False) -> None:
    """``document`` as JSON on stdout: indented, or on one line (one document
    per line when a command keeps reporting)."""
    indent = None if compact else 2
    click.echo(json.dumps(document, indent=indent, ensure_ascii=False))


def text(raw: bytes | None) -> str | None:
    """Kafka bytes (a key, a value) as JSON can carry them."""
    return None if raw is None else raw.decode("utf-8", "replace")
