"""Readers open the real stores read-only (issue 17, item 2;
docs/adr/0016-read-only-open.md).

A Postgres role with only USAGE on the schema and SELECT on its tables opens
both stores through ``open_readers`` and reads through every read method of
the ports, graph, vector and ledger; a store that is missing, behind or ahead
of this code refuses to open with ``StoreSchemaError``; and a write through a
read-only store is refused, by the store and underneath it by the database
session (Postgres) or the access mode (Neo4j, whose Community edition has no
roles to test with).
"""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio
from pydantic import SecretStr

import adapters.neo4j.store as neo4j_store
import adapters.pgvector.store as pg_store
from adapters.neo4j import Neo4jGraphStore
from adapters.neo4j.runner import Blame
from adapters.pgvector import PgVectorStore
from adapters.pgvector.migrations import MIGRATIONS
from contracts.domain import (
    Alias,
    EmbeddingIdentity,
    Entity,
    ErasureTombstone,
    RebuildMarker,
    Relationship,
    StreamPartition,
    VectorRecord,
)
from contracts.errors import (
    EmbeddingIdentityMismatchError,
    PermanentStoreError,
    ReadOnlyStoreError,
    StoreSchemaError,
)
from contracts.ids import EntityId, EventId, TenantId
from streams.sdk import Stores, open_readers
from streams.settings import Settings
from streams.wiring import make_embedder
from tests.services import Neo4jConfig

pytestmark = [pytest.mark.services]

DIMENSION = 8
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _hex() -> str:
    return uuid.uuid4().hex[:8]


def _as_role(dsn: str, role: str, password: str) -> str:
    parts = urlsplit(dsn)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{role}:{password}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _settings(neo4j: Neo4jConfig, dsn: str, schema: str) -> Settings:
    return Settings(
        neo4j_uri=neo4j.uri,
        neo4j_user=neo4j.user,
        neo4j_password=SecretStr(neo4j.password),
        pg_dsn=SecretStr(dsn),
        pg_schema=schema,
        embedding_dimension=DIMENSION,
    )


def _reads(module: ModuleType) -> set[str]:
    return set(re.findall(r"^    (\w+) = reads\(", inspect.getsource(module), re.MULTILINE))


