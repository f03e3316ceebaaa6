"""The pinned scenarios under every delivery mode with PgVectorStore as the
vector store (the graph side stays in memory): the same cases and the same
oracle as tests/scenarios/test_scenarios.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.pgvector_support import ScenarioVectorStores
from tests.scenarios.stores import use_stores
from tests.scenarios.test_scenarios import CASES, run_pinned

pytestmark = [pytest.mark.services, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def scenario_schemas(pg_dsn: str) -> AsyncIterator[ScenarioVectorStores]:
    factory = ScenarioVectorStores(pg_dsn, prefix=f"rs_sc_{uuid.uuid4().hex[:8]}")
    try:
        yield factory
    finally:
        await factory.drop_all()


@pytest_asyncio.fixture(loop_scope="session")
async def pgvector_stores(
    scenario_schemas: ScenarioVectorStores,
) -> AsyncIterator[ScenarioVectorStores]:
    try:
        yield scenario_schemas
    finally:
        await scenario_schemas.release()


@pytest.mark.parametrize(("name", "mode", "seed"), CASES)
async def test_pinned_history_on_pgvector(
    name: str, mode: str, seed: int, pgvector_stores: ScenarioVectorStores
) -> None:
    with use_stores(pgvector_stores):
        await run_pinned(name, mode, seed)
    assert pgvector_stores.live >= 1  # the case really folded into Postgres
