"""An adapter written outside redstring, proving itself with the shipped suites.

This module is all that such an adapter's own repository needs, saved as a
``test_*.py`` beside a pytest configuration with ``asyncio_mode = "auto"``
(docs/adapters.md). It imports the suites from the installed package, never
from redstring's tests/: tests/outside/test_outside_adapter.py copies it into
an empty directory and runs pytest there, where redstring's tests are not
importable.

The stores are redstring's memory adapters under other names, standing in for
a fourth adapter; a real one implements the ports itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.compliance import GraphStoreCompliance, LedgerCompliance, VectorStoreCompliance
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import EmbeddingIdentity, Entity
from contracts.ids import EntityId, TenantId
from contracts.ports.graph import GraphUnitOfWork, ProjectedGraphStore
from contracts.ports.vector import ProjectedVectorStore


class OutsideGraphStore(InMemoryGraphStore):
    """The graph adapter under test."""


class OutsideVectorStore(InMemoryVectorStore):
    """The vector adapter under test."""


class TestOutsideGraphStore(GraphStoreCompliance):
    @pytest.fixture
    async def store(self) -> AsyncIterator[ProjectedGraphStore]:
        async with OutsideGraphStore() as store:
            yield store


class TestOutsideGraphLedger(LedgerCompliance):
    """The ledger suite writes and observes one tenant-scoped fact through the
    store's own port, which only the adapter's author knows how to do."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[ProjectedGraphStore]:
        async with OutsideGraphStore() as store:
            yield store

    async def write_tenant_fact(self, uow: GraphUnitOfWork, tenant: TenantId) -> None:
        await uow.upsert_entity(tenant, Entity(tenant, EntityId("fact"), "Fact", "Thing"))

    async def has_tenant_fact(self, store: ProjectedGraphStore, tenant: TenantId) -> bool:
        return await store.get_entity(tenant, EntityId("fact")) is not None


class TestOutsideVectorStore(VectorStoreCompliance):
    @pytest.fixture
    async def store(self, dimension: int) -> AsyncIterator[ProjectedVectorStore]:
        async with OutsideVectorStore(EmbeddingIdentity("outside", dimension)) as store:
            yield store
