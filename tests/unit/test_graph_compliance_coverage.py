"""The graph compliance suite still covers the graph port
(docs/adr/0012-compliance-suites-and-coverage-gates.md).

Every read method of ``GraphStore`` (a public async method whose resolved
return annotation mentions ``Entity``, ``Relationship``, ``Alias`` or
``EntityId`` at any depth, so ``dict[EntityId, EntityId]`` counts) must have
``test_{method}_returns_copies`` and ``test_{method}_never_crosses_tenants`` on
``GraphStoreCompliance``. The read set is derived from the Protocol and the
test names from the convention.

There is no registry and no exemption list, not even an empty one: the suite
was named to the convention from the start, so nothing needs mapping, and a
read that crosses tenants is a confidentiality bug in every case. The answer
to a differently-named test is to rename the test.

Guards keep the gate from going quiet: the port must have at least eight reads
(a detector that finds nothing passes vacuously; ``>=`` because the graph read
surface grows), and every test of either shape must name a method that is
still on the port. The last class checks what introspection cannot: that the
strategies feeding the properties draw every value kind the stores must hold.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import contracts.ports.graph as graph_port
from adapters.compliance.graph_store import GraphStoreCompliance
from adapters.compliance.strategies import names, property_dicts
from contracts.domain import Alias, Entity, Relationship, blocking_key, check_properties
from contracts.ids import EntityId
from contracts.ports.graph import GraphStore
from tests.unit import coverage_gate as gate
from tests.unit.coverage_gate import (
    COPY_CONVENTION,
    TENANT_CONVENTION,
    named_methods,
    public_async_methods,
    uncovered,
)

#: The one thing introspection cannot infer: which types a read hands back.
READ_TYPES: frozenset[object] = frozenset({Entity, Relationship, Alias, EntityId})


def port_methods() -> dict[str, Any]:
    return public_async_methods(GraphStore)


def read_methods() -> set[str]:
    return gate.read_methods(GraphStore, graph_port, READ_TYPES)


def _uncovered(convention: str) -> list[str]:
    return uncovered(GraphStoreCompliance, read_methods(), convention)


def _named_methods(convention: str) -> set[str]:
    return named_methods(GraphStoreCompliance, convention)


class TestTheGateCoversTheGraphPort:
    def test_the_port_has_read_methods_to_check(self) -> None:
        """Guard the guard: a detector that finds nothing passes vacuously."""
        assert len(read_methods()) >= 8

    def test_resolution_counts_as_a_read(self) -> None:
        """It returns only ids, nested in a dict: the depth of the search is
        what brings it in scope, and a leak there rewrites another tenant's edges."""
        assert "resolve_entity_ids" in read_methods()

    def test_every_read_method_has_a_copy_test(self) -> None:
        missing = _uncovered(COPY_CONVENTION)
        assert not missing, (
            "read methods of GraphStore without a mutation-isolation test on "
            f"GraphStoreCompliance: add {[COPY_CONVENTION.format(method=m) for m in missing]}"
        )

    def test_every_read_method_has_a_tenant_test(self) -> None:
        missing = _uncovered(TENANT_CONVENTION)
        assert not missing, (
            "read methods of GraphStore without a tenant-isolation test on "
            f"GraphStoreCompliance: add {[TENANT_CONVENTION.format(method=m) for m in missing]}"
        )

    def test_every_convention_test_names_a_method_still_on_the_port(self) -> None:
        """The other direction: a test named for a method the port dropped
        matches nothing and would pass for ever. Tenant tests may name writes
        too (a write must not land in another tenant); copy tests only reads."""
        allowed = {COPY_CONVENTION: read_methods(), TENANT_CONVENTION: set(port_methods())}
        for convention, methods in allowed.items():
            stale = sorted(_named_methods(convention) - methods)
            assert not stale, (
                f"tests named {convention!r} for methods GraphStore does not have"
                f"{' as reads' if convention == COPY_CONVENTION else ''}: "
                f"{[convention.format(method=m) for m in stale]}"
            )


SAMPLE = 300
NAMES = names()


@functools.cache
def _draw(strategy: st.SearchStrategy[Any], count: int = SAMPLE) -> list[Any]:
    drawn: list[Any] = []

    # derandomize: a guard that passes or fails by luck is not a guard.
    @settings(
        max_examples=count,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn


def _values(dicts: list[dict[str, Any]]) -> list[Any]:
    return [value for d in dicts for value in d.values()]


class TestThePropertyStrategyReachesEveryValueKind:
    """Introspection proves a read is covered; only this proves the covered
    reads are fed the values a store could mangle. A generator that cannot draw
    a 64-bit edge or an empty list does not fail: the round-trip goes quiet."""

    def test_every_scalar_kind_is_drawn(self) -> None:
        values = _values(_draw(property_dicts))
        assert any(isinstance(v, bool) for v in values), "no bool"
        assert any(isinstance(v, int) and not isinstance(v, bool) for v in values), "no int"
        assert any(isinstance(v, float) for v in values), "no float"
        assert any(isinstance(v, str) and not v.isascii() for v in values), "no non-ASCII str"

    def test_the_64_bit_edges_are_drawn(self) -> None:
        ints = {v for v in _values(_draw(property_dicts)) if type(v) is int}
        assert {-(2**63), 2**63 - 1} <= ints

    def test_lists_of_every_kind_and_empty_lists_are_drawn(self) -> None:
        lists = [v for v in _values(_draw(property_dicts)) if isinstance(v, list)]
        assert [] in lists, "no empty list"
        kinds = {type(v[0]) for v in lists if v}
        assert kinds == {str, int, float, bool}, f"lists drawn only of {kinds}"

    def test_every_drawn_dict_is_legal(self) -> None:
        """Widening the strategy must not start drawing properties no adapter
        is obliged to accept: that turns a strategy fix into adapter failures."""
        for properties in _draw(property_dicts):
            check_properties(properties, "drawn")


class TestTheNameStrategyReachesTheBlockingKeyFolds:
    def test_names_differ_from_their_blocking_keys_in_every_way_the_key_folds(self) -> None:
        drawn = _draw(NAMES)
        assert any(n != n.strip() for n in drawn), "no leading or trailing whitespace"
        assert any("  " in n or "\t" in n or "\u00a0" in n for n in drawn), "no odd inner gap"
        assert any(n.casefold() != n for n in drawn), "no upper case"
        assert any(unicodedata.normalize("NFKC", n) != n for n in drawn), "no compatibility form"

    def test_distinct_names_share_blocking_keys(self) -> None:
        drawn = set(_draw(NAMES))
        keys = [blocking_key(n) for n in drawn]
        assert len(set(keys)) < len(keys), "no two drawn names collide on a blocking key"
