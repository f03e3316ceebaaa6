"""What the in-memory graph store owes beyond the compliance suite: its own
integrity checks and the misuse it refuses instead of hanging or corrupting."""

from __future__ import annotations

import pytest

from adapters.memory.graph import GraphState, InMemoryGraphStore
from contracts.domain import Entity, StreamPartition
from contracts.errors import TenantIsolationError
from contracts.ids import EntityId, TenantId

T, OTHER = TenantId("t-one"), TenantId("t-two")
P = StreamPartition("events", 0, "topic-id")


def _entity(tenant: TenantId, id_: str = "e1") -> Entity:
    return Entity(tenant, EntityId(id_), f"Name {id_}", "Person", {"tags": ["a"]})


async def test_a_record_filed_under_the_wrong_tenant_fails_the_read() -> None:
    # A bad backfill, as the read path would meet it: the row is another
    # tenant's but sits under this tenant's key.
    store = InMemoryGraphStore()
    store._committed.entities[(T, EntityId("e1"))] = _entity(OTHER)
    with pytest.raises(TenantIsolationError):
        await store.get_entity(T, EntityId("e1"))
    with pytest.raises(TenantIsolationError):
        await store.find_entities(T)
    sweep = await store.delete_by_tenant(OTHER)
    assert sweep.outstanding == {"entities": 1}


async def test_a_direct_write_inside_a_unit_of_work_of_the_same_task_is_refused() -> None:
    store = InMemoryGraphStore()
    async with store.unit_of_work(P):
        with pytest.raises(RuntimeError, match="already holds a unit of work"):
            await store.upsert_entity(T, _entity(T))
    assert await store.get_entity(T, EntityId("e1")) is None


async def test_a_unit_of_work_cannot_be_used_after_it_ends() -> None:
    store = InMemoryGraphStore()
    async with store.unit_of_work(P) as uow:
        await uow.upsert_entity(T, _entity(T))
    with pytest.raises(RuntimeError, match="has ended"):
        await uow.upsert_entity(T, _entity(T, "e2"))
    with pytest.raises(RuntimeError, match="has ended"):
        await uow.advance_checkpoint(P, 5)
    assert [e.id for e in await store.find_entities(T)] == ["e1"]


async def test_a_closed_store_refuses_calls() -> None:
    async with InMemoryGraphStore() as store:
        pass
    with pytest.raises(RuntimeError, match="closed"):
        await store.find_entities(T)
    with pytest.raises(RuntimeError, match="closed"):
        await store.upsert_entity(T, _entity(T))


def test_a_state_copy_shares_no_mapping_with_its_original() -> None:
    state = GraphState()
    state.entities[(T, EntityId("e1"))] = _entity(T)
    snapshot = state.copy()
    snapshot.entities.clear()
    snapshot.ledger.checkpoints[("events", 0)] = ("topic-id", 3)
    assert list(state.entities) == [(T, EntityId("e1"))]
    assert state.ledger.checkpoints == {}
