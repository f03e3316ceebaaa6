"""The projection ledger's Cypher statements: checkpoints, rebuild markers,
erasure tombstones, applied event ids and acted-on control events. Parameters only, as in cypher.py.

A checkpoint node exists from the first unit of work or marker write on its
partition (its write lock is what serialises units of work), but holds a
checkpoint only once ``offset`` is set: a node without one reads as
``NO_CHECKPOINT``.
"""

from __future__ import annotations

from typing import Final

#: The first statement of every unit of work: writing a fresh token takes the
#: node's write lock, held until commit or rollback, so a second unit of work on
#: the partition (a zombie and its successor) waits here. Read after the lock is
#: taken, the checkpoint and the partition's rebuild markers cannot change
#: until commit except through this unit of work: every writer of either takes
#: the same lock first (ADR 0004, "The locked partition in memory").
_lock: Final = """MERGE (c:Checkpoint {topic: $p.topic, partition: $p.partition})
SET c.lock = $p.token
"""

_locked_columns: Final = """c.offset AS offset, c.topic_id AS topic_id,
       COLLECT {
         MATCH (m:RebuildMarker {topic: $p.topic, partition: $p.partition})
         RETURN properties(m)
       } AS markers"""

LOCK_PARTITION: Final = _lock + "RETURN " + _locked_columns + "\n"

#: ``LOCK_PARTITION`` for the partitions of a unit of work across partitions
#: (contracts.ports.ledger.UnitsAcrossPartitions), ``$p.partitions`` in lock
#: order: each row takes its node's lock before it reads that partition, and
#: the rows go in list order, so two such units lock in the same order. One
#: row: ``held``, a map per partition of what ``LOCK_PARTITION`` returns.
_lock_each: Final = """UNWIND $p.partitions AS p
MERGE (c:Checkpoint {topic: p.topic, partition: p.partition})
SET c.lock = $p.token
"""

_held_column: Final = """collect({
         topic: p.topic, partition: p.partition, offset: c.offset, topic_id: c.topic_id,
         markers: COLLECT {
           MATCH (m:RebuildMarker {topic: p.topic, partition: p.partition})
           RETURN properties(m)
         }
       }) AS held"""

LOCK_PARTITIONS: Final = _lock_each + "RETURN " + _held_column + "\n"

#: The last statement of a unit of work, run just before commit: the
#: checkpoints it advanced (``$p.checkpoints``: topic, partition, offset and
#: topic id of each) and the applied event ids it recorded, as groups of
#: (tenant, applied_at, ids). One time per group, not per id: a time parameter
#: per row made the statement twice as slow.
WRITE_DEFERRED: Final = """
CALL () {
  UNWIND $p.checkpoints AS cp
  MERGE (c:Checkpoint {topic: cp.topic, partition: cp.partition})
  SET c.offset = cp.offset, c.topic_id = cp.topic_id
}
UNWIND $p.applied AS g
UNWIND g.ids AS id
MERGE (a:AppliedEvent {tenant_id: g.tenant, event_id: id})
SET a.applied_at = g.applied_at
"""

READ_CHECKPOINT: Final = """
MATCH (c:Checkpoint {topic: $p.topic, partition: $p.partition})
RETURN c.offset AS offset, c.topic_id AS topic_id
"""

#: Compare and advance in one statement, under the node's write lock (taken by
#: ``SET c.lock`` before the offset is read). Writes only when the topic id
#: matches and the offset does not move back; the caller raises otherwise.
ADVANCE_CHECKPOINT: Final = """
MERGE (c:Checkpoint {topic: $p.topic, partition: $p.partition})
SET c.lock = $p.token
WITH c, coalesce(c.offset, -1) AS before, coalesce(c.topic_id, '') AS stored_id
WITH c, before, stored_id,
     (stored_id = '' OR $p.topic_id = '' OR stored_id = $p.topic_id) AND $p.offset >= before AS ok
FOREACH (_ IN CASE WHEN ok THEN [1] ELSE [] END |
  SET c.offset = $p.offset,
      c.topic_id = CASE WHEN stored_id = '' THEN $p.topic_id ELSE stored_id END
)
RETURN before, stored_id
"""

