"""Tenant isolation: no read crosses tenants, no write lands in another.

Tenants "a" and "b" write samples with the same ids (see ``write_sample``).
Every ``test_{method}_never_crosses_tenants`` reads under ``b`` and asserts
both halves: the answer is exactly b's (so a store answering nothing fails),
and it differs from a's answer to the same call (so the test is not vacuous).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from adapters.compliance.graph_support import (
    SampleGraph,
    alias,
    eid,
    ent,
    fresh_tenant,
    key,
    rel,
    write_sample,
)
from contracts.errors import MissingEntityError, TenantIsolationError
from contracts.ids import TenantId
from contracts.ports.graph import ProjectedGraphStore


@dataclass
class Pair:
    a: SampleGraph
    b: SampleGraph


async def assert_b_sees_only_b(
    pair: Pair, read: Callable[[TenantId], Awaitable[object]], b_expects: object
) -> None:
    answer = await read(pair.b.tenant)
    assert answer == b_expects
    assert await read(pair.a.tenant) != answer, "a and b agree, so the test would prove nothing"


class TenancyTier:
    @pytest.fixture
    async def pair(self, store: ProjectedGraphStore) -> Pair:
        a, b = fresh_tenant(), fresh_tenant()
        return Pair(await write_sample(store, a, "a"), await write_sample(store, b, "b"))

    async def test_get_entity_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        b = pair.b.entities
        await assert_b_sees_only_b(pair, lambda t: store.get_entity(t, eid("e1")), b[eid("e1")])
        assert await store.get_entity(pair.b.tenant, eid("e3")) is None

    async def test_get_entities_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        ids = [eid(i) for i in ("e1", "e2", "e3", "e5")]
        await assert_b_sees_only_b(
            pair, lambda t: store.get_entities(t, ids), pair.b.sorted_entities("e1", "e2", "e5")
        )

    async def test_find_entities_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        await assert_b_sees_only_b(
            pair, lambda t: store.find_entities(t), pair.b.sorted_entities("e1", "e2", "e5")
        )

    async def test_find_by_blocking_key_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        await assert_b_sees_only_b(
            pair,
            lambda t: store.find_by_blocking_key(t, "shared name"),
            pair.b.sorted_entities("e2"),
        )

    async def test_find_by_blocking_keys_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        await assert_b_sees_only_b(
            pair,
            lambda t: store.find_by_blocking_keys(t, ["shared name", "a one"]),
            {"shared name": pair.b.sorted_entities("e2"), "a one": []},
        )

    async def test_find_aliases_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        await assert_b_sees_only_b(
            pair, lambda t: store.find_aliases(t, eid("e1")), [pair.b.aliases[eid("e5")]]
        )

    async def test_resolve_entity_ids_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        # The dangerous direction: a leak here does not just show b a's data, it
        # rewrites b's edge endpoints onto an entity b has never heard of.
        ids = [eid(i) for i in ("e3", "e4", "e5", "e9")]
        await assert_b_sees_only_b(
            pair,
            lambda t: store.resolve_entity_ids(t, ids),
            {"e3": "e3", "e4": "e4", "e5": "e1", "e9": "e9"},
        )

    async def test_get_relationship_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        assert await store.get_relationship(pair.b.tenant, key("e1", "e2")) is None
        b_key = key("e2", "e1", "LIKES")
        await assert_b_sees_only_b(
            pair, lambda t: store.get_relationship(t, b_key), pair.b.relationships[b_key]
        )

    async def test_get_relationships_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        await assert_b_sees_only_b(
            pair, lambda t: store.get_relationships(t), list(pair.b.relationships.values())
        )

    async def test_get_relationships_for_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        await assert_b_sees_only_b(
            pair,
            lambda t: store.get_relationships_for(t, [eid("e2"), eid("e3")]),
            list(pair.b.relationships.values()),
        )

    async def test_neighbors_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        await assert_b_sees_only_b(
            pair, lambda t: store.neighbors(t, eid("e2")), pair.b.sorted_entities("e1")
        )

    # The write side: a write names one tenant and touches only that one.

    async def test_remove_alias_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        assert await store.remove_alias(pair.b.tenant, eid("e3")) is False
        assert await store.resolve_entity_ids(pair.a.tenant, [eid("e3")]) == {"e3": "e1"}

    async def test_delete_relationships_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        assert await store.delete_relationships(pair.b.tenant, [key("e1", "e2")]) == 0
        assert await store.get_relationship(pair.a.tenant, key("e1", "e2")) is not None

    async def test_upsert_relationships_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        # e3 exists under a only: for b it is missing.
        with pytest.raises(MissingEntityError):
            await store.upsert_relationships(pair.b.tenant, [rel(pair.b.tenant, "e1", "e3")])

    async def test_delete_by_tenant_never_crosses_tenants(
        self, store: ProjectedGraphStore, pair: Pair
    ) -> None:
        assert (await store.delete_by_tenant(pair.b.tenant)).complete
        a = pair.a
        assert await store.find_entities(a.tenant) == a.sorted_entities("e1", "e2", "e3")
        assert await store.get_relationships(a.tenant) == list(a.relationships.values())
        assert await store.find_aliases(a.tenant, eid("e1")) == list(a.aliases.values())

    async def test_a_write_carrying_another_tenant_is_refused(
        self, store: ProjectedGraphStore
    ) -> None:
        mine, theirs = fresh_tenant(), fresh_tenant()
        await store.upsert_entities(mine, [ent(mine, "a"), ent(mine, "b")])
        await store.upsert_entities(theirs, [ent(theirs, "a"), ent(theirs, "b")])
        writes: list[Callable[[], Awaitable[object]]] = [
            lambda: store.upsert_entity(mine, ent(theirs, "c")),
            lambda: store.upsert_entities(mine, [ent(mine, "c"), ent(theirs, "d")]),
            lambda: store.upsert_relationships(mine, [rel(theirs, "a", "b")]),
            lambda: store.upsert_alias(mine, alias(theirs, "x", "a")),
            lambda: store.upsert_aliases(mine, [alias(mine, "x", "a"), alias(theirs, "y", "a")]),
        ]
        for write in writes:
            with pytest.raises(TenantIsolationError):
                await write()
        for t in (mine, theirs):
            assert [e.id for e in await store.find_entities(t)] == ["a", "b"]
            assert await store.get_relationships(t) == []
            assert await store.resolve_entity_ids(t, [eid("x"), eid("y")]) == {"x": "x", "y": "y"}
