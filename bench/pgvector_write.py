"""Write throughput and exact search latency of the pgvector adapter.

    python -m bench.pgvector_write [--n 20000] [--batch 500] [--rounds 2]
                                   [--queries 50] [--large]

Writes: N 384-dimension vectors per side, in batches, into fresh tenants:

* adapter: the way the vector fold writes, one unit of work per batch
  (``upsert_many`` then ``advance_checkpoint``);
* ceiling: the fastest direct asyncpg code with the same semantics we could
  write, from the same ``VectorRecord`` inputs: per batch one transaction with
  the batch de-duplicated (last wins), an upsert ``ON CONFLICT (tenant_id, id)
  DO UPDATE`` and a checkpoint that cannot regress. Three shapes are measured
  (COPY into a staging table + INSERT ... SELECT, one INSERT ... unnest of
  arrays, executemany) and the fastest is the ceiling;
* reference: a bare COPY into an empty table (no conflict handling, no
  checkpoint, no de-duplication): what the wire and the heap cost alone.

Rounds alternate the order of the sides so machine noise hits all of them; the
best round of each is reported. Ratio = adapter rows/s / ceiling rows/s.

Search: exact k=10 latency (p50, p95) through ``PgVectorStore.search`` and
through the bare statement on one connection, for one tenant of 10k vectors
among 10 tenants of that size (100k rows); ``--large`` adds a tenant of 100k
among 10 (1M rows; several minutes to load).

Endpoint: REDSTRING_PG_DSN, else .devstack/env (run ``redstring dev up``
first). Everything lives in a fresh schema per side, dropped at the end.
Wall-clock numbers; no test asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import asyncpg
from pgvector import Vector
from pgvector.asyncpg import register_vector

from adapters.pgvector import PgVectorStore
from adapters.pgvector.sql import Statements
from contracts.domain import EmbeddingIdentity, StreamPartition, VectorRecord
from contracts.ids import EntityId, TenantId

DIMENSION = 384
IDENTITY = EmbeddingIdentity("bench-random", DIMENSION)
TYPES = ("person", "org", "place")

TABLE_DDL = """
CREATE TABLE {s}.vectors (tenant_id text NOT NULL, id text NOT NULL,
    embedding vector({dim}) NOT NULL, metadata jsonb NOT NULL, PRIMARY KEY (tenant_id, id));
CREATE TABLE {s}.checkpoints (topic text NOT NULL, partition integer NOT NULL,
    last_offset bigint NOT NULL, PRIMARY KEY (topic, partition));
"""
# A checkpoint that cannot move backwards, in one statement.
CHECKPOINT = """
INSERT INTO {s}.checkpoints (topic, partition, last_offset) VALUES ($1, $2, $3)
ON CONFLICT (topic, partition) DO UPDATE SET last_offset = EXCLUDED.last_offset
WHERE {s}.checkpoints.last_offset <= EXCLUDED.last_offset
"""
UPSERT_TAIL = (
    "ON CONFLICT (tenant_id, id) DO UPDATE "
    "SET embedding = EXCLUDED.embedding, metadata = EXCLUDED.metadata"
)


def dsn_from_environment() -> str:
    if os.environ.get("REDSTRING_PG_DSN"):
        return os.environ["REDSTRING_PG_DSN"]
    env = Path(__file__).resolve().parent.parent / ".devstack" / "env"
    for line in env.read_text().splitlines() if env.exists() else []:
        key, _, value = line.removeprefix("export ").partition("=")
        if key == "REDSTRING_PG_DSN":
            return value.strip().strip("'\"")
    raise SystemExit("no REDSTRING_PG_DSN and no .devstack/env: run `redstring dev up` first")


def random_vectors(rng: random.Random, count: int) -> list[tuple[float, ...]]:
    return [tuple(rng.random() - 0.5 for _ in range(DIMENSION)) for _ in range(count)]


def records(tenant: TenantId, vectors: Sequence[tuple[float, ...]]) -> list[VectorRecord]:
    return [
        VectorRecord(
            tenant_id=tenant,
            id=EntityId(f"e{i}"),
            vector=vector,
            metadata={"entity_type": TYPES[i % 3], "name": f"Entity {i}", "document_id": "d1"},
        )
        for i, vector in enumerate(vectors)
    ]


def batches(items: Sequence[VectorRecord], size: int) -> list[Sequence[VectorRecord]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def wire_rows(batch: Sequence[VectorRecord]) -> list[tuple[str, Vector, str]]:
    """What every same-semantics writer has to do to its input: last of an id
    wins, vectors to pgvector's binary form, metadata to JSON text."""
    latest = {r.id: r for r in batch}
    return [(r.id, Vector(list(r.vector)), json.dumps(r.metadata)) for r in latest.values()]


