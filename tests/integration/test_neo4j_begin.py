"""A Neo4j unit of work sends its BEGIN with its first statement, not on its
own (adapters/neo4j/store.py ``_begin``; ADR 0004, "BEGIN with the first
statement"): a round trip fewer per unit of work. What that changes for a
caller is where a failed BEGIN is raised, so that is what is checked here,
against the real server: entering the unit of work sends nothing, the first
statement raises BEGIN's error, translated, and the unit of work is rolled
back and leaves the store usable.
"""

from __future__ import annotations

import pytest
from neo4j import AsyncGraphDatabase

from adapters.neo4j import Neo4jGraphStore
from contracts.domain import StreamPartition
from contracts.errors import PermanentStoreError
from contracts.ports.ledger import NO_CHECKPOINT
from tests.services import Neo4jConfig

pytestmark = pytest.mark.services

PART = StreamPartition("begin-topic", 0, "begin-topic-id")


async def test_a_failed_begin_is_raised_by_the_first_statement(
    neo4j_config: Neo4jConfig,
) -> None:
    driver = AsyncGraphDatabase.driver(
        neo4j_config.uri, auth=(neo4j_config.user, neo4j_config.password)
    )
    # A database the server does not have: its BEGIN fails, and nothing
    # before it is sent.
    store = Neo4jGraphStore(driver, database="redstringnosuchdatabase")
    async with store:
        entered = False
        with pytest.raises(PermanentStoreError, match="DatabaseNotFound"):
            async with store.unit_of_work(PART) as uow:
                entered = True
                await uow.checkpoint(PART)
        assert entered, "BEGIN was sent on its own, before the first statement"


async def test_units_of_work_go_on_after_one_whose_begin_failed(
    neo4j_config: Neo4jConfig,
) -> None:
    """The session of a failed BEGIN is closed with its unit of work; the
    driver's next unit of work on the same database begins afresh."""
    driver = AsyncGraphDatabase.driver(
        neo4j_config.uri, auth=(neo4j_config.user, neo4j_config.password)
    )
    missing = Neo4jGraphStore(driver, database="redstringnosuchdatabase", owns_driver=False)
    with pytest.raises(PermanentStoreError):
        async with missing.unit_of_work(PART) as uow:
            await uow.checkpoint(PART)
    await missing.aclose()
    store = Neo4jGraphStore(driver)
    async with store:
        async with store.unit_of_work(PART) as uow:
            assert await uow.checkpoint(PART) >= NO_CHECKPOINT