CHECKPOINTS: Final = """
MATCH (c:Checkpoint) WHERE c.offset IS NOT NULL
RETURN c.topic AS topic, c.partition AS partition, c.offset AS offset
"""

#: Read without the partition's lock, a marker that a unit of work deletes
#: meanwhile can come back with some or all of its properties missing (Neo4j
#: reads committed data as it goes): the ledger leaves such a marker out, it is
#: closed (found by bench/e2e.py polling the markers while a replay closed its
#: window).
REBUILD_MARKERS: Final = """
MATCH (m:RebuildMarker {topic: $p.topic, partition: $p.partition})
RETURN properties(m) AS m
"""

#: Marker writes take the partition's checkpoint lock first, like every
#: other writer of what a unit of work holds in memory (LOCK_PARTITION).
PUT_REBUILD_MARKER: Final = """
MERGE (c:Checkpoint {topic: $p.topic, partition: $p.partition})
SET c.lock = $p.token
MERGE (m:RebuildMarker {tenant_id: $p.tenant, topic: $p.topic, partition: $p.partition})
SET m.topic_id = $p.topic_id, m.start_offset = $p.start_offset, m.end_offset = $p.end_offset,
    m.applied_through = $p.applied_through, m.state = $p.state
"""

CLOSE_REBUILD_MARKER: Final = """
MERGE (c:Checkpoint {topic: $p.topic, partition: $p.partition})
SET c.lock = $p.token
WITH c
OPTIONAL MATCH (m:RebuildMarker {tenant_id: $p.tenant, topic: $p.topic, partition: $p.partition})
DELETE m
RETURN count(m) AS closed
"""

IS_REBUILDING: Final = """
RETURN EXISTS { MATCH (m:RebuildMarker {tenant_id: $p.tenant}) } AS rebuilding
"""

ERASURE_TOMBSTONE: Final = """
MATCH (t:ErasureTombstone {tenant_id: $p.tenant})
RETURN properties(t) AS t
"""

PUT_ERASURE_TOMBSTONE: Final = """
MERGE (t:ErasureTombstone {tenant_id: $p.tenant})
SET t.topic = $p.topic, t.partition = $p.partition, t.topic_id = $p.topic_id, t.offset = $p.offset
"""

#: Every lookup of an applied id names its index: with the tenant-only index
#: beside it (``redstring_applied_tenant``, for the purge), Neo4j planned some
#: of them as a seek of the tenant's ids filtered by event id, a read of every
#: id the tenant ever applied, per id asked; cached, that plan made each unit
#: of work cost more as its tenant grew (docs/performance.md, "Applied ids").
_APPLIED_BY_KEY: Final = "USING INDEX SEEK a:AppliedEvent(tenant_id, event_id)"

APPLIED_EVENT_IDS: Final = f"""
UNWIND $p.ids AS id
MATCH (a:AppliedEvent {{tenant_id: $p.tenant, event_id: id}})
{_APPLIED_BY_KEY}
RETURN a.event_id AS id
"""

#: ``ERASURE_TOMBSTONE`` and ``APPLIED_EVENT_IDS`` for several tenants
#: (``$p.tenants``: maps of tenant and ids) in one statement.
_tenant_rows: Final = f"""UNWIND $p.tenants AS t
OPTIONAL MATCH (stone:ErasureTombstone {{tenant_id: t.tenant}})
RETURN t.tenant AS tenant, properties(stone) AS stone,
       COLLECT {{
         UNWIND t.ids AS id
         MATCH (a:AppliedEvent {{tenant_id: t.tenant, event_id: id}})
         {_APPLIED_BY_KEY}
         RETURN a.event_id
       }} AS applied"""

TENANT_LEDGERS: Final = _tenant_rows + "\n"

#: ``LOCK_PARTITION`` and then ``TENANT_LEDGERS`` in one statement: a unit of
#: work whose first call reads the tenant ledgers (the fold's order) takes its
#: lock with them, a round trip fewer (ADR 0004). A row per tenant of
#: ``$p.tenants`` (never empty), each with the partition's columns, read once
#: the lock is taken, as ``LOCK_PARTITION`` reads them.
_lock_with_tenant_rows: Final = _lock + "WITH " + _locked_columns + "\n" + _tenant_rows

