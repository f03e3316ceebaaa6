"""Domain values <-> statement parameters and returned properties.

Property representation: each entity or edge property is a native Neo4j
property named ``p_<key>``. The prefix keeps event keys from colliding with the
system properties (``tenant_id``, ``id``, ``name``, ``type``, ...), which never
start with it (an edge's type is its relationship type, not a property).
Native values keep their kinds: Integer, Float, Boolean, String and homogeneous
lists of those round-trip as int, float, bool, str and lists;
an empty list is stored untyped and reads back as ``[]``, which equals an empty
list of any kind, so nothing is lost. ``SET x += $props`` then merges key by key
inside the store, the port's upsert rule, with no read-modify-write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adapters.neo4j.cypher import type_labels
from contracts.domain import (
    Alias,
    Entity,
    Properties,
    RebuildMarker,
    Relationship,
    RelationshipKey,
    StreamPartition,
)
from contracts.ids import EntityId, TenantId
from contracts.validation import check_property_key

PREFIX = "p_"
_PREFIX_LENGTH = len(PREFIX)


def order_key(entity_id: str) -> str:
    """A string that Neo4j orders the way Python orders ids.

    Neo4j compares strings by UTF-16 code unit, so an astral character sorts
    below U+E000..U+FFFF; the port orders by code point. UTF-8 bytes order by
    code point, and read as Latin-1 each byte is one code unit: comparing these
    strings compares the UTF-8 bytes. An ASCII id is its own key.
    """
    return entity_id.encode("utf-8").decode("latin-1")


#: Keys already checked: a few keys recur across millions of rows.
_CHECKED_KEYS: set[str] = set()
_MAX_CHECKED_KEYS = 10_000


def encode_properties(properties: Mapping[str, Any], kind: str, subject: object) -> dict[str, Any]:
    """``properties`` under their stored names. A refused key names the value
    as ``kind subject!r`` ("relationship ('a', 'b', 'T')"): the text is made
    only then, since formatting an edge's key for every row cost more than
    encoding its properties."""
    encoded: dict[str, Any] = {}
    for key, value in properties.items():
        # The contract checked this at construction; a caller may have added a
        # key to the (mutable) dict since, and keys become property names.
        if key in _CHECKED_KEYS:
            encoded[PREFIX + key] = value
            continue
        check_property_key(key, f"{kind} {subject!r}")
        if len(_CHECKED_KEYS) < _MAX_CHECKED_KEYS:
            _CHECKED_KEYS.add(key)
        encoded[PREFIX + key] = value
    return encoded


def decode_properties(stored: Mapping[str, Any]) -> Properties:
    return {k[_PREFIX_LENGTH:]: v for k, v in stored.items() if k.startswith(PREFIX)}


def merged_in_order(entities: Iterable[Entity]) -> list[Entity]:
    """One entity per id, folding repeats in order (newer wins), sorted by id
    so that concurrent writers lock nodes in the same order."""
    by_id: dict[EntityId, Entity] = {}
    for entity in entities:
        earlier = by_id.get(entity.id)
        by_id[entity.id] = entity if earlier is None else earlier.merged_with(entity)
    return [by_id[i] for i in sorted(by_id)]


def entity_row(entity: Entity, tenant: TenantId | None = None) -> dict[str, Any]:
    """The statement row of ``entity``; with ``tenant``, the row names it (the
    statements that write several tenants at once)."""
    row = {
        "id": entity.id,
        "name": entity.name,
        "type": entity.type,
        "labels": type_labels(entity.type),
        "blocking_key": entity.blocking_key,
        "order_key": order_key(entity.id),
        "props": encode_properties(entity.properties, "entity", entity.id),
    }
    if tenant is not None:
        row["tenant"] = tenant
    return row


def entity_from(stored: Mapping[str, Any]) -> Entity:
    return Entity(
        tenant_id=TenantId(stored["tenant_id"]),
        id=EntityId(stored["id"]),
        name=stored["name"],
        type=stored["type"],
        properties=decode_properties(stored),
    )


def merged_edges_in_order(relationships: Iterable[Relationship]) -> list[Relationship]:
    by_key: dict[RelationshipKey, Relationship] = {}
    for rel in relationships:
        key = (rel.source_id, rel.target_id, rel.type)
        earlier = by_key.get(key)
        by_key[key] = rel if earlier is None else earlier.merged_with(rel)
    return [by_key[k] for k in sorted(by_key)]


def edge_rows(
    relationships: Sequence[Relationship], tenant: TenantId | None = None, first: int = 0
) -> tuple[list[EntityId], list[dict[str, Any]]]:
    """The sorted distinct endpoints, and one row per edge addressing them by
    index, counted from ``first`` (where they start in a list that other
    tenants' endpoints share); with ``tenant``, each row names it."""
    endpoints = sorted({end for rel in relationships for end in (rel.source_id, rel.target_id)})
    index = {end: i for i, end in enumerate(endpoints, first)}
    rows = [
        {
            "s": index[rel.source_id],
            "t": index[rel.target_id],
            "type": rel.type,
            "confidence": rel.confidence,
            "props": encode_properties(rel.properties, "relationship", rel.key),
        }
        for rel in relationships
    ]
    if tenant is not None:
        for row in rows:
            row["tenant"] = tenant
    return endpoints, rows


def relationship_from(record: Mapping[str, Any]) -> Relationship:
    stored = record["r"]
    return Relationship(
        tenant_id=TenantId(stored["tenant_id"]),
        source_id=EntityId(record["source"]),
        target_id=EntityId(record["target"]),
        type=record["type"],
        confidence=stored["confidence"],
        properties=decode_properties(stored),
    )


def alias_from(record: Mapping[str, Any], canonical_id: EntityId) -> Alias:
    return Alias(
        tenant_id=TenantId(record["tenant_id"]),
        alias_id=EntityId(record["alias_id"]),
        canonical_id=canonical_id,
        reason=record["reason"],
    )


def partition_params(partition: StreamPartition) -> dict[str, Any]:
    return {"topic": partition.topic, "partition": partition.partition}


def marker_from(stored: Mapping[str, Any]) -> RebuildMarker:
    return RebuildMarker(
        tenant_id=TenantId(stored["tenant_id"]),
        partition=StreamPartition(stored["topic"], stored["partition"], stored["topic_id"]),
        start_offset=stored["start_offset"],
        end_offset=stored["end_offset"],
        applied_through=stored["applied_through"],
        state=stored["state"],
    )
