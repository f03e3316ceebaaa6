"""Postgres + pgvector smoke test: store 384-dimension vectors and find the nearest by cosine."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import asyncpg
import pytest
from pgvector.asyncpg import register_vector

pytestmark = pytest.mark.services

DIMENSIONS = 384


def unit_vector(rng: random.Random) -> list[float]:
    values = [rng.gauss(0.0, 1.0) for _ in range(DIMENSIONS)]
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


async def test_insert_and_cosine_search_384_dimensions(
    pg_dsn: str, unique_name: Callable[[str], str]
) -> None:
    table = unique_name("smoke").replace("-", "_")
    rng = random.Random(384)
    vectors = {f"e-{i}": unit_vector(rng) for i in range(50)}
    conn = await asyncpg.connect(pg_dsn)
    try:
        assert await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        await register_vector(conn)
        await conn.execute(
            f"CREATE TABLE {table} (id text PRIMARY KEY, embedding vector({DIMENSIONS}) NOT NULL)"
        )
        try:
            await conn.executemany(
                f"INSERT INTO {table} (id, embedding) VALUES ($1, $2)", list(vectors.items())
            )
            # A query close to e-7: e-7 comes first, at a small cosine distance.
            query = [v + rng.gauss(0.0, 0.01) for v in vectors["e-7"]]
            rows = await conn.fetch(
                f"SELECT id, embedding <=> $1 AS distance, embedding FROM {table} "
                "ORDER BY embedding <=> $1 LIMIT 3",
                query,
            )
            assert rows[0]["id"] == "e-7"
            assert rows[0]["distance"] < 0.05 < 0.5 < rows[1]["distance"]
            stored = rows[0]["embedding"].to_list()
            assert len(stored) == DIMENSIONS
            assert stored == pytest.approx(vectors["e-7"], abs=1e-6)
        finally:
            await conn.execute(f"DROP TABLE {table}")
    finally:
        await conn.close()
