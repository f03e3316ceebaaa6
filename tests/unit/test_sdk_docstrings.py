"""The public SDK's docstrings document every parameter (issue 19, item 7).

``Publisher``, ``wait_until_projected`` and the store ``open`` functions are
what producers and readers call (docs/producers.md, docs/readers.md). Each
docstring has an ``Args:`` section naming exactly the parameters of the
signature, each parameter with a default names that default, and the
``Example:`` code compiles; so a parameter added, renamed, removed or given
another default without its documentation fails here.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from adapters.neo4j import Neo4jGraphStore
from adapters.pgvector import PgVectorStore
from streams.sdk.publisher import Publisher
from streams.sdk.read_your_writes import wait_until_projected
from streams.wiring import make_embedder, open_readers, open_stores

#: (name, the object whose docstring documents it, the callable whose
#: signature it documents). A class documents its ``__init__``.
PUBLIC: list[tuple[str, Any, Callable[..., Any]]] = [
    ("Publisher", Publisher, Publisher.__init__),
    ("Publisher.publish", Publisher.publish, Publisher.publish),
    ("Publisher.publish_many", Publisher.publish_many, Publisher.publish_many),
    ("Publisher.flush", Publisher.flush, Publisher.flush),
    ("wait_until_projected", wait_until_projected, wait_until_projected),
    ("Neo4jGraphStore.open", Neo4jGraphStore.open, Neo4jGraphStore.open),
    ("PgVectorStore.open", PgVectorStore.open, PgVectorStore.open),
    ("open_stores", open_stores, open_stores),
    ("open_readers", open_readers, open_readers),
    ("make_embedder", make_embedder, make_embedder),
]
#: Those without a result to document (a constructor).
NO_RETURNS = {"Publisher"}
#: Those with an example of their own (the rest are shown in their class's).
WITH_EXAMPLE = {name for name, _, _ in PUBLIC} - {"Publisher.flush"}

SECTION = re.compile(r"^(\w[\w ]*):\s*$")
ENTRY = re.compile(r"^(\*{0,2}\w+):")


def sections(doc: str) -> dict[str, str]:
    """Google-style sections (``Args:``, ``Returns:``...) of a cleaned
    docstring, each section's body dedented."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in doc.splitlines():
        match = SECTION.match(line)
        if match and not line.startswith(" "):
            current = found.setdefault(match.group(1), [])
        elif current is not None and (line.startswith(" ") or not line.strip()):
            current.append(line)
        else:
            current = None
    return {name: textwrap.dedent("\n".join(body)) for name, body in found.items()}


def documented_args(args: str) -> dict[str, str]:
    """Each ``name: description`` entry of an ``Args:`` body, by name (with
    ``*``/``**`` kept), its description joined onto one line."""
    entries: dict[str, list[str]] = {}
    current: list[str] = []
    for line in args.splitlines():
        match = ENTRY.match(line)
        if match:
            current = entries.setdefault(match.group(1), [])
            current.append(line[match.end() :].strip())
        elif line.strip():
            current.append(line.strip())
    return {name: " ".join(text) for name, text in entries.items()}


def signature_args(function: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    names: dict[str, inspect.Parameter] = {}
    for name, param in inspect.signature(function).parameters.items():
        if name in {"self", "cls"}:
            continue
        prefix = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
        names[prefix + name] = param
    return names


def docstring(name: str, holder: Any) -> str:
    doc = inspect.getdoc(holder)
    assert doc, f"{name} has no docstring"
    return doc


@pytest.mark.parametrize(("name", "holder", "function"), PUBLIC, ids=[p[0] for p in PUBLIC])
def test_args_section_names_every_parameter(
    name: str, holder: Any, function: Callable[..., Any]
) -> None:
    parts = sections(docstring(name, holder))
    assert "Args" in parts, f"{name}'s docstring has no Args: section"
    documented = documented_args(parts["Args"])
    expected = signature_args(function)
    assert list(documented) == list(expected), (
        f"{name}: the docstring's Args: {list(documented)} do not match the "
        f"signature's parameters {list(expected)} (names and order)"
    )
    for arg, text in documented.items():
        assert text, f"{name}: parameter {arg} has no description"


@pytest.mark.parametrize(("name", "holder", "function"), PUBLIC, ids=[p[0] for p in PUBLIC])
def test_every_default_is_stated(name: str, holder: Any, function: Callable[..., Any]) -> None:
    documented = documented_args(sections(docstring(name, holder)).get("Args", ""))
    for arg, param in signature_args(function).items():
        if param.default is inspect.Parameter.empty:
            continue
        spellings = {repr(param.default), json.dumps(param.default)}
        assert any(s in documented.get(arg, "") for s in spellings), (
            f"{name}: parameter {arg} defaults to {param.default!r}, "
            "which its Args: entry does not state"
        )


@pytest.mark.parametrize(("name", "holder", "function"), PUBLIC, ids=[p[0] for p in PUBLIC])
def test_returns_raises_and_example(name: str, holder: Any, function: Callable[..., Any]) -> None:
    parts = sections(docstring(name, holder))
    if name not in NO_RETURNS:
        assert "Returns" in parts, f"{name}'s docstring has no Returns: section"
    if name in WITH_EXAMPLE:
        assert "Example" in parts, f"{name}'s docstring has no Example: section"
        blocks = re.findall(r"```python\n(.*?)```", parts["Example"], re.DOTALL)
        assert blocks, f"{name}'s Example: has no ```python block"
        for block in blocks:
            # Top-level await and async with, as in an asyncio REPL.
            compile(
                textwrap.dedent(block),
                f"<{name} example>",
                "exec",
                flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                dont_inherit=True,
            )


def test_sections_parser_reads_args_and_examples() -> None:
    doc = textwrap.dedent(
        """\
        Summary.

        Args:
            first: One,
                continued.
            **rest: Extra.

        Returns:
            Nothing.

        Example:
            ```python
            await f()
            ```
        """
    )
    parts = sections(doc)
    assert set(parts) == {"Args", "Returns", "Example"}
    assert documented_args(parts["Args"]) == {"first": "One, continued.", "**rest": "Extra."}
