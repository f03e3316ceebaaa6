"""The driver's debug line of a statement shows its list parameters as row
counts, and the server still receives every row (adapters/neo4j/runner.py,
``quiet``).

The driver builds that line with ``repr`` of every parameter before the
logger decides whether to write it; a unit of work's rows made that 3.8% of
a busy worker's event loop, and put event values in debug logs. Both
runners are checked on the real driver and server: the Rust packer must
send a list subclass as the list it is.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from neo4j import AsyncGraphDatabase

from adapters.neo4j.runner import Blame, ManagedRunner, TransactionRunner
from tests.services import Neo4jConfig

pytestmark = pytest.mark.services

_SUM = (
    "UNWIND $p.rows AS row "
    "RETURN sum(row.x) AS total, collect(row.name) AS names, $p.tenant AS t"
)
_ROWS = [{"x": i, "name": f"secret-name-{i}"} for i in range(50)]


def _run_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if " C: RUN " in r.getMessage()]


def _check(records: list[Any], caplog: pytest.LogCaptureFixture) -> None:
    assert records[0]["total"] == sum(range(50))
    assert records[0]["names"] == [row["name"] for row in _ROWS]
    assert records[0]["t"] == "t-debug"
    lines = [line for line in _run_lines(caplog) if "UNWIND $p.rows" in line]
    assert lines, "the driver logged no RUN line: the check would be vacuous"
    for line in lines:
        assert "secret-name" not in line
        assert "<50 rows>" in line


async def test_a_transaction_runner_sends_every_row_and_logs_only_their_count(
    neo4j_config: Neo4jConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="neo4j")
    async with AsyncGraphDatabase.driver(neo4j_config.uri, auth=neo4j_config.auth) as driver:
        async with driver.session(database="neo4j") as session:
            tx = await session.begin_transaction()
            runner = TransactionRunner(tx)
            records = await runner.run(
                _SUM,
                {"rows": list(_ROWS), "tenant": "t-debug"},
                write=False,
                blame=Blame("sum"),
            )
            await runner.rollback()
    _check(records, caplog)


async def test_a_managed_runner_sends_every_row_and_logs_only_their_count(
    neo4j_config: Neo4jConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="neo4j")
    async with AsyncGraphDatabase.driver(neo4j_config.uri, auth=neo4j_config.auth) as driver:
        runner = ManagedRunner(driver, "neo4j", set())
        records = await runner.run(
            _SUM, {"rows": list(_ROWS), "tenant": "t-debug"}, write=False, blame=Blame("sum")
        )
    _check(records, caplog)