# -- the sides: each writes one batch ------------------------------------------------

Side = Callable[[TenantId, Sequence[VectorRecord], int], Awaitable[None]]


def adapter_side(store: PgVectorStore) -> Side:
    async def write(tenant: TenantId, batch: Sequence[VectorRecord], offset: int) -> None:
        partition = StreamPartition(f"bench-{tenant}", 0)
        async with store.unit_of_work(partition) as uow:
            await uow.upsert_many(tenant, batch)
            await uow.advance_checkpoint(partition, offset)

    return write


def copy_merge(conn: asyncpg.Connection, s: str) -> Side:
    merge = (
        f"INSERT INTO {s}.vectors SELECT $1, id, embedding, metadata FROM bench_stage "
        + UPSERT_TAIL
    )

    async def write(tenant: TenantId, batch: Sequence[VectorRecord], offset: int) -> None:
        async with conn.transaction():
            await conn.copy_records_to_table("bench_stage", records=wire_rows(batch))
            await conn.execute(merge, tenant)
            await conn.execute(CHECKPOINT.format(s=s), f"bench-{tenant}", 0, offset)

    return write


def unnest_insert(conn: asyncpg.Connection, s: str) -> Side:
    insert = (
        f"INSERT INTO {s}.vectors SELECT $1, u.id, u.e, u.m "
        f"FROM unnest($2::text[], $3::vector[], $4::jsonb[]) AS u(id, e, m) {UPSERT_TAIL}"
    )

    async def write(tenant: TenantId, batch: Sequence[VectorRecord], offset: int) -> None:
        ids, vectors, metadata = zip(*wire_rows(batch), strict=True)
        async with conn.transaction():
            await conn.execute(insert, tenant, list(ids), list(vectors), list(metadata))
            await conn.execute(CHECKPOINT.format(s=s), f"bench-{tenant}", 0, offset)

    return write


def executemany_insert(conn: asyncpg.Connection, s: str) -> Side:
    insert = f"INSERT INTO {s}.vectors VALUES ($1, $2, $3, $4::jsonb) {UPSERT_TAIL}"

    async def write(tenant: TenantId, batch: Sequence[VectorRecord], offset: int) -> None:
        async with conn.transaction():
            await conn.executemany(insert, [(tenant, *row) for row in wire_rows(batch)])
            await conn.execute(CHECKPOINT.format(s=s), f"bench-{tenant}", 0, offset)

    return write


def bare_copy(conn: asyncpg.Connection, s: str) -> Side:
    """Reference only: no de-duplication, no conflict handling, no checkpoint."""

    async def write(tenant: TenantId, batch: Sequence[VectorRecord], offset: int) -> None:
        await conn.copy_records_to_table(
            "vectors",
            schema_name=s.strip('"'),
            records=[(tenant, r.id, Vector(list(r.vector)), json.dumps(r.metadata)) for r in batch],
        )

    return write


DIRECT: dict[str, Callable[[asyncpg.Connection, str], Side]] = {
    "ceiling: COPY + INSERT SELECT": copy_merge,
    "ceiling: INSERT unnest": unnest_insert,
    "ceiling: executemany": executemany_insert,
    "reference: bare COPY": bare_copy,
}
ADAPTER = "adapter: unit of work"


# -- harness ------------------------------------------------------------------------


async def connect(dsn: str) -> asyncpg.Connection:
    conn = await asyncpg.connect(dsn)
    await register_vector(conn)
    return conn