LOCK_WITH_TENANT_LEDGERS: Final = _lock_with_tenant_rows + ",\n       offset, topic_id, markers\n"

#: ``LOCK_WITH_TENANT_LEDGERS`` for a unit of work across partitions
#: (``LOCK_PARTITIONS``): each tenant row carries ``held``.
_lock_each_with_tenant_rows: Final = _lock_each + "WITH " + _held_column + "\n" + _tenant_rows

LOCK_PARTITIONS_WITH_TENANT_LEDGERS: Final = _lock_each_with_tenant_rows + ",\n       held\n"

#: The walk from an id's ``AliasId`` node ``s`` to the end of its alias chain
#: (cypher.RESOLVE): the ends, their tenants and the longest walk's length.
#: Only ids with an outgoing alias edge are walked; the others resolve to
#: themselves.
resolve_walk: Final = """WHERE EXISTS { (s)-[:ALIAS_OF]->() }
CALL (s) {
  OPTIONAL MATCH walk = (s)-[:ALIAS_OF*]->(end:AliasId)
  WHERE NOT EXISTS { (end)-[:ALIAS_OF]->() }
  RETURN collect(end.id) AS ends, collect(end.tenant_id) AS tenants, max(length(walk)) AS hops
}
"""

#: ``LOCK_WITH_TENANT_LEDGERS`` that also walks each tenant row's ``resolve``
#: ids as ``RESOLVE`` does (``walks``: one map per id that has an alias), for
#: a unit of work told the ids its fold will resolve (``resolve_ahead``,
#: contracts.ports.graph.ResolutionAhead): the resolution's round trip rides
#: on the first statement's.
_walks_column: Final = (
    """COLLECT {
         UNWIND t.resolve AS id
         MATCH (s:AliasId {tenant_id: t.tenant, id: id})
         USING INDEX SEEK s:AliasId(tenant_id, id)
         """
    + resolve_walk
    + """         RETURN {id: id, tenant_id: s.tenant_id, ends: ends, tenants: tenants,
                 hops: hops}
       } AS walks"""
)

LOCK_WITH_TENANT_LEDGERS_AND_RESOLVE: Final = (
    _lock_with_tenant_rows + ",\n       " + _walks_column + ",\n       offset, topic_id, markers\n"
)

LOCK_PARTITIONS_WITH_TENANT_LEDGERS_AND_RESOLVE: Final = (
    _lock_each_with_tenant_rows + ",\n       " + _walks_column + ",\n       held\n"
)

RECORD_APPLIED_EVENTS: Final = """
UNWIND $p.ids AS id
MERGE (a:AppliedEvent {tenant_id: $p.tenant, event_id: id})
SET a.applied_at = $p.applied_at
"""

# Batched like the tenant purge: a tenant's applied ids can be many.
FORGET_APPLIED_EVENTS: Final = """
MATCH (a:AppliedEvent {tenant_id: $p.tenant})
WITH a LIMIT $p.batch
DELETE a
RETURN count(*) AS deleted
"""

EXPIRE_APPLIED_EVENTS: Final = """
MATCH (a:AppliedEvent) WHERE a.applied_at < $p.older_than
WITH a LIMIT $p.batch
DELETE a
RETURN count(*) AS deleted
"""

#: Acted-on control events (docs/design.md 6.4, "Control events act once"): a label of
#: their own, so that neither the applied-id deletes above nor the tenant purge
#: (which match their own labels) ever remove them. The first record of an id
#: is kept.
ACTED_CONTROL_EVENTS: Final = """
UNWIND $p.ids AS id
MATCH (c:ControlEvent {tenant_id: $p.tenant, event_id: id})
RETURN c.event_id AS id, c.offset AS offset
"""

RECORD_CONTROL_EVENT: Final = """
MERGE (c:ControlEvent {tenant_id: $p.tenant, event_id: $p.event_id})
ON CREATE SET c.offset = $p.offset, c.acted_at = $p.acted_at
"""
