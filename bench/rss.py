"""Peak RSS of the projector under a stream of maximum-size events (issue 15).

    python -m bench.rss [--events 12] [--previous-events 3] [--entities 10000]
    python -m bench.rss --worker [--events 80] [--entities 10000]

Each side runs in a fresh process (peak RSS is per process) and feeds
``--events`` DocumentExtracted events of ``--entities`` entities each (10,000:
the most an event may hold; about 0.9 MB, near the 1 MB value limit), each
with a quarter as many relationships, to the worker loop and projector over the
real stores (Neo4j and Postgres/pgvector), handed over as one consumer batch,
the way Faust hands ``REDSTRING_BATCH_SIZE`` records:

* bounded: the default settings (the batch cut into sub-batches by
  ``REDSTRING_BATCH_MAX_BYTES`` and ``REDSTRING_BATCH_MAX_ENTITIES``, embedding
  and writes in chunks of ``REDSTRING_WRITE_CHUNK_ENTITIES``);
* previous: no sub-batches and one embedding call and one write per run, as
  before; it grows by about 200 MB per event, so it is run on fewer events.

Reports peak RSS (``ru_maxrss``), RSS before the batch, and events/s (for
information: wall-clock on a shared machine). Endpoints: REDSTRING_*, else
.devstack/env. Each side writes a fresh tenant under a fresh topic name and a
fresh Postgres schema, deleted at the end. No test asserts on these numbers.

``--worker`` measures a real ``redstring worker`` process instead: it
publishes ``--events`` such events (spread over the tenants of a fresh topic of
the default partition count, created as ``redstring topics create`` does),
then starts one worker with the default settings (plus the endpoints, a fresh
group and Postgres schema) on that backlog, waits until both stores' positions
reach the log end on every partition, and reports the worker's peak RSS
(``VmHWM`` of /proc/<pid>/status: Faust's queue, the batch being taken, the
consumer's fetches and the projector all count) and events/s from the moment
it answers /readyz. ``--entities 400`` gives ordinary ~37 KB events.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from bench.e2e import load_stack_env


def max_event(tenant: str, index: int, entities: int) -> bytes:
    """One DocumentExtracted of ``entities`` entities and a quarter as many edges."""
    from contracts.events import event_to_json, make_event

    prefix = f"d{index}-"
    payload = {
        "document_id": f"doc-{index}",
        "extraction_model": "bench",
        "entities": [
            {"id": f"{prefix}{i}", "name": f"Entity {index} {i}", "type": "Person"}
            for i in range(entities)
        ],
        "relationships": [
            {"source": f"{prefix}{i}", "target": f"{prefix}{i + 1}", "type": "KNOWS"}
            for i in range(0, entities - 1, 4)
        ],
    }
    return event_to_json(make_event("DocumentExtracted", tenant, payload))


class Consumer:
    """streams.worker.loop.Consumer for one partition that is always assigned."""

    def __init__(self) -> None:
        self.committed: dict[int, int] = {}

    def assigned(self) -> set[int]:
        return {0}

    async def commit(self, offsets: Mapping[int, int]) -> None:
        self.committed.update(offsets)

    async def seek(self, partition: int, offset: int) -> None:
        raise AssertionError(f"the bench never needs a seek (partition {partition}, {offset})")

    def pause(self, partition: int) -> None:
        raise AssertionError("the bench never pauses")

    def resume(self, partition: int) -> None:
        pass

    async def log_end(self, partitions: Collection[int]) -> Mapping[int, int]:
        return dict.fromkeys(partitions, 0)


class Sink:
    def __init__(self) -> None:
        self.letters: list[Any] = []

    async def send(self, letters: Sequence[Any]) -> None:
        self.letters.extend(letters)


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


async def side(previous: bool, events: int, entities: int) -> dict[str, Any]:
    """One side, in this process."""
    import asyncpg

    from projections.graph import GraphProjection
    from projections.vector import VectorProjection
    from streams.settings import Settings
    from streams.wiring import open_stores
    from streams.worker.bounds import UNBOUNDED, batch_bounds
    from streams.worker.loop import WorkerLoop
    from streams.worker.metrics import Metrics
    from streams.worker.projector import Projector, RawRecord

    schema = f"rss_{uuid.uuid4().hex[:10]}"
    settings = Settings(pg_schema=schema)
    tenant = f"rss-{uuid.uuid4().hex[:10]}"
    chunk = 10**9 if previous else settings.write_chunk_entities
    stores = await open_stores(settings)
    try:
        dimension = stores.vector.dimension
        projector = Projector(
            [
                GraphProjection(stores.graph, embedding_dimension=dimension, chunk=chunk),
                VectorProjection(stores.vector, stores.embedder, chunk=chunk),
            ],
            Sink(),
            topic=f"rss-bench-{uuid.uuid4().hex[:10]}",
            topic_id=uuid.uuid4().hex,
            control_key=None,
            metrics=Metrics(),
            limits=settings.event_limits(),
        )
        consumer = Consumer()
        loop = WorkerLoop(
            projector, consumer, bounds=UNBOUNDED if previous else batch_bounds(settings)
        )
        # The consumer's batch in hand: every value, as Faust holds them.
        values = [max_event(tenant, i, entities) for i in range(events)]
        before = rss_mb()
        started = time.monotonic()
        batch = {0: [RawRecord(i, tenant.encode(), value) for i, value in enumerate(values)]}
        await loop.on_batch(batch)
        elapsed = time.monotonic() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
        assert consumer.committed.get(0) == events, consumer.committed
        return {
            "side": "previous" if previous else "bounded",
            "events": events,
            "entities_per_event": entities,
            "event_bytes": max(len(v) for v in values),
            "rss_before_mb": round(before, 1),
            "peak_rss_mb": round(peak, 1),
            "events_per_s": round(events / elapsed, 2),
            "batch_max_bytes": None if previous else settings.batch_max_bytes,
            "batch_max_entities": None if previous else settings.batch_max_entities,
            "write_chunk_entities": None if previous else chunk,
        }
    finally:
        from contracts.ids import TenantId

        await stores.graph.delete_by_tenant(TenantId(tenant))
        await stores.aclose()
        conn = await asyncpg.connect(settings.pg_dsn.get_secret_value())
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


def run_side(previous: bool, events: int, entities: int) -> dict[str, Any]:
    """``side`` in a fresh process, so that its peak RSS is its own."""
    args = [sys.executable, "-m", "bench.rss", "--child", "previous" if previous else "bounded"]
    args += ["--events", str(events), "--entities", str(entities)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def vm_hwm_mb(pid: int) -> float:
    """Peak resident set size of a live process (VmHWM, in kB)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1e3
    raise RuntimeError(f"no VmHWM for {pid}")


