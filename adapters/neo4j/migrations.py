"""``redstring migrate`` for the graph: convert a store in place to the model
this code reads (schema.GRAPH_SCHEMA_VERSION; the versions are listed in
adapters/neo4j/schema.py).

Version 1 to 2 adds each entity's type label and turns every ``:REL {type}``
edge into an edge of its own type. Each batch commits on its own, so a large
store never needs one huge transaction, and an interrupted migration is
resumed by running it again: a converted edge has left ``:REL`` in the
transaction that converted it, adding a label twice changes nothing, and the
entity pass keeps its cursor in the version node, written with each batch.
Until the version node says 2, ``bootstrap`` refuses the store, so no worker
writes the new model into a half-converted graph.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, LiteralString

from neo4j import AsyncDriver, AsyncManagedTransaction
from neo4j.exceptions import ClientError

from adapters.neo4j.cypher import RESERVED_LABELS
from adapters.neo4j.schema import (
    GRAPH_SCHEMA_VERSION,
    VERSION_NODE,
    GraphSchemaVersionError,
    create_rules,
    read_state,
    stamp,
)

#: A migration's rows per transaction.
DEFAULT_BATCH: Final = 10_000

_RESERVED: Final = sorted(RESERVED_LABELS)
_DELETED_MEANWHILE: Final = "Neo.ClientError.Statement.EntityNotFound"
_ATTEMPTS: Final = 5

_BEGIN: Final = """
MERGE (m:RedstringSchema {store: $store})
ON CREATE SET m.version = $version
SET m.migrating_to = $target
"""

# The next entities after the cursor in the order of the (tenant_id, id)
# constraint's index: the rest of the cursor's tenant, then the tenants after
# it, each an ordered seek of at most `batch` entries, so no batch rereads what
# earlier ones did (index order is ORDER BY's order, which the planner relies
# on too). The cursor is written in the same transaction.
_LABEL_BATCH: Final = """
CALL () {
  MATCH (e:Entity) WHERE e.tenant_id = $tenant AND e.id > $after
  WITH e ORDER BY e.tenant_id, e.id LIMIT $batch
  RETURN e
  UNION ALL
  MATCH (e:Entity) WHERE e.tenant_id > $tenant AND e.id IS NOT NULL
  WITH e ORDER BY e.tenant_id, e.id LIMIT $batch
  RETURN e
}
WITH e ORDER BY e.tenant_id, e.id LIMIT $batch
WITH collect(e) AS found
CALL (found) {
  UNWIND found AS e
  SET e:$(CASE WHEN e.type IS NULL OR e.type IN $reserved THEN [] ELSE [e.type] END)
}
MATCH (m:RedstringSchema {store: $store})
SET m.cursor_tenant = CASE WHEN size(found) = 0 THEN $tenant ELSE found[-1].tenant_id END,
    m.cursor_id = CASE WHEN size(found) = 0 THEN $after ELSE found[-1].id END
