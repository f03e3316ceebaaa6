"""A canonical, JSON-able picture of what the stores hold for one tenant.

Read through the ports only, so the same function describes the in-memory
stores (``redstring fold``), the real ones (``redstring export``) and the
scenario oracle's expectation. Sorted throughout, so equal states serialise to
identical bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from contracts.ids import EntityId, TenantId
from contracts.ports.graph import GraphStore
from contracts.ports.vector import VectorStore


async def graph_snapshot(
    graph: GraphStore, tenant: TenantId, entity_ids: Iterable[EntityId]
) -> dict[str, Any]:
    universe = sorted(set(entity_ids))
    entities = await graph.get_entities(tenant, universe)
    relationships = await graph.get_relationships_for(tenant, universe)
    aliases = []
    for canonical in universe:
        aliases.extend(await graph.find_aliases(tenant, canonical))
    return {
        "entities": [
            {"id": e.id, "name": e.name, "type": e.type, "properties": e.properties}
            for e in sorted(entities, key=lambda e: e.id)
        ],
        "relationships": [
            {
                "source": r.source_id,
                "target": r.target_id,
                "type": r.type,
                "confidence": r.confidence,
                "properties": r.properties,
            }
            for r in sorted(relationships, key=lambda r: r.key)
        ],
        "aliases": sorted(
            ({"alias": a.alias_id, "canonical": a.canonical_id} for a in aliases),
            key=lambda a: a["alias"],
        ),
    }


async def vector_snapshot(
    vector: VectorStore, tenant: TenantId, entity_ids: Iterable[EntityId]
) -> dict[str, Any]:
    universe = sorted(set(entity_ids))
    resolved = await vector.resolve_entity_ids(tenant, universe) if universe else {}
    visible: list[EntityId] = []
    hidden: list[EntityId] = []
    for entity_id in universe:
        if await vector.get(tenant, entity_id) is None:
            continue
        (visible if resolved[entity_id] == entity_id else hidden).append(entity_id)
    return {"visible_vectors": visible, "hidden_vectors": hidden}


async def snapshot(
    graph: GraphStore, vector: VectorStore, tenant: TenantId, entity_ids: Iterable[EntityId]
) -> dict[str, Any]:
    universe = sorted(set(entity_ids))
    return {
        **await graph_snapshot(graph, tenant, universe),
        **await vector_snapshot(vector, tenant, universe),
    }


def canonical_json(state: Any) -> str:
    return json.dumps(state, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