def start_worker(env: Mapping[str, str], port: int, log: Any) -> subprocess.Popen[bytes]:
    """``redstring worker`` with the default settings plus ``env``."""
    return subprocess.Popen(
        [sys.executable, "-m", "streams", "worker"],
        env={
            **os.environ,
            **env,
            "REDSTRING_HTTP_HOST": "127.0.0.1",
            "REDSTRING_HTTP_PORT": str(port),
            "REDSTRING_LOG_LEVEL": "WARNING",
        },
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def answers_ready(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
            return int(response.status) == 200
    except OSError:
        return False


async def worker_side(
    events: int, entities: int, within: float, stop_after: float | None = None
) -> dict[str, Any]:
    """Publish a backlog of ``events``, run one worker process on it until both
    stores reach the log end (or for ``stop_after`` seconds past /readyz), and
    report its peak RSS."""
    import socket
    import tempfile

    import asyncpg
    from neo4j import AsyncGraphDatabase

    from contracts.domain import StreamPartition
    from contracts.ids import TenantId
    from projections.admission import next_needed_offset
    from streams.kafka.producer import AsyncProducer
    from streams.kafka.topics import admin_client, create_topics, describe_topic
    from streams.settings import Settings
    from streams.wiring import open_stores

    run = uuid.uuid4().hex[:10]
    topic = f"rss-worker-{run}"
    env = {
        "REDSTRING_TOPIC": topic,
        "REDSTRING_GROUP_ID": f"{topic}-group",
        "REDSTRING_PG_SCHEMA": f"rss_{run}",
    }
    settings = Settings(topic=topic, group_id=env["REDSTRING_GROUP_ID"], pg_schema=f"rss_{run}")
    partitions = settings.partitions
    tenants = [f"rss-{run}-{i}" for i in range(partitions)]
    create_topics(settings)
    info = describe_topic(settings)
    stores = await open_stores(settings)  # migrates the schema once, before the worker
    proc: subprocess.Popen[bytes] | None = None
    log = tempfile.TemporaryFile()
    try:
        producer = AsyncProducer(settings)
        try:
            size = 0
            futures = []
            for i in range(events):
                tenant = tenants[i % len(tenants)]
                value = max_event(tenant, i, entities)
                size = max(size, len(value))
                headers: list[tuple[str, str | bytes | None]] = [
                    ("event_type", b"DocumentExtracted"),
                    ("schema_version", b"1"),
                ]
                futures.append(producer.send(topic, tenant.encode(), value, headers))
                del value
            await asyncio.gather(*futures)
        finally:
            await asyncio.to_thread(producer.close)
        highs = {p.partition: p.high for p in describe_topic(settings).partitions}
        assert sum(highs.values()) == events, highs
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        proc = start_worker(env, port, log)
        deadline = time.monotonic() + within
        started: float | None = None
        while True:
            if proc.poll() is not None:
                log.seek(0)
                err = log.read().decode(errors="replace")
                raise RuntimeError(f"worker exited with {proc.returncode}:\n{err[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker not caught up within {within}s")
            if started is None:
                if await asyncio.to_thread(answers_ready, port):
                    started = time.monotonic()
            applied = 0
            for p, high in highs.items():
                part = StreamPartition(topic, p, info.topic_id)
                graph = await next_needed_offset(stores.graph, part)
                vector = await next_needed_offset(stores.vector, part)
                applied += min(graph, vector, high)
            done = applied >= events
            if stop_after and started is not None and time.monotonic() - started > stop_after:
                break
            if done:
                break
            await asyncio.sleep(0.2)
        elapsed = time.monotonic() - (started if started is not None else deadline - within)
        peak = vm_hwm_mb(proc.pid)
        return {
            "side": "worker",
            "events": events,
            "entities_per_event": entities,
            "event_bytes": size,
            "partitions": partitions,
            "peak_rss_mb": round(peak, 1),
            "applied": applied,
            "events_per_s": round(applied / elapsed, 2),
            "batch_size": settings.batch_size,
            "batch_max_bytes": settings.batch_max_bytes,
            "read_ahead_bytes": settings.read_ahead_bytes,
        }
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for tenant in tenants:
            await stores.graph.delete_by_tenant(TenantId(tenant))
        await stores.aclose()
        auth = (settings.neo4j_user, settings.neo4j_password.get_secret_value())
        async with AsyncGraphDatabase.driver(settings.neo4j_uri, auth=auth) as driver:
            async with driver.session(database=settings.neo4j_database) as session:
                result = await session.run(
                    "MATCH (c:Checkpoint) WHERE c.topic = $t DELETE c", t=topic
                )
                await result.consume()
        conn = await asyncpg.connect(settings.pg_dsn.get_secret_value())
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{settings.pg_schema}" CASCADE')
        finally:
            await conn.close()
        log.close()
        admin = admin_client(settings)
        for future in admin.delete_topics([topic, settings.dlq_topic]).values():
            with contextlib.suppress(Exception):
                future.result()
        with contextlib.suppress(Exception):
            admin.delete_consumer_groups([env["REDSTRING_GROUP_ID"]])


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        "| side | events | entities/event | peak RSS MB | RSS before MB | MB/event | events/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = (r["peak_rss_mb"] - r["rss_before_mb"]) / r["events"]
        lines.append(
            f"| {r['side']} | {r['events']} | {r['entities_per_event']} | {r['peak_rss_mb']} "
            f"| {r['rss_before_mb']} | {per:.1f} | {r['events_per_s']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=None, help="12; 80 with --worker")
    parser.add_argument("--previous-events", type=int, default=3, help="0: skip that side")
    parser.add_argument("--entities", type=int, default=10_000)
    parser.add_argument(
        "--worker", action="store_true", help="a real worker process (default --events 80)"
    )
    parser.add_argument("--within", type=float, default=900.0, help="--worker: give up after")
    parser.add_argument(
        "--stop-after",
        type=float,
        default=None,
        help="--worker: report after this many seconds past /readyz, caught up or not",
    )
    parser.add_argument("--child", choices=["bounded", "previous"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    load_stack_env()
    if args.worker:
        events = args.events if args.events is not None else 80
        row = asyncio.run(worker_side(events, args.entities, args.within, args.stop_after))
        print(json.dumps(row))
        print(
            f"worker: {row['applied']}/{row['events']} events of {row['event_bytes']} bytes "
            "applied, "
            f"peak RSS {row['peak_rss_mb']} MB, {row['events_per_s']} events/s"
        )
        return
    args.events = args.events if args.events is not None else 12
    if args.child:
        result = asyncio.run(side(args.child == "previous", args.events, args.entities))
        print(json.dumps(result))
        return
    rows = [run_side(False, args.events, args.entities)]
    if args.previous_events:
        rows.append(run_side(True, args.previous_events, args.entities))
    for row in rows:
        print(json.dumps(row))
    print(table(rows))


if __name__ == "__main__":
    main()