RETURN size(found) AS labelled, m.cursor_tenant AS tenant, m.cursor_id AS after
"""

# CREATE, not MERGE: an old edge of type REL would match itself.
_EDGE_BATCH: Final = """
MATCH (s)-[r:REL]->(t) WHERE r.type IS NOT NULL
WITH s, r, t LIMIT $batch
CREATE (s)-[n:$(r.type)]->(t)
SET n = properties(r)
REMOVE n.type
DELETE r
RETURN count(*) AS converted
"""

_FINISH: Final = """
MATCH (m:RedstringSchema {store: $store})
SET m.version = $target
REMOVE m.migrating_to, m.cursor_tenant, m.cursor_id
"""

#: Version 1's one relationship index; version 2 has no :REL to index.
_DROP_OLD_INDEX: Final = "DROP INDEX redstring_rel_tenant IF EXISTS"


@dataclass(frozen=True)
class MigrationProgress:
    """After each committed batch: the pass, and its rows so far."""

    step: str
    rows: int


@dataclass(frozen=True)
class GraphMigrationReport:
    database: str
    from_version: int
    to_version: int
    labelled: int = 0
    converted: int = 0


async def migrate(
    driver: AsyncDriver,
    database: str,
    *,
    batch: int = DEFAULT_BATCH,
    on_batch: Callable[[MigrationProgress], None] | None = None,
) -> GraphMigrationReport:
    """Bring the store to ``GRAPH_SCHEMA_VERSION``; idempotent and resumable.

    Stop the workers first: one still running older code would keep writing
    the old model. Each batch of ``batch`` rows is its own transaction, and
    ``on_batch`` is called after each commits (an exception it raises stops
    the migration there, as a crash would). ``from_version`` 0 is an empty
    store, which is only stamped.
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    state = await read_state(driver, database)
    if state.version > GRAPH_SCHEMA_VERSION:
        raise GraphSchemaVersionError(database, state.version, GRAPH_SCHEMA_VERSION)
    report = GraphMigrationReport(database, state.version, GRAPH_SCHEMA_VERSION)
    # The entity pass seeks by the (tenant_id, id) constraint, and the
    # version node's MERGE needs its own.
    await create_rules(driver, database)
    if state.current:
        return report
    if state.empty:
        await stamp(driver, database)
        return report
    await _write(driver, database, _BEGIN, version=state.version, target=GRAPH_SCHEMA_VERSION)
    labelled, converted = await convert(
        driver, database, cursor=state.cursor, batch=batch, on_batch=on_batch
    )
    await driver.execute_query(_DROP_OLD_INDEX, database_=database)
    await _write(driver, database, _FINISH, target=GRAPH_SCHEMA_VERSION)
    return GraphMigrationReport(
        database, state.version, GRAPH_SCHEMA_VERSION, labelled=labelled, converted=converted
    )


async def convert(
    driver: AsyncDriver,
    database: str,
    *,
    cursor: tuple[str, str] | None = None,
    batch: int = DEFAULT_BATCH,
    on_batch: Callable[[MigrationProgress], None] | None = None,
) -> tuple[int, int]:
    """The passes of version 1 to 2 alone, from the entity pass's ``cursor``:
    (entities labelled, edges converted). The version node must exist (it
    keeps the cursor); ``migrate`` is what moves the version."""
    labelled = await _label_entities(driver, database, cursor, batch, on_batch)
    converted = await _convert_edges(driver, database, batch, on_batch)
    return labelled, converted


async def _write(driver: AsyncDriver, database: str, query: LiteralString, **params: Any) -> Any:
    async def work(tx: AsyncManagedTransaction) -> Any:
        return await (await tx.run(query, {"store": VERSION_NODE, **params})).single()

    for attempt in range(_ATTEMPTS):
        try:
            async with driver.session(database=database) as session:
                return await session.execute_write(work)
        except ClientError as exc:
            # A node the batch found was deleted before the batch wrote it
            # (someone purged a tenant meanwhile): the batch, run again,
            # no longer finds it. The driver retries only transient errors.
            if exc.code != _DELETED_MEANWHILE or attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


async def _label_entities(
    driver: AsyncDriver,
    database: str,
    cursor: tuple[str, str] | None,
    batch: int,
    on_batch: Callable[[MigrationProgress], None] | None,
) -> int:
    # Tenant ids are never empty, so ("", "") is before the first entity.
    tenant, after = cursor or ("", "")

    async def one() -> int:
        nonlocal tenant, after
        row = await _write(
            driver,
            database,
            _LABEL_BATCH,
            tenant=tenant,
            after=after,
            batch=batch,
            reserved=_RESERVED,
        )
        tenant, after = row["tenant"], row["after"]
        return int(row["labelled"])

    return await _repeat("labels", batch, on_batch, one)


async def _convert_edges(
    driver: AsyncDriver,
    database: str,
    batch: int,
    on_batch: Callable[[MigrationProgress], None] | None,
) -> int:
    async def one() -> int:
        return int((await _write(driver, database, _EDGE_BATCH, batch=batch))["converted"])

    return await _repeat("edges", batch, on_batch, one)


async def _repeat(
    step: str,
    batch: int,
    on_batch: Callable[[MigrationProgress], None] | None,
    one: Callable[[], Awaitable[int]],
) -> int:
    """Run ``one`` batch after another until one does fewer than ``batch``
    rows; the rows of all."""
    total = 0
    while True:
        rows = await one()
        total += rows
        if rows and on_batch is not None:
            on_batch(MigrationProgress(step, total))
        if rows < batch:
            return total
