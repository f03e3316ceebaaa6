"""The Neo4j adapter's pure parts, without a server: the order key, row
building, what each driver error becomes, and which ledger calls of a unit of
work cost a statement."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from neo4j.exceptions import (
    IncompleteCommit,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
)

from adapters.neo4j import cypher as graph_q
from adapters.neo4j import ledger_cypher as q
from adapters.neo4j.ledger import Neo4jLedger
from adapters.neo4j.rows import (
    decode_properties,
    edge_rows,
    encode_properties,
    merged_edges_in_order,
    merged_in_order,
    order_key,
)
from adapters.neo4j.runner import Blame, TransactionRunner, translate
from adapters.neo4j.view import Neo4jGraphView
from contracts.domain import Entity, RebuildMarker, Relationship, StreamPartition
from contracts.errors import (
    CheckpointRegressionError,
    PermanentStoreError,
    TopicRecreatedError,
    TransactionEndedError,
    TransientStoreError,
)
from contracts.ids import EntityId, EventId, TenantId

T = TenantId("t-unit")
_ids = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), min_size=1)


def _utf16(text: str) -> bytes:
    # How Java, and so Neo4j, compares strings: by UTF-16 code unit.
    return text.encode("utf-16-be")


@given(a=_ids, b=_ids)
def test_the_order_key_sorts_by_utf16_unit_as_ids_sort_by_code_point(a: str, b: str) -> None:
    assert (_utf16(order_key(a)) < _utf16(order_key(b))) == (a < b)


def test_utf16_order_differs_from_code_point_order_without_the_key() -> None:
    astral, high = "\U0001f600", "\uff21"
    assert high < astral and _utf16(astral) < _utf16(high)
    assert _utf16(order_key(high)) < _utf16(order_key(astral))
    assert order_key("plain-ascii id") == "plain-ascii id"


def test_properties_are_prefixed_and_come_back_unprefixed() -> None:
    props = {"name": "x", "n": 1, "f": 1.0, "b": True, "empty": []}
    stored = {"tenant_id": T, "id": "e", "name": "sys", **encode_properties(props, "entity", "e")}
    assert decode_properties(stored) == props


def test_a_key_added_after_construction_is_refused() -> None:
    entity = Entity(T, EntityId("e"), "E", "Thing", {})
    entity.properties["not a key"] = 1
    with pytest.raises(ValueError, match=r"^entity 'e': property key 'not a key' must match"):
        encode_properties(entity.properties, "entity", entity.id)
    edge = Relationship(T, EntityId("a"), EntityId("b"), "R", 1.0, {})
    edge.properties["bad key"] = 1
    with pytest.raises(ValueError, match=r"^relationship \('a', 'b', 'R'\): property key 'bad"):
        encode_properties(edge.properties, "relationship", edge.key)


def test_repeated_entities_fold_in_order_and_sort_by_id() -> None:
    batch = [
        Entity(T, EntityId("b"), "First", "Thing", {"x": 1}),
        Entity(T, EntityId("a"), "A", "Thing"),
        Entity(T, EntityId("b"), "Second", "Thing", {"y": 2}),
    ]
    merged = merged_in_order(batch)
    assert [e.id for e in merged] == ["a", "b"]
    assert merged[1] == Entity(T, EntityId("b"), "Second", "Thing", {"x": 1, "y": 2})


def test_edge_rows_address_each_endpoint_once() -> None:
    edges = merged_edges_in_order(
        [
            Relationship(T, EntityId("b"), EntityId("a"), "KNOWS", 0.5, {"w": 1}),
            Relationship(T, EntityId("a"), EntityId("c"), "KNOWS"),
            Relationship(T, EntityId("b"), EntityId("a"), "KNOWS", 0.75, {"v": 2}),
        ]
    )
    endpoints, rows = edge_rows(edges)
    assert endpoints == ["a", "b", "c"]
    assert [(endpoints[r["s"]], endpoints[r["t"]]) for r in rows] == [("a", "c"), ("b", "a")]
    assert rows[1]["confidence"] == 0.75 and rows[1]["props"] == {"p_w": 1, "p_v": 2}


def _server(code: str) -> Neo4jError:
    return Neo4jError._hydrate_neo4j(code=code, message="from the server")


@pytest.mark.parametrize(
    "error",
    [
        _server("Neo.TransientError.Transaction.DeadlockDetected"),
        _server("Neo.TransientError.General.DatabaseUnavailable"),
        ServiceUnavailable("no route"),
        SessionExpired("gone"),
        IncompleteCommit("unknown outcome"),
    ],
    ids=["deadlock", "unavailable", "service-unavailable", "session-expired", "incomplete"],
)
def test_transient_failures_become_transient_store_errors(error: Exception) -> None:
    translated = translate(error, Blame("upsert"))  # type: ignore[arg-type]
    assert isinstance(translated, TransientStoreError)
    assert not isinstance(translated, TransactionEndedError)


@pytest.mark.parametrize(
    "code",
    [
        "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration",
        "Neo.ClientError.Transaction.TransactionTimedOut",
        "Neo.ClientError.Transaction.Terminated",
        "Neo.ClientError.Transaction.LockClientStopped",
    ],
)
def test_a_transaction_the_server_ended_is_transient_and_says_so(code: str) -> None:
    """The driver calls these client errors, yet nothing of the unit of work
    was committed (ADR 0021): retried, and the projector's next pass takes
    fewer records."""
    translated = translate(_server(code), Blame("upsert"))
    assert isinstance(translated, TransactionEndedError)
    assert "REDSTRING_TRANSACTION_TIMEOUT_S" in str(translated)


def test_a_refused_value_is_permanent_and_names_the_tenant_and_ids() -> None:
    blame = Blame("neo4j.graph.upsert_entities", "t-acme", [f"e{i}" for i in range(25)])
    error = translate(_server("Neo.ClientError.Statement.TypeError"), blame)
    assert isinstance(error, PermanentStoreError)
    assert "t-acme" in str(error) and "'e0'" in str(error) and "and 5 more" in str(error)


def test_other_server_errors_pass_through_unchanged() -> None:
    error = _server("Neo.DatabaseError.General.UnknownError")
    assert translate(error, Blame("x")) is error


P = StreamPartition("events", 3, "topic-1")


class _Recorder:
    """A runner that records statements; the lock statement finds checkpoint 3
    and one marker."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, dict[str, Any]]] = []

    async def run(
        self, query: str, params: dict[str, Any], *, write: bool, blame: Blame
    ) -> list[Any]:
        self.statements.append((query, params))
        marker = {
            "tenant_id": T,
            "topic": P.topic,
            "partition": P.partition,
            "topic_id": P.topic_id,
            "start_offset": 0,
            "end_offset": 9,
            "applied_through": 1,
            "state": "rebuilding",
        }
        locked = {"offset": 3, "topic_id": P.topic_id, "markers": [marker]}
        if query == q.LOCK_PARTITION:
            return [locked]
        if query == q.LOCK_WITH_TENANT_LEDGERS:
            # Each tenant's first id is applied already.
            return [
                {**locked, "tenant": row["tenant"], "stone": None, "applied": row["ids"][:1]}
                for row in params["tenants"]
            ]
        if "missing" in query:  # an edge upsert: every endpoint found
            return [{"missing": []}]
        return []

    async def defer(
        self, query: str, params: dict[str, Any], blame: Blame, joins: dict[str, str]
    ) -> None:
        await self.run(query, params, write=True, blame=blame)


