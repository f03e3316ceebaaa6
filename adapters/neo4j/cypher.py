"""Every Cypher statement the graph store runs, as constants.

The graph is native (docs/adr/0004-neo4j-graph-store.md): an entity is an
``:Entity`` node with its type as a second label, an edge a relationship of its
own type. Tenant ids, entity ids, property keys and values always travel as
parameters; property keys arrive inside parameter maps (``+=``). Writes name
labels and types dynamically (``$(row.type)``), so nothing is formatted into a
write. A read filtered by relationship type is the one exception: Neo4j 5.26
plans ``-[r:$($p.type)]->`` as an untyped expand and a filter, so the validated
type is rendered, backticked, into a statement of its own (``typed``), and the
expand reads only that type's relationships.

A match on a tenant alone names the second key of a composite index too
(``e.id IS NOT NULL``, ``e.order_key IS NOT NULL``: the store writes both on
every entity it creates): Neo4j seeks a composite index only with a predicate
on each of its properties, and otherwise scans every ``Entity`` of every
tenant (found by bench/e2e.py: a replay's deletion slowed with the database).

Every statement that touches tenant data matches with a label and filters by
``$p.tenant`` inside the statement; the store still checks each returned record's
tenant (adapters.isolation) rather than trusting the filter.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from adapters.neo4j.ledger_cypher import WRITE_DEFERRED, resolve_walk
from contracts.validation import check_type_name

#: The store's own labels. An entity type spelled like one gets no type label
#: (it would make the node look like a ledger or alias node to every statement
#: that matches that label); its ``type`` property still says what it is.
RESERVED_LABELS: Final = frozenset(
    {
        "Entity",
        "AliasId",
        "Checkpoint",
        "RebuildMarker",
        "ErasureTombstone",
        "AppliedEvent",
        "ControlEvent",
        "RedstringSchema",
    }
)


def type_labels(entity_type: str) -> list[str]:
    """The labels an entity of ``entity_type`` carries besides ``Entity``."""
    return [] if entity_type in RESERVED_LABELS else [entity_type]


def type_label(entity_type: str) -> str:
    """The label to match entities of ``entity_type`` by (``Entity`` when the
    type has none of its own)."""
    return "Entity" if entity_type in RESERVED_LABELS else entity_type


# -- entities ------------------------------------------------------------

#: ``order_key`` sorts in Neo4j the way Python sorts ids (by code point); see
#: adapters/neo4j/rows.py. It never changes, so it is written on create only.
#: The type label follows the type: a changed type drops the old label
#: (``row.labels`` is ``[]`` for a type that is one of the store's own labels,
#: which is never added or removed; see ``type_labels``).
UPSERT_ENTITIES: Final = """
UNWIND $p.entities AS row
MERGE (e:Entity {tenant_id: $p.tenant, id: row.id})
ON CREATE SET e.order_key = row.order_key
WITH e, row,
     CASE WHEN e.type IS NULL OR e.type = row.type OR e.type IN $p.reserved
          THEN [] ELSE [e.type] END AS stale
REMOVE e:$(stale)
SET e.name = row.name, e.type = row.type, e.blocking_key = row.blocking_key, e += row.props,
    e:$(row.labels)
