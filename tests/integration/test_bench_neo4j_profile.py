"""bench/neo4j_profile.py runs, tiny, against the real Neo4j: every statement
the fold and the ceiling send is captured and named, and the tables add up
(the fold's into purged tenants too).
No time or CPU figure is asserted."""

from __future__ import annotations

import pytest

from bench.neo4j_profile import main

pytestmark = pytest.mark.services


@pytest.mark.timeout(300)
async def test_the_profile_names_every_statement_it_captures(
    stack_environ: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    await main("tiny", 7, 40, None, True)
    out = capsys.readouterr().out
    rows = [line.split(" | ")[0].lstrip("| ") for line in out.splitlines() if line.startswith("| ")]
    captured = {row for row in rows if row not in {"statement", "---", "**total**"}}
    # Every statement is one of the stores' or the ceiling's constants, by name.
    # The fold tells the first statement its edge endpoints: it resolves them.
    assert captured >= {
        "LOCK_WITH_TENANT_LEDGERS_AND_RESOLVE",
        "LEDGER_AND_UPSERT_BY_TENANT",
        "RESOLVE",
        "COMMIT",
    }, captured
    assert {"ceiling: CEILING_ENTITIES", "ceiling: CEILING_RELATIONSHIPS"} <= captured
    assert all(
        row.replace("_", "").isupper()
        or row.startswith(("ceiling: ", "upsert_alias"))
        or row in {"alias_depths"}
        for row in captured
    ), captured
    # The fold, the ceiling, and the fold into tenants just purged (--rebuild).
    assert out.count("**total**") == 3
    assert "**rebuild**" in out
