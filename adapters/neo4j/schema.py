"""Schema bootstrap on open: the graph's schema version, then constraints and
indexes, created idempotently.

Every rule's name starts with ``redstring_`` so that a store can tell which of
its schema rules exist with one query and create only the missing ones (opening
a store against a bootstrapped database costs two round trips: the version, then
the rules). Two stores
opening at once may both try to create a rule; the loser's "already exists" is
ignored.

One ``(:RedstringSchema {store: 'graph'})`` node records the version of the
model the data is written in (docs/adr/0004-neo4j-graph-store.md, "Schema
versions"):

- 1: every edge one ``:REL`` relationship with its type in a ``type``
  property, entity types only a property. Stores written before versions
  were recorded have no node; a store with entities and no node is at 1.
- 2: the native model: ``(:Entity:<Type>)`` nodes and edges of their own type.

``bootstrap`` bootstraps a store at the current version, and an empty store
(which it then stamps), and refuses any other with ``GraphSchemaVersionError``
before a statement of the current model runs against it: converting one is
``redstring migrate``'s (adapters/neo4j/migrations.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from neo4j import AsyncDriver, RoutingControl
from neo4j.exceptions import ClientError

from contracts.errors import RedstringError

#: The version this code reads and writes.
GRAPH_SCHEMA_VERSION: Final = 2
#: The version of a store with entities and no version node.
UNRECORDED_VERSION: Final = 1
#: The ``store`` key of the graph's version node.
VERSION_NODE: Final = "graph"

#: name -> statement. Composite uniqueness constraints are available in
#: Community edition and give the (tenant_id, key) lookups their index.
SCHEMA: Final[dict[str, str]] = {
    "redstring_entity_key": (
        "CREATE CONSTRAINT redstring_entity_key IF NOT EXISTS "
        "FOR (e:Entity) REQUIRE (e.tenant_id, e.id) IS UNIQUE"
    ),
    "redstring_entity_order": (
        "CREATE INDEX redstring_entity_order IF NOT EXISTS "
        "FOR (e:Entity) ON (e.tenant_id, e.order_key)"
    ),
    "redstring_entity_blocking": (
        "CREATE INDEX redstring_entity_blocking IF NOT EXISTS "
        "FOR (e:Entity) ON (e.tenant_id, e.blocking_key)"
    ),
    "redstring_alias_key": (
        "CREATE CONSTRAINT redstring_alias_key IF NOT EXISTS "
        "FOR (a:AliasId) REQUIRE (a.tenant_id, a.id) IS UNIQUE"
    ),
    "redstring_alias_edge_tenant": (
        "CREATE INDEX redstring_alias_edge_tenant IF NOT EXISTS "
        "FOR ()-[r:ALIAS_OF]-() ON (r.tenant_id)"
    ),
    "redstring_checkpoint_key": (
        "CREATE CONSTRAINT redstring_checkpoint_key IF NOT EXISTS "
        "FOR (c:Checkpoint) REQUIRE (c.topic, c.partition) IS UNIQUE"
    ),
    "redstring_marker_key": (
        "CREATE CONSTRAINT redstring_marker_key IF NOT EXISTS "
        "FOR (m:RebuildMarker) REQUIRE (m.tenant_id, m.topic, m.partition) IS UNIQUE"
    ),
    "redstring_marker_partition": (
        "CREATE INDEX redstring_marker_partition IF NOT EXISTS "
        "FOR (m:RebuildMarker) ON (m.topic, m.partition)"
    ),
    "redstring_marker_tenant": (
        "CREATE INDEX redstring_marker_tenant IF NOT EXISTS FOR (m:RebuildMarker) ON (m.tenant_id)"
    ),
    "redstring_tombstone_key": (
        "CREATE CONSTRAINT redstring_tombstone_key IF NOT EXISTS "
        "FOR (t:ErasureTombstone) REQUIRE t.tenant_id IS UNIQUE"
    ),
    "redstring_applied_key": (
        "CREATE CONSTRAINT redstring_applied_key IF NOT EXISTS "
        "FOR (a:AppliedEvent) REQUIRE (a.tenant_id, a.event_id) IS UNIQUE"
    ),
    "redstring_applied_tenant": (
        "CREATE INDEX redstring_applied_tenant IF NOT EXISTS FOR (a:AppliedEvent) ON (a.tenant_id)"
    ),
    "redstring_control_key": (
        "CREATE CONSTRAINT redstring_control_key IF NOT EXISTS "
        "FOR (c:ControlEvent) REQUIRE (c.tenant_id, c.event_id) IS UNIQUE"
    ),
    # The graph-schema version (adapters/neo4j/migrations.py): one node.
    "redstring_schema_key": (
        "CREATE CONSTRAINT redstring_schema_key IF NOT EXISTS "
        "FOR (s:RedstringSchema) REQUIRE s.store IS UNIQUE"
    ),
    "redstring_applied_at": (
        "CREATE INDEX redstring_applied_at IF NOT EXISTS FOR (a:AppliedEvent) ON (a.applied_at)"
    ),
}

_EXISTING = """
SHOW INDEXES YIELD name, state WHERE name STARTS WITH 'redstring_'
RETURN name, state
"""

_ALREADY_THERE = (
    "EquivalentSchemaRuleAlreadyExists",
    "IndexAlreadyExists",
    "ConstraintAlreadyExists",
)

#: Seconds to wait for new indexes to come online (they are empty when a
#: database is new, so this is short in practice).
INDEX_WAIT_SECONDS: Final = 300


async def create_rules(driver: AsyncDriver, database: str) -> list[str]:
    """Create whatever schema rules are missing; returns the names created."""
    records, _, _ = await driver.execute_query(_EXISTING, database_=database)
    # A constraint owns an index of the same name, so SHOW INDEXES lists both kinds.
    online = {r["name"] for r in records if r["state"] == "ONLINE"}
    present = {r["name"] for r in records}
    created: list[str] = []
    for name, statement in SCHEMA.items():
        if name in present:
            continue
        try:
            await driver.execute_query(statement, database_=database)
        except ClientError as exc:
            if not any(code in (exc.code or "") for code in _ALREADY_THERE):
                raise
        created.append(name)
    if created or online != present:
        await driver.execute_query(
            "CALL db.awaitIndexes($seconds)", seconds=INDEX_WAIT_SECONDS, database_=database
        )
    return created


# -- the schema version ------------------------------------------------------------

_STATE: Final = """
OPTIONAL MATCH (m:RedstringSchema {store: $store})
RETURN m.version AS version, EXISTS { MATCH (:Entity) } AS has_entities,
       m.cursor_tenant AS cursor_tenant, m.cursor_id AS cursor_id