"""

#: Every lookup of a key from a parameter list is hinted to its seek
#: (DELETE_RELATIONSHIPS says why).
GET_ENTITIES: Final = """
UNWIND $p.ids AS id
MATCH (e:Entity {tenant_id: $p.tenant, id: id})
USING INDEX SEEK e:Entity(tenant_id, id)
RETURN properties(e) AS e
"""

FIND_ENTITIES: Final = """
MATCH (e:Entity {tenant_id: $p.tenant})
WHERE e.order_key IS NOT NULL
WITH e ORDER BY e.order_key LIMIT $p.limit
RETURN properties(e) AS e
"""

#: The tenant's index seek, then the type label (``$p.label`` is ``Entity`` for
#: a type that has no label of its own) and the type.
FIND_ENTITIES_OF_TYPE: Final = """
MATCH (e:Entity:$($p.label) {tenant_id: $p.tenant})
WHERE e.order_key IS NOT NULL AND e.type = $p.type
WITH e ORDER BY e.order_key LIMIT $p.limit
RETURN properties(e) AS e
"""

FIND_BY_BLOCKING_KEYS: Final = """
UNWIND $p.keys AS key
MATCH (e:Entity {tenant_id: $p.tenant, blocking_key: key})
RETURN key, properties(e) AS e
"""

# -- aliases -------------------------------------------------------------
#
# An alias is an ``ALIAS_OF`` edge between two ``AliasId`` nodes (one per id
# that takes part in an alias, separate from ``Entity`` because neither end
# needs to exist as an entity). Edges are what let resolution be one
# variable-length match; an id has at most one outgoing edge (keyed by the
# absorbed id), and nodes left without edges are deleted.

#: One alias of ``$p.rows`` (``row``, at index ``i``) written. ``SET a.lock``
#: takes the write lock on the absorbed id before looking for its old edge, so
#: two concurrent upserts of one alias cannot both create one; the lock's value
#: names the statement and the row (see ``upsert_aliases_checked``).
_UPSERT_ALIAS_ROW: Final = """
MERGE (a:AliasId {tenant_id: $p.tenant, id: row.alias_id})
SET a.lock = $p.token + ':' + toString(i)
WITH row, a
OPTIONAL MATCH (a)-[old:ALIAS_OF]->(previous:AliasId)
DELETE old
WITH row, a, collect(previous) AS previous
MERGE (c:AliasId {tenant_id: $p.tenant, id: row.canonical_id})
CREATE (a)-[:ALIAS_OF {tenant_id: $p.tenant, reason: row.reason}]->(c)
WITH previous
UNWIND previous AS orphan
WITH orphan WHERE NOT EXISTS { (orphan)--() }
DELETE orphan
"""

REMOVE_ALIAS: Final = """
OPTIONAL MATCH (a:AliasId {tenant_id: $p.tenant, id: $p.alias_id})-[r:ALIAS_OF]->(c:AliasId)
DELETE r
WITH collect(a) + collect(c) AS touched, count(r) AS removed
CALL (touched) {
  UNWIND touched AS orphan
  WITH orphan WHERE NOT EXISTS { (orphan)--() }
  DELETE orphan
}
RETURN removed
"""

FIND_ALIASES: Final = """
MATCH (c:AliasId {tenant_id: $p.tenant, id: $p.canonical_id})<-[r:ALIAS_OF]-(a:AliasId)
RETURN a.id AS alias_id, r.reason AS reason, r.tenant_id AS tenant_id, a.tenant_id AS alias_tenant
"""

#: One round trip for the whole batch. Only ids with an outgoing alias edge
#: come back (a row is the is-alias column: an id without one resolves to
#: itself, and returning a row per id would cost more than the walk). Cypher
#: never traverses a relationship twice in one path, so a walk is at most as
#: long as the tenant has aliases: the port's bound holds without a number in
#: the pattern. On a cycle that rule ends the walk with no chain end, which
#: alone would read as "resolves to itself"; an alias row with no end is the
#: cycle the store raises on.

RESOLVE: Final = (
    """
UNWIND $p.ids AS id
MATCH (s:AliasId {tenant_id: $p.tenant, id: id})
USING INDEX SEEK s:AliasId(tenant_id, id)
"""
    + resolve_walk
    + """RETURN id, s.tenant_id AS tenant_id, ends, tenants, hops
"""
)

#: ``RESOLVE`` for several tenants in one round trip (``$p.asks``: one row per
#: tenant, its ``ids``); each row comes back with the tenant it was asked for.
RESOLVE_BY_TENANT: Final = (
    """
UNWIND $p.asks AS ask
UNWIND ask.ids AS id
MATCH (s:AliasId {tenant_id: ask.tenant, id: id})
USING INDEX SEEK s:AliasId(tenant_id, id)
"""
    + resolve_walk
    + """RETURN ask.tenant AS asked, id, s.tenant_id AS tenant_id, ends, tenants, hops