#: The row of ``P``'s checkpoint, moved to 5, in a deferred ledger write.
MOVED_TO_5 = {"topic": P.topic, "partition": P.partition, "offset": 5, "topic_id": P.topic_id}


async def _locked() -> tuple[_Recorder, Neo4jLedger]:
    runner = _Recorder()
    ledger = Neo4jLedger(runner)
    await ledger.lock_partition(P)
    return runner, ledger


async def test_a_unit_of_work_reads_and_writes_its_partitions_ledger_in_two_statements() -> None:
    runner, ledger = await _locked()
    now = datetime.now(UTC)
    assert await ledger.checkpoint(P) == 3
    assert await ledger.rebuild_markers(P) == [RebuildMarker(T, P, 0, 9, 1)]
    await ledger.record_applied_events(T, [EventId("b"), EventId("a")], now)
    await ledger.record_applied_events(TenantId("t-other"), [EventId("a")], now)
    later = now + timedelta(seconds=1)
    await ledger.record_applied_events(T, [EventId("c"), EventId("b")], later)
    await ledger.advance_checkpoint(P, 5)
    assert await ledger.checkpoint(P) == 5
    assert await ledger.applied_event_ids(T, [EventId("a"), EventId("d")]) == {"a"}
    assert await ledger.applied_event_ids(T, [EventId("a"), EventId("b")]) == {"a", "b"}
    # "d" is not recorded here: only that read reaches the store.
    assert [query for query, _ in runner.statements] == [q.LOCK_PARTITION, q.APPLIED_EVENT_IDS]
    assert runner.statements[-1][1]["ids"] == ["d"]

    await ledger.write_deferred()
    query, params = runner.statements[-1]
    assert query == q.WRITE_DEFERRED
    assert params["checkpoints"] == [MOVED_TO_5]
    # One group per tenant and time; an id recorded twice keeps the later time.
    assert params["applied"] == [
        {"tenant": "t-other", "applied_at": now, "ids": ["a"]},
        {"tenant": T, "applied_at": now, "ids": ["a"]},
        {"tenant": T, "applied_at": later, "ids": ["b", "c"]},
    ]
    await ledger.write_deferred()  # nothing is left to write
    assert len(runner.statements) == 3

    ledger.release_partition()  # the unit of work ended: calls reach the runner
    await ledger.checkpoint(P)
    assert runner.statements[-1][0] == q.READ_CHECKPOINT


