"""Every Cypher statement the graph store runs, as constants.

Nothing is ever formatted into these strings: tenant ids, entity ids, types,
property keys and values all travel as parameters. Relationship types are not
parametrisable in Cypher, so every edge is one ``:REL`` relationship whose
``type`` is a property; property keys arrive inside parameter maps (``+=``).

A match on a tenant alone names the second key of a composite index too
(``e.id IS NOT NULL``, ``e.order_key IS NOT NULL``: the store writes both on
every entity it creates): Neo4j seeks a composite index only with a predicate
on each of its properties, and otherwise scans every ``Entity`` of every
tenant (found by bench/e2e.py: a replay's deletion slowed with the database).

Every statement that touches tenant data matches with a label and filters by
``$tenant`` inside the statement; the store still checks each returned record's
tenant (adapters.isolation) rather than trusting the filter.
"""

from __future__ import annotations

from typing import Final

# -- entities ------------------------------------------------------------

#: ``order_key`` sorts in Neo4j the way Python sorts ids (by code point); see
#: adapters/neo4j/rows.py. It never changes, so it is written on create only.
UPSERT_ENTITIES: Final = """
UNWIND $rows AS row
MERGE (e:Entity {tenant_id: $tenant, id: row.id})
ON CREATE SET e.order_key = row.order_key
SET e.name = row.name, e.type = row.type, e.blocking_key = row.blocking_key, e += row.props
"""

GET_ENTITIES: Final = """
UNWIND $ids AS id
MATCH (e:Entity {tenant_id: $tenant, id: id})
RETURN properties(e) AS e
"""

FIND_ENTITIES: Final = """
MATCH (e:Entity {tenant_id: $tenant})
WHERE e.order_key IS NOT NULL AND ($type IS NULL OR e.type = $type)
WITH e ORDER BY e.order_key LIMIT $limit
RETURN properties(e) AS e
"""

FIND_BY_BLOCKING_KEYS: Final = """
UNWIND $keys AS key
MATCH (e:Entity {tenant_id: $tenant, blocking_key: key})
RETURN key, properties(e) AS e
"""

# -- aliases -------------------------------------------------------------
#
# An alias is an ``ALIAS_OF`` edge between two ``AliasId`` nodes (one per id
# that takes part in an alias, separate from ``Entity`` because neither end
# needs to exist as an entity). Edges are what let resolution be one
# variable-length match; an id has at most one outgoing edge (keyed by the
# absorbed id), and nodes left without edges are deleted.

#: ``SET a.lock`` takes the write lock on the absorbed id before looking for
#: its old edge, so two concurrent upserts of one alias cannot both create one.
UPSERT_ALIAS: Final = """
MERGE (a:AliasId {tenant_id: $tenant, id: $alias_id})
SET a.lock = $token
WITH a
OPTIONAL MATCH (a)-[old:ALIAS_OF]->(previous:AliasId)
DELETE old
WITH a, collect(previous) AS previous
MERGE (c:AliasId {tenant_id: $tenant, id: $canonical_id})
CREATE (a)-[:ALIAS_OF {tenant_id: $tenant, reason: $reason}]->(c)
WITH previous
UNWIND previous AS orphan
WITH orphan WHERE NOT EXISTS { (orphan)--() }
DELETE orphan
"""

REMOVE_ALIAS: Final = """
OPTIONAL MATCH (a:AliasId {tenant_id: $tenant, id: $alias_id})-[r:ALIAS_OF]->(c:AliasId)
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
MATCH (c:AliasId {tenant_id: $tenant, id: $canonical_id})<-[r:ALIAS_OF]-(a:AliasId)
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
RESOLVE: Final = """
UNWIND $ids AS id
MATCH (s:AliasId {tenant_id: $tenant, id: id})
WHERE EXISTS { (s)-[:ALIAS_OF]->() }
CALL (s) {
  OPTIONAL MATCH walk = (s)-[:ALIAS_OF*]->(end:AliasId)
  WHERE NOT EXISTS { (end)-[:ALIAS_OF]->() }
  RETURN collect(end.id) AS ends, collect(end.tenant_id) AS tenants, max(length(walk)) AS hops
}
RETURN id, s.tenant_id AS tenant_id, ends, tenants, hops
"""


def alias_depths(limit: int) -> str:
    """Before writing ``$alias_id -> $canonical_id``: the longest chain of
    aliases ending at the absorbed id, and the hops from the canonical to its
    end, each counted up to ``limit + 1`` (adapters.alias_depth). A pattern's
    length bound cannot be a parameter; ``limit`` is an int."""
    hops = int(limit) + 1
    return f"""
OPTIONAL MATCH below = (:AliasId)-[:ALIAS_OF*1..{hops}]->
  (:AliasId {{tenant_id: $tenant, id: $alias_id}})
WITH max(length(below)) AS below
OPTIONAL MATCH above = (:AliasId {{tenant_id: $tenant, id: $canonical_id}})
  -[:ALIAS_OF*1..{hops}]->(:AliasId)
