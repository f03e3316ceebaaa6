"""The one retry policy of ``PgVectorStore``'s direct calls (adapters/pgvector
errors.py): a transient failure is retried until the policy is spent, anything
else is not retried at all, and a retried call sees the same arguments."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from adapters.pgvector import PgVectorStore, RetryPolicy
from adapters.pgvector.errors import translated
from adapters.pgvector.sql import Statements
from contracts.domain import EmbeddingIdentity, StreamPartition
from contracts.errors import PermanentStoreError, TransactionEndedError, TransientStoreError
from contracts.ids import EventId, TenantId

P = StreamPartition("events", 0, "id-1")
T = TenantId("acme")
ATTEMPTS = 4


class _Connection:
    """Answers every statement from ``outcomes`` in turn: an exception is
    raised, anything else returned; records what it was asked."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[Any, ...]] = []

    async def _answer(self, *args: Any) -> Any:
        self.calls.append(args[1:])
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    fetch = fetchrow = fetchval = execute = _answer

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        yield

    def terminate(self) -> None:
        pass


class _Pool:
    def __init__(self, conn: _Connection) -> None:
        self.conn = conn

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[_Connection]:
        yield self.conn


def _store(conn: _Connection) -> PgVectorStore:
    policy = RetryPolicy(attempts=ATTEMPTS, first_delay=0.0, max_delay=0.0)
    identity = EmbeddingIdentity("model", 2, "", "")
    return PgVectorStore(
        _Pool(conn),  # type: ignore[arg-type]
        Statements("redstring"),
        identity,
        approximate=False,
        retry=policy,
    )


def _serialization() -> asyncpg.PostgresError:
    return asyncpg.exceptions.SerializationError("could not serialize access")


async def test_a_transient_failure_is_retried_until_it_passes() -> None:
    # 25P03: the server ended a session left idle in a transaction (ADR 0021).
    idle = asyncpg.exceptions.IdleInTransactionSessionTimeoutError("idle too long")
    conn = _Connection(
        _serialization(), OSError("reset"), idle, {"topic_id": "id-1", "last_offset": 7}
    )
    assert await _store(conn).checkpoint(P) == 7
    assert len(conn.calls) == 4


def test_a_session_the_server_ended_for_idling_in_a_transaction_is_an_ended_transaction() -> None:
    idle = asyncpg.exceptions.IdleInTransactionSessionTimeoutError("idle too long")
    with pytest.raises(TransactionEndedError, match="IdleInTransactionSessionTimeoutError"):
        with translated("pgvector.unit_of_work"):
            raise idle


@pytest.mark.parametrize("write", [False, True])
async def test_a_transient_failure_is_retried_as_often_as_the_policy_says(write: bool) -> None:
    conn = _Connection(_serialization())
    store = _store(conn)
    with pytest.raises(TransientStoreError, match=r"pgvector\.(checkpoint|forget_applied_events)"):
        if write:
            await store.forget_applied_events(T)
        else:
            await store.checkpoint(P)
    assert len(conn.calls) == ATTEMPTS


async def test_a_refused_value_is_not_retried() -> None:
    conn = _Connection(asyncpg.exceptions.NumericValueOutOfRangeError("out of range"))
    with pytest.raises(PermanentStoreError):
        await _store(conn).expire_applied_events(datetime.now(UTC))
    assert len(conn.calls) == 1


async def test_anything_else_is_not_retried_and_passes_unchanged() -> None:
    conn = _Connection(asyncpg.exceptions.UndefinedTableError("no such table"))
    with pytest.raises(asyncpg.exceptions.UndefinedTableError):
        await _store(conn).is_rebuilding(T)
    assert len(conn.calls) == 1


async def test_a_retried_call_is_given_the_same_ids() -> None:
    ids = [EventId("e-1"), EventId("e-2")]
    conn = _Connection(_serialization(), [{"event_id": "e-2"}])
    found = await _store(conn).applied_event_ids(T, iter(ids))
    assert found == {EventId("e-2")}
    assert [call[1] for call in conn.calls] == [ids, ids]


def test_a_direct_call_shows_the_views_signature() -> None:
    store = _store(_Connection(None))
    assert list(inspect.signature(store.applied_event_ids).parameters) == [
        "tenant_id",
        "event_ids",
    ]
    assert store.applied_event_ids.__name__ == "applied_event_ids"