async def bench_writes(dsn: str, n: int, size: int, rounds: int, prefix: str) -> dict[str, float]:
    """Rows/s per side. Batches are interleaved (batch i of every side, in an
    order that rotates, before batch i + 1 of any), so that the load other
    processes put on a shared machine lands on every side alike."""
    vectors = random_vectors(random.Random(384), n)
    store = await PgVectorStore.open(dsn, IDENTITY, schema=f"{prefix}_adapter", max_size=2)
    conns = {name: await connect(dsn) for name in DIRECT}
    schemas = {name: f'"{prefix}_direct{i}"' for i, name in enumerate(DIRECT)}
    for name, s in schemas.items():
        await conns[name].execute(f"CREATE SCHEMA {s};" + TABLE_DDL.format(s=s, dim=DIMENSION))
        await conns[name].execute(
            "CREATE TEMP TABLE bench_stage (id text, embedding vector, metadata jsonb) "
            "ON COMMIT DELETE ROWS"
        )
    sides: dict[str, Side] = {ADAPTER: adapter_side(store)}
    sides.update({name: make(conns[name], schemas[name]) for name, make in DIRECT.items()})
    seconds = dict.fromkeys(sides, 0.0)
    try:
        for _ in range(rounds):
            inputs = {}
            for name in sides:
                tenant = TenantId(f"t-{uuid.uuid4().hex[:8]}")
                inputs[name] = (tenant, batches(records(tenant, vectors), size))
            names = list(sides)
            for offset in range(len(inputs[ADAPTER][1])):
                names = names[1:] + names[:1]
                for name in names:
                    tenant, parts = inputs[name]
                    started = time.perf_counter()
                    await sides[name](tenant, parts[offset], offset)
                    seconds[name] += time.perf_counter() - started
    finally:
        await store.aclose()
        for name, s in schemas.items():
            await conns[name].execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
            await conns[name].close()
        dropper = await asyncpg.connect(dsn)
        await dropper.execute(f'DROP SCHEMA IF EXISTS "{store.schema}" CASCADE')
        await dropper.close()
    return {name: rounds * n / spent for name, spent in seconds.items()}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench_search(
    dsn: str, per_tenant: int, queries: int, prefix: str
) -> dict[str, tuple[float, float]]:
    rng = random.Random(per_tenant)
    schema = f"{prefix}_search{per_tenant}"
    store = await PgVectorStore.open(dsn, IDENTITY, schema=schema, max_size=2)
    conn = await connect(dsn)
    try:
        load_started = time.perf_counter()
        vectors = random_vectors(rng, per_tenant)
        tenants = [TenantId(f"t{i}-{uuid.uuid4().hex[:6]}") for i in range(10)]
        # Setup, not measured: COPY straight into the store's table. Other
        # tenants reuse the vectors; they are there to be filtered out.
        encoded = [Vector(list(v)) for v in vectors]
        for tenant in tenants:
            await conn.copy_records_to_table(
                "vectors",
                schema_name=schema,
                records=[
                    (tenant, f"e{i}", v, json.dumps({"entity_type": TYPES[i % 3]}))
                    for i, v in enumerate(encoded)
                ],
            )
        await conn.execute(f'VACUUM ANALYZE "{schema}".vectors')
        print(f"  loaded {10 * per_tenant:,} rows in {time.perf_counter() - load_started:.0f}s")
        target = tenants[3]
        probes = random_vectors(rng, queries + 5)
        sql = Statements(schema).search(by_type=False, approximate=False)
        latencies: dict[str, list[float]] = {"adapter": [], "bare statement": []}
        for i, probe in enumerate(probes):
            started = time.perf_counter()
            found = await store.search(target, probe, 10)
            adapter = time.perf_counter() - started
            started = time.perf_counter()
            rows = await conn.fetch(sql, target, Vector(list(probe)), 10)
            bare = time.perf_counter() - started
            assert [m.record.id for m in found] == [r["id"] for r in rows]
            if i >= 5:  # warm-up
                latencies["adapter"].append(adapter * 1000)
                latencies["bare statement"].append(bare * 1000)
        return {k: (statistics.median(v), percentile(v, 0.95)) for k, v in latencies.items()}
    finally:
        await store.aclose()
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="vectors written per side")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--large", action="store_true", help="also a 100k tenant among 10")
    args = parser.parse_args()
    dsn = dsn_from_environment()
    prefix = f"rs_bench_{uuid.uuid4().hex[:6]}"

    print(f"writes: {args.n:,} vectors of {DIMENSION} dimensions per side, batches of {args.batch}")
    best = await bench_writes(dsn, args.n, args.batch, args.rounds, prefix)
    ceiling_name = max((k for k in best if k.startswith("ceiling")), key=best.__getitem__)
    adapter = best[ADAPTER]
    print("\nrows/s over all rounds:")
    for name, rate in best.items():
        print(f"  {name:<32} {rate:>10,.0f}   adapter/this = {adapter / rate:.2f}")
    print(f"\nwrite ratio adapter/ceiling ({ceiling_name}) = {adapter / best[ceiling_name]:.2f}")

    sizes = [10_000, 100_000] if args.large else [10_000]
    for per_tenant in sizes:
        print(f"\nexact search, k=10, a tenant of {per_tenant:,} among 10 tenants of that size:")
        results = await bench_search(dsn, per_tenant, args.queries, prefix)
        for name, (p50, p95) in results.items():
            print(f"  {name:<16} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
        ratio = results["adapter"][0] / results["bare statement"][0]
        print(f"  p50 ratio adapter/bare statement = {ratio:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