RETURN coalesce(below, 0) AS below, coalesce(max(length(above)), 0) AS above
"""


# -- relationships ---------------------------------------------------------

_EDGE: Final = """
RETURN s.id AS source, t.id AS target, properties(r) AS r,
       s.tenant_id AS source_tenant, t.tenant_id AS target_tenant
"""

#: Endpoints are looked up once each (``$endpoints``, sorted), in order, and
#: rows address them by index. If any is missing nothing is written and the
#: missing ids come back, so the caller can raise with the tenant's view intact.
UPSERT_RELATIONSHIPS: Final = """
UNWIND range(0, size($endpoints) - 1) AS i
OPTIONAL MATCH (n:Entity {tenant_id: $tenant, id: $endpoints[i]})
WITH i, n ORDER BY i
WITH collect(n) AS nodes, collect(CASE WHEN n IS NULL THEN $endpoints[i] END) AS missing
CALL (nodes, missing) {
  UNWIND CASE WHEN size(missing) = 0 THEN $rows ELSE [] END AS row
  WITH nodes[row.s] AS s, nodes[row.t] AS t, row
  MERGE (s)-[r:REL {type: row.type}]->(t)
  ON CREATE SET r.tenant_id = $tenant
  SET r.confidence = row.confidence, r += row.props
}
RETURN missing
"""

DELETE_RELATIONSHIPS: Final = """
UNWIND $keys AS k
MATCH (s:Entity {tenant_id: $tenant, id: k.source})
      -[r:REL]->(t:Entity {tenant_id: $tenant, id: k.target})
WHERE r.type = k.type
DELETE r
RETURN count(r) AS deleted
"""

GET_RELATIONSHIP: Final = (
    """
MATCH (s:Entity {tenant_id: $tenant, id: $source})
      -[r:REL]->(t:Entity {tenant_id: $tenant, id: $target})
WHERE r.type = $type
"""
    + _EDGE
)

# Three shapes of one read, so that a given endpoint is an index seek; the
# target endpoint is not filtered by tenant on purpose: a foreign one would be
# corruption, and the record check raises on it instead of hiding it.
GET_RELATIONSHIPS_FROM: Final = (
    """
MATCH (s:Entity {tenant_id: $tenant, id: $source})-[r:REL]->(t:Entity)
WHERE ($target IS NULL OR t.id = $target) AND ($type IS NULL OR r.type = $type)
"""
    + _EDGE
)

GET_RELATIONSHIPS_TO: Final = (
    """
MATCH (s:Entity)-[r:REL]->(t:Entity {tenant_id: $tenant, id: $target})
WHERE $type IS NULL OR r.type = $type
"""
    + _EDGE
)

GET_RELATIONSHIPS_ALL: Final = (
    """
MATCH (s:Entity {tenant_id: $tenant})-[r:REL]->(t:Entity)
WHERE s.id IS NOT NULL AND ($type IS NULL OR r.type = $type)
"""
    + _EDGE
)

GET_RELATIONSHIPS_FOR: Final = (
    """
UNWIND $ids AS id
MATCH (:Entity {tenant_id: $tenant, id: id})-[edge:REL]-()
WITH DISTINCT edge
WITH startNode(edge) AS s, edge AS r, endNode(edge) AS t
"""
    + _EDGE
)

NEIGHBORS: Final = """
MATCH (:Entity {tenant_id: $tenant, id: $id})-[r:REL]-(m:Entity)
RETURN properties(m) AS e, collect(r.tenant_id) AS edge_tenants
"""

# -- tenant purge ---------------------------------------------------------------

# Each runs repeatedly until it deletes fewer than $batch, so a large tenant is
# never one huge transaction outside a unit of work.
DELETE_TENANT_RELATIONSHIPS: Final = """
MATCH ()-[r:REL]->() WHERE r.tenant_id = $tenant
WITH r LIMIT $batch
DELETE r
RETURN count(*) AS deleted
"""

DELETE_TENANT_ENTITIES: Final = """
MATCH (e:Entity {tenant_id: $tenant}) WHERE e.id IS NOT NULL
WITH e LIMIT $batch
DETACH DELETE e
RETURN count(*) AS deleted
"""

DELETE_TENANT_ALIASES: Final = """
MATCH (a:AliasId {tenant_id: $tenant}) WHERE a.id IS NOT NULL
WITH a LIMIT $batch
DETACH DELETE a
RETURN count(*) AS deleted
"""

COUNT_TENANT: Final = """
CALL () {
  MATCH (e:Entity {tenant_id: $tenant}) WHERE e.id IS NOT NULL RETURN count(e) AS entities
}
CALL () { MATCH ()-[r:REL]->() WHERE r.tenant_id = $tenant RETURN count(r) AS relationships }
CALL () {
  MATCH (a:AliasId {tenant_id: $tenant}) WHERE a.id IS NOT NULL RETURN count(a) AS alias_ids
}
CALL () { MATCH ()-[r:ALIAS_OF]->() WHERE r.tenant_id = $tenant RETURN count(r) AS alias_edges }
RETURN entities, relationships, alias_ids + alias_edges AS aliases
"""
