"""Two transactions that write one edge at once make one edge, whichever way
each writes it (adapters/neo4j/cypher.py, ``UPSERT_RELATIONSHIPS``;
docs/adr/0004-neo4j-graph-store.md, "Edges between ends the statement
wrote"). A statement that writes both ends itself holds their write locks
and creates a missing edge after one look; any other writes it after locking
both ends and looking again. The first writer holds its transaction open
while the second writes, so the second's first look cannot see the edge.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from adapters.neo4j import Neo4jGraphStore
from contracts.domain import Entity, Relationship, StreamPartition
from contracts.ids import EntityId, TenantId

pytestmark = pytest.mark.services

#: How long the first writer keeps its transaction open after its edge
#: statement: the second writer's statement runs meanwhile.
HOLD_S = 0.5


@pytest.mark.parametrize(
    ("first_writes_ends", "second_writes_ends"),
    [(True, False), (False, True), (True, True), (False, False)],
    ids=["ends-then-edge-alone", "edge-alone-then-ends", "ends-twice", "edge-alone-twice"],
)
async def test_two_writers_of_one_edge_at_once_make_one_edge(
    store: Neo4jGraphStore, first_writes_ends: bool, second_writes_ends: bool
) -> None:
    tenant = TenantId(f"edge-{uuid.uuid4().hex[:8]}")
    ends = [Entity(tenant, EntityId(i), i.upper(), "Thing") for i in ("s", "t")]
    await store.upsert_entities(tenant, ends)
    edge = Relationship(tenant, EntityId("s"), EntityId("t"), "KNOWS")
    first_wrote = asyncio.Event()

    async def write(writes_ends: bool, partition: int, first: bool) -> None:
        if not first:
            await first_wrote.wait()
        stream = StreamPartition(f"edge-{tenant}", partition, "topic-id")
        async with store.unit_of_work(stream) as uow:
            await uow.upsert_by_tenant({tenant: ends} if writes_ends else {}, {tenant: [edge]})
            if first:
                first_wrote.set()
                await asyncio.sleep(HOLD_S)

    await asyncio.wait_for(
        asyncio.gather(
            write(first_writes_ends, 0, first=True),
            write(second_writes_ends, 1, first=False),
        ),
        timeout=60,
    )
    found = await store.get_relationships(tenant, source_id=EntityId("s"))
    assert [(r.target_id, r.type) for r in found] == [("t", "KNOWS")]
    await store.delete_by_tenant(tenant)
