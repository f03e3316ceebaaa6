"""Every statement the Neo4j stores run is planned with an index seek for its
tenant or partition, never a scan of a whole label: a scan costs time in
proportion to every tenant in the database (bench/e2e.py found the tenant
purge and ``find_entities`` scanning every ``Entity`` once the database held
other tenants). The schema is bootstrapped first, as the store does on open.

The graph is native (docs/adr/0004-neo4j-graph-store.md): a read filtered by
relationship type expands only that type (the type is in the ``Expand``, not a
filter after it), and a lookup by id, key or tenant is an index seek.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import pytest
from neo4j import AsyncGraphDatabase

from adapters.alias_depth import DEFAULT_MAX_ALIAS_DEPTH
from adapters.neo4j import Neo4jGraphStore, cypher, ledger_cypher
from adapters.neo4j.schema import bootstrap
from contracts.domain import Entity, Relationship
from contracts.ids import EntityId, EventId, TenantId
from tests.integration.conftest import db_hits, profile_statement
from tests.services import Neo4jConfig

pytestmark = pytest.mark.services

#: Operators that read a whole label, every relationship of a type, or every
#: entry of an index (every tenant's).
SCANS = {
    "NodeByLabelScan",
    "NodeIndexScan",
    "DirectedRelationshipIndexScan",
    "UndirectedRelationshipIndexScan",
    "AllNodesScan",
    "DirectedRelationshipTypeScan",
    "UndirectedRelationshipTypeScan",
    "DirectedAllRelationshipsScan",
    "UndirectedAllRelationshipsScan",
}

#: System-wide statements: they read every partition or expire by time on purpose.
WHOLE_STORE = {"CHECKPOINTS"}


def _statements() -> list[tuple[str, str]]:
    found = []
    for module in (cypher, ledger_cypher):
        for name, value in vars(module).items():
            if name in WHOLE_STORE:
                continue
            # A leading underscore marks a fragment, planned inside its statement.
            public = name.isupper() and not name.startswith("_")
            if public and isinstance(value, str) and "MATCH" in value:
                found.append((f"{module.__name__.rsplit('.', 1)[1]}.{name}", value))
    # Rendered with the bound of the alias chain, an int.
    checked = cypher.upsert_aliases_checked(DEFAULT_MAX_ALIAS_DEPTH)
    found.append(("cypher.upsert_aliases_checked", checked))
    return found


def _operators(plan: dict) -> list[str]:
    out = [plan["operatorType"].split("@")[0]]
    for child in plan.get("children", []):
        out += _operators(child)
    return out


def _steps(plan: dict) -> list[tuple[str, str]]:
    """(operator, details) for every operator of the plan."""
    out = [(plan["operatorType"].split("@")[0], str(plan.get("args", {}).get("Details", "")))]
    for child in plan.get("children", []):
        out += _steps(child)
    return out


async def _plan(config: Neo4jConfig, statement: str) -> dict:
    # Planned as the runner sends it: every parameter in the map $p
    # (adapters/neo4j/runner.py, ``quiet``), not a null $p.
    params = {"p": {name: None for name in re.findall(r"\$p\.(\w+)", statement)}}
    async with AsyncGraphDatabase.driver(config.uri, auth=config.auth) as driver:
        await bootstrap(driver, "neo4j")
        async with driver.session(database="neo4j") as session:
            summary = await (await session.run("EXPLAIN " + statement, params)).consume()
    assert summary.plan is not None
    return summary.plan


#: The reads a relationship type narrows, and the endpoint each seeks by.
TYPED_READS = {
    "GET_RELATIONSHIPS_FROM": cypher.GET_RELATIONSHIPS_FROM,
    "GET_RELATIONSHIPS_TO": cypher.GET_RELATIONSHIPS_TO,
    "GET_RELATIONSHIPS_ALL": cypher.GET_RELATIONSHIPS_ALL,
}


def test_the_statement_list_is_not_vacuous() -> None:
    names = {name for name, _ in _statements()}
    assert {"cypher.DELETE_TENANT_ENTITIES", "cypher.FIND_ENTITIES", "cypher.RESOLVE"} <= names
    assert {"cypher.UPSERT_ENTITIES_AND_RELATIONSHIPS", "cypher.upsert_aliases_checked"} <= names
    assert len(names) >= 25


@pytest.mark.parametrize(("name", "statement"), _statements(), ids=[n for n, _ in _statements()])
async def test_no_statement_scans_a_whole_label(
    neo4j_config: Neo4jConfig, name: str, statement: str
) -> None:
    plan = await _plan(neo4j_config, statement)
    scans = SCANS & set(_operators(plan))
    assert not scans, f"{name} is planned with {sorted(scans)}"
    # And it finds its rows by an index: a seek on the tenant's or the
    # partition's key, never by walking from an unindexed start.
    assert any("Seek" in op for op in _operators(plan)), f"{name} uses no index: {_operators(plan)}"


@pytest.mark.parametrize("name", sorted(TYPED_READS))
async def test_a_type_filtered_read_expands_only_that_type(
    neo4j_config: Neo4jConfig, name: str
) -> None:
    plan = await _plan(neo4j_config, cypher.typed(TYPED_READS[name], "WORKS_AT"))
    steps = _steps(plan)
    operators = [op for op, _ in steps]
    assert not SCANS & set(operators), f"typed {name} is planned with {operators}"
    assert any(op.startswith("NodeUniqueIndexSeek") for op in operators), operators
    expands = [details for op, details in steps if op.startswith("Expand")]
    assert expands, operators
    # The type is in the expand itself, so only WORKS_AT relationships are read.
    assert all(":WORKS_AT]" in details for details in expands), expands


@pytest.mark.parametrize("name", sorted(TYPED_READS))
async def test_an_untyped_read_names_no_type(neo4j_config: Neo4jConfig, name: str) -> None:
    steps = _steps(await _plan(neo4j_config, TYPED_READS[name]))
    expands = [details for op, details in steps if op.startswith("Expand")]
    assert expands, steps
    # No relationship type in the expand: every edge of the node is read.
    assert not any(re.search(r"\[\w*:", details) for details in expands), expands


async def test_entities_of_a_type_are_the_tenants_seek_then_the_label(
    neo4j_config: Neo4jConfig,
) -> None:
    steps = _steps(await _plan(neo4j_config, cypher.FIND_ENTITIES_OF_TYPE))
    seeks = [details for op, details in steps if "IndexSeek" in op]
    assert seeks and "tenant_id = $p.tenant" in seeks[0], steps
    assert any(op == "Filter" and "e:$all($p.label)" in details for op, details in steps), steps


def test_only_validated_types_become_cypher() -> None:
    assert "-[r:`WORKS_AT`]->" in cypher.typed(cypher.GET_RELATIONSHIPS_FROM, "WORKS_AT")
    for hostile in ("WORKS`]->(x) DETACH DELETE x //", "a b", "1ST", "", "X" * 65):
        with pytest.raises(ValueError):
            cypher.typed(cypher.GET_RELATIONSHIPS_FROM, hostile)
    # Writes and the other reads name types by parameter: nothing is rendered.
    for module in (cypher, ledger_cypher):
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str):
                assert "`" not in value, name


#: The statements that write edges, each planned on its own.
EDGE_WRITES = {
    name: value
    for name, value in vars(cypher).items()
    if name.isupper()
    and isinstance(value, str)
    and "-[r:$(row.type)]->(t)" in value
    # A whole statement, not the fragment the edge writes share.
    and "UNWIND" in value
}


def test_the_edge_writes_are_found() -> None:
    assert {"UPSERT_RELATIONSHIPS", "UPSERT_BY_TENANT", "LEDGER_AND_UPSERT_BY_TENANT"} <= set(
        EDGE_WRITES
    )


@pytest.mark.parametrize("name", sorted(EDGE_WRITES))
async def test_an_edge_is_looked_for_by_an_expand_between_its_ends(
    neo4j_config: Neo4jConfig, name: str
) -> None:
    """A relationship ``MERGE`` with a dynamic type between two bound nodes is
    planned by 5.26 as a scan of every relationship in the database while it
    holds fewer than about ten (an empty store, or one a purge emptied), and
    the plan is cached: a store that started empty then wrote each edge in
    time proportional to all of them (a benchmark side of 12,000 events ran
    at 4 events/s). The look is a one-hop variable-length expand instead,
    which has no scan to be planned as; this checks the plan's shape, which
    holds whatever the statistics of the database the test runs on."""
    steps = _steps(await _plan(neo4j_config, EDGE_WRITES[name]))
    merges = [details for op, details in steps if "Merge" in op and "]->" in details]
    assert not merges, f"{name} merges an edge: {merges}"
    looks = [op for op, _ in steps if op.startswith("VarLengthExpand(Into)")]
    # A look from each end, before the lock and after it.
    assert len(looks) == 4, f"{name}: {[op for op, _ in steps]}"


HUB_DEGREE = 300


async def test_an_edge_at_a_hub_costs_the_degree_of_its_other_end(
    store: Neo4jGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-hop look walks every relationship of the end it starts from. An
    entity many documents mention (a hub of a Zipf-like tenant) has thousands,
    and a look that always started from the source made each new edge from it
    cost its whole degree, a projection slowing as its hubs grew. Database
    hits come from ``PROFILE``; nothing is timed."""
    tenant = TenantId(f"hub-{uuid.uuid4().hex[:8]}")
    leaves = [EntityId(f"leaf{i:03d}") for i in range(HUB_DEGREE + 4)]
    source, sink = EntityId("source-hub"), EntityId("sink-hub")
    ids = [source, sink, *leaves]
    await store.upsert_entities(tenant, [Entity(tenant, i, i, "Thing") for i in ids])
    fan = [Relationship(tenant, source, leaf, "MENTIONS") for leaf in leaves[:HUB_DEGREE]]
    fan += [Relationship(tenant, leaf, sink, "MENTIONS") for leaf in leaves[:HUB_DEGREE]]
    await store.upsert_relationships(tenant, fan)

    profiled = profile_statement(monkeypatch, store, cypher.UPSERT_RELATIONSHIPS)
    spare, other = leaves[HUB_DEGREE], leaves[HUB_DEGREE + 1]
    # Between two leaves of one edge or none: what a write costs without a hub.
    await store.upsert_relationships(tenant, [Relationship(tenant, spare, other, "MENTIONS")])
    at_hubs = [
        Relationship(tenant, source, spare, "MENTIONS"),  # from a hub, new
        Relationship(tenant, source, leaves[0], "MENTIONS", confidence=0.5),  # found
        Relationship(tenant, source, leaves[1], "CITES"),  # another type
        Relationship(tenant, other, sink, "MENTIONS"),  # into a hub, new
        Relationship(tenant, leaves[2], sink, "MENTIONS", confidence=0.5),  # found
    ]
    for edge in at_hubs:
        await store.upsert_relationships(tenant, [edge])

    baseline, *written = [db_hits(result.summary.profile) for result in profiled]
    assert len(written) == len(at_hubs)
    # Each reads about what the write between two leaves reads, far from the
    # hub's 300 relationships (the look from the source read all of them).
    assert max(written) < baseline + HUB_DEGREE // 3, (baseline, written)
    found = await store.get_relationships(tenant, source_id=source)
    assert len(found) == HUB_DEGREE + 2
    assert {(r.target_id, r.type, r.confidence) for r in found} >= {
        (spare, "MENTIONS", 1.0),
        (leaves[0], "MENTIONS", 0.5),
        (leaves[1], "CITES", 1.0),
    }
    into_sink = await store.get_relationships(tenant, target_id=sink)
    assert len(into_sink) == HUB_DEGREE + 1
    assert (leaves[2], 0.5) in {(r.source_id, r.confidence) for r in into_sink}
    await store.delete_by_tenant(tenant)


