"""The alias tier (docs/adr/0011-alias-surface.md): keyed by the absorbed id, direct and
ordered ``find_aliases``, total and transitive resolution, and corrupt cycles
that raise instead of hanging."""

from __future__ import annotations

import itertools

import pytest

from adapters.compliance.graph_support import (
    HANG_TIMEOUT,
    alias,
    eid,
    ent,
    fresh_partition,
    fresh_tenant,
    rel,
)
from contracts.errors import AliasChainTooDeepError, AliasCycleError
from contracts.limits import DEFAULT_MAX_ALIAS_DEPTH
from contracts.ports.graph import ProjectedGraphStore


class AliasTier:
    async def test_an_id_never_merged_resolves_to_itself_known_or_not(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entity(t, ent(t, "known"))
        resolved = await store.resolve_entity_ids(t, [eid("known"), eid("never-seen")])
        assert resolved == {"known": "known", "never-seen": "never-seen"}
        assert await store.resolve_entity_ids(t, []) == {}

    async def test_resolution_follows_a_chain_to_the_end(self, store: ProjectedGraphStore) -> None:
        # Three deep: at two hops "follow one hop" and "follow to the end" agree.
        # With no other alias in the tenant this is also the longest legal chain,
        # so a bound of len(aliases) without the +1 fails here.
        t = fresh_tenant()
        for absorbed, canonical in [("d", "c"), ("c", "b"), ("b", "a")]:
            await store.upsert_alias(t, alias(t, absorbed, canonical))
        resolved = await store.resolve_entity_ids(t, [eid(i) for i in "dcba"])
        assert resolved == {"d": "a", "c": "a", "b": "a", "a": "a"}

    async def test_an_alias_making_a_chain_longer_than_the_limit_is_refused(
        self, store: ProjectedGraphStore
    ) -> None:
        """A chain of the limit's length is written and resolves; one more hop,
        at either end, raises and writes nothing (adapters.alias_depth)."""
        t = fresh_tenant()
        chain = [f"n{i}" for i in range(DEFAULT_MAX_ALIAS_DEPTH + 1)]
        for absorbed, canonical in itertools.pairwise(chain):
            await store.upsert_alias(t, alias(t, absorbed, canonical))
        assert await store.resolve_entity_ids(t, [eid(chain[0])]) == {chain[0]: chain[-1]}
        for absorbed, canonical in (("below", chain[0]), (chain[-1], "above")):
            with pytest.raises(AliasChainTooDeepError) as raised:
                await store.upsert_alias(t, alias(t, absorbed, canonical))
            assert raised.value.tenant_id == t
        assert await store.resolve_entity_ids(t, [eid("below"), eid(chain[0])]) == {
            "below": "below",
            chain[0]: chain[-1],
        }
        assert await store.find_aliases(t, eid(chain[0])) == []

    @pytest.mark.parametrize("extra", [0, 1])
    async def test_joining_two_chains_counts_the_hops_of_both(
        self, store: ProjectedGraphStore, extra: int
    ) -> None:
        """``a_k -> b_0`` joins a chain of k hops below to one of m above: k + 1 + m
        hops, allowed up to the limit and refused past it."""
        t = fresh_tenant()
        below = DEFAULT_MAX_ALIAS_DEPTH // 2
        above = DEFAULT_MAX_ALIAS_DEPTH - 1 - below + extra
        a = [f"a{i}" for i in range(below + 1)]
        b = [f"b{i}" for i in range(above + 1)]
        for chain in (a, b):
            for absorbed, canonical in itertools.pairwise(chain):
                await store.upsert_alias(t, alias(t, absorbed, canonical))
        if extra:
            with pytest.raises(AliasChainTooDeepError):
                await store.upsert_alias(t, alias(t, a[-1], b[0]))
            assert await store.resolve_entity_ids(t, [eid(a[0])]) == {a[0]: a[-1]}
        else:
            await store.upsert_alias(t, alias(t, a[-1], b[0]))
            assert await store.resolve_entity_ids(t, [eid(a[0])]) == {a[0]: b[-1]}

    async def test_a_batch_writes_in_order_and_each_alias_sees_the_ones_before(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_aliases(
            t,
            [
                alias(t, "d", "c"),
                alias(t, "c", "b"),
                alias(t, "b", "a"),
                alias(t, "x", "first", "one"),
                alias(t, "x", "second", "two"),
            ],
        )
        resolved = await store.resolve_entity_ids(t, [eid(i) for i in "dcbx"])
        assert resolved == {"d": "a", "c": "a", "b": "a", "x": "second"}
        assert await store.find_aliases(t, eid("first")) == []
        assert await store.find_aliases(t, eid("second")) == [alias(t, "x", "second", "two")]
        await store.upsert_aliases(t, [])
        assert await store.find_aliases(t, eid("a")) == [alias(t, "b", "a")]

    async def test_a_batch_counts_the_depth_over_what_its_earlier_aliases_wrote(
        self, store: ProjectedGraphStore
    ) -> None:
        """Checked one by one, not all against the state before the call: moving
        the bottom of a full chain away first makes room at its top; a chain
        built in one call is refused at the hop past the limit, and nothing of
        the call is written."""
        t = fresh_tenant()
        chain = [f"n{i}" for i in range(DEFAULT_MAX_ALIAS_DEPTH + 1)]
        await store.upsert_aliases(
            t, [alias(t, absorbed, canonical) for absorbed, canonical in itertools.pairwise(chain)]
        )
        await store.upsert_aliases(t, [alias(t, chain[0], "free"), alias(t, chain[-1], "top")])
        assert await store.resolve_entity_ids(t, [eid(chain[0]), eid(chain[1])]) == {
            chain[0]: "free",
            chain[1]: "top",
        }
        u = fresh_tenant()
        longer = [f"m{i}" for i in range(DEFAULT_MAX_ALIAS_DEPTH + 2)]
        pairs = [
            alias(u, absorbed, canonical) for absorbed, canonical in itertools.pairwise(longer)
        ]
        with pytest.raises(AliasChainTooDeepError) as raised:
            await store.upsert_aliases(u, [*pairs, alias(u, "after", "refusal")])
        assert (raised.value.tenant_id, raised.value.entity_id) == (u, longer[-2])
        assert await store.resolve_entity_ids(u, [eid(longer[0]), eid("after")]) == {
            longer[0]: longer[0],
            "after": "after",
        }
        # In a unit of work the call ends where a loop would: what came before
        # the refusal is written, for the unit of work to commit or roll back.
        w = fresh_tenant()
        pairs = [
            alias(w, absorbed, canonical) for absorbed, canonical in itertools.pairwise(longer)
        ]
        async with store.unit_of_work(fresh_partition()) as uow:
            with pytest.raises(AliasChainTooDeepError):
                await uow.upsert_aliases(w, [*pairs, alias(w, "after", "refusal")])
        assert await store.resolve_entity_ids(w, [eid(longer[0]), eid("after")]) == {
            longer[0]: longer[-2],
            "after": "after",
        }

    async def test_resolution_is_batched_and_keeps_every_id_asked(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_alias(t, alias(t, "b", "a"))
        resolved = await store.resolve_entity_ids(t, [eid("b"), eid("x"), eid("b"), eid("a")])
        assert resolved == {"b": "a", "x": "x", "a": "a"}

    async def test_neither_endpoint_of_an_alias_needs_to_exist(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_alias(t, alias(t, "ghost", "phantom", "merged early"))
        assert await store.resolve_entity_ids(t, [eid("ghost")]) == {"ghost": "phantom"}
        assert await store.find_aliases(t, eid("phantom")) == [
            alias(t, "ghost", "phantom", "merged early")
        ]
        assert await store.find_entities(t) == []

    async def test_an_alias_is_keyed_by_the_absorbed_entity(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_alias(t, alias(t, "b", "first", "one"))
        await store.upsert_alias(t, alias(t, "b", "second", "two"))
        assert await store.resolve_entity_ids(t, [eid("b")]) == {"b": "second"}
        # Keyed on the canonical instead, both rows would survive and resolution
        # alone could not tell.
        assert await store.find_aliases(t, eid("first")) == []
        assert await store.find_aliases(t, eid("second")) == [alias(t, "b", "second", "two")]

    async def test_upserting_an_alias_again_is_idempotent(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        for _ in range(2):
            await store.upsert_alias(t, alias(t, "b", "a", "same"))
        assert await store.find_aliases(t, eid("a")) == [alias(t, "b", "a", "same")]

    async def test_removing_an_alias_restores_the_identity(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_alias(t, alias(t, "b", "a"))
        assert await store.remove_alias(t, eid("b")) is True
        assert await store.remove_alias(t, eid("b")) is False
        assert await store.resolve_entity_ids(t, [eid("b")]) == {"b": "b"}
        assert await store.find_aliases(t, eid("a")) == []
        assert await store.remove_alias(t, eid("never")) is False

    async def test_find_aliases_is_direct_and_ordered(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        # The higher id goes in first, so insertion order is not id order.
        await store.upsert_alias(t, alias(t, "c", "a", "second"))
        await store.upsert_alias(t, alias(t, "b", "a", "first"))
        await store.upsert_alias(t, alias(t, "a", "z", "later"))
        await store.upsert_alias(t, alias(t, "x", "y"))
        assert await store.find_aliases(t, eid("a")) == [
            alias(t, "b", "a", "first"),
            alias(t, "c", "a", "second"),
        ]
        assert await store.find_aliases(t, eid("z")) == [alias(t, "a", "z", "later")]
        assert await store.find_aliases(t, eid("b")) == []

    @pytest.mark.timeout(HANG_TIMEOUT)
    async def test_a_two_cycle_raises_rather_than_hanging(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        # No legal merge closes a cycle; writing the aliases directly is how a
        # corrupt store looks to the adapter.
        await store.upsert_alias(t, alias(t, "a", "b"))
        await store.upsert_alias(t, alias(t, "b", "a"))
        with pytest.raises(AliasCycleError) as raised:
            await store.resolve_entity_ids(t, [eid("a")])
        assert (raised.value.tenant_id, raised.value.entity_id) == (t, "a")

    @pytest.mark.timeout(HANG_TIMEOUT)
    async def test_a_three_cycle_raises_too(self, store: ProjectedGraphStore) -> None:
        # Checking that a hop does not lead straight back to the id it came from
        # catches every two-cycle and misses this one.
        t = fresh_tenant()
        for absorbed, canonical in [("a", "b"), ("b", "c"), ("c", "a")]:
            await store.upsert_alias(t, alias(t, absorbed, canonical))
        for start in "abc":
            with pytest.raises(AliasCycleError):
                await store.resolve_entity_ids(t, [eid(start)])

    @pytest.mark.timeout(HANG_TIMEOUT)
    async def test_an_id_leading_into_a_cycle_raises(self, store: ProjectedGraphStore) -> None:
        # Comparing each hop with the starting id catches both cycles above,
        # entered from a member, and never ends on a walk that starts outside.
        t = fresh_tenant()
        for absorbed, canonical in [("tail", "a"), ("a", "b"), ("b", "c"), ("c", "b")]:
            await store.upsert_alias(t, alias(t, absorbed, canonical))
        with pytest.raises(AliasCycleError) as raised:
            await store.resolve_entity_ids(t, [eid("free"), eid("tail")])
        assert raised.value.tenant_id == t
        # An id off the cycle still resolves on its own.
        assert await store.resolve_entity_ids(t, [eid("free")]) == {"free": "free"}


class PurgeTier:
    async def test_delete_by_tenant_takes_everything_and_sweeps_clean(
        self, store: ProjectedGraphStore
    ) -> None:
        t = fresh_tenant()
        await store.upsert_entities(t, [ent(t, "a"), ent(t, "b")])
        await store.upsert_relationships(t, [rel(t, "a", "b")])
        await store.upsert_alias(t, alias(t, "c", "a"))
        sweep = await store.delete_by_tenant(t)
        assert sweep.tenant_id == t
        assert dict(sweep.remaining) == {"entities": 0, "relationships": 0, "aliases": 0}
        assert sweep.complete
        assert await store.find_entities(t) == []
        assert await store.get_relationships(t) == []

    async def test_deleting_a_tenant_takes_its_aliases(self, store: ProjectedGraphStore) -> None:
        # Surviving aliases would have a replay merge over rows it never created.
        t = fresh_tenant()
        await store.upsert_alias(t, alias(t, "b", "a"))
        await store.delete_by_tenant(t)
        assert await store.find_aliases(t, eid("a")) == []
        assert await store.resolve_entity_ids(t, [eid("b")]) == {"b": "b"}
        assert await store.remove_alias(t, eid("b")) is False

    async def test_deleting_an_empty_tenant_is_a_complete_sweep(
        self, store: ProjectedGraphStore
    ) -> None:
        sweep = await store.delete_by_tenant(fresh_tenant())
        assert sweep.complete

    async def test_a_deleted_tenant_can_be_written_again(self, store: ProjectedGraphStore) -> None:
        t = fresh_tenant()
        await store.upsert_entity(t, ent(t, "a", x=1))
        await store.delete_by_tenant(t)
        await store.upsert_entity(t, ent(t, "a", y=2))
        assert await store.get_entity(t, eid("a")) == ent(t, "a", y=2)
