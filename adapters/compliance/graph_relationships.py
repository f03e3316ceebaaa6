"""Relationship semantics: keyed upserts, existing endpoints, deletes, filters,
and neighbours in both directions."""

from __future__ import annotations

import pytest

from adapters.compliance.graph_support import alias, eid, ent, fresh_tenant, key, rel
from contracts.errors import MissingEntityError
from contracts.ports.graph import ProjectedGraphStore


class RelationshipTier:
    async def test_an_upserted_relationship_reads_back(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, "a"), ent(t, "b")])
        r = rel(t, "a", "b", "KNOWS", 0.75, since=[2001, 2002], note="met")
        await store.upsert_relationships(t, [r])
        assert await store.get_relationship(t, key("a", "b")) == r

    async def test_an_unknown_key_reads_as_none(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, "a"), ent(t, "b")])
        await store.upsert_relationships(t, [rel(t, "a", "b")])
        assert await store.get_relationship(t, key("b", "a")) is None
        assert await store.get_relationship(t, key("a", "b", "LIKES")) is None

    async def test_relationships_are_keyed_by_source_target_and_type(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, "a"), ent(t, "b")])
        await store.upsert_relationships(t, [rel(t, "a", "b", "KNOWS", 0.5, x=1, y=[1])])
        await store.upsert_relationships(
            t, [rel(t, "a", "b", "KNOWS", 0.9, y=[2], z="new"), rel(t, "a", "b", "LIKES")]
        )
        assert await store.get_relationships(t) == [
            rel(t, "a", "b", "KNOWS", 0.9, x=1, y=[2], z="new"),
            rel(t, "a", "b", "LIKES"),
        ]

    async def test_a_missing_endpoint_raises_and_nothing_is_written(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, "a"), ent(t, "b")])
        batch = [rel(t, "a", "b"), rel(t, "b", "ghost"), rel(t, "phantom", "a")]
        with pytest.raises(MissingEntityError) as raised:
            await store.upsert_relationships(t, batch)
        assert raised.value.tenant_id == t
        assert set(raised.value.entity_ids) == {"ghost", "phantom"}
        assert await store.get_relationships(t) == []

    async def test_an_alias_does_not_stand_in_for_a_missing_endpoint(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entity(t, ent(t, "a"))
        await store.upsert_alias(t, alias(t, "gone", "a"))
        with pytest.raises(MissingEntityError):
            await store.upsert_relationships(t, [rel(t, "gone", "a")])

    async def test_delete_relationships_returns_how_many_existed(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, i) for i in "abc"])
        await store.upsert_relationships(t, [rel(t, "a", "b"), rel(t, "b", "c"), rel(t, "a", "c")])
        deleted = await store.delete_relationships(
            t, [key("a", "b"), key("c", "a"), key("b", "c"), key("a", "b")]
        )
        assert deleted == 2
        assert await store.get_relationships(t) == [rel(t, "a", "c")]
        assert await store.delete_relationships(t, []) == 0
        assert [e.id for e in await store.find_entities(t)] == ["a", "b", "c"]

    async def test_get_relationships_applies_every_filter_and_orders_by_key(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, i) for i in "abc"])
        edges = [
            rel(t, "b", "c", "LIKES"),
            rel(t, "a", "c", "KNOWS"),
            rel(t, "a", "b", "LIKES"),
            rel(t, "a", "b", "KNOWS"),
        ]
        await store.upsert_relationships(t, edges)

        async def keys(**filters: str) -> list[tuple[str, str, str]]:
            return [r.key for r in await store.get_relationships(t, **filters)]  # type: ignore[arg-type]

        ab_k, ab_l = key("a", "b"), key("a", "b", "LIKES")
        ac_k, bc_l = key("a", "c"), key("b", "c", "LIKES")
        assert await keys() == [ab_k, ab_l, ac_k, bc_l]
        assert await keys(source_id="a") == [ab_k, ab_l, ac_k]
        assert await keys(target_id="c") == [ac_k, bc_l]
        assert await keys(rel_type="LIKES") == [ab_l, bc_l]
        assert await keys(source_id="a", target_id="b", rel_type="LIKES") == [ab_l]
        assert await keys(source_id="c") == []

    async def test_get_relationships_for_takes_either_endpoint(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, i) for i in "abcd"])
        await store.upsert_relationships(
            t, [rel(t, "c", "d"), rel(t, "b", "a"), rel(t, "a", "c"), rel(t, "b", "d")]
        )
        found = await store.get_relationships_for(t, [eid("a"), eid("zz")])
        assert [r.key for r in found] == [key("a", "c"), key("b", "a")]
        assert await store.get_relationships_for(t, []) == []

    async def test_neighbors_are_one_edge_away_either_way_once_each_ordered_by_id(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, i) for i in "abcde"])
        await store.upsert_relationships(
            t,
            [
                rel(t, "a", "d"),
                rel(t, "b", "a"),
                rel(t, "a", "b", "LIKES"),
                rel(t, "c", "e"),
            ],
        )
        assert await store.neighbors(t, eid("a")) == [ent(t, "b"), ent(t, "d")]
        assert await store.neighbors(t, eid("e")) == [ent(t, "c")]

    async def test_an_entity_without_edges_has_no_neighbors(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entity(t, ent(t, "a"))
        assert await store.neighbors(t, eid("a")) == []
        assert await store.neighbors(t, eid("unknown")) == []
