"""The Neo4j graph store on the local stack, and the database hits of a
``PROFILE``d statement: deterministic for a given graph, so these tests read
cost without timing anything."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.neo4j import Neo4jGraphStore
from tests.services import Neo4jConfig


@pytest.fixture
async def store(neo4j_config: Neo4jConfig) -> AsyncIterator[Neo4jGraphStore]:
    opened = await Neo4jGraphStore.open(neo4j_config.uri, neo4j_config.user, neo4j_config.password)
    async with opened:
        yield opened


def db_hits(plan: dict[str, Any]) -> int:
    """Every operator's database hits in a profiled plan."""
    return int(plan.get("dbHits", 0)) + sum(db_hits(c) for c in plan.get("children", []))


def profile_statement(
    monkeypatch: pytest.MonkeyPatch, store: Neo4jGraphStore, statement: str
) -> list[Any]:
    """Run ``statement`` under ``PROFILE`` whenever the store sends it alone
    (its direct writes and purge do); returns the list its results go to."""
    results: list[Any] = []
    driver = store._driver
    execute = driver.execute_query

    async def profiled(query: Any, params: Any = None, **config: Any) -> Any:
        if query != statement:
            return await execute(query, params, **config)
        result = await execute("PROFILE " + query, params, **config)
        results.append(result)
        return result

    monkeypatch.setattr(driver, "execute_query", profiled)
    return results
