"""Write throughput of the Neo4j graph adapter against the sink's ceiling.

    python -m bench.neo4j_write --docs 2000 [--batch 50] [--rounds 3]

Writes N extracted documents (10 entities and 12 relationships each) twice per
round, into fresh tenants: once through the adapter's unit of work, the way
the graph fold does (resolve_entity_ids over the edge endpoints,
upsert_entities, upsert_relationships, advance_checkpoint; one unit of work per
batch of documents), and once with the fastest direct driver code we have
(two UNWIND statements in one transaction per batch, same stored shape, no
checkpoint, no alias resolution, no endpoint check). The two sides alternate
batch by batch, each going first in turn, so that noise from a shared machine
lands on both alike; a first, unreported round warms plan caches and pools.
Prints entities/s and relationships/s per side and the ratio adapter/ceiling.

Endpoints: REDSTRING_NEO4J_URI/USER/PASSWORD, else .devstack/env (run
``redstring dev up`` first). Wall-clock numbers; no test asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from neo4j import (
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    AsyncSession,
    NotificationMinimumSeverity,
)

from adapters.neo4j import Neo4jGraphStore
from adapters.neo4j.cypher import _EDGE_CREATE, _EDGE_LOOK
from adapters.neo4j.rows import order_key
from contracts.domain import Entity, Relationship, StreamPartition
from contracts.ids import EntityId, TenantId

ENTITIES_PER_DOC = 10
#: A ring of ten edges plus two chords: twelve per document.
EDGES = [(j, (j + 1) % 10, "NEXT") for j in range(10)] + [(0, 5, "CHORD"), (2, 7, "CHORD")]

#: The native model (docs/adr/0004-neo4j-graph-store.md): the type as a label,
#: set without the adapter's care for a type that changes or is reserved.
CEILING_ENTITIES = """
UNWIND $rows AS row
MERGE (e:Entity {tenant_id: $tenant, id: row.id})
ON CREATE SET e.order_key = row.order_key
SET e.name = row.name, e.type = row.type, e.blocking_key = row.blocking_key, e += row.props,
    e:$(row.type)
"""

#: Each endpoint looked up once, rows addressing them by index: about 1.6x
#: faster than two MATCHes per row on this data (the adapter does the same,
#: plus its missing-endpoint check). An edge is looked for by a one-hop
#: expand from the end with fewer relationships, as the adapter does (adapters/neo4j/cypher.py,
#: ``UPSERT_RELATIONSHIPS``): ``MERGE (s)-[r:$(row.type)]->(t)`` is planned as
#: a scan of every relationship when the database holds fewer than about
#: ten, and the ceiling is planned in the warm-up, on stores emptied for it.
#: The ceiling has one writer, so it takes no lock between look and create.
CEILING_RELATIONSHIPS = (
    """
