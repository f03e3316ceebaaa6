"""The vector and ledger compliance suites against PgVectorStore on a real
Postgres + pgvector: the same tests as the memory run, nothing skipped.

One schema per test session (``rs_<hex>_d<dimension>``), dropped at the end, so
runs sharing the local stack never see each other's rows. The dimension is
part of a schema's column type, so each dimension a test asks for gets its own
schema, opened once. asyncpg pools belong to the event loop that made them:
the pools and every test here run on pytest-asyncio's session loop.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from adapters.compliance.ledger import LedgerCompliance
from adapters.compliance.vector_store import VectorStoreCompliance
from adapters.pgvector import PgVectorStore
from contracts.domain import EmbeddingIdentity, VectorRecord
from contracts.ids import EntityId, TenantId
from tests.pgvector_support import PgStores

pytestmark = [pytest.mark.services, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def pg_stores(pg_dsn: str) -> AsyncIterator[PgStores]:
    stores = PgStores(pg_dsn, prefix=f"rs_{uuid.uuid4().hex[:8]}")
    try:
        yield stores
    finally:
        await stores.close_and_drop()


class TestPgVectorStore(VectorStoreCompliance):
    @pytest_asyncio.fixture(loop_scope="session")
    async def store(self, pg_stores: PgStores, dimension: int) -> PgVectorStore:
        return await pg_stores.get(EmbeddingIdentity("compliance", dimension))


class TestPgVectorLedger(LedgerCompliance):
    @pytest_asyncio.fixture(loop_scope="session")
    async def store(self, pg_stores: PgStores) -> PgVectorStore:
        return await pg_stores.get(EmbeddingIdentity("test", 3))

    async def write_tenant_fact(self, uow: Any, tenant: TenantId) -> None:
        await uow.upsert(tenant, VectorRecord(tenant, EntityId("fact"), (1.0, 0.0, 0.0)))

    async def has_tenant_fact(self, store: Any, tenant: TenantId) -> bool:
        return await store.get(tenant, EntityId("fact")) is not None
