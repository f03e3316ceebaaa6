"""The mechanics both coverage gates share
(docs/adr/0012-compliance-suites-and-coverage-gates.md): derive a port's read methods
from its Protocol, and match them against a compliance suite's test
names by convention. Each gate module states its own port, read types and
guards; only the introspection lives here."""

from __future__ import annotations

import inspect
import re
from types import ModuleType
from typing import Any, get_args, get_type_hints

COPY_CONVENTION = "test_{method}_returns_copies"
TENANT_CONVENTION = "test_{method}_never_crosses_tenants"


def mentions(annotation: object, targets: frozenset[object]) -> bool:
    """Whether ``annotation`` names one of ``targets`` at any nesting depth."""
    if annotation in targets:
        return True
    return any(mentions(arg, targets) for arg in get_args(annotation))


def public_async_methods(protocol: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(protocol, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }


def read_methods(protocol: type, namespace: ModuleType, read_types: frozenset[object]) -> set[str]:
    """Public async methods whose resolved return annotation mentions a read type.
    ``namespace`` resolves the port's annotations (written under TYPE_CHECKING
    or as strings)."""
    return {
        name
        for name, member in public_async_methods(protocol).items()
        if mentions(get_type_hints(member, globalns=vars(namespace)).get("return"), read_types)
    }


def uncovered(suite: type, methods: set[str], convention: str) -> list[str]:
    return sorted(m for m in methods if not hasattr(suite, convention.format(method=m)))


def named_methods(suite: type, convention: str) -> set[str]:
    """The methods that tests on ``suite`` name through ``convention``."""
    pattern = re.compile("^" + convention.format(method="(?P<method>.+)") + "$")
    return {match["method"] for name in dir(suite) if (match := pattern.match(name)) is not None}