UNWIND range(0, size($endpoints) - 1) AS i
MATCH (n:Entity {tenant_id: $tenant, id: $endpoints[i]})
WITH i, n ORDER BY i
WITH collect(n) AS nodes
UNWIND $rows AS row
WITH nodes[row.s] AS s, nodes[row.t] AS t, row
CALL (s, t, row) {"""
    + _EDGE_LOOK
    # The adapter's statements read their parameters from the map $p
    # (adapters/neo4j/runner.py, ``quiet``); the ceiling sends its own as it
    # always has.
    + _EDGE_CREATE.replace("$p.tenant", "$tenant")
    + "}\n"
)


@dataclass(frozen=True)
class Batch:
    entities: list[Entity]
    relationships: list[Relationship]


def documents(tenant: TenantId, docs: int, batch: int) -> list[Batch]:
    """The same documents for every run, homed under ``tenant``."""
    batches: list[Batch] = []
    for start in range(0, docs, batch):
        entities: list[Entity] = []
        edges: list[Relationship] = []
        for d in range(start, min(start + batch, docs)):
            ids = [EntityId(f"d{d}-e{j}") for j in range(ENTITIES_PER_DOC)]
            for j, entity_id in enumerate(ids):
                props: dict[str, Any] = {"score": j / 10, "rank": j, "tags": ["bench", f"doc{d}"]}
                entities.append(Entity(tenant, entity_id, f"Entity {d} {j}", "Thing", props))
            for s, t, kind in EDGES:
                edges.append(Relationship(tenant, ids[s], ids[t], kind, 0.5, {"doc": f"d{d}"}))
        batches.append(Batch(entities, edges))
    return batches


async def adapter_batch(
    store: Neo4jGraphStore, partition: StreamPartition, offset: int, tenant: TenantId, batch: Batch
) -> None:
    """One batch the way the graph fold writes it: one unit of work."""
    async with store.unit_of_work(partition) as uow:
        # The fold's order (projections/graph.py): endpoints resolved first.
        ends = sorted({e for r in batch.relationships for e in (r.source_id, r.target_id)})
        resolved = await uow.resolve_entity_ids(tenant, ends)
        await uow.upsert_entities(tenant, batch.entities)
        # As the fold does: an edge is rebuilt only when an endpoint resolved
        # to another id (none do here; the call is what is measured).
        edges = [
            r
            if resolved[r.source_id] == r.source_id and resolved[r.target_id] == r.target_id
            else replace(r, source_id=resolved[r.source_id], target_id=resolved[r.target_id])
            for r in batch.relationships
        ]
        await uow.upsert_relationships(tenant, edges)
        await uow.advance_checkpoint(partition, offset)


async def _ceiling_work(
    tx: AsyncManagedTransaction,
    tenant: str,
    entities: list[Any],
    endpoints: Sequence[str],
    edges: list[Any],
) -> None:
    await (await tx.run(CEILING_ENTITIES, tenant=tenant, rows=entities)).consume()
    await (
        await tx.run(CEILING_RELATIONSHIPS, tenant=tenant, endpoints=endpoints, rows=edges)
    ).consume()


def ceiling_params(batch: Batch) -> tuple[list[Any], list[str], list[Any]]:
    """The ceiling's parameters for ``batch``: entity rows, endpoints, edge rows."""
    entities = [
        {
            "id": e.id,
            "name": e.name,
            "type": e.type,
            "blocking_key": e.blocking_key,
            "order_key": order_key(e.id),
            "props": {"p_" + k: v for k, v in e.properties.items()},
        }
        for e in batch.entities
    ]
    endpoints = sorted({end for r in batch.relationships for end in (r.source_id, r.target_id)})
    index = {end: i for i, end in enumerate(endpoints)}
    edges = [
        {
            "s": index[r.source_id],
            "t": index[r.target_id],
            "type": r.type,
            "confidence": r.confidence,
            "props": {"p_" + k: v for k, v in r.properties.items()},
        }
        for r in batch.relationships
    ]
    return entities, endpoints, edges


async def ceiling_batch(session: AsyncSession, tenant: TenantId, batch: Batch) -> None:
    """The same rows and stored shape, with nothing but the two writes."""
    entities, endpoints, edges = ceiling_params(batch)
    await session.execute_write(_ceiling_work, tenant, entities, endpoints, edges)


def _endpoints() -> tuple[str, str, str]:
    env = dict(os.environ)
    if "REDSTRING_NEO4J_URI" not in env:
        stack = Path(__file__).resolve().parent.parent / ".devstack" / "env"
        if not stack.exists():
            raise SystemExit("no REDSTRING_NEO4J_URI and no .devstack/env: run `redstring dev up`")
        for line in stack.read_text().splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env.setdefault(key.strip(), value.strip().strip("'\""))
    return (
        env["REDSTRING_NEO4J_URI"],
        env.get("REDSTRING_NEO4J_USER", "neo4j"),
        env.get("REDSTRING_NEO4J_PASSWORD", ""),
    )


async def _timed(run: Awaitable[None]) -> float:
    started = time.perf_counter()
    await run
    return time.perf_counter() - started


async def main(docs: int, batch: int, rounds: int) -> None:
    uri, user, password = _endpoints()
    store = await Neo4jGraphStore.open(uri, user, password)
    driver = AsyncGraphDatabase.driver(
        uri, auth=(user, password), notifications_min_severity=NotificationMinimumSeverity.OFF
    )
    tenants: list[TenantId] = []

    def fresh() -> TenantId:
        tenants.append(TenantId(f"bench-{uuid.uuid4().hex[:8]}"))
        return tenants[-1]

    totals = {"adapter": 0.0, "ceiling": 0.0}
    ratios: list[float] = []
    try:
        async with driver.session(database="neo4j") as session:
            # rounds + 1: the first warms the server's plan cache and both pools.
            for r in range(rounds + 1):
                partition = StreamPartition(f"bench-{uuid.uuid4().hex[:8]}", 0, uuid.uuid4().hex)
                mine, theirs = fresh(), fresh()
                pairs = zip(
                    documents(mine, docs, batch), documents(theirs, docs, batch), strict=True
                )
                spent = {"adapter": 0.0, "ceiling": 0.0}
                # Batch by batch, alternating which side goes first, so that
                # machine noise lands on both sides alike.
                for offset, (ours, direct) in enumerate(pairs):
                    adapter = _timed(adapter_batch(store, partition, offset, mine, ours))
                    ceiling = _timed(ceiling_batch(session, theirs, direct))
                    first, second = (adapter, ceiling) if offset % 2 == 0 else (ceiling, adapter)
                    one, two = await first, await second
                    a, c = (one, two) if offset % 2 == 0 else (two, one)
                    spent["adapter"] += a
                    spent["ceiling"] += c
                if r == 0:
                    continue
                ratios.append(spent["ceiling"] / spent["adapter"])
                for side in totals:
                    totals[side] += spent[side]
                print(
                    f"round {r}: adapter {spent['adapter']:6.2f}s  ceiling "
                    f"{spent['ceiling']:6.2f}s  ratio {ratios[-1]:.2f}"
                )
    finally:
        for tenant in tenants:
            await store.delete_by_tenant(tenant)
        await driver.close()
        await store.aclose()

    print(f"\n{docs} documents, {batch} per batch, {rounds} rounds:")
    for side, seconds in totals.items():
        print(
            f"  {side:8} {rounds * docs * ENTITIES_PER_DOC / seconds:9.0f} entities/s "
            f"{rounds * docs * len(EDGES) / seconds:9.0f} relationships/s"
        )
    print(
        f"  ratio adapter/ceiling: {totals['ceiling'] / totals['adapter']:.2f} "
        f"(per round: median {statistics.median(ratios):.2f})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=50, help="documents per transaction")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.docs, args.batch, args.rounds))