async def test_a_unit_of_work_refuses_a_bad_advance_at_the_call_and_defers_nothing() -> None:
    runner, ledger = await _locked()
    with pytest.raises(CheckpointRegressionError):
        await ledger.advance_checkpoint(P, 2)
    with pytest.raises(TopicRecreatedError):
        await ledger.advance_checkpoint(StreamPartition(P.topic, P.partition, "topic-2"), 4)
    with pytest.raises(TopicRecreatedError):
        await ledger.checkpoint(StreamPartition(P.topic, P.partition, "topic-2"))
    await ledger.advance_checkpoint(P, 3)  # equal: nothing changes
    await ledger.write_deferred()
    assert [query for query, _ in runner.statements] == [q.LOCK_PARTITION]


async def test_other_partitions_are_read_from_the_store() -> None:
    runner, ledger = await _locked()
    other = StreamPartition(P.topic, P.partition + 1, P.topic_id)
    assert await ledger.checkpoint(other) == -1
    assert await ledger.rebuild_markers(other) == []
    assert [query for query, _ in runner.statements[1:]] == [q.READ_CHECKPOINT, q.REBUILD_MARKERS]


async def test_a_lazily_locked_unit_of_work_takes_its_lock_with_the_tenant_ledgers() -> None:
    """The fold's first call reads the tenant ledgers: the lock comes with them
    in one statement, and the partition is then answered from memory."""
    runner = _Recorder()
    ledger = Neo4jLedger(runner)
    ledger.lock_on_first_statement(P)
    assert await ledger.tenant_ledgers({}) == {}
    assert runner.statements == []  # nothing asked, nothing sent: the lock waits
    other = TenantId("t-other")
    found = await ledger.tenant_ledgers({T: [EventId("b"), EventId("a")], other: []})
    assert found == {T: (None, {"a"}), other: (None, set())}
    [(query, params)] = runner.statements
    assert query == q.LOCK_WITH_TENANT_LEDGERS
    assert (params["topic"], params["partition"]) == (P.topic, P.partition)
    assert params["tenants"] == [{"tenant": other, "ids": []}, {"tenant": T, "ids": ["a", "b"]}]
    assert await ledger.checkpoint(P) == 3
    assert await ledger.rebuild_markers(P) == [RebuildMarker(T, P, 0, 9, 1)]
    await ledger.record_applied_events(T, [EventId("c")], datetime.now(UTC))
    assert await ledger.applied_event_ids(T, [EventId("c")]) == {"c"}
    assert len(runner.statements) == 1  # all of it from the locked partition
    await ledger.tenant_ledgers({T: [EventId("d")]})  # held: a plain read now
    assert runner.statements[-1][0] == q.TENANT_LEDGERS


