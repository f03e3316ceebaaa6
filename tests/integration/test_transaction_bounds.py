"""A unit of work left open by a frozen process (a long GC pause, a stopped
VM) holds its partition's checkpoint lock in the store; the server must end
it, so that the partition's next owner goes on (docs/adr/0021-transaction-
bounds.md). Each store is opened twice, as two processes would: the
"zombie" with a short ``transaction_timeout``, its successor with none. The
zombie's unit of work stops on an event it is never given until the
successor is done, so nothing here is timed: the successor either gets the
lock while the zombie still waits, or the guard ends the test.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from adapters.neo4j import Neo4jGraphStore
from adapters.pgvector import PgVectorStore
from contracts.domain import EmbeddingIdentity, StreamPartition
from contracts.errors import TransientStoreError
from contracts.ports.ledger import NO_CHECKPOINT
from tests.pgvector_support import drop_schemas
from tests.services import Neo4jConfig

pytestmark = pytest.mark.services

BOUND_S = 1.0
# Far longer than BOUND_S plus a busy machine's scheduling: reached only if
# the zombie's transaction is never ended.
GUARD_S = 60.0

Opener = Callable[[float | None], AbstractAsyncContextManager[Any]]


@pytest.fixture
def neo4j_opener(neo4j_config: Neo4jConfig) -> Opener:
    @asynccontextmanager
    async def open_store(bound: float | None) -> AsyncIterator[Neo4jGraphStore]:
        store = await Neo4jGraphStore.open(
            neo4j_config.uri,
            neo4j_config.user,
            neo4j_config.password,
            transaction_timeout=bound,
        )
        async with store:
            yield store

    return open_store


@pytest.fixture
async def pgvector_opener(pg_dsn: str) -> AsyncIterator[Opener]:
    schema = f"rs_bounds_{uuid.uuid4().hex[:8]}"

    @asynccontextmanager
    async def open_store(bound: float | None) -> AsyncIterator[PgVectorStore]:
        store = await PgVectorStore.open(
            pg_dsn,
            EmbeddingIdentity("bounds", 3),
            schema=schema,
            max_size=2,
            transaction_timeout=bound,
        )
        async with store:
            yield store

    yield open_store
    await drop_schemas(pg_dsn, schema)


@pytest.fixture(params=["neo4j", "pgvector"])
def opener(request: pytest.FixtureRequest) -> Opener:
    opener: Opener = request.getfixturevalue(f"{request.param}_opener")
    return opener


async def test_a_frozen_unit_of_work_gives_its_partition_up_to_the_next_owner(
    opener: Opener,
) -> None:
    partition = StreamPartition(f"bounds-{uuid.uuid4().hex[:8]}", 0, "t1")
    inside, wake = asyncio.Event(), asyncio.Event()

    async def zombie(store: Any) -> None:
        async with store.unit_of_work(partition) as uow:
            await uow.advance_checkpoint(partition, 5)
            inside.set()
            await wake.wait()  # frozen: the server hears nothing more from it

    async with opener(BOUND_S) as zombie_store, opener(None) as successor_store:
        frozen = asyncio.create_task(zombie(zombie_store))
        try:
            await asyncio.wait_for(inside.wait(), GUARD_S)
            async with asyncio.timeout(GUARD_S):
                async with successor_store.unit_of_work(partition) as uow:
                    # The zombie's write never committed.
                    assert await uow.checkpoint(partition) == NO_CHECKPOINT
                    await uow.advance_checkpoint(partition, 9)
            assert not frozen.done(), "the zombie left on its own: nothing was shown"
            wake.set()
            # Woken, the zombie finds its transaction gone: a transient error,
            # so the worker retries from the checkpoints, never a refusal.
            with pytest.raises(TransientStoreError):
                await asyncio.wait_for(frozen, GUARD_S)
        finally:
            wake.set()
            frozen.cancel()
            await asyncio.gather(frozen, return_exceptions=True)
        assert await successor_store.checkpoint(partition) == 9
