"""What the in-memory vector store does beyond the compliance suite: the
guards a real database gives for free and a dict does not."""

from __future__ import annotations

import asyncio

import pytest

from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import EmbeddingIdentity, StreamPartition, VectorRecord
from contracts.errors import TenantIsolationError
from contracts.ids import EntityId, TenantId
from contracts.ports.vector import ProjectedVectorStore

A, B = TenantId("tenant-a"), TenantId("tenant-b")
PARTITION = StreamPartition("events", 0)


def record(tenant: TenantId, name: str, *vector: float) -> VectorRecord:
    return VectorRecord(tenant_id=tenant, id=EntityId(name), vector=tuple(vector))


@pytest.fixture
def store() -> InMemoryVectorStore:
    return InMemoryVectorStore(EmbeddingIdentity("test", 2))


def test_it_is_statically_a_projected_vector_store(store: InMemoryVectorStore) -> None:
    typed: ProjectedVectorStore = store  # mypy checks the structure here
    assert isinstance(typed, ProjectedVectorStore)


async def test_a_foreign_record_in_storage_is_refused_not_returned(
    store: InMemoryVectorStore,
) -> None:
    """Only a write that bypassed the adapter can put one there; a read that
    returned it, or silently dropped it, would hide the corruption."""
    store._state.records[(A, EntityId("x"))] = record(B, "x", 1.0, 0.0)
    with pytest.raises(TenantIsolationError):
        await store.get(A, EntityId("x"))
    with pytest.raises(TenantIsolationError):
        await store.search(A, (1.0, 0.0), k=5)


async def test_a_unit_of_work_cannot_be_used_after_it_ends(store: InMemoryVectorStore) -> None:
    async with store.unit_of_work(PARTITION) as uow:
        await uow.upsert(A, record(A, "x", 1.0, 0.0))
    with pytest.raises(RuntimeError, match="has ended"):
        await uow.upsert(A, record(A, "y", 1.0, 0.0))
    with pytest.raises(RuntimeError, match="has ended"):
        await uow.advance_checkpoint(PARTITION, 3)
    assert await store.get(A, EntityId("y")) is None


@pytest.mark.timeout(10)
async def test_a_direct_write_inside_the_stores_own_unit_of_work_fails_fast(
    store: InMemoryVectorStore,
) -> None:
    async with store.unit_of_work(PARTITION) as uow:
        await uow.upsert(A, record(A, "x", 1.0, 0.0))
        with pytest.raises(RuntimeError, match="deadlock"):
            await store.upsert(A, record(A, "y", 1.0, 0.0))
    assert await store.get(A, EntityId("x")) is not None


async def test_units_of_work_are_serialised(store: InMemoryVectorStore) -> None:
    """Each transaction copies the state it starts from; without the lock the
    second to commit would erase the first's write."""

    async def write(name: str) -> None:
        async with store.unit_of_work(PARTITION) as uow:
            await uow.upsert(A, record(A, name, 1.0, 0.0))
            await asyncio.sleep(0.01)

    await asyncio.gather(*(write(f"n{i}") for i in range(5)))
    for i in range(5):
        assert await store.get(A, EntityId(f"n{i}")) is not None


async def test_the_lock_is_released_after_a_failed_unit_of_work(
    store: InMemoryVectorStore,
) -> None:
    with pytest.raises(KeyError):
        async with store.unit_of_work(PARTITION):
            raise KeyError("boom")
    await asyncio.wait_for(store.upsert(A, record(A, "x", 0.0, 1.0)), timeout=5)
