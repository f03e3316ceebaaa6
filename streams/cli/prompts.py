"""What several commands ask of the operator: a tenant id, a confirmation, and
who they are (recorded in the control events they publish)."""

from __future__ import annotations

import getpass
import sys

import click

from contracts.ids import TenantId, tenant_id


def parse_tenant(value: str) -> TenantId:
    try:
        return tenant_id(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--tenant") from None


def confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.ClickException(f"{question} Refusing without a terminal; pass --yes.")
    # On stderr, so that the answer is asked for even when stdout is piped (-o json).
    click.confirm(question, abort=True, err=True)


def operator() -> str:
    try:
        return f"redstring-cli:{getpass.getuser()}"
    except Exception:
        return "redstring-cli"
