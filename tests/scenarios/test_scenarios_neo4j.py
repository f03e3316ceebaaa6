"""The pinned histories under every delivery mode, folded into Neo4jGraphStore.

The graph side is the real adapter on the shared Neo4j; the vector side is the
memory store. Every store the harness asks for is a fresh namespace of tenant
ids and topic names (tests/scenarios/namespaced.py), so a case starts empty
without wiping a database other runs use; the namespaces are deleted after
each case. Seeded modes run with their first seed here (the memory run takes
all three): every pinned history meets every mode, inside the CI budget.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import cast

import pytest
from neo4j import AsyncGraphDatabase

from adapters.memory.vector import InMemoryVectorStore
from adapters.neo4j import Neo4jGraphStore
from contracts.domain import EmbeddingIdentity
from contracts.ports.graph import ProjectedGraphStore
from contracts.ports.vector import ProjectedVectorStore
from tests.scenarios.namespaced import Names, Namespaced
from tests.scenarios.stores import use_stores
from tests.scenarios.test_scenarios import CASES, run_pinned
from tests.services import Neo4jConfig

pytestmark = pytest.mark.services

FIRST_SEED_CASES = [case for case in CASES if case.values[2] == 0]

# Label by label, so each delete stays inside one label's nodes; the tenant and
# topic prefixes are parameters like everything else.
_CLEANUP = [
    "MATCH (n:Entity) WHERE n.tenant_id STARTS WITH $prefix DETACH DELETE n",
    "MATCH (n:AliasId) WHERE n.tenant_id STARTS WITH $prefix DETACH DELETE n",
    "MATCH (n:AppliedEvent) WHERE n.tenant_id STARTS WITH $prefix DELETE n",
    "MATCH (n:RebuildMarker) WHERE n.tenant_id STARTS WITH $prefix DELETE n",
    "MATCH (n:ErasureTombstone) WHERE n.tenant_id STARTS WITH $prefix DELETE n",
    "MATCH (n:ControlEvent) WHERE n.tenant_id STARTS WITH $prefix DELETE n",
    "MATCH (n:Checkpoint) WHERE n.topic STARTS WITH $prefix DELETE n",
]


class Neo4jGraphStores:
    """Scenario StoreFactory: Neo4j for the graph, memory for vectors."""

    def __init__(self, config: Neo4jConfig) -> None:
        self.config = config
        self.prefixes: list[str] = []
        self.stores: list[Neo4jGraphStore] = []

    async def graph(self) -> ProjectedGraphStore:
        store = await Neo4jGraphStore.open(self.config.uri, self.config.user, self.config.password)
        prefix = f"s{uuid.uuid4().hex[:8]}-"
        self.stores.append(store)
        self.prefixes.append(prefix)
        return cast(ProjectedGraphStore, Namespaced(store, Names(prefix)))

    async def vector(self, identity: EmbeddingIdentity) -> ProjectedVectorStore:
        return InMemoryVectorStore(identity)

    async def close(self) -> None:
        for store in self.stores:
            await store.aclose()
        async with AsyncGraphDatabase.driver(self.config.uri, auth=self.config.auth) as driver:
            for prefix in self.prefixes:
                for statement in _CLEANUP:
                    await driver.execute_query(statement, prefix=prefix)


@pytest.fixture
async def neo4j_stores(neo4j_config: Neo4jConfig) -> AsyncIterator[Neo4jGraphStores]:
    factory = Neo4jGraphStores(neo4j_config)
    try:
        yield factory
    finally:
        await factory.close()


@pytest.mark.parametrize(("name", "mode", "seed"), FIRST_SEED_CASES)
async def test_pinned_history_on_neo4j(
    name: str, mode: str, seed: int, neo4j_stores: Neo4jGraphStores
) -> None:
    with use_stores(neo4j_stores):
        await run_pinned(name, mode, seed)


def test_every_mode_and_history_is_covered() -> None:
    """Guard the filter: taking one seed must not drop a history or a mode."""
    everything = {(case.values[0], case.values[1]) for case in CASES}
    here = {(case.values[0], case.values[1]) for case in FIRST_SEED_CASES}
    assert here == everything