def _first_calls() -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "checkpoint": lambda v: v.checkpoint(P),
        "markers": lambda v: v.rebuild_markers(P),
        "advance": lambda v: v.advance_checkpoint(P, 4),
        "record applied": lambda v: v.record_applied_events(T, [EventId("a")], now),
        "applied ids": lambda v: v.applied_event_ids(T, [EventId("a")]),
        "put marker": lambda v: v.put_rebuild_marker(RebuildMarker(T, P, 0, 9, 2)),
        "another partition": lambda v: v.checkpoint(StreamPartition(P.topic, 9, P.topic_id)),
        "upsert": lambda v: v.upsert_entities(T, [Entity(T, EntityId("e"), "E", "Thing")]),
        "resolve": lambda v: v.resolve_entity_ids(T, [EntityId("e")]),
        "resolve by tenant": lambda v: v.resolve_entity_ids_by_tenant({T: [EntityId("e")]}),
        "upsert by tenant": lambda v: v.upsert_by_tenant(
            {T: [Entity(T, EntityId("e"), "E", "Thing")]}, {}
        ),
    }


@pytest.mark.parametrize("call", sorted(_first_calls()))
async def test_a_lazily_locked_unit_of_work_locks_before_any_other_first_call(call: str) -> None:
    runner = _Recorder()
    view = Neo4jGraphView(runner)
    view.lock_on_first_statement(P)
    await _first_calls()[call](view)
    assert runner.statements[0][0] == q.LOCK_PARTITION
    assert [query for query, _ in runner.statements].count(q.LOCK_PARTITION) == 1
    await view.write_deferred()
    view.release_partition()
    assert [query for query, _ in runner.statements].count(q.LOCK_PARTITION) == 1


async def test_a_lazily_locked_unit_of_work_that_sends_nothing_takes_no_lock() -> None:
    runner = _Recorder()
    ledger = Neo4jLedger(runner)
    ledger.lock_on_first_statement(P)
    await ledger.write_deferred()
    ledger.release_partition()
    await ledger.checkpoint(P)  # ended: read from the store, unlocked
    assert [query for query, _ in runner.statements] == [q.READ_CHECKPOINT]


