"""Units of work over graph writes: a batch's effects and its checkpoint
commit together or not at all, and reads inside see the batch's own writes.

Checkpoint fencing and interleaving belong to the ledger suite
(``adapters.compliance.ledger``); this tier covers every kind of graph write.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from adapters.compliance.graph_support import (
    HANG_TIMEOUT,
    alias,
    eid,
    ent,
    fresh_partition,
    fresh_tenant,
    key,
    rel,
)
from contracts.domain import Entity, RebuildMarker, Relationship
from contracts.errors import AliasCycleError, MissingEntityError, TenantIsolationError
from contracts.ids import EventId, TenantId
from contracts.ports.graph import (
    ProjectedGraphStore,
    ResolutionAhead,
    TenantResolution,
    TenantUpserts,
)
from contracts.ports.ledger import NO_CHECKPOINT, TenantLedgerReads


class Boom(Exception):
    """Raised inside a unit of work to make it roll back."""


async def _before(store: ProjectedGraphStore) -> TenantId:
    """A tenant holding one of everything, for a unit of work to change."""
    t = fresh_tenant()
    await store.upsert_entities(t, [ent(t, "a", v=1), ent(t, "b")])
    await store.upsert_relationships(t, [rel(t, "a", "b")])
    await store.upsert_alias(t, alias(t, "old", "a"))
    return t


async def _assert_untouched(store: ProjectedGraphStore, t: TenantId) -> None:
    assert await store.find_entities(t) == [ent(t, "a", v=1), ent(t, "b")]
    assert await store.get_relationships(t) == [rel(t, "a", "b")]
    assert await store.find_aliases(t, eid("a")) == [alias(t, "old", "a")]
    assert await store.resolve_entity_ids(t, [eid("new")]) == {"new": "new"}


class UnitOfWorkTier:
    async def test_a_unit_of_work_resolves_several_tenants_as_each_alone(
        self, store: ProjectedGraphStore
    ) -> None:
        """``resolve_entity_ids_by_tenant`` (contracts.ports.graph.TenantResolution,
        which a store may offer) answers for each tenant what
        ``resolve_entity_ids`` answers: an id aliased in one tenant is its
        own in another, and aliases written in the unit of work count."""
        a, b, c, p = fresh_tenant(), fresh_tenant(), fresh_tenant(), fresh_partition()
        for absorbed, canonical in [("x", "y"), ("y", "z")]:
            await store.upsert_alias(a, alias(a, absorbed, canonical))
        async with store.unit_of_work(p) as uow:
            if not isinstance(uow, TenantResolution):
                pytest.skip("this store's units of work resolve tenant by tenant")
            await uow.upsert_alias(b, alias(b, "y", "w"))
            asked = {
                a: [eid("x"), eid("y"), eid("q"), eid("x")],
                b: [eid("x"), eid("y")],
                c: [],
            }
            found = await uow.resolve_entity_ids_by_tenant(asked)
            assert found == {a: {"x": "z", "y": "z", "q": "q"}, b: {"x": "x", "y": "w"}, c: {}}
            assert found == {t: await uow.resolve_entity_ids(t, ids) for t, ids in asked.items()}
            assert await uow.resolve_entity_ids_by_tenant({}) == {}

    @pytest.mark.timeout(HANG_TIMEOUT)
    async def test_resolving_several_tenants_raises_on_one_tenants_cycle(
        self, store: ProjectedGraphStore
    ) -> None:
        a, b, p = fresh_tenant(), fresh_tenant(), fresh_partition()
        await store.upsert_alias(a, alias(a, "p", "q"))
        # No legal merge closes a cycle: written directly, as a corrupt store.
        await store.upsert_alias(b, alias(b, "a", "b"))
        await store.upsert_alias(b, alias(b, "b", "a"))
        async with store.unit_of_work(p) as uow:
            if not isinstance(uow, TenantResolution):
                pytest.skip("this store's units of work resolve tenant by tenant")
            with pytest.raises(AliasCycleError) as raised:
                await uow.resolve_entity_ids_by_tenant({a: [eid("p")], b: [eid("a")]})
            assert (raised.value.tenant_id, raised.value.entity_id) == (b, "a")

    async def test_ids_told_ahead_resolve_as_when_asked(self, store: ProjectedGraphStore) -> None:
        """``resolve_ahead`` (contracts.ports.graph.ResolutionAhead, which a
        store may offer) changes no answer: ids told before the unit of work's
        first call resolve as ``resolve_entity_ids`` resolves them, ids not
        told ahead too, and an alias the unit of work writes afterwards
        counts, for ids told ahead as for the others."""
        a, b, p = fresh_tenant(), fresh_tenant(), fresh_partition()
        for absorbed, canonical in [("x", "y"), ("y", "z")]:
            await store.upsert_alias(a, alias(a, absorbed, canonical))
        async with store.unit_of_work(p) as uow:
            if not isinstance(uow, ResolutionAhead) or not isinstance(uow, TenantResolution):
                pytest.skip("this store's units of work are not told ids ahead")
            uow.resolve_ahead({a: [eid("x"), eid("q")], b: [eid("x")]})
            # The graph fold's first call.
            if isinstance(uow, TenantLedgerReads):
                await uow.tenant_ledgers({a: [], b: []})
            else:
                await uow.checkpoint(p)
            told = {a: [eid("x"), eid("q")], b: [eid("x")]}
            assert await uow.resolve_entity_ids_by_tenant(told) == {
                a: {"x": "z", "q": "q"},
                b: {"x": "x"},
            }
            assert await uow.resolve_entity_ids_by_tenant({a: [eid("y"), eid("x")]}) == {
                a: {"y": "z", "x": "z"}
            }
            await uow.upsert_alias(b, alias(b, "x", "w"))
            await uow.upsert_alias(a, alias(a, "q", "x"))
            assert await uow.resolve_entity_ids_by_tenant(told) == {
                a: {"x": "z", "q": "z"},
                b: {"x": "w"},
            }
            assert await uow.resolve_entity_ids(b, [eid("x")]) == {"x": "w"}

    @pytest.mark.timeout(HANG_TIMEOUT)
    async def test_ids_told_ahead_raise_on_a_cycle_when_asked(
        self, store: ProjectedGraphStore
    ) -> None:
        b, p = fresh_tenant(), fresh_partition()
        # No legal merge closes a cycle: written directly, as a corrupt store.
        await store.upsert_alias(b, alias(b, "a", "b"))
        await store.upsert_alias(b, alias(b, "b", "a"))
        async with store.unit_of_work(p) as uow:
            if not isinstance(uow, ResolutionAhead) or not isinstance(uow, TenantResolution):
                pytest.skip("this store's units of work are not told ids ahead")
            uow.resolve_ahead({b: [eid("a"), eid("c")]})
            if isinstance(uow, TenantLedgerReads):
                await uow.tenant_ledgers({b: []})
            with pytest.raises(AliasCycleError) as raised:
                await uow.resolve_entity_ids_by_tenant({b: [eid("c"), eid("a")]})
            assert (raised.value.tenant_id, raised.value.entity_id) == (b, "a")

    async def test_a_unit_of_work_upserts_several_tenants_as_each_alone(
        self, store: ProjectedGraphStore
    ) -> None:
        """``upsert_by_tenant`` (contracts.ports.graph.TenantUpserts, which a
        store may offer) leaves what ``upsert_entities`` and then
        ``upsert_relationships`` of each tenant leave: the same ids in two
        tenants stay apart, properties merge with what is stored and within
        the call, a type changes, and an edge may join an entity of the call
        to one already stored."""
        calls, alone = [fresh_tenant() for _ in range(3)], [fresh_tenant() for _ in range(3)]
        p = fresh_partition()

        def entities(t: TenantId) -> list[Entity]:
            return [ent(t, "x", w=2), ent(t, "y", type_="Org"), ent(t, "x", u=3)]

        def edges(t: TenantId) -> list[Relationship]:
            return [
                rel(t, "x", "y", since=1),
                rel(t, "y", "old"),
                rel(t, "x", "y", "KNOWS", 0.5, until=2),
            ]

        for t in [*calls, *alone]:
            await store.upsert_entities(t, [ent(t, "x", v=1), ent(t, "y"), ent(t, "old")])
        a, b, c = calls
        async with store.unit_of_work(p) as uow:
            if not isinstance(uow, TenantUpserts):
                pytest.skip("this store's units of work upsert tenant by tenant")
            await uow.upsert_by_tenant({a: entities(a), b: entities(b)}, {a: edges(a), c: edges(c)})
            await uow.upsert_by_tenant({}, {})
            await uow.upsert_by_tenant({a: []}, {b: []})
        a2, b2, c2 = alone
        for t in (a2, b2):
            await store.upsert_entities(t, entities(t))
        for t in (a2, c2):
            await store.upsert_relationships(t, edges(t))
        for t, t2 in zip(calls, alone, strict=True):
            found = [replace(e, tenant_id=t2) for e in await store.find_entities(t)]
            assert found == await store.find_entities(t2)
            edges_found = [replace(r, tenant_id=t2) for r in await store.get_relationships(t)]
            assert edges_found == await store.get_relationships(t2)
        assert [e.type for e in await store.find_entities(a)] == ["Person", "Person", "Org"]
        assert len(await store.get_relationships(c)) == 2

    async def test_several_tenants_upsert_no_edge_when_one_misses_an_endpoint(
        self, store: ProjectedGraphStore
    ) -> None:
        a, b, c, p = fresh_tenant(), fresh_tenant(), fresh_tenant(), fresh_partition()
        for t in (b, c):
            await store.upsert_entities(t, [ent(t, "p"), ent(t, "r")])
        async with store.unit_of_work(p) as uow:
            if not isinstance(uow, TenantUpserts):
                pytest.skip("this store's units of work upsert tenant by tenant")
            with pytest.raises(MissingEntityError) as raised:
                await uow.upsert_by_tenant(
                    {a: [ent(a, "x"), ent(a, "y")], b: [ent(b, "q", v=1)]},
                    {
                        a: [rel(a, "x", "y")],
                        c: [rel(c, "p", "q"), rel(c, "s", "r")],
                        b: [rel(b, "p", "z")],
                    },
                )
            assert (raised.value.tenant_id, raised.value.entity_ids) == (c, ("q", "s"))
            # Every entity of the call is written; no edge of it is.
            assert [e.id for e in await uow.find_entities(a)] == ["x", "y"]
            assert await uow.get_entity(b, eid("q")) == ent(b, "q", v=1)
            for t in (a, b, c):
                assert await uow.get_relationships(t) == []

    async def test_several_tenants_upsert_nothing_when_a_value_is_another_tenants(
        self, store: ProjectedGraphStore
    ) -> None:
        a, b, p = fresh_tenant(), fresh_tenant(), fresh_partition()
        async with store.unit_of_work(p) as uow:
            if not isinstance(uow, TenantUpserts):
                pytest.skip("this store's units of work upsert tenant by tenant")
            for entities, edges in [
                ({a: [ent(a, "x")], b: [ent(a, "y")]}, {}),
                ({a: [ent(a, "x"), ent(a, "y")]}, {b: [rel(a, "x", "y")]}),
            ]:
                with pytest.raises(TenantIsolationError):
                    await uow.upsert_by_tenant(entities, edges)
                for t in (a, b):
                    assert await uow.find_entities(t) == []
                    assert await uow.get_relationships(t) == []

    async def test_a_unit_of_work_commits_graph_writes_with_the_checkpoint(
        self, store: ProjectedGraphStore
    ) -> None:
        t, p = fresh_tenant(), fresh_partition()
        async with store.unit_of_work(p) as uow:
            await uow.upsert_entities(t, [ent(t, "a"), ent(t, "b")])
            await uow.upsert_relationships(t, [rel(t, "a", "b")])
            await uow.upsert_alias(t, alias(t, "c", "a"))
            await uow.advance_checkpoint(p, 7)
        assert await store.checkpoint(p) == 7
        assert await store.get_relationships(t) == [rel(t, "a", "b")]
        assert await store.resolve_entity_ids(t, [eid("c")]) == {"c": "a"}

    async def test_reads_inside_a_unit_of_work_see_its_writes_and_outside_do_not(
        self, store: ProjectedGraphStore
    ) -> None:
        t, p = fresh_tenant(), fresh_partition()
        async with store.unit_of_work(p) as uow:
            await uow.upsert_entities(t, [ent(t, "a"), ent(t, "b")])
            # Both endpoints exist only inside the transaction so far.
            await uow.upsert_relationships(t, [rel(t, "a", "b")])
            await uow.upsert_alias(t, alias(t, "c", "a"))
            await uow.advance_checkpoint(p, 3)
            assert [e.id for e in await uow.find_entities(t)] == ["a", "b"]
            assert await uow.neighbors(t, eid("a")) == [ent(t, "b")]
            assert await uow.resolve_entity_ids(t, [eid("c")]) == {"c": "a"}
            assert await uow.checkpoint(p) == 3
            assert await store.find_entities(t) == []
            assert await store.checkpoint(p) == NO_CHECKPOINT
        assert [e.id for e in await store.find_entities(t)] == ["a", "b"]

    async def test_an_exception_leaves_neither_graph_writes_nor_checkpoint(
        self, store: ProjectedGraphStore
    ) -> None:
        t, p = await _before(store), fresh_partition()
        await store.advance_checkpoint(p, 4)
        with pytest.raises(Boom):
            async with store.unit_of_work(p) as uow:
                await uow.upsert_entities(t, [ent(t, "a", v=2), ent(t, "c")])
                await uow.upsert_relationships(t, [rel(t, "b", "c")])
                await uow.delete_relationships(t, [key("a", "b")])
                await uow.upsert_alias(t, alias(t, "new", "a"))
                await uow.remove_alias(t, eid("old"))
                await uow.advance_checkpoint(p, 9)
                raise Boom
        await _assert_untouched(store, t)
        assert await store.checkpoint(p) == 4

    async def test_a_tenant_deleted_inside_a_failed_unit_of_work_is_still_there(
        self, store: ProjectedGraphStore
    ) -> None:
        t, p = await _before(store), fresh_partition()
        with pytest.raises(Boom):
            async with store.unit_of_work(p) as uow:
                assert (await uow.delete_by_tenant(t)).complete
                assert await uow.find_entities(t) == []
                await uow.advance_checkpoint(p, 1)
                raise Boom
        await _assert_untouched(store, t)
        assert await store.checkpoint(p) == NO_CHECKPOINT

    async def test_a_store_error_inside_rolls_back_the_earlier_writes(
        self, store: ProjectedGraphStore
    ) -> None:
        t, p = await _before(store), fresh_partition()
        with pytest.raises(MissingEntityError):
            async with store.unit_of_work(p) as uow:
                await uow.upsert_entity(t, ent(t, "c"))
                await uow.advance_checkpoint(p, 2)
                await uow.upsert_relationships(t, [rel(t, "c", "ghost")])
        assert await store.get_entity(t, eid("c")) is None
        assert await store.checkpoint(p) == NO_CHECKPOINT

    async def test_a_unit_of_work_scopes_each_statement_to_its_tenant(
        self, store: ProjectedGraphStore
    ) -> None:
        t1, t2, p = fresh_tenant(), fresh_tenant(), fresh_partition()
        async with store.unit_of_work(p) as uow:
            await uow.upsert_entity(t1, ent(t1, "a", owner="t1"))
            await uow.upsert_entity(t2, ent(t2, "a", owner="t2"))
            with pytest.raises(TenantIsolationError):
                await uow.upsert_entity(t1, ent(t2, "b"))
            assert await uow.get_entity(t1, eid("a")) == ent(t1, "a", owner="t1")
            await uow.advance_checkpoint(p, 0)
        assert await store.get_entity(t1, eid("a")) == ent(t1, "a", owner="t1")
        assert await store.get_entity(t2, eid("a")) == ent(t2, "a", owner="t2")
        assert await store.get_entity(t1, eid("b")) is None
        assert await store.get_entity(t2, eid("b")) is None

    async def test_units_of_work_follow_one_another(self, store: ProjectedGraphStore) -> None:
        t, p = fresh_tenant(), fresh_partition()
        for offset, name in enumerate(["first", "second", "third"]):
            async with store.unit_of_work(p) as uow:
                previous = await uow.get_entity(t, eid("a"))
                assert (previous is None) == (offset == 0)
                await uow.upsert_entity(t, Entity(t, eid("a"), name, "Person", {name: offset}))
                await uow.advance_checkpoint(p, offset)
        assert await store.get_entity(t, eid("a")) == ent(
            t, "a", "third", first=0, second=1, third=2
        )
        assert await store.checkpoint(p) == 2

    async def test_a_unit_of_work_cannot_be_used_after_it_ends(
        self, store: ProjectedGraphStore
    ) -> None:
        """Not even for the ledger calls a store may answer without a statement."""
        t, p = fresh_tenant(), fresh_partition()
        async with store.unit_of_work(p) as uow:
            await uow.advance_checkpoint(p, 1)
        for call in (
            lambda: uow.checkpoint(p),
            lambda: uow.rebuild_markers(p),
            lambda: uow.advance_checkpoint(p, 2),
            lambda: uow.record_applied_events(t, [EventId("e")], datetime.now(UTC)),
            lambda: uow.applied_event_ids(t, [EventId("e")]),
            lambda: uow.upsert_entity(t, ent(t, "a")),
        ):
            with pytest.raises(RuntimeError, match="has ended"):
                await call()
        assert await store.checkpoint(p) == 1
        assert await store.applied_event_ids(t, [EventId("e")]) == set()

    async def test_a_direct_marker_write_waits_for_the_partitions_unit_of_work(
        self, store: ProjectedGraphStore
    ) -> None:
        """A unit of work's partition (checkpoint and rebuild markers) changes
        only through it until it ends: another writer of a marker waits. Held
        from the unit of work's first call (a store may take its lock with
        its first statement: the Neo4j one does)."""
        t, p = fresh_tenant(), fresh_partition()
        marker = RebuildMarker(t, p, start_offset=0, end_offset=9, applied_through=2)
        async with store.unit_of_work(p) as uow:
            assert await uow.rebuild_markers(p) == []
            writer = asyncio.create_task(store.put_rebuild_marker(marker))
            await asyncio.sleep(0.5)
            assert not writer.done()
            assert await uow.rebuild_markers(p) == []
            await uow.advance_checkpoint(p, 0)
        await asyncio.wait_for(writer, timeout=30)
        assert await store.rebuild_markers(p) == [marker]
        async with store.unit_of_work(p) as uow:
            assert await uow.checkpoint(p) == 0
            closer = asyncio.create_task(store.close_rebuild_marker(t, p))
            await asyncio.sleep(0.5)
            assert not closer.done()
            assert await uow.rebuild_markers(p) == [marker]
        assert await asyncio.wait_for(closer, timeout=30) is True
        assert await store.rebuild_markers(p) == []
