"""A broken outside adapter: the suites, run from outside, must catch it.

Its ``get_entity`` hands out the same object each time, so a caller mutating
one answer changes the next; the copy tier's ``test_get_entity_returns_copies``
fails on it (tests/outside/test_outside_adapter.py checks that it does).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.compliance import GraphStoreCompliance
from adapters.memory.graph import InMemoryGraphStore
from contracts.domain import Entity
from contracts.ids import EntityId, TenantId
from contracts.ports.graph import ProjectedGraphStore


class LeakyGraphStore(InMemoryGraphStore):
    def __init__(self) -> None:
        super().__init__()
        self._handed_out: dict[tuple[TenantId, EntityId], Entity | None] = {}

    async def get_entity(self, tenant_id: TenantId, entity_id: EntityId) -> Entity | None:
        key = (tenant_id, entity_id)
        if key not in self._handed_out:
            self._handed_out[key] = await super().get_entity(tenant_id, entity_id)
        return self._handed_out[key]


class TestLeakyGraphStore(GraphStoreCompliance):
    @pytest.fixture
    async def store(self) -> AsyncIterator[ProjectedGraphStore]:
        async with LeakyGraphStore() as store:
            yield store
