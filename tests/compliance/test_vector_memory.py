"""The vector compliance suite against the in-memory reference store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.compliance.vector_store import VectorStoreCompliance
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import EmbeddingIdentity


class TestInMemoryVectorStore(VectorStoreCompliance):
    @pytest.fixture
    async def store(self, dimension: int) -> AsyncIterator[InMemoryVectorStore]:
        async with InMemoryVectorStore(EmbeddingIdentity("compliance", dimension)) as store:
            yield store
