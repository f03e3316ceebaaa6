"""Hypothesis properties: the store agrees with a dict model.

Each example makes its own tenant (the ``store`` fixture lives for the whole
test), so examples never see each other's writes. No example count or deadline
is set here: the caller's hypothesis profile bounds both for real stores
(redstring's "services" profile, in its tests/conftest.py), and the same
assertions run everywhere.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.compliance.graph_support import (
    HANG_TIMEOUT,
    PER_EXAMPLE,
    alias,
    fresh_partition,
    fresh_tenant,
)
from adapters.compliance.strategies import (
    alias_forests,
    entities,
    entity_ids,
    pooled_ids,
    property_dicts,
    relationships,
    under,
)
from contracts.domain import (
    Entity,
    Properties,
    Relationship,
    RelationshipKey,
    blocking_key,
)
from contracts.errors import AliasChainTooDeepError, AliasCycleError
from contracts.ids import EntityId
from contracts.limits import DEFAULT_MAX_ALIAS_DEPTH
from contracts.ports.graph import ProjectedGraphStore

_POOL = pooled_ids(5)


def _model_resolve(model: dict[EntityId, EntityId], start: EntityId) -> EntityId:
    current = start
    while current in model:
        current = model[current]
    return current


def _kinds(properties: Properties) -> dict[str, object]:
    """Each value's kind (and its items' kinds): equality alone cannot tell 1
    from 1.0 from True, so a store that changed kinds would still compare equal."""
    return {
        key: (list, [type(item) for item in value]) if isinstance(value, list) else type(value)
        for key, value in properties.items()
    }


class PropertyTier:
    @PER_EXAMPLE
    @given(
        drawn=st.lists(
            entities(st.sampled_from(_POOL)), min_size=2, max_size=4, unique_by=lambda e: e.id
        ),
        edge_properties=property_dicts,
        confidence=st.sampled_from([0, 1]) | st.floats(0.0, 1.0),
    )
    async def test_property_values_keep_their_kinds(
        self,
        store: ProjectedGraphStore,
        drawn: list[Entity],
        edge_properties: Properties,
        confidence: float,
    ) -> None:
        t = fresh_tenant()
        people = [under(e, t) for e in drawn]
        await store.upsert_entities(t, people)
        edge = Relationship(t, people[0].id, people[1].id, "KNOWS", confidence, edge_properties)
        await store.upsert_relationships(t, [edge])
        for person in people:
            stored = await store.get_entity(t, person.id)
            assert stored is not None and _kinds(stored.properties) == _kinds(person.properties)
        read = await store.get_relationship(t, edge.key)
        assert read is not None and _kinds(read.properties) == _kinds(edge_properties)
        assert type(read.confidence) is type(confidence)

    @PER_EXAMPLE
    @given(batches=st.lists(st.lists(entities(), max_size=4), max_size=5))
    async def test_entity_upserts_agree_with_a_dict_model(
        self, store: ProjectedGraphStore, batches: list[list[Entity]]
    ) -> None:
        t = fresh_tenant()
        model: dict[EntityId, Entity] = {}
        for drawn in batches:
            batch = [under(e, t) for e in drawn]
            if len(batch) == 1:
                await store.upsert_entity(t, batch[0])
            else:
                await store.upsert_entities(t, batch)
            for e in batch:
                model[e.id] = model[e.id].merged_with(e) if e.id in model else e
        assert await store.find_entities(t) == [model[i] for i in sorted(model)]
        ids = [*model, EntityId("absent")]
        assert await store.get_entities(t, ids) == [model[i] for i in sorted(model)]

    @PER_EXAMPLE
    @given(drawn=st.lists(entities(), max_size=6), probes=st.lists(st.text(max_size=4)))
    async def test_blocking_key_lookups_agree_with_the_model(
        self, store: ProjectedGraphStore, drawn: list[Entity], probes: list[str]
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [under(e, t) for e in drawn])
        stored = await store.find_entities(t)
        keys = [e.blocking_key for e in stored] + [blocking_key(p) for p in probes]
        expected = {k: [e for e in stored if e.blocking_key == k] for k in keys}
        assert await store.find_by_blocking_keys(t, keys) == expected
        for k in keys[:3]:
            assert await store.find_by_blocking_key(t, k) == expected[k]

    @PER_EXAMPLE
    @given(
        people=st.lists(entities(st.sampled_from(_POOL)), min_size=1, max_size=5),
        drawn=st.lists(relationships(st.sampled_from(_POOL)), max_size=8),
    )
    async def test_relationship_upserts_agree_with_a_dict_model(
        self, store: ProjectedGraphStore, people: list[Entity], drawn: list[Relationship]
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [under(e, t) for e in people])
        present = {e.id for e in people}
        model: dict[RelationshipKey, Relationship] = {}
        for r in (under(r, t) for r in drawn):
            if {r.source_id, r.target_id} <= present:
                await store.upsert_relationships(t, [r])
                model[r.key] = model[r.key].merged_with(r) if r.key in model else r
        assert await store.get_relationships(t) == [model[k] for k in sorted(model)]
        some = sorted(present)[:2]
        assert await store.get_relationships_for(t, some) == [
            model[k] for k in sorted(model) if k[0] in some or k[1] in some
        ]
        for entity_id in sorted(present):
            near = {k[1] for k in model if k[0] == entity_id} | {
                k[0] for k in model if k[1] == entity_id
            }
            assert [e.id for e in await store.neighbors(t, entity_id)] == sorted(near)

    @PER_EXAMPLE
    @given(merges=alias_forests(), extra=st.lists(entity_ids, max_size=3))
    async def test_resolution_is_total_transitive_and_idempotent_over_alias_forests(
        self,
        store: ProjectedGraphStore,
        merges: list[tuple[EntityId, EntityId]],
        extra: list[EntityId],
    ) -> None:
        t = fresh_tenant()
        model: dict[EntityId, EntityId] = {}
        for absorbed, canonical in merges:
            await store.upsert_alias(t, alias(t, absorbed, canonical))
            model[absorbed] = canonical
        asked = [*pooled_ids(8), *extra]
        resolved = await store.resolve_entity_ids(t, asked)
        assert resolved == {i: _model_resolve(model, i) for i in asked}
        again = await store.resolve_entity_ids(t, list(resolved.values()))
        assert all(again[c] == c for c in resolved.values())
        for canonical in set(model.values()):
            direct = sorted(a for a, c in model.items() if c == canonical)
            assert [a.alias_id for a in await store.find_aliases(t, canonical)] == direct

    @PER_EXAMPLE
    @given(
        base=st.integers(DEFAULT_MAX_ALIAS_DEPTH - 3, DEFAULT_MAX_ALIAS_DEPTH),
        picks=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=6),
        reasons=st.lists(st.sampled_from(["", "same", "name match"]), min_size=6, max_size=6),
    )
    async def test_one_batch_of_aliases_is_single_upserts_in_one_unit_of_work(
        self,
        store: ProjectedGraphStore,
        base: int,
        picks: list[tuple[int, int]],
        reasons: list[str],
    ) -> None:
        """A chain a few hops short of the limit, then aliases among its bottom,
        its top, a middle id and fresh ids: some lengthen it past the limit,
        some move a member away first and make room, some close a cycle. One
        ``upsert_aliases`` call refuses at the same alias (or none) as a loop of
        ``upsert_alias`` in a unit of work, and leaves what its commit or its
        rollback leaves."""
        chain = [EntityId(f"c{i}") for i in range(base + 1)]
        pool = [chain[0], chain[1], chain[base // 2], chain[-2], chain[-1]]
        pool += [EntityId(f"f{i}") for i in range(10 - len(pool))]
        pairs = [(pool[a], pool[c], reasons[i]) for i, (a, c) in enumerate(picks) if a != c]
        outcomes = []
        for batched in (True, False):
            t = fresh_tenant()
            await store.upsert_aliases(t, [alias(t, a, c) for a, c in itertools.pairwise(chain)])
            written = [alias(t, a, c, why) for a, c, why in pairs]
            refused: EntityId | None = None
            try:
                if batched:
                    await store.upsert_aliases(t, written)
                else:
                    async with store.unit_of_work(fresh_partition()) as uow:
                        for one in written:
                            await uow.upsert_alias(t, one)
            except AliasChainTooDeepError as exc:
                refused = exc.entity_id
            held = [
                (a.alias_id, a.canonical_id, a.reason)
                for target in {*chain, *pool}
                for a in await store.find_aliases(t, target)
            ]
            outcomes.append((refused, sorted(held)))
        assert outcomes[0] == outcomes[1]

    @pytest.mark.timeout(HANG_TIMEOUT)
    @PER_EXAMPLE
    @given(length=st.integers(2, 6), tail=st.integers(0, 3), forest=alias_forests(size=4))
    async def test_any_cycle_raises_rather_than_hanging(
        self,
        store: ProjectedGraphStore,
        length: int,
        tail: int,
        forest: list[tuple[EntityId, EntityId]],
    ) -> None:
        t = fresh_tenant()
        # Unrelated legal aliases raise the bound; the cycle must still be caught.
        for absorbed, canonical in forest:
            await store.upsert_alias(t, alias(t, absorbed, canonical))
        ring = [EntityId(f"r{i}") for i in range(length)]
        for i, member in enumerate(ring):
            await store.upsert_alias(t, alias(t, member, ring[(i + 1) % length]))
        path = [EntityId(f"tail{i}") for i in range(tail)]
        for i, member in enumerate(path):
            await store.upsert_alias(t, alias(t, member, path[i + 1] if i + 1 < tail else ring[0]))
        for start in [*ring, *path]:
            with pytest.raises(AliasCycleError):
                await store.resolve_entity_ids(t, [start])
