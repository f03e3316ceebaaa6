"""What a read-only open checks of the graph schema, reading only
(docs/adr/0016-read-only-open.md).

A reader first compares the model the graph is written in (its version node,
``schema.read_state``) with the one this code reads, then checks that every
constraint and index of ``schema.SCHEMA`` exists and is online.
"""

from __future__ import annotations

from neo4j import AsyncDriver, RoutingControl

from adapters.neo4j.schema import GRAPH_SCHEMA_VERSION, SCHEMA, read_state
from contracts.errors import StoreSchemaError

#: What to run when the graph's schema is missing or behind.
MIGRATE_REMEDY = (
    "run `redstring migrate` (or start a worker, which creates the schema on open) "
    "as a user that may create constraints, then open the reader again"
)

#: The graph schema version this code reads.
READ_VERSION = GRAPH_SCHEMA_VERSION

_RULES = """
SHOW INDEXES YIELD name, state WHERE name STARTS WITH 'redstring_'
RETURN name, state
"""


async def stored_version(driver: AsyncDriver, database: str) -> int | None:
    """The model the graph's data is in; None for an empty graph, which any
    version reads alike (the rules check then says whether it is set up)."""
    state = await read_state(driver, database)
    return None if state.empty else state.version


def check_version(where: str, stored: int | None) -> None:
    """Raise ``StoreSchemaError`` unless ``stored`` is ``READ_VERSION`` or the
    graph is empty (None)."""
    if stored is None or stored == READ_VERSION:
        return
    if stored > READ_VERSION:
        raise StoreSchemaError(
            where,
            f"the graph schema is at version {stored}, newer than this code understands "
            f"({READ_VERSION})",
            "upgrade this reader to the redstring version the workers run",
        )
    raise StoreSchemaError(
        where,
        f"the graph schema is at version {stored}, this code reads {READ_VERSION}",
        MIGRATE_REMEDY,
    )


async def check_schema(driver: AsyncDriver, database: str) -> None:
    """Raise ``StoreSchemaError`` unless every schema rule this code relies
    on exists and is online; runs in read access mode and creates nothing."""
    where = f"Neo4j database {database!r}"
    check_version(where, await stored_version(driver, database))
    records, _, _ = await driver.execute_query(
        _RULES, database_=database, routing_=RoutingControl.READ
    )
    states = {r["name"]: r["state"] for r in records}
    missing = sorted(set(SCHEMA) - set(states))
    if len(missing) == len(SCHEMA):
        raise StoreSchemaError(
            where, "the graph is not initialised (no redstring schema)", MIGRATE_REMEDY
        )
    if missing:
        raise StoreSchemaError(where, f"schema rules missing: {', '.join(missing)}", MIGRATE_REMEDY)
    offline = sorted(name for name in SCHEMA if states[name] != "ONLINE")
    if offline:
        raise StoreSchemaError(
            where,
            f"schema rules not online: {', '.join(f'{n} ({states[n]})' for n in offline)}",
            "wait for the indexes to come online (SHOW INDEXES), or rebuild a FAILED one",
        )
