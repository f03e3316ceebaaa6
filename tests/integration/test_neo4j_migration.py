"""The graph-schema migration (adapters/neo4j/migrations.py) on a store written
in the old model by the old statements: interrupted and resumed, run twice,
and read back through the port and with the Cypher a Neo4j user writes.

The local stack has one Neo4j database, shared with every other test, so the
conversion passes are checked on this test's own tenant under the current
version node; only ``test_a_store_in_the_old_model_is_refused_until_migrated``
takes the version node away, for as long as one small migration takes, and
puts it back whatever happens.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from click.testing import CliRunner
from neo4j import AsyncDriver, AsyncGraphDatabase, NotificationMinimumSeverity

from adapters.neo4j import Neo4jGraphStore
from adapters.neo4j import cypher as q
from adapters.neo4j.migrations import MigrationProgress, convert, migrate
from adapters.neo4j.rows import order_key
from adapters.neo4j.schema import (
    GRAPH_SCHEMA_VERSION,
    GraphSchemaVersionError,
    read_state,
)
from contracts.domain import Alias, Entity, Relationship
from contracts.ids import EntityId, TenantId
from contracts.limits import DEFAULT_MAX_ALIAS_DEPTH
from streams.cli.main import main
from tests.services import Neo4jConfig

pytestmark = pytest.mark.services

DATABASE = "neo4j"

# -- the old model, as version 1 wrote it ------------------------------------------

OLD_UPSERT_ENTITIES = """
UNWIND $rows AS row
MERGE (e:Entity {tenant_id: $tenant, id: row.id})
ON CREATE SET e.order_key = row.order_key
SET e.name = row.name, e.type = row.type, e.blocking_key = row.blocking_key, e += row.props
"""

OLD_UPSERT_RELATIONSHIPS = """
UNWIND $rows AS row
MATCH (s:Entity {tenant_id: $tenant, id: row.source})
MATCH (t:Entity {tenant_id: $tenant, id: row.target})
MERGE (s)-[r:REL {type: row.type}]->(t)
ON CREATE SET r.tenant_id = $tenant
SET r.confidence = row.confidence, r += row.props
"""

#: "AliasId" is one of the store's own labels: such an entity gets no type label.
TYPES = ["Person", "Organization", "AliasId", "Thing"]


def _entities(tenant: TenantId, count: int) -> list[Entity]:
    return [
        Entity(tenant, EntityId(f"e{i:04}"), f"Entity {i}", TYPES[i % 4], {"rank": i})
        for i in range(count)
    ]


def _edges(tenant: TenantId, count: int) -> list[Relationship]:
    def e(i: int) -> EntityId:
        return EntityId(f"e{i % count:04}")

    edges = [Relationship(tenant, e(i), e(i + 1), "WORKS_AT", 0.5, {"n": i}) for i in range(count)]
    edges += [Relationship(tenant, e(i), e(i + 7), "KNOWS", 0.25) for i in range(count)]
    # Types the store's own statements use: still plain edge types.
    edges += [Relationship(tenant, e(i), e(i + 3), "REL", 1.0) for i in range(count // 12)]
    edges += [Relationship(tenant, e(i), e(i + 5), "ALIAS_OF", 0.75) for i in range(count // 60)]
    return edges


async def _write_old_model(
    driver: AsyncDriver, tenant: TenantId, entities: list[Entity], edges: list[Relationship]
) -> None:
    rows = [
        {
            "id": x.id,
            "name": x.name,
            "type": x.type,
            "blocking_key": x.blocking_key,
            "order_key": order_key(x.id),
            "props": {"p_" + k: v for k, v in x.properties.items()},
        }
        for x in entities
    ]
    await driver.execute_query(OLD_UPSERT_ENTITIES, tenant=tenant, rows=rows, database_=DATABASE)
    edge_rows = [
        {
            "source": r.source_id,
            "target": r.target_id,
            "type": r.type,
            "confidence": r.confidence,
            "props": {"p_" + k: v for k, v in r.properties.items()},
        }
        for r in edges
    ]
    await driver.execute_query(
        OLD_UPSERT_RELATIONSHIPS, tenant=tenant, rows=edge_rows, database_=DATABASE
    )
    await driver.execute_query(
        q.upsert_aliases_checked(DEFAULT_MAX_ALIAS_DEPTH),
        p={
            "tenant": tenant,
            "rows": [{"alias_id": "e0005", "canonical_id": "e0006", "reason": "same"}],
            "token": "t",
        },
        database_=DATABASE,
    )


async def _old_tenant(
    driver: AsyncDriver, count: int
) -> tuple[TenantId, list[Entity], list[Relationship]]:
    """A fresh tenant of ``count`` entities written in the old model."""
    tenant = TenantId(f"mig-{uuid.uuid4().hex[:8]}")
    entities, edges = _entities(tenant, count), _edges(tenant, count)
    await _write_old_model(driver, tenant, entities, edges)
    return tenant, entities, edges


async def _count(driver: AsyncDriver, query: str, **params: Any) -> int:
    records, _, _ = await driver.execute_query(query, params, database_=DATABASE)
    return int(records[0][0])


async def _drop(driver: AsyncDriver, tenant: TenantId) -> None:
    for label in ("Entity", "AliasId"):
        await driver.execute_query(
            f"MATCH (n:{label} {{tenant_id: $t}}) DETACH DELETE n", t=tenant, database_=DATABASE
        )


class Interrupted(Exception):
    pass


def _stop_at(step: str) -> Any:
    def hook(progress: MigrationProgress) -> None:
        if progress.step == step:
            raise Interrupted(progress)

    return hook


@pytest.fixture
async def driver(neo4j_config: Neo4jConfig) -> AsyncIterator[AsyncDriver]:
    async with AsyncGraphDatabase.driver(
        neo4j_config.uri,
        auth=neo4j_config.auth,
        notifications_min_severity=NotificationMinimumSeverity.OFF,
    ) as driver:
        yield driver


async def _check_native(
    neo4j_config: Neo4jConfig,
    driver: AsyncDriver,
    tenant: TenantId,
    entities: list[Entity],
    edges: list[Relationship],
) -> None:
    t = {"t": tenant}
    # What a Neo4j user writes.
    works_at = await _count(
        driver, "MATCH (:Entity {tenant_id: $t})-[:WORKS_AT]->(b) RETURN count(b)", **t
    )
    assert works_at == sum(1 for r in edges if r.type == "WORKS_AT")
    people = await _count(driver, "MATCH (p:Person {tenant_id: $t}) RETURN count(p)", **t)
    assert people == sum(1 for x in entities if x.type == "Person")
    assert (
        await _count(driver, "MATCH (a:AliasId:Entity {tenant_id: $t}) RETURN count(a)", **t) == 0
    )
    old = await _count(
        driver,
        "MATCH (:Entity {tenant_id: $t})-[r:REL]->() WHERE r.type IS NOT NULL RETURN count(r)",
        **t,
    )
    assert old == 0
    # Every edge converted once: none lost, none doubled.
    native = await _count(driver, "MATCH (:Entity {tenant_id: $t})-[r]->() RETURN count(r)", **t)
    assert native == len(edges)
    # And through the port, exactly what was written.
    async with await Neo4jGraphStore.open(
        neo4j_config.uri, neo4j_config.user, neo4j_config.password
    ) as store:
        assert await store.get_relationships(tenant) == sorted(edges, key=lambda r: r.key)
        got = await store.get_entities(tenant, [x.id for x in entities])
        assert got == sorted(entities, key=lambda x: x.id)
        for kind in TYPES:
            found = await store.find_entities(tenant, kind, limit=len(entities))
            assert [x.id for x in found] == sorted(x.id for x in entities if x.type == kind)
        works = await store.get_relationships(tenant, source_id=EntityId("e0000"), rel_type="KNOWS")
        assert [r.target_id for r in works] == ["e0007"]
        assert await store.resolve_entity_ids(tenant, [EntityId("e0005")]) == {"e0005": "e0006"}
        assert await store.find_aliases(tenant, EntityId("e0006")) == [
            Alias(tenant, EntityId("e0005"), EntityId("e0006"), "same")
        ]
        await store.delete_by_tenant(tenant)


async def test_conversion_interrupted_resumed_and_run_twice(
    neo4j_config: Neo4jConfig, driver: AsyncDriver
) -> None:
    tenant, entities, edges = await _old_tenant(driver, 1200)
    old = "MATCH (:Entity {tenant_id: $t})-[r:REL]->() WHERE r.type IS NOT NULL RETURN count(r)"
    assert await _count(driver, old, t=tenant) == len(edges)
    try:
        # Stopped after the first committed batch of the entity pass: the
        # cursor is in the version node.
        with pytest.raises(Interrupted):
            await convert(driver, DATABASE, batch=1000, on_batch=_stop_at("labels"))
        state = await read_state(driver, DATABASE)
        assert state.cursor is not None and state.current
        # Resumed from it, and stopped after the first batch of edges.
        with pytest.raises(Interrupted):
            await convert(
                driver, DATABASE, cursor=state.cursor, batch=1000, on_batch=_stop_at("edges")
            )
        remaining = await _count(driver, old, t=tenant)
        native = await _count(
            driver,
            "MATCH (:Entity {tenant_id: $t})-[r]->() WHERE r.type IS NULL RETURN count(r)",
            t=tenant,
        )
        assert 0 < remaining < len(edges) and native + remaining == len(edges)
        # Resumed to the end, then run again: the second run finds nothing.
        state = await read_state(driver, DATABASE)
        await convert(driver, DATABASE, cursor=state.cursor, batch=1000)
        _, again = await convert(driver, DATABASE, batch=1000)
        assert again == 0
        await _check_native(neo4j_config, driver, tenant, entities, edges)
    finally:
        await driver.execute_query(
            "MATCH (m:RedstringSchema {store: 'graph'}) REMOVE m.cursor_tenant, m.cursor_id",
            database_=DATABASE,
        )
        await _drop(driver, tenant)


async def test_a_store_in_the_old_model_is_refused_until_migrated(
    neo4j_config: Neo4jConfig, driver: AsyncDriver
) -> None:
    tenant, entities, edges = await _old_tenant(driver, 30)
    try:
        # A store written before versions were recorded: no version node.
        await driver.execute_query(
            "MATCH (m:RedstringSchema {store: 'graph'}) DELETE m", database_=DATABASE
        )
        assert (await read_state(driver, DATABASE)).version == 1
        with pytest.raises(GraphSchemaVersionError, match="run `redstring migrate`"):
            await Neo4jGraphStore.open(neo4j_config.uri, neo4j_config.user, neo4j_config.password)
        # Interrupted: still refused, now by the version node it wrote.
        with pytest.raises(Interrupted):
            await migrate(driver, DATABASE, batch=10, on_batch=_stop_at("edges"))
        assert (await read_state(driver, DATABASE)).recorded == 1
        with pytest.raises(GraphSchemaVersionError, match="version 1"):
            await Neo4jGraphStore.open(neo4j_config.uri, neo4j_config.user, neo4j_config.password)
        report = await migrate(driver, DATABASE, batch=10)
        assert (report.from_version, report.to_version) == (1, GRAPH_SCHEMA_VERSION)
        assert report.converted > 0
        again = await migrate(driver, DATABASE, batch=10)
        assert (again.from_version, again.converted) == (GRAPH_SCHEMA_VERSION, 0)
        state = await read_state(driver, DATABASE)
        assert state.current and state.cursor is None
        await _check_native(neo4j_config, driver, tenant, entities, edges)
    finally:
        # Whatever happened, leave the shared database at the current version.
        await migrate(driver, DATABASE)
        await _drop(driver, tenant)


async def test_an_entity_whose_type_changes_changes_its_label(neo4j_config: Neo4jConfig) -> None:
    tenant = TenantId(f"mig-{uuid.uuid4().hex[:8]}")
    ada = EntityId("ada")
    async with await Neo4jGraphStore.open(
        neo4j_config.uri, neo4j_config.user, neo4j_config.password
    ) as store:
        labels = "MATCH (e:Entity {tenant_id: $t, id: 'ada'}) RETURN labels(e)"
        async with AsyncGraphDatabase.driver(neo4j_config.uri, auth=neo4j_config.auth) as driver:
            for kind, expected in [
                ("Person", {"Entity", "Person"}),
                ("Mathematician", {"Entity", "Mathematician"}),
                ("Checkpoint", {"Entity"}),
                ("Person", {"Entity", "Person"}),
            ]:
                await store.upsert_entity(tenant, Entity(tenant, ada, "Ada", kind))
                records, _, _ = await driver.execute_query(labels, t=tenant)
                assert set(records[0][0]) == expected
                assert [x.id for x in await store.find_entities(tenant, kind)] == [ada]
        await store.delete_by_tenant(tenant)


def test_redstring_migrate_runs_both_stores_and_twice_changes_nothing(
    stack_environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = f"mig_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("REDSTRING_PG_SCHEMA", schema)
    try:
        first = CliRunner().invoke(main, ["migrate"])
        assert first.exit_code == 0, first.output
        assert f"graph (neo4j): at version {GRAPH_SCHEMA_VERSION}, nothing to do" in first.output
        assert f"vectors (schema {schema}): at version 2, applied 1, 2" in first.output
        second = CliRunner().invoke(main, ["migrate"])
        assert second.exit_code == 0, second.output
        assert "applied none pending" in second.output
    finally:

        async def drop() -> None:
            conn = await asyncpg.connect(stack_environ["REDSTRING_PG_DSN"])
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                await conn.close()

        asyncio.run(drop())
