"""Shared pieces of the graph compliance suite: fresh tenants, value builders,
the sample graph the copy and tenancy tiers read, and the tamper helper."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings

from contracts.domain import (
    Alias,
    Entity,
    Properties,
    Relationship,
    RelationshipKey,
    StreamPartition,
)
from contracts.ids import EntityId, TenantId, tenant_id
from contracts.ports.graph import GraphStore

# The store fixture is per test, not per example, so every property makes its
# own tenant inside each example instead. One class per adapter runs the same
# test functions, which is the point of the suite (and means a failing example
# found on memory is replayed on a real store first).
PER_EXAMPLE = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors]
)

#: Long enough for a real store under load; a hang in the alias walk is what it catches.
HANG_TIMEOUT = 30


def fresh_tenant() -> TenantId:
    return tenant_id(f"t-{uuid.uuid4().hex[:8]}")


def fresh_partition() -> StreamPartition:
    return StreamPartition(f"graph-events-{uuid.uuid4().hex[:8]}", 0, uuid.uuid4().hex)


def eid(value: str) -> EntityId:
    return EntityId(value)


def ent(
    tenant: TenantId, id_: str, name: str | None = None, type_: str = "Person", **props: Any
) -> Entity:
    return Entity(tenant, EntityId(id_), name or f"Name {id_}", type_, dict(props))


def rel(
    tenant: TenantId,
    source: str,
    target: str,
    type_: str = "KNOWS",
    confidence: float = 1.0,
    **props: Any,
) -> Relationship:
    return Relationship(tenant, EntityId(source), EntityId(target), type_, confidence, dict(props))


def alias(tenant: TenantId, absorbed: str, canonical: str, reason: str = "") -> Alias:
    return Alias(tenant, EntityId(absorbed), EntityId(canonical), reason)


def key(source: str, target: str, type_: str = "KNOWS") -> RelationshipKey:
    return (EntityId(source), EntityId(target), type_)


@dataclass
class SampleGraph:
    """What one tenant wrote, so a test can state what a read must answer."""

    tenant: TenantId
    entities: dict[EntityId, Entity] = field(default_factory=dict)
    relationships: dict[RelationshipKey, Relationship] = field(default_factory=dict)
    aliases: dict[EntityId, Alias] = field(default_factory=dict)

    def sorted_entities(self, *ids: str) -> list[Entity]:
        return [self.entities[EntityId(i)] for i in sorted(ids)]


async def write_sample(store: GraphStore, tenant: TenantId, flavour: str) -> SampleGraph:
    """Flavour "a" and "b" share ids and one blocking key but differ in every
    name, property, edge and alias, so a read under one that leaks the other
    is visible in its answer."""
    g = SampleGraph(tenant)
    props: Properties = {"owner": flavour, "tags": [flavour, "x"], "n": [1, 2]}
    if flavour == "a":
        specs = [("e1", "A one"), ("e2", "A two"), ("e3", "Shared  Name")]
        edges = [rel(tenant, "e1", "e2", weight=[0.5]), rel(tenant, "e2", "e3", note="a")]
        aliases = [alias(tenant, "e3", "e1", "a-merge"), alias(tenant, "e4", "e1", "a-merge")]
    else:
        specs = [("e1", "B one"), ("e2", "shared name"), ("e5", "B five")]
        edges = [rel(tenant, "e2", "e1", "LIKES", 0.5, weight=[0.25])]
        aliases = [alias(tenant, "e5", "e1", "b-merge")]
    for id_, name in specs:
        g.entities[EntityId(id_)] = ent(tenant, id_, name, "Person", **props)
    g.relationships = {r.key: r for r in edges}
    g.aliases = {a.alias_id: a for a in aliases}
    await store.upsert_entities(tenant, list(g.entities.values()))
    await store.upsert_relationships(tenant, edges)
    for a in aliases:
        await store.upsert_alias(tenant, a)
    return g


TAMPERED = "tampered"


def tamper(value: object) -> None:
    """Change everything reachable in a read's result, in place; frozen values
    too, since an adapter handing out its stored object would share them."""
    if isinstance(value, list):
        for item in value:
            tamper(item)
        value.append(TAMPERED)
    elif isinstance(value, dict):
        for k, item in value.items():
            if isinstance(item, str):
                value[k] = TAMPERED
            else:
                tamper(item)
        value[TAMPERED] = TAMPERED
    elif isinstance(value, Entity | Relationship):
        if isinstance(value, Entity):
            object.__setattr__(value, "name", TAMPERED)
        else:
            object.__setattr__(value, "confidence", 0.125)
        for item in value.properties.values():
            if isinstance(item, list):
                item.append(item[0] if item else TAMPERED)
        value.properties[TAMPERED] = True
    elif isinstance(value, Alias):
        object.__setattr__(value, "canonical_id", TAMPERED)
        object.__setattr__(value, "reason", TAMPERED)
    else:
        raise AssertionError(f"no way to tamper with {value!r}")
