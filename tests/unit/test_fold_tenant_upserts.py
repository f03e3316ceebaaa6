"""The graph fold writes a run of extractions for all its tenants at once when
the unit of work offers it (``contracts.ports.graph.TenantUpserts``), and
ends in the state that writing tenant by tenant reaches: tenants never touch
each other's rows, and a run's deletes and upserts never touch the same edge.
The memory store offers it; wrapped to hide it, it stands in for a store that
does not."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters.memory.graph import InMemoryGraphStore
from contracts.domain import StreamPartition
from contracts.ids import EntityId, TenantId
from contracts.ports.graph import TenantUpserts
from projections.graph import GraphProjection
from tests.scenarios.harness import to_log
from tests.scenarios.histories import TOPIC_ID, LogBuilder

PARTITION = StreamPartition("events", 0, TOPIC_ID)
WRITES = ("upsert_by_tenant", "upsert_entities", "upsert_relationships", "delete_relationships")


class _Counted:
    """A unit of work that counts its writes, and hides ``upsert_by_tenant``
    unless ``offered``."""

    def __init__(self, inner: Any, calls: list[str], *, offered: bool) -> None:
        self._inner = inner
        self._calls = calls
        self._offered = offered

    def __getattr__(self, name: str) -> Any:
        if name == "upsert_by_tenant" and not self._offered:
            raise AttributeError(name)
        found = getattr(self._inner, name)
        if name not in WRITES:
            return found

        async def counted(*args: Any) -> Any:
            # Counted when called: isinstance against a protocol looks the
            # attribute up without calling it.
            self._calls.append(name)
            return await found(*args)

        return counted


class _CountedStore(InMemoryGraphStore):
    def __init__(self, *, offered: bool) -> None:
        super().__init__()
        self.offered = offered
        self.calls: list[str] = []

    @asynccontextmanager
    async def unit_of_work(self, partition: StreamPartition) -> AsyncIterator[Any]:  # type: ignore[override]
        async with super().unit_of_work(partition) as uow:
            counted = _Counted(uow, self.calls, offered=self.offered)
            assert isinstance(counted, TenantUpserts) is self.offered
            yield counted


TENANTS = ("acme", "globex", "initech")


async def _fold(store: _CountedStore, chunk: int) -> list[Any]:
    log = LogBuilder("tenant-upserts")
    log.extract("acme", "d1", [("a", "A", "Person"), ("b", "B", "Person")])  # 0
    log.extract("initech", "d1", [("a", "A", "Org"), ("b", "B", "Org")])  # 1
    log.merge("acme", "b", ["a"])  # 2
    log.merge("globex", "ghost", ["g"])  # 3: g resolves to an entity that is not
    # acme's a -> x is b -> x, and b is only in the store (read first).
    acme = [("x", "X", "Person"), ("a", "A", "Person", {"v": 1})]
    log.extract("acme", "d2", acme, [("a", "x", "KNOWS")])  # 4
    globex = [("y", "Y", "Org"), ("c", "C", "Org"), ("g", "G", "Org")]
    log.extract("globex", "d2", globex, [("c", "y", "OWNS"), ("c", "g", "OWNS")])  # 5: one dangles
    initech = [("z", "Z", "Org"), ("a", "A", "Org", {"w": 2})]
    log.extract("initech", "d2", initech, [("z", "a", "OWNS")])  # 6
    acme = [("a", "A", "Person", {"u": 3}), ("b", "B", "Person"), ("x", "X", "Person")]
    log.extract("acme", "d3", acme, [("a", "b", "KNOWS"), ("b", "x", "KNOWS")])  # 7: one collapses
    fold = GraphProjection(store, chunk=chunk)
    records = to_log(log.records)
    reports = [await fold.apply(PARTITION, records[:2]), await fold.apply(PARTITION, records[2:])]
    found: list[Any] = [reports]
    for tenant in TENANTS:
        ids = [EntityId(i) for i in ("a", "b", "c", "g", "x", "y", "z", "ghost")]
        found.append(await store.get_entities(TenantId(tenant), ids))
        found.append(await store.get_relationships(TenantId(tenant)))
    return found


#: The second batch's merges and then one run of all three tenants: 10
#: entities and 4 edges written (the collapsed and the dangling one are not),
#: and one delete (the collapsed edge's key).
RUN_ENTITIES, RUN_EDGES = 10, 4


@pytest.mark.parametrize("chunk", [1000, 4, 1])
async def test_a_run_is_written_for_all_its_tenants_in_one_call_per_chunk(chunk: int) -> None:
    at_once, one_by_one = _CountedStore(offered=True), _CountedStore(offered=False)
    assert await _fold(at_once, chunk) == await _fold(one_by_one, chunk)
    # The first batch is one run of two tenants: 4 entities. The last call of
    # a run's entities carries its first edges.
    first, second = -(-4 // chunk), -(-RUN_ENTITIES // chunk) + -(-RUN_EDGES // chunk) - 1
    assert at_once.calls.count("upsert_by_tenant") == first + second
    assert at_once.calls.count("delete_relationships") == 1
    # Tenant by tenant: an entity upsert per tenant and chunk, and so on.
    assert "upsert_by_tenant" not in one_by_one.calls
    if chunk == 1000:
        assert at_once.calls == ["upsert_by_tenant", "delete_relationships", "upsert_by_tenant"]
        assert one_by_one.calls.count("upsert_entities") == 2 + 3
        assert one_by_one.calls.count("upsert_relationships") == 3


async def test_a_run_written_at_once_resolves_dangles_and_collapses_per_tenant() -> None:
    found = await _fold(_CountedStore(offered=True), 1000)
    reports, edges = found[0], {t: found[2 + 2 * i] for i, t in enumerate(TENANTS)}
    # a -> b collapsed onto b; c -> g, which is ghost, dangled.
    assert (reports[1].collapsed, reports[1].dangling) == (1, 1)
    assert {(r.source_id, r.target_id) for r in edges["acme"]} == {("b", "x")}
    assert {(r.source_id, r.target_id) for r in edges["globex"]} == {("c", "y")}
    assert {(r.source_id, r.target_id) for r in edges["initech"]} == {("z", "a")}
    acme_a, initech_a = found[1][0], found[5][0]
    assert (acme_a.properties, initech_a.properties) == ({"v": 1, "u": 3}, {"w": 2})
