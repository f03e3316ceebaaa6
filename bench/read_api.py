"""Latency of the read API beside the same call through the Python ports.

    python -m bench.read_api [--sizes 10000 100000] [--calls 300] [--json FILE]

For each size N: one fresh tenant of N entities (each with an edge to the
next and to the seventh next, so about four neighbours, and a 384-dimension
vector from the built-in hashing embedder) is written through the ports into
the local stack's Neo4j and a fresh Postgres schema. Then `redstring serve`
runs as its own process (as deployed; plain uvicorn, one worker) and each
operation is timed one call at a time, alternating sides call by call so that
noise hits both:

* get-entity: ``GET /v1/tenants/T/entities/{id}`` vs ``graph.get_entity``;
* neighbours: ``GET .../neighbors/{id}`` vs ``graph.neighbors``;
* search: ``POST .../search`` with a 384-float vector, k=10, vs
  ``vector.search`` with the same vector.

The port side opens the stores with ``open_readers`` in this process, as a
Python reader would. The HTTP side is an httpx client on one kept-alive
connection; its time includes the JSON encoding of the request and the decoding
of the answer. Ratio = HTTP p50 (p95) / port p50 (p95).

Endpoints: the REDSTRING_* environment, else .devstack/env (``redstring dev
up`` first). The tenant's Neo4j data and the Postgres schema are deleted at the
end. Wall-clock numbers; no test asserts on them (docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import jwt

from contracts.domain import Entity, Relationship, VectorRecord
from contracts.ids import EntityId, TenantId
from streams.settings import Settings
from streams.wiring import Stores, open_readers, open_stores

ROOT = Path(__file__).resolve().parent.parent
SECRET = "bench-read-api-secret-of-at-least-32-bytes"
CHUNK = 2000
TYPES = ("Person", "Organization", "Place")


def stack_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith("REDSTRING_")}
    path = ROOT / ".devstack" / "env"
    for line in path.read_text().splitlines() if path.exists() else []:
        line = line.removeprefix("export ").strip()
        if line.startswith("REDSTRING_") and "=" in line:
            key, value = line.split("=", 1)
            env.setdefault(key, value.strip("'\""))
    return env


def settings_of(env: dict[str, str]) -> Settings:
    fields = {f"REDSTRING_{n.upper()}": n for n in Settings.model_fields}
    return Settings(**{fields[k]: v for k, v in env.items() if k in fields})  # type: ignore[arg-type]


async def load(stores: Stores, tenant: TenantId, n: int) -> None:
    ids = [EntityId(f"e{i:07d}") for i in range(n)]
    for start in range(0, n, CHUNK):
        chunk = ids[start : start + CHUNK]
        entities = [
            Entity(tenant, i, f"entity {i} of the bench", TYPES[k % 3], {"rank": k})
            for k, i in enumerate(chunk, start)
        ]
        await stores.graph.upsert_entities(tenant, entities)
        vectors = await stores.embedder.embed_documents([e.name for e in entities])
        await stores.vector.upsert_many(
            tenant,
            [
                VectorRecord(tenant, e.id, tuple(v), {"entity_type": e.type})
                for e, v in zip(entities, vectors, strict=True)
            ],
        )
    for start in range(0, n, CHUNK):
        edges = [
            Relationship(tenant, ids[k], ids[(k + step) % n], kind, 0.9)
            for k in range(start, min(start + CHUNK, n))
            for step, kind in ((1, "NEXT"), (7, "SEVENTH"))
        ]
        await stores.graph.upsert_relationships(tenant, edges)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    server_env = {
        **os.environ,
        **env,
        "REDSTRING_SERVE_HOST": "127.0.0.1",
        "REDSTRING_SERVE_PORT": str(port),
        "REDSTRING_SERVE_JWT_KEY": SECRET,
        # Its warnings and errors only: a request line per call would time the
        # log file's disk instead.
        "REDSTRING_LOG_LEVEL": "WARNING",
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "streams", "serve"],
            env=server_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        if process.poll() is not None:
            raise RuntimeError(f"redstring serve exited; see {log}")
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("redstring serve did not become ready")


def percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=20, method="inclusive")
    return statistics.median(samples) * 1000, cuts[18] * 1000


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


async def measure(
    readers: Stores, client: httpx.AsyncClient, tenant: TenantId, n: int, calls: int
) -> dict[str, dict[str, float]]:
    rng = random.Random(n)
    query = [rng.uniform(-1, 1) for _ in range(readers.vector.dimension)]
    graph, vector = readers.graph, readers.vector
    base = f"/v1/tenants/{tenant}"

    async def ok(response: Awaitable[httpx.Response]) -> None:
        (await response).raise_for_status()

    def operations(i: EntityId) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
        return {
            "get-entity": (
                lambda: graph.get_entity(tenant, i),
                lambda: ok(client.get(f"{base}/entities/{i}")),
            ),
            "neighbours": (
                lambda: graph.neighbors(tenant, i),
                lambda: ok(client.get(f"{base}/neighbors/{i}")),
            ),
            "search": (
                lambda: vector.search(tenant, query, 10),
                lambda: ok(client.post(f"{base}/search", json={"vector": query, "limit": 10})),
            ),
        }

    results: dict[str, dict[str, float]] = {}
    for name in ("get-entity", "neighbours", "search"):
        port: list[float] = []
        http: list[float] = []
        warmup = 20
        for k in range(calls + warmup):
            entity = EntityId(f"e{rng.randrange(n):07d}")
            port_call, http_call = operations(entity)[name]
            first, second = (port_call, http_call) if k % 2 else (http_call, port_call)
            a, b = await timed(first), await timed(second)
            if k < warmup:
                continue
            port.append(a if first is port_call else b)
            http.append(b if first is port_call else a)
        port_p50, port_p95 = percentiles(port)
        http_p50, http_p95 = percentiles(http)
        results[name] = {
            "port_p50_ms": round(port_p50, 3),
            "port_p95_ms": round(port_p95, 3),
            "http_p50_ms": round(http_p50, 3),
            "http_p95_ms": round(http_p95, 3),
            "ratio_p50": round(http_p50 / port_p50, 2),
            "ratio_p95": round(http_p95 / port_p95, 2),
        }
    return results


async def run_size(env: dict[str, str], n: int, calls: int) -> dict[str, dict[str, float]]:
    settings = settings_of(env)
    tenant = TenantId(f"bench-read-{uuid.uuid4().hex[:8]}")
    writer = await open_stores(settings)
    try:
        started = time.perf_counter()
        await load(writer, tenant, n)
        print(f"  loaded {n} entities in {time.perf_counter() - started:.0f}s", flush=True)
        port = free_port()
        server = start_server(env, port, Path(f"/tmp/bench-read-api-{tenant}.log"))
        print(f"  server log: /tmp/bench-read-api-{tenant}.log", flush=True)
        readers = await open_readers(settings)
        token = jwt.encode({"tenant_id": tenant, "exp": int(time.time()) + 3600}, SECRET, "HS256")
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            ) as client:
                return await measure(readers, client, tenant, n, calls)
        finally:
            await readers.aclose()
            server.terminate()
            server.wait(timeout=30)
    finally:
        await writer.graph.delete_by_tenant(tenant)
        await writer.vector.delete_by_tenant(tenant)
        await writer.aclose()


async def drop_schema(env: dict[str, str], schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(env["REDSTRING_PG_DSN"])
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    schema = f"bench_read_{uuid.uuid4().hex[:8]}"
    env = {**stack_environment(), "REDSTRING_PG_SCHEMA": schema}
    report: dict[str, Any] = {"calls": args.calls, "sizes": {}}
    try:
        for n in args.sizes:
            print(f"{n} entities per tenant:", flush=True)
            results = asyncio.run(run_size(env, n, args.calls))
            report["sizes"][str(n)] = results
            print(
                f"  {'operation':<11} {'port p50/p95 ms':>17} {'HTTP p50/p95 ms':>17} "
                f"{'ratio p50/p95':>14}"
            )
            for name, r in results.items():
                print(
                    f"  {name:<11} {r['port_p50_ms']:>8.2f}/{r['port_p95_ms']:<8.2f}"
                    f" {r['http_p50_ms']:>8.2f}/{r['http_p95_ms']:<8.2f}"
                    f" {r['ratio_p50']:>6.2f}/{r['ratio_p95']:<6.2f}",
                    flush=True,
                )
    finally:
        asyncio.run(drop_schema(env, schema))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