#: The statements that look applied ids up by their key (a MATCH; the MERGEs
#: that record them seek the unique index as a MERGE must).
APPLIED_LOOKUPS = {
    name: value
    for name, value in vars(ledger_cypher).items()
    if name.isupper()
    and isinstance(value, str)
    and re.search(r"MATCH \(a:AppliedEvent \{tenant_id: [$\w.]+, event_id: id\}\)", value)
}


def test_the_applied_id_lookups_are_found() -> None:
    assert {"APPLIED_EVENT_IDS", "TENANT_LEDGERS", "LOCK_WITH_TENANT_LEDGERS"} <= set(
        APPLIED_LOOKUPS
    )


@pytest.mark.parametrize("name", sorted(APPLIED_LOOKUPS))
async def test_an_applied_id_is_looked_up_by_its_key(neo4j_config: Neo4jConfig, name: str) -> None:
    """Beside the key's unique index, ``AppliedEvent`` has one on the tenant
    alone (for the purge), and Neo4j 5.26 planned the lookups of a unit of
    work's ids, on some statistics, as a seek of the tenant's ids filtered by
    event id: every id the tenant had applied, read again for each id asked.
    The plan was cached, so a tenant's units of work cost more the longer its
    history (a 10,000-event tenant's last tenth 1.83 times its second, the
    lock statement 2 million database hits a unit). Which plan a database
    picks unaided depends on its statistics; the statement names its index,
    so the plan is the key's seek whatever they are (a bare ``USING INDEX``
    was answered with a scan of the key's index on the test database)."""
    statement = APPLIED_LOOKUPS[name]
    assert "USING INDEX SEEK a:AppliedEvent(tenant_id, event_id)" in statement, name
    steps = _steps(await _plan(neo4j_config, statement))
    reads = [(op, details) for op, details in steps if "AppliedEvent" in details]
    assert reads, steps
    # A seek of the key: not the tenant's index, and not a scan of the key's
    # index either (which a bare USING INDEX let the planner pick).
    assert all(
        op.startswith("NodeUniqueIndexSeek") and "AppliedEvent(tenant_id, event_id)" in details
        for op, details in reads
    ), reads


