"""The graph and ledger compliance suites against Neo4j (the local stack, or
whatever tests/services.py provides).

Each test opens its own store (driver), in the test's own event loop: a
driver is bound to the loop it was created in, and the suite's tier fixtures
(``pair``, ``sample``) run in the test's function-scoped loop, so a
session-scoped driver would be used from a foreign loop. Opening costs a
connection and one schema query (the bootstrap finds every rule in place).
Every test makes fresh tenants and topic names, so tests never see each other's
rows in the shared database.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.compliance.graph_store import GraphStoreCompliance
from adapters.compliance.ledger import LedgerCompliance
from adapters.neo4j import Neo4jGraphStore
from contracts.domain import Entity, ErasureTombstone, RebuildMarker, StreamPartition
from contracts.ids import EntityId, EventId, TenantId
from contracts.ports.ledger import TenantLedgerReads
from tests.services import Neo4jConfig

pytestmark = pytest.mark.services


@pytest.fixture
async def neo4j_store(neo4j_config: Neo4jConfig) -> AsyncIterator[Neo4jGraphStore]:
    store = await Neo4jGraphStore.open(neo4j_config.uri, neo4j_config.user, neo4j_config.password)
    async with store:
        yield store


class TestNeo4jGraphStore(GraphStoreCompliance):
    @pytest.fixture
    def store(self, neo4j_store: Neo4jGraphStore) -> Neo4jGraphStore:
        return neo4j_store


class TestNeo4jGraphLedger(LedgerCompliance):
    @pytest.fixture
    def store(self, neo4j_store: Neo4jGraphStore) -> Neo4jGraphStore:
        return neo4j_store

    async def write_tenant_fact(self, uow: Any, tenant: TenantId) -> None:
        await uow.upsert_entity(tenant, Entity(tenant, EntityId("fact"), "Fact", "Thing"))

    async def has_tenant_fact(self, store: Any, tenant: TenantId) -> bool:
        return await store.get_entity(tenant, EntityId("fact")) is not None


async def test_a_unit_of_work_opened_by_the_tenant_ledgers_reads_them_under_its_lock(
    neo4j_store: Neo4jGraphStore,
) -> None:
    """The fold's first call, ``tenant_ledgers``, takes the partition's lock
    with it (``LOCK_WITH_TENANT_LEDGERS``): the same answers as when the lock
    came first, the partition's checkpoint and markers read with them, and
    units of work opened so on one partition still never interleave."""
    erased, live = TenantId(f"tl-{uuid.uuid4().hex[:8]}"), TenantId(f"tl-{uuid.uuid4().hex[:8]}")
    partition = StreamPartition(f"tl-{uuid.uuid4().hex[:8]}", 0, "topic-id")
    marker = RebuildMarker(live, partition, start_offset=0, end_offset=9, applied_through=2)
    now = datetime.now(UTC)
    await neo4j_store.put_erasure_tombstone(ErasureTombstone(erased, partition, 41))
    await neo4j_store.record_applied_events(erased, [EventId("e1")], now)
    await neo4j_store.record_applied_events(live, [EventId("e2")], now)
    await neo4j_store.advance_checkpoint(partition, 0)
    await neo4j_store.put_rebuild_marker(marker)
    wanted = {erased: [EventId("e1"), EventId("e3")], live: [EventId("e2"), EventId("e4")]}
    async with neo4j_store.unit_of_work(partition) as uow:
        assert isinstance(uow, TenantLedgerReads)
        found = await uow.tenant_ledgers(wanted)
        assert await uow.checkpoint(partition) == 0
        assert await uow.rebuild_markers(partition) == [marker]
    assert found == {
        erased: (ErasureTombstone(erased, partition, 41), {"e1"}),
        live: (None, {"e2"}),
    }

    async def bump() -> None:
        async with neo4j_store.unit_of_work(partition) as uow:
            assert isinstance(uow, TenantLedgerReads)
            await uow.tenant_ledgers(wanted)
            seen = await uow.checkpoint(partition)
            await asyncio.sleep(0.05)
            await uow.advance_checkpoint(partition, seen + 1)
            await uow.record_applied_events(live, [EventId(f"b{seen}")], now)

    await asyncio.wait_for(asyncio.gather(bump(), bump(), bump()), timeout=60)
    assert await neo4j_store.checkpoint(partition) == 3
    assert await neo4j_store.applied_event_ids(live, [EventId(f"b{i}") for i in range(3)]) == {
        "b0",
        "b1",
        "b2",
    }
    await neo4j_store.close_rebuild_marker(live, partition)
    for tenant in (erased, live):
        await neo4j_store.forget_applied_events(tenant)
