"""Where a statement runs, and what its failures mean to a caller.

The store's methods are written once (``Neo4jGraphView``) against a
``Runner``: either ``ManagedRunner``, which runs each statement as its own
managed transaction (a direct call on the store), or ``TransactionRunner``,
which runs it inside a unit of work's open transaction.

Error policy:

- Transient failures (``ServiceUnavailable``, ``SessionExpired``,
  ``TransientError`` including deadlocks) of a direct call are retried by the
  driver's managed transactions, with exponential backoff and jitter, for up to
  ``max_transaction_retry_time`` (30 s by default); if they persist they surface
  as ``TransientStoreError``.
- Inside a unit of work nothing can be retried transparently: the caller's
  code between statements is part of the transaction. A transient failure there
  surfaces as ``TransientStoreError`` and the transaction is rolled back; the
  caller (the projector agent) retries the whole batch, which the checkpoint
  fence makes safe even when a commit's outcome was unknown.
- A transaction the server ended (it outlived its timeout, or an
  administrator terminated it) is transient too: nothing of it was committed,
  and a new one may well finish (docs/adr/0021-transaction-bounds.md).
- Any other ``ClientError`` (a value the database refuses) is permanent:
  ``PermanentStoreError`` naming the tenant and the ids of the call.
- Anything else (a server bug, a closed driver) propagates unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, LiteralString, Protocol

from neo4j import AsyncDriver, AsyncTransaction, Query, Record, RoutingControl
from neo4j.exceptions import ClientError, DriverError, IncompleteCommit, Neo4jError

from contracts.errors import PermanentStoreError, TransactionEndedError, TransientStoreError

_IDS_SHOWN = 20

# The server ended the transaction and released its locks; the driver calls
# these client errors because retrying with the same timeout may end the same
# way, but a unit of work retried from the stores' checkpoints is safe.
_ENDED_BY_SERVER = frozenset(
    {
        "Neo.ClientError.Transaction.TransactionTimedOut",
        "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration",
        "Neo.ClientError.Transaction.Terminated",
        "Neo.ClientError.Transaction.LockClientStopped",
    }
)


@dataclass(frozen=True, slots=True)
class Blame:
    """What a failure names: the call's tenant (None for the ledger) and ids."""

    what: str
    tenant: str | None = None
    ids: Sequence[str] = ()

    def __str__(self) -> str:
        parts = [self.what]
        if self.tenant is not None:
            parts.append(f"tenant {self.tenant!r}")
        if self.ids:
            shown = ", ".join(map(repr, self.ids[:_IDS_SHOWN]))
            more = f" and {len(self.ids) - _IDS_SHOWN} more" if len(self.ids) > _IDS_SHOWN else ""
            parts.append(f"ids {shown}{more}")
        return ", ".join(parts)


