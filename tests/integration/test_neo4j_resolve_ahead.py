"""A Neo4j unit of work told the ids its fold will resolve walks their
aliases in its first statement (``LOCK_WITH_TENANT_LEDGERS_AND_RESOLVE``) and
answers the resolution from that walk, without a statement of its own, until
it writes (contracts.ports.graph.ResolutionAhead; the compliance suite's
``test_ids_told_ahead_resolve_as_when_asked`` checks the answers). Counted
here: the statements sent.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from adapters.compliance.graph_support import alias, eid, fresh_partition, fresh_tenant
from adapters.neo4j import Neo4jGraphStore
from adapters.neo4j import cypher as q
from adapters.neo4j import ledger_cypher as lq
from adapters.neo4j.runner import TransactionRunner

pytestmark = pytest.mark.services


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    queries: list[str] = []
    send = TransactionRunner._send

    async def counted(self: TransactionRunner, query: Any, params: Any, blame: Any) -> Any:
        queries.append(query)
        return await send(self, query, params, blame)

    monkeypatch.setattr(TransactionRunner, "_send", counted)
    return queries


async def test_ids_told_ahead_are_resolved_by_the_first_statement(
    store: Neo4jGraphStore, sent: list[str]
) -> None:
    a, p = fresh_tenant(), fresh_partition()
    await store.upsert_alias(a, alias(a, "x", "y"))
    async with store.unit_of_work(p) as uow:
        uow.resolve_ahead({a: [eid("x"), eid("q")]})
        await uow.tenant_ledgers({a: []})
        assert await uow.resolve_entity_ids_by_tenant({a: [eid("q"), eid("x")]}) == {
            a: {"x": "y", "q": "q"}
        }
        assert sent == [lq.LOCK_WITH_TENANT_LEDGERS_AND_RESOLVE]
        # An id not told ahead is asked with a statement of its own.
        assert await uow.resolve_entity_ids_by_tenant({a: [eid("y")]}) == {a: {"y": "y"}}
        assert sent[1:] == [q.RESOLVE_BY_TENANT]
        # So is every id once the unit of work has written.
        await uow.upsert_alias(a, alias(a, "q", "x"))
        sent.clear()
        assert await uow.resolve_entity_ids_by_tenant({a: [eid("q")]}) == {a: {"q": "y"}}
        assert sent == [q.RESOLVE_BY_TENANT]


async def test_a_unit_of_work_told_nothing_ahead_locks_as_before(
    store: Neo4jGraphStore, sent: list[str]
) -> None:
    a, p = fresh_tenant(), fresh_partition()
    async with store.unit_of_work(p) as uow:
        await uow.tenant_ledgers({a: []})
        assert await uow.resolve_entity_ids_by_tenant({a: [eid("x")]}) == {a: {"x": "x"}}
    assert sent[:2] == [lq.LOCK_WITH_TENANT_LEDGERS, q.RESOLVE_BY_TENANT]


async def test_a_unit_across_partitions_takes_its_locks_ledgers_and_walks_in_one_statement(
    store: Neo4jGraphStore, sent: list[str]
) -> None:
    """A unit of work across partitions (ADR 0024): its first statement locks
    every partition, reads the tenant ledgers and walks the ids told ahead;
    its ledger write carries each partition's checkpoint."""
    a, b = fresh_tenant(), fresh_tenant()
    p = fresh_partition()
    q2 = replace(p, partition=p.partition + 1)
    await store.upsert_alias(a, alias(a, "x", "y"))
    await store.advance_checkpoint(q2, 4)
    sent.clear()
    async with store.unit_of_work_across([q2, p]) as uow:
        uow.resolve_ahead({a: [eid("x")], b: [eid("x")]})
        await uow.tenant_ledgers({a: [], b: []})
        assert await uow.resolve_entity_ids_by_tenant({a: [eid("x")], b: [eid("x")]}) == {
            a: {"x": "y"},
            b: {"x": "x"},
        }
        assert [await uow.checkpoint(part) for part in (p, q2)] == [-1, 4]
        await uow.advance_checkpoint(p, 0)
        await uow.advance_checkpoint(q2, 5)
    assert sent == [lq.LOCK_PARTITIONS_WITH_TENANT_LEDGERS_AND_RESOLVE, lq.WRITE_DEFERRED]
    assert [await store.checkpoint(part) for part in (p, q2)] == [0, 5]