class _Tx:
    """An explicit transaction that records what reaches the server."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def run(self, query: str, params: dict[str, Any]) -> Any:
        # Every statement's parameters go as the one map $p (runner.quiet).
        assert params.keys() == {"p"}, params
        self.sent.append((query, params["p"]))

        async def records() -> Any:
            for record in [{"q": query}]:
                yield record

        return records()

    async def commit(self) -> None:
        self.sent.append(("COMMIT", {}))

    async def rollback(self) -> None:
        self.sent.append(("ROLLBACK", {}))


_JOINS = {"SECOND": "FIRST+SECOND"}


def _deferring() -> tuple[_Tx, TransactionRunner]:
    tx = _Tx()
    return tx, TransactionRunner(tx)  # type: ignore[arg-type]


async def test_a_deferred_write_joins_the_named_next_statement_of_its_tenant() -> None:
    tx, runner = _deferring()
    await runner.defer("FIRST", {"tenant": T, "a": 1}, Blame("first"), _JOINS)
    assert tx.sent == []
    records = await runner.run("SECOND", {"tenant": T, "b": 2}, write=True, blame=Blame("2nd"))
    assert tx.sent == [("FIRST+SECOND", {"tenant": T, "a": 1, "b": 2})]
    assert records == [{"q": "FIRST+SECOND"}]
    await runner.commit()
    assert tx.sent[1:] == [("COMMIT", {})]


async def test_a_deferred_write_runs_alone_before_anything_else() -> None:
    tx, runner = _deferring()
    await runner.defer("FIRST", {"tenant": T, "a": 1}, Blame("first"), _JOINS)
    await runner.run("OTHER", {"tenant": T}, write=False, blame=Blame("read"))
    # Another tenant's statement, or one sharing a parameter name, is no join.
    await runner.defer("FIRST", {"tenant": T, "a": 1}, Blame("first"), _JOINS)
    await runner.run("SECOND", {"tenant": TenantId("t-other")}, write=True, blame=Blame("2"))
    await runner.defer("FIRST", {"tenant": T, "a": 1}, Blame("first"), _JOINS)
    await runner.run("SECOND", {"tenant": T, "a": 2}, write=True, blame=Blame("2"))
    # A second deferral sends the first; commit sends the last.
    await runner.defer("FIRST", {"tenant": T, "a": 1}, Blame("first"), _JOINS)
    await runner.defer("FIRST", {"tenant": T, "a": 3}, Blame("first"), _JOINS)
    await runner.commit()
    assert [query for query, _ in tx.sent] == [
        "FIRST", "OTHER", "FIRST", "SECOND", "FIRST", "SECOND", "FIRST", "FIRST", "COMMIT"
    ]  # fmt: skip
    assert tx.sent[-2][1]["a"] == 3


class _LockingTx(_Tx):
    """The lock statement finds checkpoint 3, an edge upsert its ends, and a
    read of applied ids every id it asks for."""

    async def run(self, query: str, params: dict[str, Any]) -> Any:
        assert params.keys() == {"p"}, params
        params = params["p"]
        self.sent.append((query, params))
        found = [{"offset": 3, "topic_id": P.topic_id, "markers": [], "missing": []}]
        if query == q.APPLIED_EVENT_IDS:  # every id asked was written
            found = [{"id": event_id} for event_id in params["ids"]]

        async def records() -> Any:
            for record in found:
                yield record

        return records()


async def _with_a_deferred_ledger() -> tuple[_LockingTx, Neo4jGraphView, datetime]:
    """A lazily locked unit of work that has recorded event "a" and moved
    its checkpoint to 5, nothing sent yet."""
    tx = _LockingTx()
    view = Neo4jGraphView(TransactionRunner(tx))  # type: ignore[arg-type]
    view.lock_on_first_statement(P)
    now = datetime.now(UTC)
    await view.record_applied_events(T, [EventId("a")], now)
    await view.advance_checkpoint(P, 5)
    return tx, view, now


async def test_a_unit_of_works_ledger_write_rides_with_its_first_entity_upsert() -> None:
    """The fold records the applied ids and moves the checkpoint before the
    effects: the entity upsert, joined to its edges, carries them, and
    nothing is left to write before commit."""
    tx, view, now = await _with_a_deferred_ledger()
    entity, other = Entity(T, EntityId("e"), "E", "Thing"), Entity(T, EntityId("f"), "F", "Thing")
    await view.upsert_entities(T, [entity, other])
    await view.upsert_relationships(T, [Relationship(T, EntityId("e"), EntityId("f"), "IS")])
    await view.write_deferred()
    assert [query for query, _ in tx.sent] == [
        q.LOCK_PARTITION,
        graph_q.LEDGER_AND_UPSERT_ENTITIES_AND_RELATIONSHIPS,
    ]
    params = tx.sent[1][1]
    assert params["checkpoints"] == [MOVED_TO_5]
    assert params["applied"] == [{"tenant": T, "applied_at": now, "ids": ["a"]}]
    assert [row["id"] for row in params["entities"]] == ["e", "f"]
    assert params["endpoints"] == ["e", "f"]
    assert await view.checkpoint(P) == 5
    assert await view.applied_event_ids(T, [EventId("a")]) == {"a"}  # read from the store
    assert tx.sent[-1][0] == q.APPLIED_EVENT_IDS
    # Recorded later: the next upsert carries it; alone, it is sent alone.
    await view.record_applied_events(T, [EventId("b")], now)
    await view.upsert_entities(T, [entity])
    await view.record_applied_events(T, [EventId("c")], now)
    await view.write_deferred()
    assert [query for query, _ in tx.sent[3:]] == [
        graph_q.LEDGER_AND_UPSERT_ENTITIES,
        q.WRITE_DEFERRED,
    ]
    assert tx.sent[3][1]["applied"][0]["ids"] == ["b"]
    assert tx.sent[4][1]["applied"][0]["ids"] == ["c"]


async def test_several_tenants_upserts_carry_the_ledger_and_address_their_own_ends() -> None:
    """``upsert_by_tenant`` is one statement: it carries the deferred ledger
    write like the entity upsert, names each row's tenant, and its edge rows
    address the endpoints of their own tenant."""
    tx, view, _ = await _with_a_deferred_ledger()
    u = TenantId("globex")
    await view.upsert_by_tenant(
        {
            T: [Entity(T, EntityId("e"), "E", "Thing"), Entity(T, EntityId("f"), "F", "Thing")],
            u: [Entity(u, EntityId("g"), "G", "Thing")],
        },
        {
            T: [Relationship(T, EntityId("e"), EntityId("f"), "IS")],
            u: [Relationship(u, EntityId("h"), EntityId("e"), "IS")],
        },
    )
    await view.upsert_by_tenant({}, {u: []})  # nothing to write: nothing sent
    await view.write_deferred()
    assert [query for query, _ in tx.sent] == [
        q.LOCK_PARTITION,
        graph_q.LEDGER_AND_UPSERT_BY_TENANT,
    ]
    params = tx.sent[1][1]
    assert params["checkpoints"][0]["offset"] == 5
    assert params["applied"][0]["ids"] == ["a"]
    assert [(row["tenant"], row["id"]) for row in params["entities"]] == [
        (T, "e"),
        (T, "f"),
        (u, "g"),
    ]
    ends = [(end["tenant"], end["id"]) for end in params["endpoints"]]
    assert ends == [(T, "e"), (T, "f"), (u, "e"), (u, "h")]
    edges = [(row["tenant"], ends[row["s"]], ends[row["t"]]) for row in params["rows"]]
    assert edges == [(T, (T, "e"), (T, "f")), (u, (u, "h"), (u, "e"))]
    # Only an edge whose two ends this statement writes skips the lock: u's
    # "e" is not T's, and u's "h" is not written here.
    assert [row["held"] for row in params["rows"]] == [True, False]
    await view.upsert_by_tenant({T: [Entity(T, EntityId("e"), "E", "Thing")]}, {})
    assert tx.sent[-1][0] == graph_q.UPSERT_BY_TENANT  # the ledger went with the first
    # Made from the per-tenant statements: every tenant is a row's.
    assert "$p.tenant" not in graph_q.UPSERT_BY_TENANT
    assert graph_q.UPSERT_BY_TENANT.count("row.tenant") == 3  # entities, two edge creates


async def test_a_rolled_back_unit_of_work_never_sends_its_deferred_write() -> None:
    tx, runner = _deferring()
    await runner.defer("FIRST", {"tenant": T}, Blame("first"), _JOINS)
    await runner.rollback()
    assert tx.sent == [("ROLLBACK", {})]
