"""``redstring migrate``: bring both stores to the schema this code reads.

The graph's migrations convert the data in place, in batches, and workers
refuse a graph with one pending (adapters/neo4j/migrations.py); Postgres's
are DDL that a worker's open also applies (adapters/pgvector/migrations.py),
run here so that one command, run before the workers start, leaves nothing
pending in either store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adapters.neo4j.migrations import GraphMigrationReport, MigrationProgress, migrate
from adapters.neo4j.schema import GraphSchemaState, check_version, read_state
from streams.settings import Settings
from streams.wiring import make_embedder

if TYPE_CHECKING:
    from neo4j import AsyncDriver


@dataclass(frozen=True)
class VectorMigrationReport:
    schema: str
    applied: tuple[int, ...]
    version: int


@dataclass(frozen=True)
class StoresMigrationReport:
    graph: GraphMigrationReport
    vector: VectorMigrationReport


def _driver(settings: Settings) -> AsyncDriver:
    from neo4j import AsyncGraphDatabase, NotificationMinimumSeverity

    return AsyncGraphDatabase.driver(
        settings.neo4j_uri,
        auth=(settings.neo4j_user, settings.neo4j_password.get_secret_value()),
        notifications_min_severity=NotificationMinimumSeverity.OFF,
    )


async def graph_state(settings: Settings) -> GraphSchemaState:
    """The graph's schema version, read only."""
    async with _driver(settings) as driver:
        return await read_state(driver, settings.neo4j_database)


async def check_graph(settings: Settings) -> None:
    """Raise ``GraphSchemaVersionError`` while the graph needs a migration
    (or is newer than this code); a worker checks before it starts."""
    check_version(await graph_state(settings), settings.neo4j_database)


async def migrate_stores(
    settings: Settings,
    *,
    batch: int,
    on_batch: Callable[[MigrationProgress], None] | None = None,
) -> StoresMigrationReport:
    async with _driver(settings) as driver:
        graph = await migrate(driver, settings.neo4j_database, batch=batch, on_batch=on_batch)
    vector = await _migrate_vector(settings)
    return StoresMigrationReport(graph, vector)


async def _migrate_vector(settings: Settings) -> VectorMigrationReport:
    import asyncpg

    from adapters.pgvector.migrations import migrate as migrate_pg
    from adapters.pgvector.sql import quote_identifier

    # The schema is bound to the workers' embedding identity on its first
    # migration, as a worker's open would bind it.
    identity = make_embedder(settings).identity
    table = f"{quote_identifier(settings.pg_schema)}.schema_migrations"
    conn = await asyncpg.connect(settings.pg_dsn.get_secret_value())
    try:

        async def applied() -> set[int]:
            if await conn.fetchval("SELECT to_regclass($1)", table) is None:
                return set()
            return {r["version"] for r in await conn.fetch(f"SELECT version FROM {table}")}

        before = await applied()
        await migrate_pg(conn, settings.pg_schema, identity, hnsw=False)
        after = await applied()
    finally:
        await conn.close()
    return VectorMigrationReport(
        settings.pg_schema, tuple(sorted(after - before)), max(after, default=0)
    )
