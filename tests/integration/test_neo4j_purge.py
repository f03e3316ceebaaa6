"""The tenant purge over many batches (docs/adr/0004-neo4j-graph-store.md,
"Tenant purge in batches"): every edge goes in the edge phase, before the
entities, and each batch reads about as much as the first, so the purge is
linear in the tenant's size. Database hits come from ``PROFILE``, which is
deterministic for a given graph; nothing here is timed.
"""

from __future__ import annotations

import uuid

import pytest

from adapters.neo4j import Neo4jGraphStore, cypher, ledger
from contracts.domain import Entity, Relationship
from contracts.ids import EntityId, TenantId
from tests.integration.conftest import db_hits, profile_statement

pytestmark = pytest.mark.services

ENTITIES = 60
BATCH = 10


async def _graph(store: Neo4jGraphStore, tenant: TenantId) -> int:
    """A ring with chords, and a hub with more edges than a batch holds, so
    that a batch ends inside one entity's edges. Returns the edge count."""
    ids = [EntityId(f"e{i:03d}") for i in range(ENTITIES)]
    await store.upsert_entities(tenant, [Entity(tenant, i, i, "Thing") for i in ids])
    edges = [Relationship(tenant, ids[i], ids[(i + 1) % ENTITIES], "NEXT") for i in range(ENTITIES)]
    edges += [
        Relationship(tenant, ids[i], ids[(i + 7) % ENTITIES], "CHORD") for i in range(0, 60, 2)
    ]
    edges += [Relationship(tenant, ids[30], ids[i], "HUB") for i in range(2 * BATCH + 3)]
    await store.upsert_relationships(tenant, edges)
    return len(edges)


async def test_the_edge_phase_deletes_every_edge_reading_each_entity_about_once(
    store: Neo4jGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger, "DELETE_BATCH", BATCH)
    tenant, other = (
        TenantId(f"purge-{uuid.uuid4().hex[:8]}"),
        TenantId(f"purge-{uuid.uuid4().hex[:8]}"),
    )
    edges = await _graph(store, tenant)
    await _graph(store, other)

    profiled = profile_statement(monkeypatch, store, cypher.DELETE_TENANT_RELATIONSHIPS)
    sweep = await store.delete_by_tenant(tenant)
    steps = [
        {**result.records[0].data(), "hits": db_hits(result.summary.profile)} for result in profiled
    ]

    assert sweep.complete, sweep
    # The edge phase found every edge itself: none was left for DETACH DELETE.
    assert sum(step["deleted"] for step in steps) == edges
    assert len(steps) >= edges // BATCH
    # Linear: no batch reads much more than the first (a walk from the start
    # each time reads every entity already stripped, growing batch by batch).
    assert max(step["hits"] for step in steps) <= 2 * steps[0]["hits"], steps
    # Each entity is read once, plus a batch again after each full batch of edges.
    full = sum(1 for step in steps if step["deleted"] == BATCH)
    assert sum(step["scanned"] for step in steps) <= ENTITIES + BATCH * full
    # The other tenant keeps everything.
    assert len(await store.get_relationships(other)) == edges
    await store.delete_by_tenant(other)
