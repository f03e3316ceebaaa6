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

from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.compliance.graph_store import GraphStoreCompliance
from adapters.compliance.ledger import LedgerCompliance
from adapters.neo4j import Neo4jGraphStore
from contracts.domain import Entity
from contracts.ids import EntityId, TenantId
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