"""
)


@lru_cache(maxsize=64)
def upsert_aliases_checked(limit: int) -> str:
    """The aliases of ``$p.rows`` (``alias_id``, ``canonical_id``, ``reason``), in
    order, each behind its depth check, in one statement: for each row, the
    longest chain of aliases ending at the absorbed id and the hops from the
    canonical to its end, counted up to ``limit + 1`` (adapters.alias_depth)
    over what the rows before it wrote (a ``CALL`` per row sees the ones
    before). A row is written only if the chain it makes is at most ``limit``
    hops and the row before it was written (its lock holds this statement's
    token and its index), so the first refusal ends the batch as it would end
    a loop of single upserts. Every row's counts come back, so the caller
    raises for the first refused. One round trip per merge instead of one per
    absorbed id (counted per statement by bench/neo4j_profile.py). A pattern's
    length bound cannot be a parameter; ``limit`` is an int.
    """
    hops, most = int(limit) + 1, int(limit)
    return (
        f"""
UNWIND range(0, size($p.rows) - 1) AS i
CALL (i) {{
WITH i, $p.rows[i] AS row
OPTIONAL MATCH below = (:AliasId)-[:ALIAS_OF*1..{hops}]->
  (:AliasId {{tenant_id: $p.tenant, id: row.alias_id}})
WITH i, row, max(length(below)) AS below
OPTIONAL MATCH above = (:AliasId {{tenant_id: $p.tenant, id: row.canonical_id}})
  -[:ALIAS_OF*1..{hops}]->(:AliasId)
WITH i, row, coalesce(below, 0) AS below, coalesce(max(length(above)), 0) AS above
WITH i, row, below, above, i = 0 OR EXISTS {{
  MATCH (p:AliasId {{tenant_id: $p.tenant, id: $p.rows[i - 1].alias_id}})
  USING INDEX SEEK p:AliasId(tenant_id, id)
  WHERE p.lock = $p.token + ':' + toString(i - 1)
}} AS reached
CALL (i, row, below, above, reached) {{
WITH i, row WHERE reached AND below + 1 + above <= {most}
"""
        + _UPSERT_ALIAS_ROW
        + """}
RETURN below, above, reached
}
RETURN i, below, above, reached
ORDER BY i
"""
    )


# -- relationships ---------------------------------------------------------

_EDGE: Final = """
RETURN s.id AS source, t.id AS target, type(r) AS type, properties(r) AS r,
       s.tenant_id AS source_tenant, t.tenant_id AS target_tenant
"""

#: The edges of ``row.type`` from ``s`` to ``t``, updated: ``found``. A
#: one-hop variable-length look is an expand between the two bound nodes
#: whatever the statistics (``UPSERT_RELATIONSHIPS`` below). It walks every
#: relationship of the end it starts from, so it starts from the end with
#: fewer: from a hub, an entity with thousands of edges, each new edge would
#: cost the hub's degree (``COUNT`` of a node's relationships is its stored
#: degree, not a walk). Only one of the two looks runs for a row.
_EDGE_LOOK: Final = """
    WITH s, t, row, COUNT { (s)-->() } <= COUNT { (t)<--() } AS forward
    OPTIONAL MATCH (s)-[out*1..1]->(t) WHERE forward AND type(out[0]) = row.type
    WITH s, t, row, forward, collect(out[0]) AS ahead
    OPTIONAL MATCH (t)<-[back*1..1]-(s) WHERE NOT forward AND type(back[0]) = row.type
    WITH s, t, row, ahead, collect(back[0]) AS behind
    WITH s, t, row, ahead + behind AS found
    FOREACH (r IN found | SET r.confidence = row.confidence, r += row.props)
"""

#: The edge created when the look found none.
_EDGE_CREATE: Final = """    FOREACH (_ IN CASE WHEN size(found) = 0 THEN [1] ELSE [] END |
      CREATE (s)-[r:$(row.type)]->(t)
      SET r.tenant_id = $p.tenant, r.confidence = row.confidence, r += row.props)
"""

#: Endpoints are looked up once each (``$p.endpoints``, sorted), in order, and
#: rows address them by index. If any is missing nothing is written and the
#: missing ids come back, so the caller can raise with the tenant's view intact.
#:
#: Each edge is found or created the way ``MERGE`` does it (look, lock both
#: ends, look again, create), spelled out so that the look is an expand
#: between the two bound nodes whatever the statistics: 5.26 plans
#: ``MERGE (s)-[r:$(row.type)]->(t)`` as a scan of every relationship in the
#: database when it holds fewer than about ten, and a plan is cached, so a
#: store that started empty wrote each edge in time proportional to all of
#: them (docs/adr/0004-neo4j-graph-store.md, "Edges: an expand whatever the
#: statistics"). A variable-length pattern of one hop has no scan to choose.
#: ``lock`` is a system property (user properties are ``p_``-prefixed); set
#: and removed, it takes the node's write lock and leaves nothing behind.
#: A row with ``held`` true has both ends written by this same statement's
#: entity upsert (``UPSERT_BY_TENANT``): that ``SET`` took both write locks
#: before the look, and any other writer of an edge between them waits for
#: them, so the first look already answers as the second would and the
#: edge is created at once (docs/adr/0004-neo4j-graph-store.md, "Edges
#: between ends the statement wrote").
UPSERT_RELATIONSHIPS: Final = (
    """
UNWIND range(0, size($p.endpoints) - 1) AS i
OPTIONAL MATCH (n:Entity {tenant_id: $p.tenant, id: $p.endpoints[i]})
USING INDEX SEEK n:Entity(tenant_id, id)
WITH i, n ORDER BY i
WITH collect(n) AS nodes, collect(CASE WHEN n IS NULL THEN $p.endpoints[i] END) AS missing
CALL (nodes, missing) {
  UNWIND CASE WHEN size(missing) = 0 THEN $p.rows ELSE [] END AS row
  WITH nodes[row.s] AS s, nodes[row.t] AS t, row
  CALL (s, t, row) {"""
    + _EDGE_LOOK
    + """    WITH s, t, row WHERE size(found) = 0
    CALL (s, t, row) {
      WITH s, t, row, [] AS found WHERE row.held = true
"""
    + _EDGE_CREATE
    + """    }
    WITH s, t, row WHERE row.held IS NULL OR row.held = false
    SET s.lock = true, t.lock = true
    REMOVE s.lock, t.lock
    WITH s, t, row"""
    + _EDGE_LOOK
    + _EDGE_CREATE
    + """  }
}
RETURN missing
"""
)

#: A unit of work's entity upsert and the edge upsert that follows it, for one
#: tenant, as one statement (runner.TransactionRunner.defer): nothing reads
#: the entity upsert's result, and the graph fold writes a run's edges right
#: after its entities, so the pair costs one round trip. The edges' endpoint
#: lookups see the entities written above them in the same statement.
UPSERT_ENTITIES_AND_RELATIONSHIPS: Final = (
    "CALL () {" + UPSERT_ENTITIES + "}\n" + UPSERT_RELATIONSHIPS
)

#: The unit of work's deferred ledger write (``ledger_cypher.WRITE_DEFERRED``:
#: its checkpoint and applied ids) carried by its first entity upsert, and by
#: the edge upsert joined to that. The fold writes a unit of work's ledger
#: before its effects, so a unit of work of extractions sends no ledger
#: statement of its own: a round trip fewer. All of it is one transaction, so
#: the order inside it changes no answer (the ledger's reads of what is
#: deferred are answered from memory or after it).
LEDGER_AND_UPSERT_ENTITIES: Final = "CALL () {" + WRITE_DEFERRED + "}\n" + UPSERT_ENTITIES

LEDGER_AND_UPSERT_ENTITIES_AND_RELATIONSHIPS: Final = (
    "CALL () {" + WRITE_DEFERRED + "}\n" + UPSERT_ENTITIES_AND_RELATIONSHIPS
)

#: ``UPSERT_ENTITIES_AND_RELATIONSHIPS`` for several tenants in one
#: statement (contracts.ports.graph.TenantUpserts), made from the two so that
#: they never drift apart: each entity row, endpoint (``{tenant, id}``) and
#: edge row names its tenant instead of ``$p.tenant``. Every entity first, then
#: the endpoints' lookups; if any is missing, no edge is written and the
#: missing endpoints come back, in ``$p.endpoints``' order.
UPSERT_BY_TENANT: Final = (
    "CALL () {"
    + UPSERT_ENTITIES.replace("{tenant_id: $p.tenant,", "{tenant_id: row.tenant,")
    + "}\n"
    + UPSERT_RELATIONSHIPS.replace(
        "{tenant_id: $p.tenant, id: $p.endpoints[i]}",
        "{tenant_id: $p.endpoints[i].tenant, id: $p.endpoints[i].id}",
    ).replace("r.tenant_id = $p.tenant,", "r.tenant_id = row.tenant,")
)

#: ``UPSERT_BY_TENANT`` carrying the unit of work's deferred ledger write.
LEDGER_AND_UPSERT_BY_TENANT: Final = "CALL () {" + WRITE_DEFERRED + "}\n" + UPSERT_BY_TENANT

#: The hints hold both endpoints to their key's seek: without them the
#: planner has, as the store's statistics moved, planned a scan of every
#: tenant's entities per key, a million rows for a batch of 32 keys
#: (docs/performance.md, "Plans that moved").
DELETE_RELATIONSHIPS: Final = """
UNWIND $p.keys AS k
MATCH (s:Entity {tenant_id: $p.tenant, id: k.source})
      -[r:$(k.type)]->(t:Entity {tenant_id: $p.tenant, id: k.target})
USING INDEX SEEK s:Entity(tenant_id, id)
USING INDEX SEEK t:Entity(tenant_id, id)
DELETE r
RETURN count(r) AS deleted
"""

GET_RELATIONSHIP: Final = (
    """
MATCH (s:Entity {tenant_id: $p.tenant, id: $p.source})
      -[r:$($p.type)]->(t:Entity {tenant_id: $p.tenant, id: $p.target})
"""
    + _EDGE
)

# Three shapes of one read, so that a given endpoint is an index seek; the
# target endpoint is not filtered by tenant on purpose: a foreign one would be
# corruption, and the record check raises on it instead of hiding it. Each is
# untyped here; ``typed`` gives the statement for one relationship type.
GET_RELATIONSHIPS_FROM: Final = (
    """
MATCH (s:Entity {tenant_id: $p.tenant, id: $p.source})-[r]->(t:Entity)
WHERE $p.target IS NULL OR t.id = $p.target
"""
    + _EDGE
)

GET_RELATIONSHIPS_TO: Final = (
    """
MATCH (s:Entity)-[r]->(t:Entity {tenant_id: $p.tenant, id: $p.target})
"""
    + _EDGE
)

#: The hint keeps the tenant's seek (a seek, not the index scan a bare
#: ``USING INDEX`` allows): with a type in the pattern the planner would
#: otherwise scan that type across every tenant.
GET_RELATIONSHIPS_ALL: Final = (
    """
MATCH (s:Entity {tenant_id: $p.tenant})-[r]->(t:Entity)
USING INDEX SEEK s:Entity(tenant_id, id)
WHERE s.id IS NOT NULL
"""
    + _EDGE
)

#: Where the untyped relationship pattern ``-[r]->`` stands in the three reads.
_UNTYPED: Final = "-[r]->"


@lru_cache(maxsize=1024)
def typed(statement: str, rel_type: str) -> str:
    """``statement`` (one of the three reads above) traversing only
    ``rel_type``: the type is checked against the contract's pattern again
    here, where it becomes Cypher text, and backticked."""
    check_type_name(rel_type, "relationship type")
    if statement.count(_UNTYPED) != 1:
        raise ValueError("typed() takes a statement with one untyped relationship pattern")
    return statement.replace(_UNTYPED, f"-[r:`{rel_type}`]->")


#: The hint holds each id to its key's seek (as DELETE_RELATIONSHIPS').
GET_RELATIONSHIPS_FOR: Final = (
    """
UNWIND $p.ids AS id
MATCH (n:Entity {tenant_id: $p.tenant, id: id})-[edge]-()
USING INDEX SEEK n:Entity(tenant_id, id)
WITH DISTINCT edge
WITH startNode(edge) AS s, edge AS r, endNode(edge) AS t
"""
    + _EDGE
)

NEIGHBORS: Final = """
MATCH (:Entity {tenant_id: $p.tenant, id: $p.id})-[r]-(m:Entity)
RETURN properties(m) AS e, collect(r.tenant_id) AS edge_tenants
"""

# -- tenant purge ---------------------------------------------------------------

# Each runs repeatedly until it deletes fewer than $p.batch, so a large tenant is
# never one huge transaction outside a unit of work. An edge has a type of its
# own, and a relationship index needs one, so the tenant's edges are found from
# its entities: the edges first, so that each entity batch is plain deletes.

#: One step of a walk over the tenant's entities in id order from a cursor
#: (``$p.after``, exclusive): the next ``$p.batch`` entities, and at most ``$p.batch``
#: of their outgoing edges deleted. Their entities stay until the next
#: statement, so a walk from the start each time would reread every entity
#: already stripped, and the purge would be quadratic (ADR 0004, "Tenant purge
#: in batches"). The caller keeps the cursor where it is while a statement
#: deletes ``$p.batch`` (the entities may have edges left) and moves it to
#: ``last`` otherwise. Ordering by both keys is what lets the planner read the
#: composite index in order and stop at the limit; by ``e.id`` alone it sorts
#: every entity past the cursor.
DELETE_TENANT_RELATIONSHIPS: Final = """
MATCH (e:Entity {tenant_id: $p.tenant}) WHERE e.id > $p.after
WITH e ORDER BY e.tenant_id, e.id LIMIT $p.batch
WITH collect(e) AS scanned, max(e.id) AS last
CALL (scanned) {
  UNWIND scanned AS e
  MATCH (e)-[r]->()
  WITH r LIMIT $p.batch
  DELETE r
  RETURN count(*) AS deleted
}
RETURN size(scanned) AS scanned, deleted, last
"""

DELETE_TENANT_ENTITIES: Final = """
MATCH (e:Entity {tenant_id: $p.tenant}) WHERE e.id IS NOT NULL
WITH e LIMIT $p.batch
DETACH DELETE e
RETURN count(*) AS deleted
"""

DELETE_TENANT_ALIASES: Final = """
MATCH (a:AliasId {tenant_id: $p.tenant}) WHERE a.id IS NOT NULL
WITH a LIMIT $p.batch
DETACH DELETE a
RETURN count(*) AS deleted
"""

COUNT_TENANT: Final = """
CALL () {
  MATCH (e:Entity {tenant_id: $p.tenant}) WHERE e.id IS NOT NULL RETURN count(e) AS entities
}
CALL () {
  MATCH (e:Entity {tenant_id: $p.tenant})-[r]-() WHERE e.id IS NOT NULL
  RETURN count(DISTINCT r) AS relationships
}
CALL () {
  MATCH (a:AliasId {tenant_id: $p.tenant}) WHERE a.id IS NOT NULL RETURN count(a) AS alias_ids
}
CALL () {
  // Between alias nodes only: an entity edge may have the type ALIAS_OF too.
  MATCH (:AliasId)-[r:ALIAS_OF]->(:AliasId) WHERE r.tenant_id = $p.tenant
  RETURN count(r) AS alias_edges
}
RETURN entities, relationships, alias_ids + alias_edges AS aliases
"""
