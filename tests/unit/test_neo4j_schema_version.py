"""The graph's schema version, decided without a server: which stores a
worker's open bootstraps, which it refuses and what the refusal says; and how
entity types become labels (adapters/neo4j/schema.py, adapters/neo4j/cypher.py)."""

from __future__ import annotations

import pytest

from adapters.neo4j import cypher
from adapters.neo4j.schema import (
    GRAPH_SCHEMA_VERSION,
    GraphSchemaState,
    GraphSchemaVersionError,
    check_version,
)


def test_an_empty_store_and_a_current_one_open() -> None:
    check_version(GraphSchemaState(None, has_entities=False), "neo4j")
    check_version(GraphSchemaState(GRAPH_SCHEMA_VERSION, has_entities=True), "neo4j")
    assert GraphSchemaState(None, has_entities=False).empty


def test_a_store_with_entities_and_no_version_is_the_old_model() -> None:
    state = GraphSchemaState(None, has_entities=True)
    assert state.version == 1
    with pytest.raises(GraphSchemaVersionError) as raised:
        check_version(state, "graphs")
    message = str(raised.value)
    assert "'graphs'" in message and "version 1" in message
    assert "run `redstring migrate`" in message


def test_an_interrupted_migration_is_still_pending() -> None:
    state = GraphSchemaState(1, has_entities=True, cursor=("acme", "ada"))
    with pytest.raises(GraphSchemaVersionError, match="migration is pending"):
        check_version(state, "neo4j")


def test_a_newer_store_is_refused_without_suggesting_a_migration() -> None:
    with pytest.raises(GraphSchemaVersionError) as raised:
        check_version(GraphSchemaState(GRAPH_SCHEMA_VERSION + 1, True), "neo4j")
    assert "older than the store" in str(raised.value)
    assert "migrate" not in str(raised.value)


def test_types_spelled_like_the_stores_labels_get_no_label() -> None:
    assert cypher.type_labels("Person") == ["Person"]
    for own in ("Entity", "AliasId", "Checkpoint", "RedstringSchema"):
        assert cypher.type_labels(own) == []
        assert cypher.type_label(own) == "Entity"


def test_only_a_valid_type_is_rendered_into_a_read() -> None:
    typed = cypher.typed(cypher.GET_RELATIONSHIPS_TO, "WORKS_AT")
    assert "-[r:`WORKS_AT`]->" in typed and "-[r]->" not in typed
    for hostile in ("WORKS`]->(x) DETACH DELETE x //", "a b", "1ST", "", "X" * 65):
        with pytest.raises(ValueError):
            cypher.typed(cypher.GET_RELATIONSHIPS_TO, hostile)


def test_every_label_of_the_stores_own_is_reserved() -> None:
    """A label the schema gives the store's own nodes, left out of
    RESERVED_LABELS, would let an entity type pass for a ledger or alias node."""
    import re

    from adapters.neo4j.schema import SCHEMA

    own = {m for rule in SCHEMA.values() for m in re.findall(r"FOR \(\w+:(\w+)\)", rule)}
    assert len(own) >= 7, own  # guard the guard: the scan found the schema's labels
    assert own <= cypher.RESERVED_LABELS, own - cypher.RESERVED_LABELS
