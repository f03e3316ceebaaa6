"""Every read returns fresh objects: mutating a result never changes the store.

One ``test_{method}_returns_copies`` per read method of the port, named so the
coverage gate (tests/unit/test_graph_compliance_coverage.py) finds it.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable

import pytest

from adapters.compliance.graph_support import eid, fresh_tenant, key, tamper, write_sample
from contracts.ids import TenantId
from contracts.ports.graph import ProjectedGraphStore


async def assert_returns_copies(read: Callable[[], Awaitable[object]]) -> None:
    first = await read()
    assert first not in (None, [], {}), "the read found nothing, so the test would prove nothing"
    expected = copy.deepcopy(first)
    tamper(first)
    assert first != expected, "tampering changed nothing, so the test would prove nothing"
    assert await read() == expected


class CopyTier:
    @pytest.fixture
    async def sample(self, store: ProjectedGraphStore) -> TenantId:
        t = fresh_tenant()
        await write_sample(store, t, "a")
        return t

    async def test_get_entity_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(lambda: store.get_entity(sample, eid("e1")))

    async def test_get_entities_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(lambda: store.get_entities(sample, [eid("e1"), eid("e2")]))

    async def test_find_entities_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(lambda: store.find_entities(sample))

    async def test_find_by_blocking_key_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(lambda: store.find_by_blocking_key(sample, "a one"))

    async def test_find_by_blocking_keys_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(
            lambda: store.find_by_blocking_keys(sample, ["a one", "shared name", "none"])
        )

    async def test_find_aliases_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(lambda: store.find_aliases(sample, eid("e1")))

    async def test_resolve_entity_ids_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(
            lambda: store.resolve_entity_ids(sample, [eid("e3"), eid("e1")])
        )

    async def test_get_relationship_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(lambda: store.get_relationship(sample, key("e1", "e2")))

    async def test_get_relationships_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(lambda: store.get_relationships(sample))

    async def test_get_relationships_for_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(lambda: store.get_relationships_for(sample, [eid("e2")]))

    async def test_neighbors_returns_copies(
        self, store: ProjectedGraphStore, sample: TenantId
    ) -> None:
        await assert_returns_copies(lambda: store.neighbors(sample, eid("e2")))
