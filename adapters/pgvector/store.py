"""``PgVectorStore``: the vector port and its ledger on Postgres + pgvector.

One schema per store (default ``redstring``), created and migrated on
``open``; the embedding identity is bound to it for good (migrations.py).
Connections come from an asyncpg pool whose ``init`` registers pgvector's
binary codec on each of them.

Direct calls each run as one short transaction (a read as one statement) on
a ``PgUnitOfWork`` of their own, retried with backoff on transient failures:
one policy for every direct call (``_direct_read``, ``_direct_write``).
``unit_of_work(partition)`` takes one pooled connection, opens one
transaction, and locks the partition's checkpoint row before handing out the
view; nothing in it is retried (see errors.py): a transient failure surfaces
as ``TransientStoreError`` and the caller redoes the whole batch.

``read_only=True`` opens a reader: no DDL, every connection read-only, the
schema's migrations and identity checked instead of applied, and a write
refused before it reaches Postgres (docs/adr/0016-read-only-open.md).

Search is exact by default (docs/adr/0005-pgvector-exact-search.md).
``hnsw=True`` builds an HNSW index and answers from it with iterative scans:
faster on large tenants, approximate, and not what the compliance suite states.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg
from pgvector import Vector
from pgvector.asyncpg import register_vector

from adapters.alias_depth import DEFAULT_MAX_ALIAS_DEPTH
from adapters.direct_calls import reads, writes
from adapters.pgvector import vectors
from adapters.pgvector.codec import encode_vector
from adapters.pgvector.errors import (
    RetryPolicy,
    breaks_connection,
    translated,
    with_retries,
)
from adapters.pgvector.migrations import check_readable, migrate
from adapters.pgvector.sql import Statements, quote_identifier
from adapters.pgvector.unit_of_work import PgUnitOfWork
from adapters.pgvector.vectors import plan_search, plan_upsert
from contracts.domain import (
    EmbeddingIdentity,
    ErasureSweep,
    StreamPartition,
    VectorMatch,
    VectorRecord,
)
from contracts.errors import ReadOnlyStoreError
from contracts.ids import TenantId
from contracts.ids import tenant_id as valid_tenant_id
from contracts.ports.ledger import lock_order
from contracts.ports.lifecycle import ClosingContext
from contracts.ports.vector import VectorUnitOfWork

if TYPE_CHECKING:
    from contracts.ports.ledger import UnitsAcrossPartitions
    from contracts.ports.vector import ProjectedVectorStore

__all__ = ["PgVectorStore"]

T = TypeVar("T")


async def _prepare_connection(extension_schema: str, conn: asyncpg.Connection) -> None:
    await register_vector(conn, schema=extension_schema)
    # Writes hand over vectors already packed (codec.WireVector); reads decode
    # as pgvector does.
    await conn.set_type_codec(
        "vector",
        schema=extension_schema,
        encoder=encode_vector,
        decoder=Vector.from_binary,
        format="binary",
    )


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
        read_only: bool = False,
    ) -> None:
        self.max_alias_depth = max_alias_depth  # adapters.alias_depth
        self._read_only = read_only
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
        read_only: bool = False,
        transaction_timeout: float | None = None,
    ) -> PgVectorStore:
        """Migrate ``schema`` (idempotent; safe from several workers at once),
        check or record ``identity`` (``EmbeddingIdentityMismatchError`` if the
        schema holds another), and open a pool of ``min_size``..``max_size``;
        or, with ``read_only=True``, check both without writing anything.

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
            read_only: Open for reading only (default ``False``): no DDL and
                no writes, so a role with only ``USAGE`` on ``schema`` and
                ``SELECT`` on its tables can open it. Every connection is
                read-only (``default_transaction_read_only``); the schema
                must already be at this code's migrations and bound to
                ``identity``; writes and ``unit_of_work`` raise
                ``ReadOnlyStoreError`` without reaching Postgres
                (docs/adr/0016-read-only-open.md).
            transaction_timeout: Seconds a pooled connection may sit idle
                inside a transaction before Postgres ends its session and
                releases its locks (``idle_in_transaction_session_timeout``;
                default ``None``: the server's setting;
                ``REDSTRING_TRANSACTION_TIMEOUT_S``). Bounds how long a
                frozen process can hold a partition from its next owner
                (docs/adr/0021-transaction-bounds.md); the unit of work it
                ends fails with ``TransientStoreError``.

        Returns:
            The open ``PgVectorStore``, an async context manager.

        Raises:
            ValueError: ``schema`` is not a plain identifier (before
                connecting).
            EmbeddingIdentityMismatchError: The schema holds vectors of
                another model or dimension.
            StoreSchemaError: ``read_only`` and the schema is missing, has
                migrations pending, is newer than this code, or this role
                may not read it; the message says what to run.
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

        # A reader's session refuses writes itself, whatever reaches it.
        session = {"default_transaction_read_only": "on"} if read_only else {}

        async def bootstrap() -> str:
            with translated("pgvector.open"):
                conn = await asyncpg.connect(dsn, server_settings=session)
            try:
                with translated("pgvector.open"):
                    if read_only:
                        return await check_readable(conn, schema, identity, hnsw=hnsw)
                    return await migrate(conn, schema, identity, hnsw=hnsw)
            finally:
                with suppress(Exception):
                    await conn.close()

        extension_schema = await with_retries(policy, bootstrap)
        settings = {"search_path": quote_identifier(extension_schema), **session}
        if transaction_timeout is not None:
            # A session frozen inside a transaction is idle to the server.
            settings["idle_in_transaction_session_timeout"] = str(
                max(1, round(transaction_timeout * 1000))
            )
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
            read_only=read_only,
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

    def _view(self, conn: asyncpg.Connection) -> PgUnitOfWork:
        view = PgUnitOfWork(conn, self._sql, self._identity, self._approximate)
        view.max_alias_depth = self.max_alias_depth
        return view

    @property
    def read_only(self) -> bool:
        """Opened with ``read_only=True``: writes are refused."""
        return self._read_only

    def _refuse_write(self, call: str) -> None:
        if self._read_only:
            raise ReadOnlyStoreError(f"PgVectorStore (schema {self.schema!r})", call)
        self._refuse_inside_own_unit_of_work()

    def _refuse_inside_own_unit_of_work(self) -> None:
        task = asyncio.current_task()
        if task is not None and task in self._holders:
            raise RuntimeError(
                "a direct write or a nested unit of work inside this store's own unit "
                "of work would wait on its own locks; write through the unit of work instead"
            )

    async def _direct_read(self, name: str, call: Callable[[PgUnitOfWork], Awaitable[T]]) -> T:
        """Run ``call`` on a pooled connection, retried per the store's policy."""
        where = f"pgvector.{name}"

        async def attempt() -> T:
            with translated(where):
                async with self._pool.acquire() as conn, _discarded_if_broken(conn):
                    return await call(self._view(conn))

        return await with_retries(self._retry, attempt)

    async def _direct_write(self, name: str, call: Callable[[PgUnitOfWork], Awaitable[T]]) -> T:
        """Run ``call`` in a short transaction of its own, retried per the
        store's policy; refused inside this task's own unit of work and by
        a read-only store."""
        self._refuse_write(name)
        where = f"pgvector.{name}"

        async def attempt() -> T:
            with translated(where):
                async with (
                    self._pool.acquire() as conn,
                    _discarded_if_broken(conn),
                    conn.transaction(),
                ):
                    return await call(self._view(conn))

        return await with_retries(self._retry, attempt)

    # -- unit of work -----------------------------------------------------------

    def unit_of_work(
        self, partition: StreamPartition
    ) -> AbstractAsyncContextManager[VectorUnitOfWork]:
        return self._unit_of_work([partition])

    def unit_of_work_across(
        self, partitions: Sequence[StreamPartition]
    ) -> AbstractAsyncContextManager[VectorUnitOfWork]:
        """contracts.ports.ledger.UnitsAcrossPartitions: the checkpoint rows
        locked in order (``PgLedger.lock_all``)."""
        return self._unit_of_work(lock_order(partitions))

    @asynccontextmanager
    async def _unit_of_work(
        self, partitions: Sequence[StreamPartition]
    ) -> AsyncIterator[PgUnitOfWork]:
        self._refuse_write("unit_of_work")
        where = "pgvector.unit_of_work"
        with translated(where):
            conn = await self._pool.acquire()
        try:
            with translated(where):
                transaction = conn.transaction()
                await transaction.start()
            ops = self._view(conn)
            task = asyncio.current_task()
            if task is not None:
                self._holders.add(task)
            try:
                try:
                    await ops.lock_all(partitions)
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

    # -- VectorStore: direct calls --------------------------------------------------
    # Planned before a connection is taken, so that a bad record or query never
    # costs SQL (vectors.plan_upsert, vectors.plan_search).

    get = reads(PgUnitOfWork.get)
    resolve_entity_ids = reads(PgUnitOfWork.resolve_entity_ids)
    hide_merged = writes(PgUnitOfWork.hide_merged)
    unhide = writes(PgUnitOfWork.unhide)

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
        return await self._direct_read("search", lambda view: view.apply_search(plan))

    async def upsert(self, tenant_id: TenantId, record: VectorRecord) -> None:
        await self.upsert_many(tenant_id, [record])

    async def upsert_many(self, tenant_id: TenantId, records: Sequence[VectorRecord]) -> None:
        plan = plan_upsert(tenant_id, records, self.dimension)
        if plan.rows:
            await self._direct_write("upsert", lambda view: view.apply_upsert(plan))

    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep:
        """Batch by batch, each in its own short transaction (a large tenant
        never holds one huge transaction open); then the sweep counts what is
        left. Inside a unit of work the same batches run in its transaction."""
        tenant = valid_tenant_id(tenant_id)
        for table in ("vectors", "vector_aliases"):
            size = vectors.DELETE_BATCH

            def batch(view: PgUnitOfWork, table: str = table, size: int = size) -> Awaitable[int]:
                return view.delete_batch(tenant, table, size)

            while await self._direct_write("delete_by_tenant", batch) == size:
                pass
        return await self._direct_read("delete_by_tenant", lambda view: view.sweep(tenant))

    # -- ProjectionLedger: direct calls ------------------------------------------------

    checkpoint = reads(PgUnitOfWork.checkpoint)
    advance_checkpoint = writes(PgUnitOfWork.advance_checkpoint)
    checkpoints = reads(PgUnitOfWork.checkpoints)
    rebuild_markers = reads(PgUnitOfWork.rebuild_markers)
    put_rebuild_marker = writes(PgUnitOfWork.put_rebuild_marker)
    close_rebuild_marker = writes(PgUnitOfWork.close_rebuild_marker)
    is_rebuilding = reads(PgUnitOfWork.is_rebuilding)
    erasure_tombstone = reads(PgUnitOfWork.erasure_tombstone)
    put_erasure_tombstone = writes(PgUnitOfWork.put_erasure_tombstone)
    applied_event_ids = reads(PgUnitOfWork.applied_event_ids)
    record_applied_events = writes(PgUnitOfWork.record_applied_events)
    forget_applied_events = writes(PgUnitOfWork.forget_applied_events)
    expire_applied_events = writes(PgUnitOfWork.expire_applied_events)
    acted_control_events = reads(PgUnitOfWork.acted_control_events)
    record_control_event = writes(PgUnitOfWork.record_control_event)

    # -- lifecycle ------------------------------------------------------------------------

    async def aclose(self) -> None:
        await self._pool.close()


if TYPE_CHECKING:
    # mypy proves the store and its units of work conform to the ports.
    _store: type[ProjectedVectorStore] = PgVectorStore
    _across: type[UnitsAcrossPartitions[VectorUnitOfWork]] = PgVectorStore
    _unit: type[VectorUnitOfWork] = PgUnitOfWork
