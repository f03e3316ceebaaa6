"""Every statement the Neo4j stores run is planned with an index seek for its
tenant or partition, never a scan of a whole label: a scan costs time in
proportion to every tenant in the database (bench/e2e.py found the tenant
purge and ``find_entities`` scanning every ``Entity`` once the database held
other tenants). The schema is bootstrapped first, as the store does on open.
"""

from __future__ import annotations

import re

import pytest
from neo4j import AsyncGraphDatabase

from adapters.neo4j import cypher, ledger_cypher
from adapters.neo4j.schema import bootstrap
from tests.services import Neo4jConfig

pytestmark = pytest.mark.services

#: Operators that read a whole label or every relationship of a type.
SCANS = {
    "NodeByLabelScan",
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
            if name.isupper() and isinstance(value, str) and "MATCH" in value:
                found.append((f"{module.__name__.rsplit('.', 1)[1]}.{name}", value))
    return found


def _operators(plan: dict) -> list[str]:
    out = [plan["operatorType"].split("@")[0]]
    for child in plan.get("children", []):
        out += _operators(child)
    return out


def test_the_statement_list_is_not_vacuous() -> None:
    names = {name for name, _ in _statements()}
    assert {"cypher.DELETE_TENANT_ENTITIES", "cypher.FIND_ENTITIES", "cypher.RESOLVE"} <= names
    assert len(names) >= 25


@pytest.mark.parametrize(("name", "statement"), _statements(), ids=[n for n, _ in _statements()])
async def test_no_statement_scans_a_whole_label(
    neo4j_config: Neo4jConfig, name: str, statement: str
) -> None:
    params = {p: None for p in re.findall(r"\$(\w+)", statement)}
    async with AsyncGraphDatabase.driver(neo4j_config.uri, auth=neo4j_config.auth) as driver:
        await bootstrap(driver, "neo4j")
        async with driver.session(database="neo4j") as session:
            summary = await (await session.run("EXPLAIN " + statement, params)).consume()
    assert summary.plan is not None
    scans = SCANS & set(_operators(summary.plan))
    assert not scans, f"{name} is planned with {sorted(scans)}"
