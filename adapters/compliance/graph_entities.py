"""Entity semantics: upsert merges, reads by id, type, and blocking key."""

from __future__ import annotations

from typing import cast

import pytest

from adapters.compliance.graph_support import eid, ent, fresh_tenant
from contracts.domain import blocking_key
from contracts.ports.graph import ProjectedGraphStore


class EntityTier:
    async def test_an_upserted_entity_reads_back(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        e = ent(t, "e1", "Ada", "Person", born=1815, tags=["math"], ratio=0.5, alive=False)
        await store.upsert_entity(t, e)
        assert await store.get_entity(t, eid("e1")) == e

    async def test_an_unknown_id_reads_as_none(self, store: ProjectedGraphStore) -> None:
        assert await store.get_entity(fresh_tenant(), eid("nobody")) is None

    async def test_an_upsert_merges_properties_and_takes_name_and_type_from_the_newer(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entity(t, ent(t, "e1", "Ada", "Person", a=1, b=["x"]))
        await store.upsert_entity(t, ent(t, "e1", "Ada L.", "Author", b=[], c=True))
        assert await store.get_entity(t, eid("e1")) == ent(
            t, "e1", "Ada L.", "Author", a=1, b=[], c=True
        )

    async def test_upsert_entities_applies_in_order(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        await store.upsert_entities(
            t, [ent(t, "e1", "First", a=1), ent(t, "e2"), ent(t, "e1", "Second", b=2)]
        )
        assert await store.get_entity(t, eid("e1")) == ent(t, "e1", "Second", a=1, b=2)
        assert await store.get_entity(t, eid("e2")) == ent(t, "e2")

    async def test_upserting_nothing_is_allowed(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [])
        assert await store.find_entities(t) == []

    async def test_get_entities_answers_the_known_ids_ordered_by_id(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, i) for i in ("c", "a", "b")])
        found = await store.get_entities(t, [eid("c"), eid("zz"), eid("a"), eid("c")])
        assert found == [ent(t, "a"), ent(t, "c")]
        assert await store.get_entities(t, []) == []

    async def test_find_entities_filters_by_type_orders_by_id_and_limits(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        people = [ent(t, i, type_="Person") for i in ("p3", "p1", "p2")]
        await store.upsert_entities(t, [*people, ent(t, "o1", type_="Org")])
        assert [e.id for e in await store.find_entities(t)] == ["o1", "p1", "p2", "p3"]
        assert [e.id for e in await store.find_entities(t, "Person")] == ["p1", "p2", "p3"]
        assert [e.id for e in await store.find_entities(t, "Person", limit=2)] == ["p1", "p2"]
        assert await store.find_entities(t, "Place") == []
        assert await store.find_entities(t, limit=0) == []

    async def test_find_entities_limits_in_code_point_order(
        self, store: ProjectedGraphStore
    ) -> None:
        # Java (so Neo4j) orders strings by UTF-16 code unit, which puts an astral
        # character before U+E000..U+FFFF; the port orders by code point, and a
        # limit must cut that order, not the store's.
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, i) for i in ("\U0001f600", "\uff21", "z")])
        assert [e.id for e in await store.find_entities(t, limit=2)] == ["z", "\uff21"]
        assert [e.id for e in await store.find_entities(t)] == ["z", "\uff21", "\U0001f600"]

    async def test_find_entities_of_an_empty_tenant_is_empty(
        self, store: ProjectedGraphStore
    ) -> None:
        assert await store.find_entities(fresh_tenant()) == []

    async def test_find_by_blocking_key_folds_case_whitespace_and_compatibility_forms(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(
            t,
            [
                ent(t, "e2", "  ÄRGER\t im\u00a0Büro "),
                ent(t, "e1", "ärger im büro"),
                ent(t, "e3", "Ärger im Büro GmbH"),
                ent(t, "e4", "ﬁle"),
            ],
        )
        found = await store.find_by_blocking_key(t, blocking_key("Ärger im Büro"))
        assert [e.id for e in found] == ["e1", "e2"]
        assert [e.id for e in await store.find_by_blocking_key(t, "file")] == ["e4"]

    async def test_find_by_blocking_key_follows_a_rename(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        await store.upsert_entity(t, ent(t, "e1", "Old Name"))
        await store.upsert_entity(t, ent(t, "e1", "New Name"))
        assert await store.find_by_blocking_key(t, "old name") == []
        assert [e.id for e in await store.find_by_blocking_key(t, "new name")] == ["e1"]

    async def test_find_by_blocking_key_with_no_match_is_empty(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entity(t, ent(t, "e1", "Ada"))
        assert await store.find_by_blocking_key(t, "grace") == []

    async def test_find_by_blocking_keys_answers_every_key_asked(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(
            t, [ent(t, "e2", "Ada"), ent(t, "e1", "ADA"), ent(t, "e3", "Grace")]
        )
        found = await store.find_by_blocking_keys(t, ["ada", "nobody", "grace", "ada"])
        assert {k: [e.id for e in v] for k, v in found.items()} == {
            "ada": ["e1", "e2"],
            "nobody": [],
            "grace": ["e3"],
        }
        assert await store.find_by_blocking_keys(t, []) == {}

    async def test_a_write_keeps_no_reference_to_the_callers_values(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        e = ent(t, "e1", tags=["a"])
        await store.upsert_entity(t, e)
        cast(list[str], e.properties["tags"]).append("b")
        e.properties["extra"] = 1
        assert await store.get_entity(t, eid("e1")) == ent(t, "e1", tags=["a"])

    async def test_an_invalid_tenant_id_is_refused(self, store: ProjectedGraphStore) -> None:
        with pytest.raises(ValueError):
            await store.get_entity("Not A Tenant", eid("e1"))  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            await store.find_entities("")  # type: ignore[arg-type]
        bad = "Bad Tenant"
        with pytest.raises(ValueError):
            await store.upsert_entity(bad, ent(bad, "e1"))  # type: ignore[arg-type]
