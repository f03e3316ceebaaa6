"""The graph compliance suite against the in-memory reference store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.compliance.graph_store import GraphStoreCompliance
from adapters.memory.graph import InMemoryGraphStore
from contracts.ports.graph import ProjectedGraphStore


class TestInMemoryGraphStore(GraphStoreCompliance):
    @pytest.fixture
    async def store(self) -> AsyncIterator[ProjectedGraphStore]:
        async with InMemoryGraphStore() as store:
            yield store