"""

_STAMP: Final = """
MERGE (m:RedstringSchema {store: $store})
ON CREATE SET m.version = $version
RETURN m.version AS version
"""


class GraphSchemaVersionError(RedstringError):
    """The graph is written in a model this code does not read: older (a
    migration is pending or was interrupted) or newer (the code is older than
    the store). ``found`` and ``expected`` are schema versions."""

    def __init__(self, database: str, found: int, expected: int) -> None:
        self.database = database
        self.found = found
        self.expected = expected
        if found < expected:
            remedy = (
                "a graph migration is pending: stop the workers, run `redstring migrate`, "
                "then start them again"
            )
        else:
            remedy = "this code is older than the store: run the redstring version that wrote it"
        super().__init__(
            f"Neo4j database {database!r} is at graph schema version {found}, this code "
            f"reads version {expected}; {remedy}"
        )


@dataclass(frozen=True)
class GraphSchemaState:
    """What a store's version node (or its absence) says."""

    recorded: int | None
    has_entities: bool
    #: Where an interrupted migration's entity pass stopped: (tenant, id).
    cursor: tuple[str, str] | None = None

    @property
    def version(self) -> int:
        """The model the data is in; 0 for an empty, unstamped store."""
        if self.recorded is not None:
            return self.recorded
        return UNRECORDED_VERSION if self.has_entities else 0

    @property
    def current(self) -> bool:
        return self.version == GRAPH_SCHEMA_VERSION

    @property
    def empty(self) -> bool:
        return self.version == 0


async def read_state(driver: AsyncDriver, database: str) -> GraphSchemaState:
    """The store's schema version; reads only, so a reader may call it."""
    records, _, _ = await driver.execute_query(
        _STATE, store=VERSION_NODE, database_=database, routing_=RoutingControl.READ
    )
    row = records[0]
    cursor = None
    if row["cursor_tenant"] is not None:
        cursor = (row["cursor_tenant"], row["cursor_id"])
    return GraphSchemaState(row["version"], bool(row["has_entities"]), cursor)


def check_version(state: GraphSchemaState, database: str) -> None:
    """Raise ``GraphSchemaVersionError`` unless the store is at this code's
    version (an empty one passes: there is nothing to misread)."""
    if not (state.current or state.empty):
        raise GraphSchemaVersionError(database, state.version, GRAPH_SCHEMA_VERSION)


async def stamp(driver: AsyncDriver, database: str) -> None:
    """Record the current version on an empty store."""
    records, _, _ = await driver.execute_query(
        _STAMP, store=VERSION_NODE, version=GRAPH_SCHEMA_VERSION, database_=database
    )
    # Two opens of an empty store race to stamp it, harmlessly; another
    # version here means a migration began meanwhile.
    found = records[0]["version"]
    if found != GRAPH_SCHEMA_VERSION:
        raise GraphSchemaVersionError(database, found, GRAPH_SCHEMA_VERSION)


async def bootstrap(driver: AsyncDriver, database: str) -> list[str]:
    """Check the version, create whatever schema rules are missing, and stamp
    an empty store; returns the rules created. Refuses a store in another
    model before writing to it."""
    state = await read_state(driver, database)
    check_version(state, database)
    created = await create_rules(driver, database)
    if state.empty:
        await stamp(driver, database)
    return created
