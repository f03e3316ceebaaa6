"""The canonical export of one tenant: the same JSON as ``redstring fold``
writes, so a dry run and the live stores can be compared byte for byte."""

from __future__ import annotations

from typing import Any

from contracts.domain import StreamPartition
from contracts.ids import EntityId, TenantId
from contracts.ports.graph import ProjectedGraphStore
from contracts.ports.vector import ProjectedVectorStore
from projections.snapshot import canonical_json, snapshot
from streams.wiring import Stores


async def tenant_universe(graph: ProjectedGraphStore, tenant: TenantId) -> set[EntityId]:
    """Every id the graph knows for the tenant: its entities, the endpoints of
    their edges, and their aliases, transitively."""
    ids = {e.id for e in await graph.find_entities(tenant, limit=10_000_000)}
    for rel in await graph.get_relationships_for(tenant, sorted(ids)):
        ids.update((rel.source_id, rel.target_id))
    frontier = set(ids)
    while frontier:
        found: set[EntityId] = set()
        for canonical in sorted(frontier):
            found.update(a.alias_id for a in await graph.find_aliases(tenant, canonical))
        frontier = found - ids
        ids |= found
    return ids


async def export_tenant(
    graph: ProjectedGraphStore,
    vector: ProjectedVectorStore,
    tenant: TenantId,
    partition: StreamPartition,
) -> dict[str, Any]:
    universe = await tenant_universe(graph, tenant)
    return {
        **await snapshot(graph, vector, tenant, universe),
        "checkpoints": {
            "graph": await graph.checkpoint(partition),
            "vector": await vector.checkpoint(partition),
        },
    }


async def export_json(stores: Stores, tenant: TenantId, partition: StreamPartition) -> str:
    """The canonical JSON of one tenant, as ``redstring fold`` writes it."""
    state = await export_tenant(stores.graph, stores.vector, tenant, partition)
    return canonical_json({"tenants": {tenant: state}})
