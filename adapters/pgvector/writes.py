"""The three ways ``upsert_many`` can send a batch, kept side by side so that
``bench/pgvector_write.py`` measures them against each other in one run.

All three have the same semantics: rows are already de-duplicated by id
(last occurrence wins, which is what applying the batch in order leaves), and
each row replaces the stored vector and metadata under (tenant, id).
``upsert_rows`` is the one the adapter uses; the benchmark's numbers in
docs/performance.md are why.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
from pgvector import Vector

from adapters.pgvector.sql import STAGE_TABLE, Statements

__all__ = [
    "COPY_THRESHOLD",
    "Row",
    "copy_upsert",
    "executemany_upsert",
    "unnest_upsert",
    "upsert_rows",
]

#: (id, vector, metadata as JSON text)
Row = tuple[str, Vector, str]

#: Below this many rows one statement beats COPY's three round trips.
COPY_THRESHOLD = 64


async def copy_upsert(
    conn: asyncpg.Connection, sql: Statements, tenant: str, rows: Sequence[Row]
) -> None:
    """COPY (binary) into the connection's staging table, then one
    INSERT ... SELECT ... ON CONFLICT. The staging table is emptied first, not
    after: a unit of work may stage several batches in one transaction."""
    await conn.execute(sql.clear_stage)
    await conn.copy_records_to_table(
        STAGE_TABLE, records=rows, columns=("id", "embedding", "metadata")
    )
    await conn.execute(sql.upsert_from_stage, tenant)


async def unnest_upsert(
    conn: asyncpg.Connection, sql: Statements, tenant: str, rows: Sequence[Row]
) -> None:
    """One statement: the batch as three arrays, unnested server-side."""
    ids, vectors, metadata = zip(*rows, strict=True) if rows else ((), (), ())
    await conn.execute(sql.upsert_unnest, tenant, list(ids), list(vectors), list(metadata))


async def executemany_upsert(
    conn: asyncpg.Connection, sql: Statements, tenant: str, rows: Sequence[Row]
) -> None:
    """One prepared INSERT ... ON CONFLICT, pipelined per row."""
    await conn.executemany(sql.upsert_one, [(tenant, *row) for row in rows])


async def upsert_rows(
    conn: asyncpg.Connection, sql: Statements, tenant: str, rows: Sequence[Row]
) -> None:
    if len(rows) < COPY_THRESHOLD:
        await unnest_upsert(conn, sql, tenant, rows)
    else:
        await copy_upsert(conn, sql, tenant, rows)
