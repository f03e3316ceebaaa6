"""The vector compliance suite still covers the vector port
(docs/adr/0012-compliance-suites-and-coverage-gates.md).

Every read method of ``VectorStore`` (a public async method whose return
annotation mentions ``VectorRecord``, ``VectorMatch`` or ``EntityId`` at any
depth) must have ``test_{method}_returns_copies`` and
``test_{method}_never_crosses_tenants`` on ``VectorStoreCompliance``. The read
set is derived from the Protocol, the test names from the convention.

There is deliberately no registry and no exemption list here, not even an
empty one. Every vector test was named to the convention from the start, so
nothing needs mapping; and an exemption slot exists to be filled. A read that
crosses tenants is a confidentiality bug in every case, and a read that cannot
leak a mutable view proves it with a three-line test rather than a sentence.
Unlike a graph gate that inherited differently-named tests, nothing is kept by
hand here: keep it that way. The answer to a differently-named test is to
rename the test.

Two guards keep the gate from going quiet: the read set is pinned exactly (a
detector that finds nothing, or finds the wrong thing, fails here by name), and
every test of either shape must name a live read method.

The last class checks what introspection cannot: that the metadata strategy
feeding the suite's properties draws the one key the port interprets.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

import contracts.ports.vector as vector_port
from adapters.compliance.vector_store import VectorStoreCompliance
from adapters.compliance.vector_strategies import TYPE_NAMES, metadata_dicts
from contracts.domain import ENTITY_TYPE_KEY, VectorMatch, VectorRecord
from contracts.ids import EntityId, TenantId
from contracts.ports.vector import VectorStore
from tests.unit import coverage_gate as gate
from tests.unit.coverage_gate import (
    COPY_CONVENTION,
    TENANT_CONVENTION,
    named_methods,
    uncovered,
)

#: The one thing introspection cannot infer: which types a read hands back.
READ_TYPES: frozenset[object] = frozenset({VectorRecord, VectorMatch, EntityId})


def read_methods() -> set[str]:
    return gate.read_methods(VectorStore, vector_port, READ_TYPES)


def _uncovered(convention: str) -> list[str]:
    return uncovered(VectorStoreCompliance, read_methods(), convention)


def _named_methods(convention: str) -> set[str]:
    return named_methods(VectorStoreCompliance, convention)


class TestTheGateCoversTheVectorPort:
    def test_the_port_has_read_methods_to_check(self) -> None:
        """Guard the guard: a detector that finds nothing passes vacuously, and
        one that finds the wrong set checks the wrong thing. The exact set fails
        in both directions; edit it once, in the commit that changes the port."""
        assert read_methods() == {"get", "search", "resolve_entity_ids"}

    def test_every_read_method_has_a_copy_test(self) -> None:
        missing = _uncovered(COPY_CONVENTION)
        assert not missing, (
            "read methods of VectorStore without a mutation-isolation test on "
            f"VectorStoreCompliance: add {[COPY_CONVENTION.format(method=m) for m in missing]}"
        )

    def test_every_read_method_has_a_tenant_test(self) -> None:
        missing = _uncovered(TENANT_CONVENTION)
        assert not missing, (
            "read methods of VectorStore without a tenant-isolation test on "
            f"VectorStoreCompliance: add {[TENANT_CONVENTION.format(method=m) for m in missing]}"
        )

    def test_every_convention_test_names_a_live_read_method(self) -> None:
        """The other direction: a test named for a method the port dropped, or
        for a write, matches nothing and would pass for ever."""
        reads = read_methods()
        for convention in (COPY_CONVENTION, TENANT_CONVENTION):
            stale = sorted(_named_methods(convention) - reads)
            assert not stale, (
                f"tests named {convention!r} for methods that are not reads of "
                f"VectorStore: {[convention.format(method=m) for m in stale]}"
            )


@functools.cache
def _draw_metadata(count: int) -> list[dict[str, Any]]:
    drawn: list[dict[str, Any]] = []

    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(metadata_dicts())
    def collect(metadata: dict[str, Any]) -> None:
        drawn.append(metadata)

    collect()
    return drawn


class TestTheMetadataStrategyReachesTheReservedKey:
    """Introspection proves a read is covered; only this proves the covered
    ``search`` is fed input its filter bites on. A generator that cannot draw
    ``entity_type`` does not fail: the properties over it go quiet."""

    SAMPLE = 300

    def _typed_values(self) -> tuple[list[dict[str, Any]], list[object]]:
        drawn = _draw_metadata(self.SAMPLE)
        assert len(drawn) >= self.SAMPLE
        return drawn, [md[ENTITY_TYPE_KEY] for md in drawn if ENTITY_TYPE_KEY in md]

    def test_the_reserved_key_is_drawn_and_also_left_out(self) -> None:
        drawn, typed = self._typed_values()
        assert typed, f"no drawn metadata carried {ENTITY_TYPE_KEY!r}"
        assert len(typed) < len(drawn), f"every drawn metadata carried {ENTITY_TYPE_KEY!r}"

    def test_values_fall_on_both_sides_of_the_filter(self) -> None:
        _, typed = self._typed_values()
        matching = [t for t in typed if isinstance(t, str) and t in TYPE_NAMES]
        assert matching, "no drawn entity_type could match a search filter"
        assert len(matching) < len(typed), "every drawn entity_type matches some filter"

    def test_some_value_is_unhashable(self) -> None:
        """The slice 5 bug as a requirement on the generator: a stored list or
        dict once made an adapter raise TypeError where another returned []."""
        _, typed = self._typed_values()
        assert any(isinstance(t, list | dict) for t in typed)
        assert any(t is None or isinstance(t, bool | int) for t in typed)

    def test_every_drawn_dict_constructs_a_vector_record(self) -> None:
        """Widening the strategy must not start drawing metadata no adapter is
        obliged to accept: that would turn a strategy fix into adapter failures."""
        drawn, _ = self._typed_values()
        for metadata in drawn:
            VectorRecord(
                tenant_id=TenantId("t"), id=EntityId("e"), vector=(1.0,), metadata=metadata
            )
