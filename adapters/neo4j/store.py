"""``Neo4jGraphStore``: the ProjectedGraphStore on the official async driver.

Open it with ``await Neo4jGraphStore.open(uri, user, password)``, which checks
connectivity and bootstraps the schema. Direct calls each run as their own
managed transaction, on the store's one view over a managed runner;
``unit_of_work(partition)`` is one explicit transaction that starts by
write-locking the partition's checkpoint node, so two units of work on a
partition (a zombie worker and its successor) run one after the other
and the checkpoint is compared and advanced under that lock. The same first
statement reads the partition's checkpoint and rebuild markers, which the unit
of work then serves from memory; its checkpoint advance and applied event ids
are written by one statement just before commit (ADR 0004). Every transaction
carries the store's ``transaction_timeout``, so that a frozen process's lock
is released by the server (ADR 0021).

``open(..., read_only=True)`` opens a reader: nothing is created, the schema
is checked instead (read_only.py), every statement runs in read access mode,
and writes are refused before they reach the database
(docs/adr/0016-read-only-open.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Self, TypeVar

from neo4j import (
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncSession,
    AsyncTransaction,
    NotificationMinimumSeverity,
)
from neo4j.exceptions import DriverError, Neo4jError

from adapters.alias_depth import DEFAULT_MAX_ALIAS_DEPTH
from adapters.direct_calls import reads, writes
from adapters.neo4j.read_only import check_schema
from adapters.neo4j.runner import Blame, ManagedRunner, TransactionRunner, translate
from adapters.neo4j.schema import bootstrap
from adapters.neo4j.view import Neo4jGraphView
from contracts.domain import StreamPartition
from contracts.errors import ReadOnlyStoreError
from contracts.ports.ledger import lock_order
from contracts.ports.lifecycle import ClosingContext

if TYPE_CHECKING:
    from contracts.ports.graph import GraphUnitOfWork, ProjectedGraphStore
    from contracts.ports.ledger import UnitsAcrossPartitions

DEFAULT_DATABASE = "neo4j"

T = TypeVar("T")


#: Direct writes whose statement may write the first part of the call before
#: the adapter refuses the rest (from what the statement returns): each runs in
#: a transaction of its own, rolled back when it raises, so that a refused call
#: writes nothing, as the in-memory store's do.
_ONE_TRANSACTION = frozenset({"upsert_aliases"})


async def _begin(session: AsyncSession, tx_timeout: float | None) -> AsyncTransaction:
    """An explicit transaction whose BEGIN waits to go with its first statement
    (or its commit): one round trip fewer per unit of work, and one message
    fewer that wakes the server on its own (bench/neo4j_profile.py; ADR 0004,
    "BEGIN with the first statement"). The driver does the same for
    ``execute_query`` through a flag of the session's; a driver without that
    flag sends BEGIN on its own, as before. A failed BEGIN is then raised by
    the first statement, and the unit of work is rolled back as for any
    failure of it."""
    pipelined = getattr(session, "_pipelined_begin", None)
    if pipelined is None:
        return await session.begin_transaction(timeout=tx_timeout)
    with pipelined:
        return await session.begin_transaction(timeout=tx_timeout)


class Neo4jGraphStore(ClosingContext):
    """The store over a driver. ``owns_driver``: close the driver on ``aclose``."""

    def __init__(
        self,
        driver: AsyncDriver,
        database: str = DEFAULT_DATABASE,
        *,
        owns_driver: bool = True,
        max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH,
        read_only: bool = False,
        transaction_timeout: float | None = None,
    ) -> None:
        # Tasks inside a unit of work: a direct write from one would wait on
        # locks its own transaction holds.
        self._holders: set[asyncio.Task[Any]] = set()
        self._managed = ManagedRunner(
            driver,
            database,
            self._holders,
            read_only=read_only,
            transaction_timeout=transaction_timeout,
        )
        self._transaction_timeout = transaction_timeout
        self._read_only = read_only
        # Each of its statements is a transaction of its own, so one view
        # serves every direct call.
        self._direct = Neo4jGraphView(self._managed)
        self._direct.max_alias_depth = max_alias_depth
        self._driver = driver
        self._database = database
        self._owns_driver = owns_driver

    @classmethod
    async def open(
        cls,
        uri: str,
        user: str,
        password: str,
        *,
        database: str = DEFAULT_DATABASE,
        max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH,
        read_only: bool = False,
        transaction_timeout: float | None = None,
        **driver_config: Any,
    ) -> Self:
        """Connect, bootstrap the schema (idempotent), and return the store;
        or, with ``read_only=True``, check the schema without writing.

        Guarantees that the returned store can reach the database (the
        driver's connectivity check passed) and that every constraint and
        index the store relies on exists and is online. Creating the schema is
        idempotent and safe from several workers at once. The store owns its
        driver: ``aclose`` (or leaving ``async with``) closes it. Readers use
        it as described in docs/readers.md.

        Args:
            uri: The Neo4j URI, e.g. ``neo4j://localhost:7687`` (routing) or
                ``bolt://host:7687``; ``+s``/``+ssc`` schemes for TLS
                (``REDSTRING_NEO4J_URI``).
            user: User name for basic authentication
                (``REDSTRING_NEO4J_USER``).
            password: That user's password, in plain text (from
                ``settings.neo4j_password.get_secret_value()``).
            database: The database to use (default ``"neo4j"``,
                ``REDSTRING_NEO4J_DATABASE``).
            max_alias_depth: The longest alias chain, in hops, that writes
                may create and resolution will follow (default 32,
                ``REDSTRING_MAX_ALIAS_DEPTH``; see ``adapters.alias_depth``).
                Readers and workers of one deployment should use the same
                value.
            read_only: Open for reading only (default ``False``): nothing
                is created; every schema rule must already exist and be
                online; every statement runs in read access mode; writes
                and ``unit_of_work`` raise ``ReadOnlyStoreError`` without
                reaching Neo4j (docs/adr/0016-read-only-open.md).
            transaction_timeout: Seconds after which the server ends any
                transaction of this store, a unit of work or a direct
                call, and releases its locks (default ``None``: the
                server's ``db.transaction.timeout``;
                ``REDSTRING_TRANSACTION_TIMEOUT_S``). Bounds how long a
                frozen process can hold a partition from its next owner
                (docs/adr/0021-transaction-bounds.md); a transaction that
                outlives it fails with ``TransientStoreError``.
            **driver_config: Passed to ``neo4j.AsyncGraphDatabase.driver``
                (e.g. ``max_connection_pool_size=50``,
                ``connection_timeout=5.0``). Schema notifications are off
                unless ``notifications_min_severity`` is given.

        Returns:
            The open ``Neo4jGraphStore``, an async context manager.

        Raises:
            neo4j.exceptions.ServiceUnavailable: The database cannot be
                reached.
            neo4j.exceptions.AuthError: ``user``/``password`` are refused.
            neo4j.exceptions.Neo4jError: Creating the schema failed (e.g. the
                user may not create constraints).
            StoreSchemaError: ``read_only`` and the schema is missing,
                incomplete or not online; the message says what to run.
                The driver is closed before any of these propagates.

        Example:
            ```python
            from adapters.neo4j import Neo4jGraphStore

            async with await Neo4jGraphStore.open(
                "neo4j://localhost:7687", "neo4j", "password", database="neo4j"
            ) as graph:
                entity = await graph.get_entity("acme", "ada")
            ```
        """
        # Schema notifications ("property key does not exist" on a young
        # database) are noise for a store whose statements are fixed.
        driver_config.setdefault("notifications_min_severity", NotificationMinimumSeverity.OFF)
        driver = AsyncGraphDatabase.driver(uri, auth=(user, password), **driver_config)
        try:
            await driver.verify_connectivity()
            if read_only:
                await check_schema(driver, database)
            else:
                await bootstrap(driver, database)
        except BaseException:
            await driver.close()
            raise
        return cls(
            driver,
            database,
            max_alias_depth=max_alias_depth,
            read_only=read_only,
            transaction_timeout=transaction_timeout,
        )

    @property
    def max_alias_depth(self) -> int:
        """Alias hops from any id to its canonical (adapters.alias_depth)."""
        return self._direct.max_alias_depth

    async def _direct_read(self, name: str, call: Callable[[Neo4jGraphView], Awaitable[T]]) -> T:
        return await call(self._direct)

    @property
    def read_only(self) -> bool:
        """Opened with ``read_only=True``: writes are refused."""
        return self._read_only

    def _refuse_if_read_only(self, call: str) -> None:
        if self._read_only:
            raise ReadOnlyStoreError(f"Neo4jGraphStore (database {self._database!r})", call)

    async def _direct_write(self, name: str, call: Callable[[Neo4jGraphView], Awaitable[T]]) -> T:
        self._refuse_if_read_only(name)
        if name in _ONE_TRANSACTION:
            async with self._transaction(f"begin {name}") as view:
                return await call(view)
        # The managed runner refuses a write from inside this task's own unit
        # of work, and the driver retries transient failures.
        return await call(self._direct)

    @asynccontextmanager
    async def unit_of_work(self, partition: StreamPartition) -> AsyncIterator[GraphUnitOfWork]:
        self._refuse_if_read_only("unit_of_work")
        async with self._transaction("begin a unit of work", [partition]) as uow:
            yield uow

    @asynccontextmanager
    async def unit_of_work_across(
        self, partitions: Sequence[StreamPartition]
    ) -> AsyncIterator[GraphUnitOfWork]:
        """contracts.ports.ledger.UnitsAcrossPartitions: the checkpoint nodes
        locked in order by the first statement (``LOCK_PARTITIONS``)."""
        ordered = lock_order(partitions)
        self._refuse_if_read_only("unit_of_work_across")
        async with self._transaction("begin a unit of work", ordered) as uow:
            yield uow

    @asynccontextmanager
    async def _transaction(
        self, what: str, partitions: Sequence[StreamPartition] = ()
    ) -> AsyncIterator[Neo4jGraphView]:
        """A view over one explicit transaction: committed when the block ends,
        rolled back when it raises; the partitions' locks (in lock order)
        taken by its first statement, when given."""
        self._managed.check_open()
        task = asyncio.current_task()
        if task is None or task in self._holders:
            raise RuntimeError(
                "this task already holds a unit of work on the graph store; "
                "make the call through that unit of work"
            )
        self._holders.add(task)
        try:
            async with self._driver.session(database=self._database) as session:
                try:
                    tx = await _begin(session, self._transaction_timeout)
                except (Neo4jError, DriverError) as exc:
                    raise translate(exc, Blame(what)) from exc
                runner = TransactionRunner(tx)
                view = Neo4jGraphView(runner)
                view.max_alias_depth = self.max_alias_depth
                try:
                    if partitions:
                        view.lock_on_first_statement(*partitions)
                    yield view
                    await view.write_deferred()
                    await runner.commit()
                except BaseException:
                    await runner.rollback()
                    raise
                finally:
                    view.release_partition()
        finally:
            self._holders.discard(task)

    async def aclose(self) -> None:
        if self._managed.close() and self._owns_driver:
            await self._driver.close()

    # -- GraphStore: direct calls -----------------------------------------------

    get_entity = reads(Neo4jGraphView.get_entity)
    get_entities = reads(Neo4jGraphView.get_entities)
    find_entities = reads(Neo4jGraphView.find_entities)
    find_by_blocking_key = reads(Neo4jGraphView.find_by_blocking_key)
    find_by_blocking_keys = reads(Neo4jGraphView.find_by_blocking_keys)
    upsert_entity = writes(Neo4jGraphView.upsert_entity)
    upsert_entities = writes(Neo4jGraphView.upsert_entities)
    upsert_alias = writes(Neo4jGraphView.upsert_alias)
    upsert_aliases = writes(Neo4jGraphView.upsert_aliases)
    remove_alias = writes(Neo4jGraphView.remove_alias)
    find_aliases = reads(Neo4jGraphView.find_aliases)
    resolve_entity_ids = reads(Neo4jGraphView.resolve_entity_ids)
    upsert_relationships = writes(Neo4jGraphView.upsert_relationships)
    delete_relationships = writes(Neo4jGraphView.delete_relationships)
    get_relationship = reads(Neo4jGraphView.get_relationship)
    get_relationships = reads(Neo4jGraphView.get_relationships)
    get_relationships_for = reads(Neo4jGraphView.get_relationships_for)
    neighbors = reads(Neo4jGraphView.neighbors)
    delete_by_tenant = writes(Neo4jGraphView.delete_by_tenant)

    # -- ProjectionLedger: direct calls -------------------------------------------

    checkpoint = reads(Neo4jGraphView.checkpoint)
    advance_checkpoint = writes(Neo4jGraphView.advance_checkpoint)
    checkpoints = reads(Neo4jGraphView.checkpoints)
    rebuild_markers = reads(Neo4jGraphView.rebuild_markers)
    put_rebuild_marker = writes(Neo4jGraphView.put_rebuild_marker)
    close_rebuild_marker = writes(Neo4jGraphView.close_rebuild_marker)
    is_rebuilding = reads(Neo4jGraphView.is_rebuilding)
    erasure_tombstone = reads(Neo4jGraphView.erasure_tombstone)
    put_erasure_tombstone = writes(Neo4jGraphView.put_erasure_tombstone)
    applied_event_ids = reads(Neo4jGraphView.applied_event_ids)
    record_applied_events = writes(Neo4jGraphView.record_applied_events)
    forget_applied_events = writes(Neo4jGraphView.forget_applied_events)
    expire_applied_events = writes(Neo4jGraphView.expire_applied_events)
    acted_control_events = reads(Neo4jGraphView.acted_control_events)
    record_control_event = writes(Neo4jGraphView.record_control_event)


if TYPE_CHECKING:
    # mypy proves the store and its units of work conform to the ports.
    _store: type[ProjectedGraphStore] = Neo4jGraphStore
    _across: type[UnitsAcrossPartitions[GraphUnitOfWork]] = Neo4jGraphStore
    _unit: type[GraphUnitOfWork] = Neo4jGraphView
