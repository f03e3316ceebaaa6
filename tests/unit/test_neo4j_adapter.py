"""The Neo4j adapter's pure parts, without a server: the order key, row
building, and what each driver error becomes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from neo4j.exceptions import (
    IncompleteCommit,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
)

from adapters.neo4j.rows import (
    decode_properties,
    edge_rows,
    encode_properties,
    merged_edges_in_order,
    merged_in_order,
    order_key,
)
from adapters.neo4j.runner import Blame, translate
from contracts.domain import Entity, Relationship
from contracts.errors import PermanentStoreError, TransientStoreError
from contracts.ids import EntityId, TenantId

T = TenantId("t-unit")
_ids = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), min_size=1)


def _utf16(text: str) -> bytes:
    # How Java, and so Neo4j, compares strings: by UTF-16 code unit.
    return text.encode("utf-16-be")


@given(a=_ids, b=_ids)
def test_the_order_key_sorts_by_utf16_unit_as_ids_sort_by_code_point(a: str, b: str) -> None:
    assert (_utf16(order_key(a)) < _utf16(order_key(b))) == (a < b)


def test_utf16_order_differs_from_code_point_order_without_the_key() -> None:
    astral, high = "\U0001f600", "\uff21"
    assert high < astral and _utf16(astral) < _utf16(high)
    assert _utf16(order_key(high)) < _utf16(order_key(astral))
    assert order_key("plain-ascii id") == "plain-ascii id"


def test_properties_are_prefixed_and_come_back_unprefixed() -> None:
    props = {"name": "x", "n": 1, "f": 1.0, "b": True, "empty": []}
    stored = {"tenant_id": T, "id": "e", "name": "sys", **encode_properties(props, "here")}
    assert decode_properties(stored) == props


def test_a_key_added_after_construction_is_refused() -> None:
    entity = Entity(T, EntityId("e"), "E", "Thing", {})
    entity.properties["not a key"] = 1
    with pytest.raises(ValueError, match="not a key"):
        encode_properties(entity.properties, "entity 'e'")


def test_repeated_entities_fold_in_order_and_sort_by_id() -> None:
    batch = [
        Entity(T, EntityId("b"), "First", "Thing", {"x": 1}),
        Entity(T, EntityId("a"), "A", "Thing"),
        Entity(T, EntityId("b"), "Second", "Thing", {"y": 2}),
    ]
    merged = merged_in_order(batch)
    assert [e.id for e in merged] == ["a", "b"]
    assert merged[1] == Entity(T, EntityId("b"), "Second", "Thing", {"x": 1, "y": 2})


def test_edge_rows_address_each_endpoint_once() -> None:
    edges = merged_edges_in_order(
        [
            Relationship(T, EntityId("b"), EntityId("a"), "KNOWS", 0.5, {"w": 1}),
            Relationship(T, EntityId("a"), EntityId("c"), "KNOWS"),
            Relationship(T, EntityId("b"), EntityId("a"), "KNOWS", 0.75, {"v": 2}),
        ]
    )
    endpoints, rows = edge_rows(edges)
    assert endpoints == ["a", "b", "c"]
    assert [(endpoints[r["s"]], endpoints[r["t"]]) for r in rows] == [("a", "c"), ("b", "a")]
    assert rows[1]["confidence"] == 0.75 and rows[1]["props"] == {"p_w": 1, "p_v": 2}


def _server(code: str) -> Neo4jError:
    return Neo4jError._hydrate_neo4j(code=code, message="from the server")


@pytest.mark.parametrize(
    "error",
    [
        _server("Neo.TransientError.Transaction.DeadlockDetected"),
        _server("Neo.TransientError.General.DatabaseUnavailable"),
        ServiceUnavailable("no route"),
        SessionExpired("gone"),
        IncompleteCommit("unknown outcome"),
    ],
    ids=["deadlock", "unavailable", "service-unavailable", "session-expired", "incomplete"],
)
def test_transient_failures_become_transient_store_errors(error: Exception) -> None:
    assert isinstance(translate(error, Blame("upsert")), TransientStoreError)  # type: ignore[arg-type]


def test_a_refused_value_is_permanent_and_names_the_tenant_and_ids() -> None:
    blame = Blame("neo4j.graph.upsert_entities", "t-acme", [f"e{i}" for i in range(25)])
    error = translate(_server("Neo.ClientError.Statement.TypeError"), blame)
    assert isinstance(error, PermanentStoreError)
    assert "t-acme" in str(error) and "'e0'" in str(error) and "and 5 more" in str(error)


def test_other_server_errors_pass_through_unchanged() -> None:
    error = _server("Neo.DatabaseError.General.UnknownError")
    assert translate(error, Blame("x")) is error
