"""A store opened read-only refuses every write before it reaches the
database, and a read-only Neo4j open checks the schema rules instead of
creating them (docs/adr/0016-read-only-open.md; issue 17, item 2). Against
the real databases: tests/integration/test_read_only_open.py."""

from __future__ import annotations

import inspect
import re
from types import ModuleType
from typing import Any

import pytest
from neo4j import RoutingControl

import adapters.neo4j.store as neo4j_store
import adapters.pgvector.store as pg_store
from adapters.neo4j import Neo4jGraphStore
from adapters.neo4j.read_only import check_schema, check_version
from adapters.neo4j.schema import GRAPH_SCHEMA_VERSION, SCHEMA
from adapters.pgvector import PgVectorStore, RetryPolicy
from adapters.pgvector.sql import Statements
from contracts.domain import EmbeddingIdentity, StreamPartition, VectorRecord
from contracts.errors import ReadOnlyStoreError, StoreSchemaError
from contracts.ids import EntityId, TenantId

P = StreamPartition("events", 0, "id-1")


class _Untouchable:
    """A pool or driver that fails the test when anything is asked of it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a read-only store reached its database ({name})")


def _writes(module: ModuleType) -> list[str]:
    return re.findall(r"^    (\w+) = writes\(", inspect.getsource(module), re.MULTILINE)


def _pg() -> PgVectorStore:
    return PgVectorStore(
        _Untouchable(),  # type: ignore[arg-type]
        Statements("redstring"),
        EmbeddingIdentity("model", 2, "", ""),
        approximate=False,
        retry=RetryPolicy(),
        read_only=True,
    )


def _graph() -> Neo4jGraphStore:
    return Neo4jGraphStore(_Untouchable(), read_only=True)  # type: ignore[arg-type]


STORES = [(_pg, pg_store, ["delete_by_tenant"]), (_graph, neo4j_store, [])]


@pytest.mark.parametrize(("make", "module", "more"), STORES, ids=["pgvector", "neo4j"])
async def test_every_write_is_refused_without_reaching_the_database(
    make: Any, module: ModuleType, more: list[str]
) -> None:
    store = make()
    names = _writes(module) + more
    assert len(names) > 5
    for name in names:
        method = getattr(store, name)
        parameters = inspect.signature(method).parameters
        arguments = [TenantId("acme") if p == "tenant_id" else None for p in parameters]
        with pytest.raises(ReadOnlyStoreError, match=f"read-only and refuses {name}"):
            await method(*arguments)
    with pytest.raises(ReadOnlyStoreError, match="unit_of_work"):
        async with store.unit_of_work(P):
            pass
    assert store.read_only


async def test_a_vector_write_with_records_is_refused() -> None:
    record = VectorRecord(TenantId("acme"), EntityId("ada"), (1.0, 0.0))
    with pytest.raises(ReadOnlyStoreError, match="upsert"):
        await _pg().upsert_many(TenantId("acme"), [record])


class _Driver:
    """Answers the version query with ``version`` and the index listing with ``rules``."""

    def __init__(self, rules: dict[str, str], version: int | None = GRAPH_SCHEMA_VERSION) -> None:
        self.rules = rules
        self.version = version
        self.asked: list[dict[str, Any]] = []

    async def execute_query(self, query: str, **kwargs: Any) -> tuple[Any, None, None]:
        self.asked.append(kwargs)
        if "RedstringSchema" in query:
            state = {"version": self.version, "has_entities": self.version is not None}
            return [{**state, "cursor_tenant": None, "cursor_id": None}], None, None
        return [{"name": n, "state": s} for n, s in self.rules.items()], None, None


async def test_a_graph_with_every_rule_online_is_readable() -> None:
    driver = _Driver(dict.fromkeys(SCHEMA, "ONLINE"))
    await check_schema(driver, "neo4j")  # type: ignore[arg-type]
    assert [a["routing_"] for a in driver.asked] == [RoutingControl.READ, RoutingControl.READ]


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({}, r"not initialised.*redstring migrate"),
        (
            {"redstring_entity_key": "ONLINE"},
            r"schema rules missing: redstring_alias_edge_tenant, redstring_alias_key",
        ),
        (
            {**dict.fromkeys(SCHEMA, "ONLINE"), "redstring_entity_key": "POPULATING"},
            r"not online: redstring_entity_key \(POPULATING\)",
        ),
    ],
)
async def test_a_graph_without_its_rules_is_refused(rules: dict[str, str], message: str) -> None:
    with pytest.raises(StoreSchemaError, match=message):
        await check_schema(_Driver(rules), "neo4j")  # type: ignore[arg-type]


def test_the_graph_version_is_the_one_this_code_reads() -> None:
    assert GRAPH_SCHEMA_VERSION == 2
    check_version("graph", None)  # an empty graph: the rules check decides
    check_version("graph", 2)
    with pytest.raises(StoreSchemaError, match=r"version 3, newer.*upgrade this reader"):
        check_version("graph", 3)
    with pytest.raises(StoreSchemaError, match=r"version 1, this code reads 2.*migrate"):
        check_version("graph", 1)


async def test_a_graph_in_the_old_model_is_refused_before_its_rules_are_read() -> None:
    driver = _Driver(dict.fromkeys(SCHEMA, "ONLINE"), version=1)
    with pytest.raises(StoreSchemaError, match=r"version 1, this code reads 2.*migrate"):
        await check_schema(driver, "neo4j")  # type: ignore[arg-type]
    assert len(driver.asked) == 1
