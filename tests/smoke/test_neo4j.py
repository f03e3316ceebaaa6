"""Neo4j smoke tests: a uniqueness constraint holds, a node round-trips over
Bolt, and the project's stacks plan statements again at most hourly."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from neo4j import AsyncGraphDatabase
from neo4j.exceptions import ConstraintError

from tests.services import Neo4jConfig, stack_source

pytestmark = pytest.mark.services


async def test_uniqueness_constraint_and_node_round_trip(
    neo4j_config: Neo4jConfig, tenant_id: str, unique_name: Callable[[str], str]
) -> None:
    label = unique_name("Smoke").replace("-", "_")
    constraint = f"{label}_id_unique"
    async with AsyncGraphDatabase.driver(neo4j_config.uri, auth=neo4j_config.auth) as driver:
        await driver.execute_query(
            f"CREATE CONSTRAINT {constraint} IF NOT EXISTS "
            f"FOR (n:{label}) REQUIRE (n.tenant, n.id) IS UNIQUE"
        )
        try:
            await driver.execute_query(
                f"CREATE (n:{label} {{tenant: $tenant, id: $id, name: $name}})",
                tenant=tenant_id,
                id="e-1",
                name="Ada",
            )
            records, _, _ = await driver.execute_query(
                f"MATCH (n:{label} {{tenant: $tenant, id: $id}}) RETURN n.name AS name",
                tenant=tenant_id,
                id="e-1",
            )
            assert [r["name"] for r in records] == ["Ada"]

            with pytest.raises(ConstraintError):
                await driver.execute_query(
                    f"CREATE (n:{label} {{tenant: $tenant, id: $id}})", tenant=tenant_id, id="e-1"
                )
            records, _, _ = await driver.execute_query(
                "SHOW CONSTRAINTS YIELD name, type WHERE name = $name RETURN type",
                name=constraint,
            )
            assert [r["type"] for r in records] == ["UNIQUENESS"]
        finally:
            await driver.execute_query(f"MATCH (n:{label}) DETACH DELETE n")
            await driver.execute_query(f"DROP CONSTRAINT {constraint} IF EXISTS")


async def test_the_projects_stacks_replan_statements_at_most_hourly(
    neo4j_config: Neo4jConfig,
) -> None:
    """devstack/Neo4jLauncher.java and docker-compose.yml set
    dbms.cypher.min_replan_interval to 1h (docs/deploy.md, "Sizing"): with
    Neo4j's 10 s, a store growing from empty planned every statement again
    every few seconds, each plan the same unique-index seek."""
    if stack_source() == "env":
        pytest.skip("servers given by REDSTRING_* endpoints: their settings are their operator's")
    async with AsyncGraphDatabase.driver(neo4j_config.uri, auth=neo4j_config.auth) as driver:
        records, _, _ = await driver.execute_query(
            "SHOW SETTINGS YIELD name, value WHERE name = $name RETURN value",
            name="dbms.cypher.min_replan_interval",
        )
    assert [r["value"] for r in records] == ["1h"]
