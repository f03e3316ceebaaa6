"""``PgVectorStore``: the vector port and its ledger on Postgres + pgvector.

One schema per store (default ``redstring``), created and migrated on
``open``; the embedding identity is bound to it for good (migrations.py).
Connections come from an asyncpg pool whose ``init`` registers pgvector's
binary codec on each of them.

Direct calls each run as one short transaction (a read as one statement),
retried with backoff on transient failures. ``unit_of_work(partition)`` takes
one pooled connection, opens one transaction, and locks the partition's
checkpoint row before handing out the view; nothing in it is retried (see
errors.py): a transient failure surfaces as ``TransientStoreError`` and the
caller redoes the whole batch.

Search is exact by default (docs/adr/0005-pgvector-exact-search.md).
``hnsw=True`` builds an HNSW index and answers from it with iterative scans:
faster on large tenants, approximate, and not what the compliance suite states.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import asyncpg
from pgvector.asyncpg import register_vector

from adapters.alias_depth import DEFAULT_MAX_ALIAS_DEPTH
from adapters.pgvector import vectors
from adapters.pgvector.errors import (
    RetryPolicy,
    breaks_connection,
    translated,
    with_retries,
)
from adapters.pgvector.migrations import migrate
from adapters.pgvector.operations import Operations
from adapters.pgvector.sql import Statements, quote_identifier
from adapters.pgvector.vectors import plan_search, plan_upsert
from contracts.domain import (
    EmbeddingIdentity,
    ErasureSweep,
    ErasureTombstone,
    RebuildMarker,
    StreamPartition,
    VectorMatch,
    VectorRecord,
)
from contracts.ids import EntityId, EventId, TenantId
from contracts.ids import tenant_id as valid_tenant_id
from contracts.ports.lifecycle import ClosingContext
from contracts.ports.vector import VectorUnitOfWork

__all__ = ["PgVectorStore"]

T = TypeVar("T")


async def _prepare_connection(extension_schema: str, conn: asyncpg.Connection) -> None:
    await register_vector(conn, schema=extension_schema)


@asynccontextmanager
async def _discarded_if_broken(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """Close a connection that failed in a way that leaves it unusable, so the
    pool opens a fresh one for the retry instead of handing this one out again."""
    try:
        yield
    except BaseException as error:
        if breaks_connection(error):
            with suppress(Exception):  # already detached by the pool
                conn.terminate()
        raise


async def _nothing_to_reset(conn: asyncpg.Connection) -> None:
    """asyncpg's default reset sends four statements to the server on every
    release (unlock advisory locks, close cursors, unlisten, RESET ALL): a
    round trip per unit of work and per direct call. This adapter leaves no
    session state behind (no session advisory locks, cursors only inside
    transactions, no LISTEN, settings only at connect time), and asyncpg
    still rolls back a transaction left open before calling this."""


class PgVectorStore(ClosingContext):
    """``ProjectedVectorStore`` on Postgres + pgvector. Build with ``open``."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        sql: Statements,
        identity: EmbeddingIdentity,
        *,
        approximate: bool,
        retry: RetryPolicy,
        max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH,
    ) -> None:
        self.max_alias_depth = max_alias_depth  # adapters.alias_depth
        self._pool = pool
        self._sql = sql
        self._identity = identity
        self._approximate = approximate
        self._retry = retry
        # Tasks inside one of this store's units of work: a direct write from
        # one of them would wait on the unit of work's own row locks forever.
        self._holders: set[asyncio.Task[Any]] = set()

    @classmethod
    async def open(
        cls,
        dsn: str,
        identity: EmbeddingIdentity,
        *,
        schema: str = "redstring",
        min_size: int = 1,
        max_size: int = 10,
        hnsw: bool = False,
        retry: RetryPolicy | None = None,
        max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH,
    ) -> PgVectorStore:
        """Migrate ``schema`` (idempotent; safe from several workers at once),
        check or record ``identity`` (``EmbeddingIdentityMismatchError`` if the
        schema holds another), and open a pool of ``min_size``..``max_size``.

        Guarantees that the returned store's schema is at the current
        migration, that its vectors were made by ``identity`` (model and
        dimension; a schema is bound to one identity for good, so a reader
        with another embedder cannot open it), and that every pooled
        connection has pgvector's codec registered. Connecting and migrating
        are retried on transient failures per ``retry``. The store owns its
        pool: ``aclose`` (or leaving ``async with``) closes it. Readers use it
        as described in docs/readers.md.

        Args:
            dsn: The libpq/asyncpg connection string, e.g.
                ``postgresql://user:password@localhost:5432/redstring``
                (``settings.pg_dsn.get_secret_value()``).
            identity: The embedding model and dimension of the vectors, e.g.
                ``make_embedder(settings).identity``. Recorded on first open;
                must match afterwards.
            schema: The Postgres schema holding the store (default
                ``"redstring"``, ``REDSTRING_PG_SCHEMA``); a plain identifier,
                created if missing.
            min_size: Connections the pool keeps open (default 1).
            max_size: Connections the pool opens at most (default 10).
            hnsw: Build an HNSW index and answer ``search`` from it
                (approximate, faster on large tenants) instead of exact search
                (default ``False``; docs/adr/0005-pgvector-exact-search.md).
            retry: Backoff for transient failures (``RetryPolicy``: attempts,
                first and maximum delay in seconds). Default ``None``:
                ``RetryPolicy()``, 6 attempts from 0.05 s up to 2.0 s.
            max_alias_depth: The longest alias chain, in hops, that writes may
                create and resolution will follow (default 32,
                ``REDSTRING_MAX_ALIAS_DEPTH``; see ``adapters.alias_depth``).

        Returns:
            The open ``PgVectorStore``, an async context manager.

        Raises:
            ValueError: ``schema`` is not a plain identifier (before
                connecting).
            EmbeddingIdentityMismatchError: The schema holds vectors of
                another model or dimension.
            TransientStoreError: Postgres stayed unreachable (or starting,
                or out of connections) through every retry.
            asyncpg.PostgresError: Anything else Postgres refuses (bad
                credentials, a missing database, no right to create the
                schema or the pgvector extension) propagates unchanged, at
                once.

        Example:
            ```python
            from adapters.pgvector import PgVectorStore
            from streams.settings import Settings
            from streams.wiring import make_embedder

            settings = Settings()
            embedder = make_embedder(settings)
            async with await PgVectorStore.open(
                settings.pg_dsn.get_secret_value(), embedder.identity, max_size=4
            ) as vectors:
                query = await embedder.embed_query("analytical engine")
                matches = await vectors.search("acme", query, k=5)
            ```
        """
        quote_identifier(schema)  # refuse a bad name before connecting
        policy = retry or RetryPolicy()
        sql = Statements(schema)

        async def bootstrap() -> str:
            with translated("pgvector.open"):
                conn = await asyncpg.connect(dsn)
            try:
                with translated("pgvector.open"):
                    return await migrate(conn, schema, identity, hnsw=hnsw)
            finally:
                with suppress(Exception):
                    await conn.close()

        extension_schema = await with_retries(policy, bootstrap)
        settings = {"search_path": quote_identifier(extension_schema)}
        if hnsw:
            # Keep scanning the index until k rows pass the tenant filter
            # (pgvector >= 0.8); a session default, so every query gets it.
            settings["hnsw.iterative_scan"] = "relaxed_order"

        async def create_pool() -> asyncpg.Pool:
            with translated("pgvector.open"):
                return await asyncpg.create_pool(
                    dsn,
                    min_size=min_size,
                    max_size=max_size,
                    init=partial(_prepare_connection, extension_schema),
                    reset=_nothing_to_reset,
                    server_settings=settings,
                )

        pool = await with_retries(policy, create_pool)
        return cls(
            pool,
            sql,
            identity,
            approximate=hnsw,
            retry=policy,
            max_alias_depth=max_alias_depth,
        )

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    @property
    def dimension(self) -> int:
        return self._identity.dimension

    @property
    def schema(self) -> str:
        return self._sql.schema

    def _ops(self, conn: asyncpg.Connection) -> Operations:
        ops = Operations(conn, self._sql, self._identity, self._approximate)
        ops.max_alias_depth = self.max_alias_depth
        return ops

    def _refuse_inside_own_unit_of_work(self) -> None:
        task = asyncio.current_task()
        if task is not None and task in self._holders:
            raise RuntimeError(
                "a direct write or a nested unit of work inside this store's own unit "
                "of work would wait on its own locks; write through the unit of work instead"
            )

    async def _read(self, where: str, call: Callable[[Operations], Awaitable[T]]) -> T:
        async def attempt() -> T:
            with translated(where):
                async with self._pool.acquire() as conn, _discarded_if_broken(conn):
                    return await call(self._ops(conn))

        return await with_retries(self._retry, attempt)

    async def _write(self, where: str, call: Callable[[Operations], Awaitable[T]]) -> T:
        self._refuse_inside_own_unit_of_work()

        async def attempt() -> T:
            with translated(where):
                async with (
                    self._pool.acquire() as conn,
                    _discarded_if_broken(conn),
                    conn.transaction(),
                ):
                    return await call(self._ops(conn))

        return await with_retries(self._retry, attempt)

    # -- unit of work -----------------------------------------------------------

    def unit_of_work(
        self, partition: StreamPartition
    ) -> AbstractAsyncContextManager[VectorUnitOfWork]:
        return self._unit_of_work(partition)

    @asynccontextmanager
    async def _unit_of_work(self, partition: StreamPartition) -> AsyncIterator[Operations]:
        self._refuse_inside_own_unit_of_work()
        where = "pgvector.unit_of_work"
        with translated(where):
            conn = await self._pool.acquire()
        try:
            with translated(where):
                transaction = conn.transaction()
                await transaction.start()
            ops = self._ops(conn)
            task = asyncio.current_task()
            if task is not None:
                self._holders.add(task)
            try:
                try:
                    await ops.lock(partition)
                    yield ops
                except BaseException:
                    # The original error matters; a failed rollback means the
                    # connection is broken: close it rather than pool it.
                    try:
                        await transaction.rollback()
                    except Exception:
                        with suppress(Exception):  # already detached by the pool
                            conn.terminate()
                    raise
                with translated(f"{where} commit"):
                    await transaction.commit()
            finally:
                ops.retire()
                if task is not None:
                    self._holders.discard(task)
        finally:
            await self._pool.release(conn)

    # -- VectorStore ---------------------------------------------------------------

    async def get(self, tenant_id: TenantId, entity_id: EntityId) -> VectorRecord | None:
        return await self._read("pgvector.get", lambda ops: ops.get(tenant_id, entity_id))

    async def search(
        self,
        tenant_id: TenantId,
        vector: Sequence[float],
        k: int,
        entity_type: str | None = None,
    ) -> list[VectorMatch]:
        plan = plan_search(tenant_id, vector, k, entity_type, self.dimension)
        if plan is None:
            return []
        return await self._read("pgvector.search", lambda ops: ops.apply_search(plan))

    async def resolve_entity_ids(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> dict[EntityId, EntityId]:
        ids = list(entity_ids)  # an iterator must survive a retry
        return await self._read(
            "pgvector.resolve_entity_ids", lambda ops: ops.resolve_entity_ids(tenant_id, ids)
        )

    async def upsert(self, tenant_id: TenantId, record: VectorRecord) -> None:
        await self.upsert_many(tenant_id, [record])

    async def upsert_many(self, tenant_id: TenantId, records: Sequence[VectorRecord]) -> None:
        # Checked before a connection is taken: a wrong dimension never costs SQL.
        plan = plan_upsert(tenant_id, records, self.dimension)
        if plan.rows:
            await self._write("pgvector.upsert", lambda ops: ops.apply_upsert(plan))

    async def hide_merged(
        self, tenant_id: TenantId, alias_id: EntityId, canonical_id: EntityId
    ) -> None:
        await self._write(
            "pgvector.hide_merged", lambda ops: ops.hide_merged(tenant_id, alias_id, canonical_id)
        )

    async def unhide(self, tenant_id: TenantId, alias_id: EntityId) -> bool:
        return await self._write("pgvector.unhide", lambda ops: ops.unhide(tenant_id, alias_id))

    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep:
        """Batch by batch, each in its own short transaction (a large tenant
        never holds one huge transaction open); then the sweep counts what is
        left. Inside a unit of work the same batches run in its transaction."""
        tenant = valid_tenant_id(tenant_id)
        where = "pgvector.delete_by_tenant"
        for table in ("vectors", "vector_aliases"):
            size = vectors.DELETE_BATCH

            def batch(ops: Operations, table: str = table, size: int = size) -> Awaitable[int]:
                return ops.delete_batch(tenant, table, size)

            while await self._write(where, batch) == size:
                pass
        return await self._read(where, lambda ops: ops.sweep(tenant))

    # -- ProjectionLedger -------------------------------------------------------------

    async def checkpoint(self, partition: StreamPartition) -> int:
        return await self._read("pgvector.checkpoint", lambda ops: ops.checkpoint(partition))

    async def advance_checkpoint(self, partition: StreamPartition, offset: int) -> None:
        await self._write(
            "pgvector.advance_checkpoint", lambda ops: ops.advance_checkpoint(partition, offset)
        )

    async def checkpoints(self) -> dict[tuple[str, int], int]:
        return await self._read("pgvector.checkpoints", lambda ops: ops.checkpoints())

    async def rebuild_markers(self, partition: StreamPartition) -> list[RebuildMarker]:
        return await self._read(
            "pgvector.rebuild_markers", lambda ops: ops.rebuild_markers(partition)
        )

    async def put_rebuild_marker(self, marker: RebuildMarker) -> None:
        await self._write("pgvector.put_rebuild_marker", lambda ops: ops.put_rebuild_marker(marker))

    async def close_rebuild_marker(self, tenant_id: TenantId, partition: StreamPartition) -> bool:
        return await self._write(
            "pgvector.close_rebuild_marker",
            lambda ops: ops.close_rebuild_marker(tenant_id, partition),
        )

    async def is_rebuilding(self, tenant_id: TenantId) -> bool:
        return await self._read("pgvector.is_rebuilding", lambda ops: ops.is_rebuilding(tenant_id))

    async def erasure_tombstone(self, tenant_id: TenantId) -> ErasureTombstone | None:
        return await self._read(
            "pgvector.erasure_tombstone", lambda ops: ops.erasure_tombstone(tenant_id)
        )

    async def put_erasure_tombstone(self, tombstone: ErasureTombstone) -> None:
        await self._write(
            "pgvector.put_erasure_tombstone", lambda ops: ops.put_erasure_tombstone(tombstone)
        )

    async def applied_event_ids(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> set[EventId]:
        ids = list(event_ids)
        return await self._read(
            "pgvector.applied_event_ids", lambda ops: ops.applied_event_ids(tenant_id, ids)
        )

    async def record_applied_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId], applied_at: datetime
    ) -> None:
        ids = list(event_ids)
        await self._write(
            "pgvector.record_applied_events",
            lambda ops: ops.record_applied_events(tenant_id, ids, applied_at),
        )

    async def forget_applied_events(self, tenant_id: TenantId) -> None:
        await self._write(
            "pgvector.forget_applied_events", lambda ops: ops.forget_applied_events(tenant_id)
        )

    async def expire_applied_events(self, older_than: datetime) -> int:
        return await self._write(
            "pgvector.expire_applied_events", lambda ops: ops.expire_applied_events(older_than)
        )

    async def acted_control_events(
        self, tenant_id: TenantId, event_ids: Iterable[EventId]
    ) -> dict[EventId, int]:
        ids = list(event_ids)
        return await self._read(
            "pgvector.acted_control_events", lambda ops: ops.acted_control_events(tenant_id, ids)
        )

    async def record_control_event(
        self, tenant_id: TenantId, event_id: EventId, offset: int, acted_at: datetime
    ) -> None:
        await self._write(
            "pgvector.record_control_event",
            lambda ops: ops.record_control_event(tenant_id, event_id, offset, acted_at),
        )

    # -- lifecycle ------------------------------------------------------------------------

    async def aclose(self) -> None:
        await self._pool.close()
