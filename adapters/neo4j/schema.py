"""Schema bootstrap: constraints and indexes, created idempotently on open.

Every name starts with ``redstring_`` so that a store can tell which of its
schema rules exist with one query and create only the missing ones (opening a
store against a bootstrapped database costs one round trip). Two stores opening
at once may both try to create a rule; the loser's "already exists" is ignored.
"""

from __future__ import annotations

from typing import Final

from neo4j import AsyncDriver
from neo4j.exceptions import ClientError

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
    "redstring_rel_tenant": (
        "CREATE INDEX redstring_rel_tenant IF NOT EXISTS FOR ()-[r:REL]-() ON (r.tenant_id)"
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


async def bootstrap(driver: AsyncDriver, database: str) -> list[str]:
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
