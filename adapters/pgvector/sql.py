"""The SQL text of the pgvector adapter, for one schema.

Identifiers (the schema, the extension's schema) are validated and quoted
here, once; every value reaches Postgres as a parameter. Ordering by id uses
``COLLATE "C"`` so that ties break by code point, as the reference store's
Python ``str`` ordering does, whatever the database's collation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SCHEMA_PATTERN", "Statements", "quote_identifier"]

#: A schema name the adapter accepts: lowercase, so that quoting changes nothing.
SCHEMA_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# A zero vector has no direction: pgvector's <=> answers NaN, the reference
# store scores it 0.0, i.e. a distance of 1.0. Postgres sorts NaN above every
# number, so the mapping must happen before ORDER BY, not after.
_DISTANCE = "COALESCE(NULLIF(v.embedding <=> $2, 'NaN'::float8), 1.0)"


def quote_identifier(name: str) -> str:
    if not SCHEMA_PATTERN.fullmatch(name):
        raise ValueError(f"schema name {name!r} must match {SCHEMA_PATTERN.pattern}")
    return f'"{name}"'


@dataclass(frozen=True)
class Statements:
    schema: str

    @property
    def s(self) -> str:
        return quote_identifier(self.schema)

    # -- vectors ------------------------------------------------------------

    @property
    def get(self) -> str:
        return (
            f"SELECT tenant_id, id, embedding, metadata::text FROM {self.s}.vectors "
            "WHERE tenant_id = $1 AND id = $2"
        )

    def search(self, *, by_type: bool, approximate: bool) -> str:
        """$1 tenant, $2 query, $3 k[, $4 entity type]. The tenant, the type and
        visibility are all inside the WHERE: pre-filtered, never top-k-then-drop."""
        where = [
            "v.tenant_id = $1",
            # Only a stored JSON *string* equal to the one asked for matches;
            # jsonb equality never equates "1" with 1 or "true" with true.
            *(["v.metadata -> 'entity_type' = to_jsonb($4::text)"] if by_type else []),
            f"NOT EXISTS (SELECT 1 FROM {self.s}.vector_aliases a "
            "WHERE a.tenant_id = v.tenant_id AND a.alias_id = v.id)",
        ]
        columns = "v.tenant_id, v.id, v.embedding, v.metadata::text"
        if not approximate:
            # The ORDER BY wraps <=> in an expression, so even a store that has
            # an HNSW index cannot answer this from it: exact by construction.
            return (
                f"SELECT {columns}, {_DISTANCE} AS distance FROM {self.s}.vectors v "
                f"WHERE {' AND '.join(where)} "
                'ORDER BY distance, v.id COLLATE "C" LIMIT $3'
            )
        # The bare <=> in the inner ORDER BY is what lets the HNSW index (with
        # iterative scans) serve it; relaxed_order may return it slightly out of
        # order, so the outer query sorts again, exactly as the exact one does.
        return (
            f"WITH nearest AS MATERIALIZED (SELECT {columns}, {_DISTANCE} AS distance "
            f"FROM {self.s}.vectors v WHERE {' AND '.join(where)} "
            "ORDER BY v.embedding <=> $2 LIMIT $3) "
            'SELECT * FROM nearest ORDER BY distance, id COLLATE "C"'
        )

    @property
    def upsert(self) -> str:
        """$1 tenant, $2 ids, $3 vectors, $4 metadata: the batch as three arrays
        in one statement. Measured against COPY into a staging table plus
        INSERT ... SELECT, and against executemany (bench/pgvector_write.py,
        docs/performance.md): as fast or faster at every batch size tried, in
        one round trip, with no per-connection staging table."""
        return (
            f"INSERT INTO {self.s}.vectors (tenant_id, id, embedding, metadata) "
            "SELECT $1, u.id, u.embedding, u.metadata "
            "FROM unnest($2::text[], $3::vector[], $4::jsonb[]) AS u(id, embedding, metadata) "
            "ON CONFLICT (tenant_id, id) DO UPDATE "
            "SET embedding = EXCLUDED.embedding, metadata = EXCLUDED.metadata"
        )

    @property
    def hide(self) -> str:
        return (
            f"INSERT INTO {self.s}.vector_aliases (tenant_id, alias_id, canonical_id) "
            "VALUES ($1, $2, $3) ON CONFLICT (tenant_id, alias_id) "
            "DO UPDATE SET canonical_id = EXCLUDED.canonical_id"
        )

    @property
    def unhide(self) -> str:
        return f"DELETE FROM {self.s}.vector_aliases WHERE tenant_id = $1 AND alias_id = $2"

    @property
    def alias_depths(self) -> str:
        """$1 tenant, $2 absorbed id, $3 canonical id, $4 limit: before
        writing $2 -> $3, the longest chain of aliases ending at $2 and the
        hops from $3 to its end, each counted up to $4 + 1
        (adapters.alias_depth)."""
        return (
            "WITH RECURSIVE"
            " below(id, depth) AS ("
            "  SELECT $2::text, 0"
            "  UNION ALL"
            "  SELECT a.alias_id, b.depth + 1 FROM below b"
            f"  JOIN {self.s}.vector_aliases a ON a.tenant_id = $1 AND a.canonical_id = b.id"
            "  WHERE b.depth <= $4"
            " ) CYCLE id SET looped USING path,"
            " above(id, depth) AS ("
            "  SELECT $3::text, 0"
            "  UNION ALL"
            "  SELECT a.canonical_id, u.depth + 1 FROM above u"
            f"  JOIN {self.s}.vector_aliases a ON a.tenant_id = $1 AND a.alias_id = u.id"
            "  WHERE u.depth <= $4"
            " ) CYCLE id SET looped USING path"
            " SELECT (SELECT max(depth) FROM below) AS below,"
            " (SELECT max(depth) FROM above) AS above"
        )

    @property
    def resolve(self) -> str:
        """$1 tenant, $2 start ids: every step of every chain, with a flag on
        the step that revisits an id (a corrupt cycle); the walk stops there."""
        return (
            "WITH RECURSIVE walk(start, current, depth) AS ("
            " SELECT s, s, 0 FROM unnest($2::text[]) AS s"
            " UNION ALL"
            " SELECT w.start, a.canonical_id, w.depth + 1 FROM walk w"
            f" JOIN {self.s}.vector_aliases a ON a.tenant_id = $1 AND a.alias_id = w.current"
            ") CYCLE current SET looped USING path "
            "SELECT start, current, depth, looped FROM walk"
        )

    def delete_some(self, table: str) -> str:
        """$1 tenant, $2 batch size: one bounded slice of a tenant's rows.

        The slice's keys are gathered once, as an array (an InitPlan), and
        the rows found by the primary key: joined to a CTE instead, a table
        whose statistics predate the tenant (analysed while it was small, as
        before a replay deletes the tenant it just loaded) was planned as a
        nested loop that rescanned the CTE for every row, quadratic (5.1 s
        for one tenant's 3,194 rows)."""
        key = {"vectors": "id", "vector_aliases": "alias_id"}[table]
        return (
            f"DELETE FROM {self.s}.{table} WHERE tenant_id = $1 AND {key} = ANY(ARRAY("
            f"SELECT {key} FROM {self.s}.{table} WHERE tenant_id = $1 LIMIT $2))"
        )

    @property
    def sweep(self) -> str:
        return (
            f"SELECT (SELECT count(*) FROM {self.s}.vectors WHERE tenant_id = $1) AS vectors, "
            f"(SELECT count(*) FROM {self.s}.vector_aliases WHERE tenant_id = $1) AS aliases"
        )

    # -- ledger ---------------------------------------------------------------

    @property
    def ensure_checkpoint_row(self) -> str:
        # A row with a NULL offset is only something to lock: "no checkpoint".
        return (
            f"INSERT INTO {self.s}.checkpoints (topic, partition, topic_id, last_offset) "
            "VALUES ($1, $2, $3, NULL) ON CONFLICT (topic, partition) DO NOTHING"
        )

    @property
    def lock_checkpoint(self) -> str:
        return (
            f"SELECT topic_id, last_offset FROM {self.s}.checkpoints "
            "WHERE topic = $1 AND partition = $2 FOR UPDATE"
        )

    @property
    def lock_checkpoints(self) -> str:
        # ORDER BY comes before the row locks, so they are taken in this
        # order: two units of work over overlapping partitions never deadlock
        # (contracts.ports.ledger.UnitsAcrossPartitions).
        return (
            f"SELECT topic, partition, topic_id, last_offset FROM {self.s}.checkpoints "
            "WHERE (topic, partition) IN (SELECT * FROM unnest($1::text[], $2::int[])) "
            "ORDER BY topic, partition FOR UPDATE"
        )

    @property
    def read_checkpoint(self) -> str:
        return (
            f"SELECT topic_id, last_offset FROM {self.s}.checkpoints "
            "WHERE topic = $1 AND partition = $2"
        )

    @property
    def advance_checkpoint(self) -> str:
        """$1 topic, $2 partition, $3 offset, $4 topic id. Changes the row only
        if that moves no checkpoint backwards and the topic id is not another
        incarnation's (as the reference ledger decides); the first real
        checkpoint takes the caller's topic id, later ones keep the stored one
        unless it was never known. Returns the row changed (none: refused)."""
        return (
            f"UPDATE {self.s}.checkpoints SET last_offset = $3, topic_id = CASE "
            "WHEN last_offset IS NULL OR topic_id = '' THEN $4 ELSE topic_id END "
            "WHERE topic = $1 AND partition = $2 AND (last_offset IS NULL OR "
            "(last_offset <= $3 AND (topic_id = '' OR $4 = '' OR topic_id = $4))) "
            "RETURNING topic_id, last_offset"
        )

    @property
    def all_checkpoints(self) -> str:
        return (
            f"SELECT topic, partition, last_offset FROM {self.s}.checkpoints "
            'WHERE last_offset IS NOT NULL ORDER BY topic COLLATE "C", partition'
        )

    @property
    def markers(self) -> str:
        return (
            "SELECT tenant_id, topic, partition, topic_id, start_offset, end_offset, "
            f"applied_through, state FROM {self.s}.rebuild_markers "
            'WHERE topic = $1 AND partition = $2 ORDER BY tenant_id COLLATE "C"'
        )

    @property
    def put_marker(self) -> str:
        return (
            f"INSERT INTO {self.s}.rebuild_markers (tenant_id, topic, partition, topic_id, "
            "start_offset, end_offset, applied_through, state) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
            "ON CONFLICT (tenant_id, topic, partition) DO UPDATE SET "
            "topic_id = EXCLUDED.topic_id, start_offset = EXCLUDED.start_offset, "
            "end_offset = EXCLUDED.end_offset, applied_through = EXCLUDED.applied_through, "
            "state = EXCLUDED.state"
        )

    @property
    def close_marker(self) -> str:
        return (
            f"DELETE FROM {self.s}.rebuild_markers "
            "WHERE tenant_id = $1 AND topic = $2 AND partition = $3"
        )

    @property
    def is_rebuilding(self) -> str:
        return f"SELECT EXISTS (SELECT 1 FROM {self.s}.rebuild_markers WHERE tenant_id = $1)"

    @property
    def tombstone(self) -> str:
        return (
            f"SELECT tenant_id, topic, partition, topic_id, erased_offset FROM {self.s}.tombstones "
            "WHERE tenant_id = $1"
        )

    @property
    def put_tombstone(self) -> str:
        return (
            f"INSERT INTO {self.s}.tombstones "
            "(tenant_id, topic, partition, topic_id, erased_offset) VALUES ($1, $2, $3, $4, $5) "
            "ON CONFLICT (tenant_id) DO UPDATE SET "
            "topic = EXCLUDED.topic, partition = EXCLUDED.partition, "
            "topic_id = EXCLUDED.topic_id, erased_offset = EXCLUDED.erased_offset"
        )

    @property
    def applied(self) -> str:
        return (
            f"SELECT event_id FROM {self.s}.applied_events "
            "WHERE tenant_id = $1 AND event_id = ANY($2::text[])"
        )

    @property
    def tenant_ledgers(self) -> str:
        # One statement for what ``tombstone`` and ``applied`` ask tenant by
        # tenant. The ids come as (tenant, id) pairs, and each pair is looked up
        # on its own (LATERAL): one primary-key probe per id whatever the plan
        # cached for the statement thinks the arrays hold.
        return (
            "SELECT 0 AS kind, tenant_id, topic, partition, topic_id, erased_offset, "
            f"NULL::text AS event_id FROM {self.s}.tombstones WHERE tenant_id = ANY($1::text[]) "
            "UNION ALL "
            "SELECT 1, a.tenant_id, NULL::text, NULL::integer, NULL::text, NULL::bigint, "
            "a.event_id "
            "FROM unnest($2::text[], $3::text[]) AS w(tenant_id, event_id) "
            "CROSS JOIN LATERAL ("
            f"SELECT tenant_id, event_id FROM {self.s}.applied_events "
            "WHERE tenant_id = w.tenant_id AND event_id = w.event_id) AS a"
        )

    @property
    def record_applied(self) -> str:
        return (
            f"INSERT INTO {self.s}.applied_events (tenant_id, event_id, applied_at) "
            "SELECT $1, e, $3 FROM unnest($2::text[]) AS e "
            "ON CONFLICT (tenant_id, event_id) DO UPDATE SET applied_at = EXCLUDED.applied_at"
        )

    @property
    def forget_applied(self) -> str:
        return f"DELETE FROM {self.s}.applied_events WHERE tenant_id = $1"

    @property
    def expire_applied(self) -> str:
        return f"DELETE FROM {self.s}.applied_events WHERE applied_at < $1"

    @property
    def acted_control(self) -> str:
        return (
            f"SELECT event_id, acted_offset FROM {self.s}.control_events "
            "WHERE tenant_id = $1 AND event_id = ANY($2::text[])"
        )

    @property
    def record_control(self) -> str:
        """$1 tenant, $2 event id, $3 offset, $4 time; the first record is kept."""
        return (
            f"INSERT INTO {self.s}.control_events (tenant_id, event_id, acted_offset, acted_at) "
            "VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id, event_id) DO NOTHING"
        )