class _Rows(list[Any]):
    """A list parameter whose ``repr`` is its length.

    The driver formats every statement's parameters with ``repr`` for a debug
    line before the logger decides whether to write it (neo4j 6.4,
    ``_bolt5.py``: ``" ".join(map(repr, fields))`` in ``run``), with debug
    logging on or off. For a unit of work's rows, thousands of dicts of
    floats and strings, that took 3.8% of a busy worker's event loop
    (docs/performance.md, "The event loop's own CPU"). The driver packs a list
    subclass as a list; its debug line shows row counts, never event values."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} rows>"


def quiet(params: dict[str, Any]) -> dict[str, Any]:
    """What the runners send: ``params`` as the one map parameter ``$p``
    (statements read ``$p.tenant``, ``$p.rows``), each list value a
    :class:`_Rows`.

    Neo4j 5 caches a plan per statement *and* per size class of each
    top-level list or string parameter (1, up to 10, up to 100, up to 1,000
    ...; ``internal.cypher.use_parameter_size``): a statement with up to six list
    parameters had hundreds of cache keys, more than the cache's 1,000 entries
    held across the fold's statements, and each new one was planned again,
    0.3-0.7 s for the unit of work's large statements. At low rates, where
    units of work are small and their sizes vary, that was most of the
    latency tail (docs/performance.md, "Plans per parameter size"). The
    values inside a map parameter carry no size class: one plan per
    statement, whatever the rows."""
    return {
        "p": {key: _Rows(value) if type(value) is list else value for key, value in params.items()}
    }


def translate(exc: Neo4jError | DriverError, blame: Blame) -> Exception:
    # An incomplete commit is not retryable by the driver (the commit may have
    # happened), but a batch retried above the store is: the checkpoint fence
    # skips whatever did commit.
    if exc.is_retryable() or isinstance(exc, IncompleteCommit):
        return TransientStoreError(f"neo4j is briefly unavailable ({blame}): {exc}")
    if isinstance(exc, Neo4jError) and exc.code in _ENDED_BY_SERVER:
        return TransactionEndedError(
            f"neo4j ended the transaction ({blame}): {exc.code}; if a batch's writes "
            "outlive REDSTRING_TRANSACTION_TIMEOUT_S, raise it or lower REDSTRING_BATCH_SIZE"
        )
    if isinstance(exc, ClientError):
        return PermanentStoreError(f"neo4j refused {blame}: {exc.code}: {exc.message}")
    return exc


class Runner(Protocol):
    async def run(
        self, query: LiteralString, params: dict[str, Any], *, write: bool, blame: Blame
    ) -> list[Record]: ...

    async def defer(
        self,
        query: LiteralString,
        params: dict[str, Any],
        blame: Blame,
        joins: dict[str, LiteralString],
    ) -> None:
        """A write whose records nobody reads. Sent by itself, or, when the
        next statement is a key of ``joins`` for the same ``$tenant``, as that
        key's value with both statements' parameters (see
        ``TransactionRunner``). Either way it runs before anything after it."""
        ...


@dataclass(frozen=True, slots=True)
class _Deferred:
    query: LiteralString
    params: dict[str, Any]
    blame: Blame
    joins: dict[str, LiteralString]


class ManagedRunner:
    """Each statement is its own managed transaction, retried by the driver."""

    def __init__(
        self,
        driver: AsyncDriver,
        database: str,
        holders: set[asyncio.Task[Any]],
        *,
        read_only: bool = False,
        transaction_timeout: float | None = None,
    ) -> None:
        self._driver = driver
        self._timeout = transaction_timeout
        self._database = database
        self._holders = holders
        self._closed = False
        # A reader's statements all run in read access mode, so the server
        # refuses a write that gets this far (docs/adr/0016-read-only-open.md).
        self._read_only = read_only

    def check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the graph store is closed")

    def close(self) -> bool:
        """Refuse further calls; True the first time."""
        first, self._closed = not self._closed, True
        return first

    async def run(
        self, query: LiteralString, params: dict[str, Any], *, write: bool, blame: Blame
    ) -> list[Record]:
        self.check_open()
        if write and asyncio.current_task() in self._holders:
            # The unit of work this task holds may hold the locks this write
            # needs: waiting would hang the task on itself.
            raise RuntimeError(
                "this task holds a unit of work on the graph store; "
                "make the write through that unit of work"
            )
        # Unbounded, the statement goes as its text, as the profiling drivers
        # of bench/neo4j_profile.py and the purge test expect it.
        try:
            records, _, _ = await self._driver.execute_query(
                query if self._timeout is None else Query(query, timeout=self._timeout),
                quiet(params),
                database_=self._database,
                routing_=RoutingControl.WRITE
                if write and not self._read_only
                else RoutingControl.READ,
            )
        except (Neo4jError, DriverError) as exc:
            raise translate(exc, blame) from exc
        return records

    async def defer(
        self,
        query: LiteralString,
        params: dict[str, Any],
        blame: Blame,
        joins: dict[str, LiteralString],
    ) -> None:
        # A direct call is its own transaction: it is written now.
        await self.run(query, params, write=True, blame=blame)


class TransactionRunner:
    """Statements of one unit of work, on its explicit transaction.

    A deferred write is held until the next statement, which it runs before:
    joined with it into one statement when the pair is one the caller named
    (a round trip and a statement's fixed cost saved; bench/neo4j_profile.py),
    else sent first on its own; commit sends it too, and rollback drops it.
    So every statement still sees the writes made before it, and a failure of
    the deferred write rolls the unit of work back as it would have; it is
    raised by the next statement, blaming both.
    """

    def __init__(self, tx: AsyncTransaction) -> None:
        self._tx: AsyncTransaction | None = tx
        self._deferred: _Deferred | None = None

    def _open(self) -> AsyncTransaction:
        if self._tx is None:
            raise RuntimeError("this unit of work has ended; open a new one")
        return self._tx

    async def _send(
        self, query: LiteralString, params: dict[str, Any], blame: Blame
    ) -> list[Record]:
        tx = self._open()
        try:
            result = await tx.run(query, quiet(params))
            return [record async for record in result]
        except (Neo4jError, DriverError) as exc:
            raise translate(exc, blame) from exc

    async def _flush(self) -> None:
        held, self._deferred = self._deferred, None
        if held is not None:
            await self._send(held.query, held.params, held.blame)

    async def run(
        self, query: LiteralString, params: dict[str, Any], *, write: bool, blame: Blame
    ) -> list[Record]:
        self._open()
        held, self._deferred = self._deferred, None
        if held is not None:
            joined = held.joins.get(query)
            shared = held.params.keys() & params.keys()
            if (
                joined is not None
                and shared == {"tenant"}
                and (held.params["tenant"] == params["tenant"])
            ):
                both = Blame(
                    f"{held.blame.what} and {blame.what}",
                    blame.tenant,
                    [*held.blame.ids, *blame.ids],
                )
                return await self._send(joined, {**held.params, **params}, both)
            await self._send(held.query, held.params, held.blame)
        return await self._send(query, params, blame)

    async def defer(
        self,
        query: LiteralString,
        params: dict[str, Any],
        blame: Blame,
        joins: dict[str, LiteralString],
    ) -> None:
        self._open()
        await self._flush()
        self._deferred = _Deferred(query, params, blame, joins)

    async def commit(self) -> None:
        await self._flush()
        tx = self._open()
        self._tx = None
        try:
            await tx.commit()
        except (Neo4jError, DriverError) as exc:
            raise translate(exc, Blame("commit")) from exc

    async def rollback(self) -> None:
        self._deferred = None
        tx, self._tx = self._tx, None
        if tx is None:
            return
        # The error that made us roll back is the one worth raising; a failed
        # transaction is rolled back by the server anyway, and closing the
        # session releases whatever is left.
        with contextlib.suppress(Neo4jError, DriverError, OSError):
            await tx.rollback()
