"""Attaches the command groups to the ``redstring`` CLI."""

from __future__ import annotations

import click


def register(main: click.Group) -> None:
    try:
        from devstack.cli import dev
    except ImportError:  # pragma: no cover - devstack ships with the repository
        pass
    else:
        main.add_command(dev)