async def _superuser(dsn: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest_asyncio.fixture
async def schema(pg_dsn: str) -> AsyncIterator[str]:
    name = f"rs_ro_{_hex()}"
    yield name
    await _superuser(pg_dsn, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest_asyncio.fixture
async def reader_role(pg_dsn: str) -> AsyncIterator[tuple[str, str]]:
    """A login role with no privileges yet: (name, password)."""
    role, password = f"rs_reader_{_hex()}", _hex()
    await _superuser(pg_dsn, f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    yield role, password
    await _superuser(pg_dsn, f"DROP OWNED BY {role}", f"DROP ROLE {role}")


class _Written:
    """What the workers wrote for one tenant, through the writable stores."""

    def __init__(self) -> None:
        self.tenant = TenantId(f"t-{_hex()}")
        self.erased = TenantId(f"t-{_hex()}")
        self.partition = StreamPartition(f"ro-{_hex()}", 0, "topic-id")

    def entity(self, id_: str, name: str) -> Entity:
        return Entity(self.tenant, EntityId(id_), name, "Person", {"n": 1})

    async def write_graph(self, graph: Neo4jGraphStore) -> None:
        t = self.tenant
        await graph.upsert_entities(
            t, [self.entity("ada", "Ada Lovelace"), self.entity("charles", "Charles Babbage")]
        )
        await graph.upsert_entity(t, self.entity("ada-2", "Ada Lovelace"))
        await graph.upsert_relationships(
            t, [Relationship(t, EntityId("ada"), EntityId("charles"), "KNOWS", 0.9)]
        )
        await graph.upsert_alias(t, Alias(t, EntityId("ada-2"), EntityId("ada"), "same"))
        await self.write_ledger(graph)

    async def write_vectors(self, vectors: PgVectorStore) -> None:
        t = self.tenant
        await vectors.upsert_many(
            t,
            [
                VectorRecord(t, EntityId(f"e{i}"), tuple(float(i == j) for j in range(DIMENSION)))
                for i in range(3)
            ],
        )
        await vectors.hide_merged(t, EntityId("e2"), EntityId("e0"))
        await self.write_ledger(vectors)

    async def write_ledger(self, store: Neo4jGraphStore | PgVectorStore) -> None:
        p = self.partition
        await store.advance_checkpoint(p, 41)
        await store.put_rebuild_marker(RebuildMarker(self.tenant, p, 10, 50, 20))
        await store.put_erasure_tombstone(ErasureTombstone(self.erased, p, 7))
        await store.record_applied_events(self.tenant, [EventId("ev-1")], NOW)
        await store.record_control_event(self.tenant, EventId("ctl-1"), 30, NOW)


Read = Callable[[Any], Awaitable[Any]]


def _graph_reads(w: _Written) -> dict[str, tuple[Read, Any]]:
    """Every read of the graph store: the call, and what it must answer."""
    t = w.tenant
    ada, charles = EntityId("ada"), EntityId("charles")
    return {
        "get_entity": (lambda g: g.get_entity(t, ada), w.entity("ada", "Ada Lovelace")),
        "get_entities": (
            lambda g: g.get_entities(t, [ada, charles]),
            [w.entity("ada", "Ada Lovelace"), w.entity("charles", "Charles Babbage")],
        ),
        "find_entities": (
            lambda g: _ids(g.find_entities(t, entity_type="Person")),
            ["ada", "ada-2", "charles"],
        ),
        "find_by_blocking_key": (
            lambda g: _ids(g.find_by_blocking_key(t, "ada lovelace")),
            ["ada", "ada-2"],
        ),
        "find_by_blocking_keys": (
            lambda g: _keyed_ids(g.find_by_blocking_keys(t, ["charles babbage"])),
            {"charles babbage": ["charles"]},
        ),
        "find_aliases": (
            lambda g: g.find_aliases(t, ada),
            [Alias(t, EntityId("ada-2"), ada, "same")],
        ),
        "resolve_entity_ids": (
            lambda g: g.resolve_entity_ids(t, [EntityId("ada-2")]),
            {EntityId("ada-2"): ada},
        ),
        "get_relationship": (
            lambda g: _rel_key(g.get_relationship(t, (ada, charles, "KNOWS"))),
            (ada, charles, "KNOWS"),
        ),
        "get_relationships": (
            lambda g: _rel_keys(g.get_relationships(t, source_id=ada, rel_type="KNOWS")),
            [(ada, charles, "KNOWS")],
        ),
        "get_relationships_for": (
            lambda g: _rel_keys(g.get_relationships_for(t, [charles])),
            [(ada, charles, "KNOWS")],
        ),
        "neighbors": (lambda g: _ids(g.neighbors(t, charles)), ["ada"]),
        **_ledger_reads(w),
    }


def _vector_reads(w: _Written) -> dict[str, tuple[Read, Any]]:
    t = w.tenant
    e0 = tuple(float(j == 0) for j in range(DIMENSION))
    return {
        "get": (lambda v: _vector_of(v.get(t, EntityId("e2"))), "e2"),
        "search": (lambda v: _match_ids(v.search(t, e0, 5)), ["e0", "e1"]),
        "resolve_entity_ids": (
            lambda v: v.resolve_entity_ids(t, [EntityId("e2")]),
            {EntityId("e2"): EntityId("e0")},
        ),
        **_ledger_reads(w),
    }


def _ledger_reads(w: _Written) -> dict[str, tuple[Read, Any]]:
    p, t = w.partition, w.tenant
    return {
        "checkpoint": (lambda s: s.checkpoint(p), 41),
        "checkpoints": (lambda s: _only(s.checkpoints(), (p.topic, 0)), 41),
        "rebuild_markers": (
            lambda s: s.rebuild_markers(p),
            [RebuildMarker(t, p, 10, 50, 20)],
        ),
        "is_rebuilding": (lambda s: s.is_rebuilding(t), True),
        "erasure_tombstone": (
            lambda s: s.erasure_tombstone(w.erased),
            ErasureTombstone(w.erased, p, 7),
        ),
        "applied_event_ids": (
            lambda s: s.applied_event_ids(t, [EventId("ev-1"), EventId("ev-2")]),
            {"ev-1"},
        ),
        "acted_control_events": (
            lambda s: s.acted_control_events(t, [EventId("ctl-1")]),
            {"ctl-1": 30},
        ),
    }


async def _ids(entities: Awaitable[list[Entity]]) -> list[str]:
    return sorted(e.id for e in await entities)


async def _keyed_ids(found: Awaitable[dict[str, list[Entity]]]) -> dict[str, list[str]]:
    return {k: sorted(e.id for e in v) for k, v in (await found).items()}


async def _rel_key(found: Awaitable[Relationship | None]) -> Any:
    relationship = await found
    return None if relationship is None else relationship.key


async def _rel_keys(found: Awaitable[list[Relationship]]) -> list[Any]:
    return [r.key for r in await found]


async def _vector_of(found: Awaitable[VectorRecord | None]) -> str | None:
    record = await found
    return None if record is None else record.id


async def _match_ids(found: Awaitable[list[Any]]) -> list[str]:
    return sorted(m.record.id for m in await found)


async def _only(found: Awaitable[dict[tuple[str, int], int]], key: tuple[str, int]) -> int | None:
    return (await found).get(key)


async def _read_everything(readers: Stores, w: _Written) -> None:
    graph_reads, vector_reads = _graph_reads(w), _vector_reads(w)
    # A read method added to a store without a line here fails the test.
    assert set(graph_reads) == _reads(neo4j_store)
    assert set(vector_reads) == _reads(pg_store) | {"search"}
    for store, reads in ((readers.graph, graph_reads), (readers.vector, vector_reads)):
        for name, (read, expected) in reads.items():
            assert await read(store) == expected, name
    assert readers.vector.dimension == DIMENSION
    assert readers.vector.identity == readers.embedder.identity


async def test_a_select_only_role_reads_through_every_read_port(
    pg_dsn: str, neo4j_config: Neo4jConfig, schema: str, reader_role: tuple[str, str]
) -> None:
    writers = _settings(neo4j_config, pg_dsn, schema)
    identity = make_embedder(writers).identity
    w = _Written()
    async with await Neo4jGraphStore.open(
        neo4j_config.uri, neo4j_config.user, neo4j_config.password
    ) as graph:
        await w.write_graph(graph)
        async with await PgVectorStore.open(pg_dsn, identity, schema=schema) as vectors:
            await w.write_vectors(vectors)
            role, password = reader_role
            await _superuser(
                pg_dsn,
                f'GRANT USAGE ON SCHEMA "{schema}" TO {role}',
                f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {role}',
            )
            readers = await open_readers(
                _settings(neo4j_config, _as_role(pg_dsn, role, password), schema)
            )
            try:
                await _read_everything(readers, w)
                with pytest.raises(ReadOnlyStoreError, match="refuses upsert"):
                    await readers.vector.upsert_many(
                        w.tenant, [VectorRecord(w.tenant, EntityId("x"), (1.0,) * DIMENSION)]
                    )
                with pytest.raises(ReadOnlyStoreError, match="refuses upsert_entity"):
                    await readers.graph.upsert_entity(w.tenant, w.entity("x", "X"))
            finally:
                await readers.aclose()
            await graph.delete_by_tenant(w.tenant)


async def test_a_role_without_select_is_told_what_to_grant(
    pg_dsn: str, schema: str, reader_role: tuple[str, str]
) -> None:
    identity = EmbeddingIdentity("ro-test", DIMENSION)
    await (await PgVectorStore.open(pg_dsn, identity, schema=schema)).aclose()
    role, password = reader_role
    await _superuser(pg_dsn, f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
    with pytest.raises(StoreSchemaError, match=r"may not read the store.*grant it USAGE"):
        await PgVectorStore.open(
            _as_role(pg_dsn, role, password), identity, schema=schema, read_only=True
        )


async def _migrated(pg_dsn: str, schema: str, identity: EmbeddingIdentity, *sql: str) -> None:
    await (await PgVectorStore.open(pg_dsn, identity, schema=schema)).aclose()
    await _superuser(pg_dsn, *(s.format(schema=f'"{schema}"') for s in sql))


NEWEST = max(m.version for m in MIGRATIONS)


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        ("nothing", r"not initialised \(no migrations\).*redstring migrate"),
        ("empty schema", r"not initialised \(no migrations\).*redstring migrate"),
        (
            "newer",
            rf"version {NEWEST + 1}, newer than this code understands \(up to {NEWEST}\)"
            r".*upgrade this reader",
        ),
        ("pending", rf"version {NEWEST - 1}, this code reads version {NEWEST}.*redstring migrate"),
        ("no identity", r"no embedding identity is recorded.*redstring migrate"),
    ],
)
async def test_a_reader_refuses_a_schema_it_cannot_read(
    pg_dsn: str, schema: str, prepare: str, message: str
) -> None:
    identity = EmbeddingIdentity("ro-test", DIMENSION)
    if prepare == "empty schema":
        await _superuser(pg_dsn, f'CREATE SCHEMA "{schema}"')
    elif prepare == "newer":
        await _migrated(
            pg_dsn,
            schema,
            identity,
            f"INSERT INTO {{schema}}.schema_migrations (version, name) VALUES ({NEWEST + 1}, 'x')",
        )
    elif prepare == "pending":
        await _migrated(
            pg_dsn,
            schema,
            identity,
            f"DELETE FROM {{schema}}.schema_migrations WHERE version = {NEWEST}",
        )
    elif prepare == "no identity":
        await _migrated(pg_dsn, schema, identity, "DELETE FROM {schema}.embedding_identity")
    with pytest.raises(StoreSchemaError, match=message):
        await PgVectorStore.open(pg_dsn, identity, schema=schema, read_only=True)
    # Refusing created nothing.
    conn = await asyncpg.connect(pg_dsn)
    try:
        exists = await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema)
    finally:
        await conn.close()
    assert exists == (prepare != "nothing")


async def test_a_reader_refuses_another_embedding_identity(pg_dsn: str, schema: str) -> None:
    await _migrated(pg_dsn, schema, EmbeddingIdentity("ro-test", DIMENSION))
    with pytest.raises(EmbeddingIdentityMismatchError, match="model='ro-test'"):
        await PgVectorStore.open(
            pg_dsn, EmbeddingIdentity("other", DIMENSION), schema=schema, read_only=True
        )


async def test_the_postgres_session_itself_refuses_a_write(pg_dsn: str, schema: str) -> None:
    identity = EmbeddingIdentity("ro-test", DIMENSION)
    await _migrated(pg_dsn, schema, identity)
    # The superuser may write anything: only the session's read-only default stops it.
    async with await PgVectorStore.open(pg_dsn, identity, schema=schema, read_only=True) as store:
        with pytest.raises(ReadOnlyStoreError, match="refuses unit_of_work"):
            async with store.unit_of_work(StreamPartition("ro", 0)):
                pass
        async with store._pool.acquire() as conn:
            with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                await conn.execute(f'DELETE FROM "{schema}".embedding_identity')
            with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                await conn.execute(f'CREATE TABLE "{schema}".sneaky (x int)')


async def test_neo4j_read_access_mode_refuses_a_write(neo4j_config: Neo4jConfig) -> None:
    async with await Neo4jGraphStore.open(
        neo4j_config.uri, neo4j_config.user, neo4j_config.password, read_only=True
    ) as graph:
        tenant = TenantId(f"t-{_hex()}")
        assert await graph.get_entity(tenant, EntityId("ada")) is None
        with pytest.raises(ReadOnlyStoreError, match="refuses unit_of_work"):
            async with graph.unit_of_work(StreamPartition("ro", 0)):
                pass
        with pytest.raises(ReadOnlyStoreError, match="refuses delete_by_tenant"):
            await graph.delete_by_tenant(tenant)
        # Below the store: a write statement sent as a write still runs in
        # read access mode, and Neo4j refuses it.
        with pytest.raises(PermanentStoreError, match="AccessMode"):
            await graph._managed.run(
                "CREATE (:ReadOnlyProbe {tenant_id: $tenant})",
                {"tenant": tenant},
                write=True,
                blame=Blame("probe", tenant),
            )
        assert await graph.get_entity(tenant, EntityId("ada")) is None
