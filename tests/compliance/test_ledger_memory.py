"""The ledger suite against both in-memory stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.compliance.ledger import LedgerCompliance
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import EmbeddingIdentity, Entity, VectorRecord
from contracts.ids import EntityId, TenantId


class TestInMemoryGraphLedger(LedgerCompliance):
    @pytest.fixture
    async def store(self) -> AsyncIterator[InMemoryGraphStore]:
        async with InMemoryGraphStore() as store:
            yield store

    async def write_tenant_fact(self, uow: Any, tenant: TenantId) -> None:
        await uow.upsert_entity(tenant, Entity(tenant, EntityId("fact"), "Fact", "Thing"))

    async def has_tenant_fact(self, store: Any, tenant: TenantId) -> bool:
        return await store.get_entity(tenant, EntityId("fact")) is not None


class TestInMemoryVectorLedger(LedgerCompliance):
    @pytest.fixture
    async def store(self) -> AsyncIterator[InMemoryVectorStore]:
        async with InMemoryVectorStore(EmbeddingIdentity("test", 3)) as store:
            yield store

    async def write_tenant_fact(self, uow: Any, tenant: TenantId) -> None:
        await uow.upsert(tenant, VectorRecord(tenant, EntityId("fact"), (1.0, 0.0, 0.0)))

    async def has_tenant_fact(self, store: Any, tenant: TenantId) -> bool:
        return await store.get(tenant, EntityId("fact")) is not None