async def test_asking_for_applied_ids_costs_the_ids_asked_not_the_tenants_history(
    store: Neo4jGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = TenantId(f"history-{uuid.uuid4().hex[:8]}")
    history = [EventId(f"event-{i:04d}") for i in range(600)]
    at = datetime.now(UTC)
    await store.record_applied_events(tenant, history, at)
    profiled = profile_statement(monkeypatch, store, ledger_cypher.APPLIED_EVENT_IDS)
    asked = [*history[::60], *(EventId(f"new-{i}") for i in range(10))]
    assert await store.applied_event_ids(tenant, asked) == set(history[::60])
    [result] = profiled
    # A seek per id asked (and the rows it finds), not a walk of the 600.
    assert db_hits(result.summary.profile) <= 3 * len(asked), db_hits(result.summary.profile)
    await store.delete_by_tenant(tenant)


#: A node matched by its key from a list (an ``UNWIND`` row, or a list
#: parameter indexed by one), not by one parameter.
_KEY_FROM_A_ROW = re.compile(
    r"\((\w+):(Entity|AliasId) \{tenant_id: [^,]+, id: (?!\$[\w.]+\})[^}]+\}\)"
)


def _keys_from_rows(statement: str) -> list[tuple[str, str]]:
    """(variable, label) of each such lookup; a MERGE's seek is its
    constraint's, and a MERGE takes no hint."""
    return [
        (m[0], m[1])
        for line in statement.splitlines()
        if "MERGE" not in line
        for m in _KEY_FROM_A_ROW.findall(line)
    ]


def test_every_lookup_of_keys_from_a_list_is_held_to_its_seek() -> None:
    """The planner has planned such a lookup as a scan of the key's whole
    index, filtered per row, once the store's statistics moved (a million
    rows for 32 keys; docs/performance.md, "Plans that moved"), which the
    plans above, made on a quiet database, cannot show. A ``USING INDEX
    SEEK`` hint holds it to the seek whatever the statistics say; a bare
    ``USING INDEX`` allows the scan."""
    unhinted = []
    for name, statement in _statements():
        for var, label in set(_keys_from_rows(statement)):
            if f"USING INDEX SEEK {var}:{label}(tenant_id, id)" not in statement:
                unhinted.append(f"{name}: {var}:{label}")
    assert not unhinted, unhinted
    assert len(_keys_from_rows(cypher.DELETE_RELATIONSHIPS)) == 2
