"""What a read-only open checks of the graph schema, reading only
(docs/adr/0016-read-only-open.md).

The graph has no version marker yet: its schema is the constraints and
indexes of ``schema.SCHEMA``, so a reader checks that each exists and is
online. ``stored_version`` and ``READ_VERSION`` are the hook for a versioned
graph schema: when the graph records its version, ``stored_version`` reads
that marker, ``READ_VERSION`` is the version this code reads, and
``check_schema`` compares the two before it checks the rules.
"""

from __future__ import annotations

from neo4j import AsyncDriver, RoutingControl

from adapters.neo4j.schema import SCHEMA
from contracts.errors import StoreSchemaError

#: What to run when the graph's schema is missing or behind.
MIGRATE_REMEDY = (
    "run `redstring migrate` (or start a worker, which creates the schema on open) "
    "as a user that may create constraints, then open the reader again"
)

#: The graph schema version this code reads; None while the graph is not
#: versioned.
READ_VERSION: int | None = None

_RULES = """
SHOW INDEXES YIELD name, state WHERE name STARTS WITH 'redstring_'
RETURN name, state
"""


async def stored_version(driver: AsyncDriver, database: str) -> int | None:
    """The graph schema version the database records; None while the graph
    records none (today), so only the rules are checked."""
    del driver, database
    return None


def check_version(where: str, stored: int | None) -> None:
    """Raise ``StoreSchemaError`` unless ``stored`` is ``READ_VERSION``."""
    if stored == READ_VERSION:
        return
    if stored is not None and (READ_VERSION is None or stored > READ_VERSION):
        raise StoreSchemaError(
            where,
            f"the graph schema is at version {stored}, newer than this code understands "
            f"({READ_VERSION or 'unversioned'})",
            "upgrade this reader to the redstring version the workers run",
        )
    raise StoreSchemaError(
        where,
        f"the graph schema is at version {stored or 'none'}, this code reads {READ_VERSION}",
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
