"""Schema migrations of the pgvector adapter: versioned, idempotent, serialised.

``migrate`` runs in one transaction under a transaction-level advisory lock, so
two workers opening the same database at once queue rather than race (and a
failed open leaves nothing half-made: Postgres DDL is transactional). Each
migration is applied once and recorded in ``schema_migrations``; a migration
already recorded is never re-run, so editing one in place does nothing —
append a new version instead.

The vectors' dimension is part of the column type (``vector(n)``), so it is
fixed when version 1 runs: one schema holds one embedding identity, recorded in
``embedding_identity`` and checked on every open.

``check_readable`` is the read-only open's counterpart of ``migrate``: it
reads what ``migrate`` would write and changes nothing
(docs/adr/0016-read-only-open.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from adapters.pgvector.sql import quote_identifier
from contracts.domain import EmbeddingIdentity
from contracts.errors import EmbeddingIdentityMismatchError, StoreSchemaError

__all__ = ["MIGRATIONS", "Migration", "check_readable", "migrate"]

# One key for every redstring schema in the database: CREATE EXTENSION is
# database-wide, and opens are rare enough that queueing them all costs nothing.
_LOCK_KEY = "redstring.pgvector.migrate"
_MIN_ITERATIVE_SCAN_VERSION = (0, 8)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    #: (quoted schema, dimension) -> statements
    statements: Callable[[str, int], list[str]]


def _v1(s: str, dimension: int) -> list[str]:
    return [
        f"CREATE TABLE {s}.embedding_identity ("
        " singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),"
        " model text NOT NULL, dimension integer NOT NULL,"
        " document_prefix text NOT NULL, query_prefix text NOT NULL)",
        f"CREATE TABLE {s}.vectors ("
        " tenant_id text NOT NULL, id text NOT NULL,"
        f" embedding vector({dimension}) NOT NULL, metadata jsonb NOT NULL,"
        " PRIMARY KEY (tenant_id, id))",
        # Alias facts: absorbed id -> canonical id. An id with a row here is
        # hidden from search (docs/design.md 4).
        f"CREATE TABLE {s}.vector_aliases ("
        " tenant_id text NOT NULL, alias_id text NOT NULL, canonical_id text NOT NULL,"
        " PRIMARY KEY (tenant_id, alias_id))",
        # last_offset NULL: a row that exists only to be locked, no checkpoint yet.
        f"CREATE TABLE {s}.checkpoints ("
        " topic text NOT NULL, partition integer NOT NULL, topic_id text NOT NULL,"
        " last_offset bigint, PRIMARY KEY (topic, partition))",
        f"CREATE TABLE {s}.rebuild_markers ("
        " tenant_id text NOT NULL, topic text NOT NULL, partition integer NOT NULL,"
        " topic_id text NOT NULL, start_offset bigint NOT NULL, end_offset bigint NOT NULL,"
        " applied_through bigint NOT NULL,"
        " state text NOT NULL CHECK (state IN ('deleting', 'rebuilding')),"
        " PRIMARY KEY (tenant_id, topic, partition))",
        f"CREATE INDEX rebuild_markers_by_partition ON {s}.rebuild_markers (topic, partition)",
        f"CREATE TABLE {s}.tombstones ("
        " tenant_id text PRIMARY KEY, topic text NOT NULL, partition integer NOT NULL,"
        " topic_id text NOT NULL, erased_offset bigint NOT NULL)",
        f"CREATE TABLE {s}.applied_events ("
        " tenant_id text NOT NULL, event_id text NOT NULL,"
        " applied_at timestamptz NOT NULL, PRIMARY KEY (tenant_id, event_id))",
        # Expiry deletes by age across tenants.
        f"CREATE INDEX applied_events_by_age ON {s}.applied_events (applied_at)",
    ]


def _v2(s: str, dimension: int) -> list[str]:
    del dimension
    return [
        # Acted-on control events (docs/design.md 6.4, "Control events act once"): apart
        # from applied_events, so that neither forgetting, expiry nor the
        # tenant purge removes them.
        f"CREATE TABLE {s}.control_events ("
        " tenant_id text NOT NULL, event_id text NOT NULL, acted_offset bigint NOT NULL,"
        " acted_at timestamptz NOT NULL, PRIMARY KEY (tenant_id, event_id))",
    ]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial tables", _v1),
    Migration(2, "acted-on control events", _v2),
)

HNSW_INDEX = "vectors_embedding_hnsw"


async def migrate(
    conn: asyncpg.Connection, schema: str, identity: EmbeddingIdentity, *, hnsw: bool
) -> str:
    """Bring ``schema`` up to date and bind it to ``identity``; returns the
    schema the ``vector`` extension lives in (for the connections' codecs)."""
    s = quote_identifier(schema)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", _LOCK_KEY)
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        row = await conn.fetchrow(
            "SELECT n.nspname, e.extversion FROM pg_extension e "
            "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
        )
        extension_schema, version = str(row["nspname"]), str(row["extversion"])
        ext = quote_identifier(extension_schema)
        # Unqualified `vector` and `<=>` below resolve through the extension's schema.
        await conn.execute(f"SET LOCAL search_path = {ext}")
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        applied = {
            r["version"] for r in await conn.fetch(f"SELECT version FROM {s}.schema_migrations")
        }
        for migration in MIGRATIONS:
            if migration.version in applied:
                continue
            for statement in migration.statements(s, identity.dimension):
                await conn.execute(statement)
            await conn.execute(
                f"INSERT INTO {s}.schema_migrations (version, name) VALUES ($1, $2)",
                migration.version,
                migration.name,
            )
        await _bind_identity(conn, s, identity)
        if hnsw:
            if _version_tuple(version) < _MIN_ITERATIVE_SCAN_VERSION:
                raise RuntimeError(
                    f"hnsw=True needs pgvector >= 0.8 for iterative index scans "
                    f"(this database has {version}); open with hnsw=False for exact search"
                )
            await conn.execute(
                f"CREATE INDEX IF NOT EXISTS {HNSW_INDEX} ON {s}.vectors "
                "USING hnsw (embedding vector_cosine_ops)"
            )
    return extension_schema


async def _bind_identity(conn: asyncpg.Connection, s: str, identity: EmbeddingIdentity) -> None:
    stored = await _stored_identity(conn, s)
    if stored is None:
        await conn.execute(
            f"INSERT INTO {s}.embedding_identity "
            "(model, dimension, document_prefix, query_prefix) VALUES ($1, $2, $3, $4)",
            identity.model,
            identity.dimension,
            identity.document_prefix,
            identity.query_prefix,
        )
        return
    _check_identity(stored, identity)


async def _stored_identity(conn: asyncpg.Connection, s: str) -> EmbeddingIdentity | None:
    stored = await conn.fetchrow(
        f"SELECT model, dimension, document_prefix, query_prefix FROM {s}.embedding_identity"
    )
    if stored is None:
        return None
    return EmbeddingIdentity(
        model=stored["model"],
        dimension=stored["dimension"],
        document_prefix=stored["document_prefix"],
        query_prefix=stored["query_prefix"],
    )


def _check_identity(stored: EmbeddingIdentity, identity: EmbeddingIdentity) -> None:
    difference = stored.first_difference(identity)
    if difference is not None:
        raise EmbeddingIdentityMismatchError(*difference)


#: What a read-only open tells an operator to run when the schema is missing
#: or behind: something that opens the store for writing migrates it.
MIGRATE_REMEDY = (
    "run `redstring migrate` (or start a worker, which migrates on open) with a role "
    "that may create the schema, then open the reader again"
)


async def check_readable(
    conn: asyncpg.Connection, schema: str, identity: EmbeddingIdentity, *, hnsw: bool
) -> str:
    """Check, reading only, that ``schema`` is at exactly the migrations this
    code knows and bound to ``identity``; returns the schema the ``vector``
    extension lives in. Raises ``StoreSchemaError`` naming what is wrong and
    what to run, or ``EmbeddingIdentityMismatchError``."""
    where = f"pgvector schema {schema!r}"
    s = quote_identifier(schema)
    # The catalogs are readable by every role, so a missing schema or table
    # is told apart from one this role may not read.
    extension_schema = await conn.fetchval(
        "SELECT n.nspname FROM pg_extension e "
        "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    )
    tracked = await conn.fetchval(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = 'schema_migrations'",
        schema,
    )
    if extension_schema is None or not tracked:
        raise StoreSchemaError(
            where, "the store is not initialised (no migrations)", MIGRATE_REMEDY
        )
    try:
        applied = {
            r["version"] for r in await conn.fetch(f"SELECT version FROM {s}.schema_migrations")
        }
        stored = await _stored_identity(conn, s) if applied else None
    except asyncpg.InsufficientPrivilegeError as exc:
        raise StoreSchemaError(
            where,
            f"this role may not read the store ({exc})",
            f"grant it USAGE on schema {s} and SELECT on all tables in schema {s}",
        ) from exc
    known = {m.version for m in MIGRATIONS}
    newest = max(known)
    if applied - known:
        raise StoreSchemaError(
            where,
            f"the schema is at version {max(applied)}, newer than this code understands "
            f"(up to {newest})",
            "upgrade this reader to the redstring version the workers run",
        )
    if known - applied:
        at = max(applied, default=0)
        raise StoreSchemaError(
            where,
            f"the schema is at version {at}, this code reads version {newest}",
            MIGRATE_REMEDY,
        )
    if stored is None:
        raise StoreSchemaError(where, "no embedding identity is recorded", MIGRATE_REMEDY)
    _check_identity(stored, identity)
    if hnsw:
        indexed = await conn.fetchval(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = $2",
            schema,
            HNSW_INDEX,
        )
        if not indexed:
            raise StoreSchemaError(
                where,
                "hnsw=True but the schema has no HNSW index",
                "open it once for writing with hnsw=True, or read with hnsw=False",
            )
    return str(extension_schema)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
