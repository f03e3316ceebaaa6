"""End-to-end projection speed on the real stack, side by side with the stores'
ceiling, the Kafka ceiling and a peer (docs/design.md 10; issue 10).

    python -m bench.e2e [--size tiny|small|large|xlarge] [--seed N] [--no-peer]
                        [--capacity PxW] [--profile] [--results DIR] [--keep]
                        [--latency-rate EVENTS_PER_S] [--latency-seconds S]
                        [--latency-levels FRACTIONS]

One run, on the local stack (``redstring dev up``; endpoints from REDSTRING_*
or ``.devstack/env``):

1. A seeded workload (``bench/workload.py``): T tenants of Zipf-like sizes,
   extractions of 5-20 entities and 5-30 relationships with 384-dimension
   embeddings in the events, about 2% merges and 0.5% unmerges.
2. Rounds; in each, every side gets the same log under its own tenant ids, in
   an order that rotates from round to round (the machine is shared: noise
   should land on every side alike):

   * ``ceiling``: the same rows written straight into Neo4j and pgvector by
     the direct code of ``bench/neo4j_write.py`` and ``bench/pgvector_write.py``
     (no Kafka, no folds, no alias resolution; both stores written
     concurrently, 500 events per chunk);
   * ``kafka``: a bare confluent-kafka consumer reading the topic, doing nothing;
   * ``redstring 1w`` / ``redstring 2w``: one or two ``python -m streams
     worker`` processes on a fresh 12-partition topic, until both stores'
     checkpoints hold the whole log;
   * ``quix``: Quix Streams with its Neo4j and PostgreSQL sinks
     (``bench/quix_peer.py``), in its own virtualenv under
     ``~/.cache/redstring/bench/quix-venv``, until its group's committed
     offsets reach the end of the topic (its sinks flush before it commits);
   * ``capacity`` (with ``--capacity PxW``, e.g. ``24x3``): W worker
     processes on a fresh topic of P partitions (tenant i on partition
     i mod P), for the capacity model of docs/scaling.md.

   A side's time runs from the moment its consumer is ready to read (the
   worker's "committed the stores' positions" log line after its first
   rebalance; Quix's first message) to the moment the whole log is visible.
3. End-to-end latency at fixed offered loads, 25%, 50% and 90% of the
   1-worker throughput just measured (last round), each level paced for the
   size's ``latency_seconds``: a paced producer publishes to the 1-worker
   side's topic while its worker runs; each event's latency is publish to
   visible in both stores (checkpoints polled every 50 ms).
4. Replay: one large tenant alone on a topic, projected once, then rebuilt by
   a signed ``TenantReplayRequested`` (online replay); replay time over first
   projection time. Cost per event as the graph grows: seconds per event over
   the 10-20% tenth vs the last 10% of that first projection (one tenant
   alone: a whole log's last tenth is its largest partition finishing alone,
   which says more about the tenants' sizes than about the graph's).

Writes ``bench/results/latest.md`` (the README table: ``python -m
bench.readme`` splices it in), ``latest.json`` and ``throughput.png``
(throughput over the run; ``--plot docs/bench-throughput.png`` copies it).
Everything it creates (topics, groups, tenants, schemas) is named
``bench-<run>``/``bench_<run>`` and removed at the end; a round's topics
(about 37 KB per event each) are removed as soon as the round ends. Wall-clock
numbers; no test asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from bench.workload import DIMENSION, SIZES, Planned, Size, Workload, generate, render, tenant_names
from streams.kafka.config import librdkafka_config

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PLOT = ROOT / "docs" / "bench-throughput.png"
QUIX_VENV = Path.home() / ".cache" / "redstring" / "bench" / "quix-venv"
QUIX_PACKAGES = ["quixstreams==3.28.1", "neo4j==6.4.1", "psycopg2-binary==2.9.13"]
PARTITIONS = 12
LATENCY_LEVELS = (0.25, 0.5, 0.9)  # offered load, as fractions of the 1-worker rate
REPLAY_BATCH = 100  # the replay phase's batch size (see Bench.replay)
#: fewer distinct progress steps than this in the growth projection, and each
#: tenth of it falls inside one or two commits: the figure is flagged
GROWTH_STEPS = 20
CHUNK = 2000  # the ceiling's events per write: fewer, larger statements per tenant
CONTROL_KEY = "bench-control-key"
READY_LINE = "committed the stores' positions"
#: every label whose nodes carry a tenant_id: the workers', the peer's, the ceiling's
TENANT_LABELS = (
    "Entity",
    "AliasId",
    "AppliedEvent",
    "RebuildMarker",
    "ErasureTombstone",
    "ControlEvent",
    "QuixEntity",
    "QuixAlias",
    "BenchCeilingAlias",
)
INDEXES = {
    "bench_quix_entity": "QuixEntity",
    "bench_quix_alias": "QuixAlias",
    "bench_ceiling_alias": "BenchCeilingAlias",
}


def load_stack_env() -> None:
    """REDSTRING_* from the environment, else from .devstack/env."""
    stack = ROOT / ".devstack" / "env"
    if not stack.exists():
        return
    for line in stack.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        if key.strip():
            os.environ.setdefault(key.strip(), value.strip().strip("'\""))


# -- results ------------------------------------------------------------------------


@dataclass
class Side:
    name: str
    round: int
    events: int
    entities: int
    relationships: int
    seconds: float
    #: (seconds since the side's start, events visible)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    peak_rss_mb: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    #: CPU seconds each local server (devstack) spent while the side ran
    server_cpu: dict[str, float] = field(default_factory=dict)
    #: the machine's one-minute load average when the side ended
    load: float = 0.0
    #: per worker process, the partitions it held last (its log's last
    #: "committed the stores' positions" line)
    assignment: list[list[int]] = field(default_factory=list)
    #: seconds from the first worker's readiness to the last assignment of
    #: any worker (the group's rebalances while workers join); 0 for one
    settle_s: float = 0.0
    #: what the run's earlier sides had left in the stores when this side
    #: started, before ``Bench.fresh_stores`` removed it (empty with --accumulate)
    store_before: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class Report:
    run: str
    size: str
    seed: int
    started: str
    workload: dict[str, Any]
    machine: dict[str, Any]
    sides: list[Side] = field(default_factory=list)
    #: per offered level ("0.25", "0.5", "0.9" of the 1-worker rate): p50 ...
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the rate the levels are fractions of, when given (--latency-rate);
    #: None: the 1-worker rate measured in the same round
    latency_rate: float | None = None
    replay: dict[str, float] = field(default_factory=dict)
    #: the replay tenant's first projection (one partition, batches of REPLAY_BATCH)
    growth: dict[str, float] = field(default_factory=dict)
    #: the capacity side's shape, {"partitions": P, "workers": W}, if it ran
    capacity: dict[str, int] = field(default_factory=dict)
    #: the sides' order in each round
    order: list[list[str]] = field(default_factory=list)
    #: events per partition of the 12-partition and the capacity sides' topics
    partition_events: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: what the rounds had left in the stores before the replay phase (removed)
    replay_store_before: dict[str, int] = field(default_factory=dict)
    #: the untimed round 0: {"events": N, "seconds": S}
    warmup: dict[str, float] = field(default_factory=dict)

    def totals(self) -> dict[str, Side]:
        """Per side, summed over rounds."""
        out: dict[str, Side] = {}
        for s in self.sides:
            t = out.setdefault(s.name, Side(s.name, 0, 0, 0, 0, 0.0))
            t.events += s.events
            t.entities += s.entities
            t.relationships += s.relationships
            t.seconds += s.seconds
            t.peak_rss_mb.extend(s.peak_rss_mb)
            t.cpu_seconds.extend(s.cpu_seconds)
            for server, seconds in s.server_cpu.items():
                t.server_cpu[server] = t.server_cpu.get(server, 0.0) + seconds
        return out


# -- process helpers ----------------------------------------------------------------


def peak_rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _stat(path: Path) -> tuple[str, list[str]]:
    """A ``/proc`` stat file's command name and the fields after it (proc(5);
    here ``fields[1]`` is the parent's pid and ``fields[11:15]`` utime, stime,
    cutime and cstime in clock ticks). The name may hold spaces and
    parentheses, hence the split at the last ``)``."""
    name, rest = path.read_text().split("(", 1)[1].rsplit(")", 1)
    return name, rest.split()


def _own_ticks(fields: list[str]) -> int:
    """A stat's utime and stime: what the process or thread itself used."""
    return int(fields[11]) + int(fields[12])


def cpu_seconds(pid: int) -> float:
    with contextlib.suppress(OSError):
        return _own_ticks(_stat(Path(f"/proc/{pid}/stat"))[1]) / os.sysconf("SC_CLK_TCK")
    return 0.0


def servers_cpu() -> dict[str, float]:
    """CPU seconds used so far by each server the local stack started (a
    server's exited children included: Postgres runs a process per
    connection), and under ``<server> jit`` the part of it a Java server's
    JIT compiler threads spent; empty when the services are not the local
    stack's (``DEVSTACK_DIR`` from the stack's env file, else this checkout's)."""
    out: dict[str, float] = {}
    stack = Path(os.environ.get("DEVSTACK_DIR") or ROOT / ".devstack")
    for record in sorted((stack / "pids").glob("*.json")):
        with contextlib.suppress(OSError, ValueError, KeyError):
            pid = int(json.loads(record.read_text())["pid"])
            out[record.stem] = _tree_cpu(pid)
            jit = _jit_cpu(pid)
            if jit is not None:
                out[f"{record.stem} jit"] = jit
    return out


def _jit_cpu(pid: int) -> float | None:
    """CPU seconds of a JVM's compiler threads ("C1 CompilerThre", "C2
    CompilerThre"), or None for a process without them."""
    ticks, found = 0, False
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            name, fields = _stat(task / "stat")
            if name.startswith(("C1 CompilerThre", "C2 CompilerThre")):
                ticks += _own_ticks(fields)
                found = True
    return ticks / os.sysconf("SC_CLK_TCK") if found else None


def jit_shares(cpu: dict[str, float]) -> dict[str, float]:
    """Each Java server's JIT compiler CPU as a share of the server's CPU, from
    a ``servers_cpu`` delta."""
    return {
        server: cpu[f"{server} jit"] / cpu[server]
        for server in cpu
        if f"{server} jit" in cpu and cpu[server] > 0
    }


def _tree_cpu(pid: int) -> float:
    own = _stat(Path(f"/proc/{pid}/stat"))[1]
    ticks = sum(int(x) for x in own[11:15])  # its exited children's too
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                child = _stat(entry / "stat")[1]
                if int(child[1]) == pid:
                    ticks += _own_ticks(child)
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before[k], 2) for k in after if k in before}


def _stop(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _log_time(path: Path, needle: str) -> float | None:
    """The wall-clock time of the first JSON log line whose msg is ``needle``."""
    if not path.exists():
        return None
    for line in path.read_text(errors="replace").splitlines():
        if needle in line and line.startswith("{"):
            with contextlib.suppress(ValueError, KeyError):
                return datetime.fromisoformat(json.loads(line)["ts"]).timestamp()
    return None


def _last_log_time(path: Path, needle: str) -> float | None:
    """The wall-clock time of the last JSON log line whose msg is ``needle``."""
    last = None
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            if needle in line and line.startswith("{"):
                with contextlib.suppress(ValueError, KeyError):
                    last = datetime.fromisoformat(json.loads(line)["ts"]).timestamp()
    return last


def _last_assignment(path: Path) -> list[int]:
    """The partitions of the last "committed the stores' positions" line of a
    worker's JSON log: what it held when it last took an assignment."""
    held: list[int] = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            if READY_LINE in line and line.startswith("{"):
                with contextlib.suppress(ValueError, KeyError, AttributeError):
                    held = sorted(int(p) for p in json.loads(line)["offsets"])
    return held


async def _settled_assignment(logs: Sequence[Path], partitions: set[int]) -> list[list[int]]:
    """Each worker's last assignment, once together they cover ``partitions``.

    A small workload can be projected while the group still rebalances: one
    worker has logged its share of the new assignment and the other not yet.
    Waiting a few seconds for the last log lines gives the assignment the
    capacity model reads; past that the partial one is returned as it is."""
    deadline = time.monotonic() + 20.0
    while True:
        assignment = [_last_assignment(log) for log in logs]
        covered = {p for held in assignment for p in held}
        if covered >= partitions or time.monotonic() > deadline:
            return assignment
        await asyncio.sleep(0.5)


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- the harness --------------------------------------------------------------------


class Bench:
    def __init__(self, size: Size, seed: int, results: Path, *, peer: bool, profile: bool):
        from streams.settings import Settings

        self.size = size
        self.seed = seed
        self.run = uuid.uuid4().hex[:6]
        self.prefix = f"bench-{self.run}-"
        self.schema = f"bench_{self.run}"
        self.results = results / self.run
        self.results.mkdir(parents=True, exist_ok=True)
        self.peer = peer
        self.profile = profile
        self.settings = Settings().model_copy(update={"pg_schema": self.schema})
        self.topics: list[str] = []
        self.groups: list[str] = []
        self.pg_schemas: list[str] = [self.schema]
        self.driver: Any = None
        self.pg: Any = None

    # -- setup and cleanup --

    async def open(self) -> None:
        import asyncpg
        from neo4j import AsyncGraphDatabase, NotificationMinimumSeverity
        from pgvector.asyncpg import register_vector

        from streams.wiring import open_stores

        s = self.settings
        self.driver = AsyncGraphDatabase.driver(
            s.neo4j_uri,
            auth=(s.neo4j_user, s.neo4j_password.get_secret_value()),
            notifications_min_severity=NotificationMinimumSeverity.OFF,
        )
        # A pool: other engineers' tests restart the shared servers, and a pool
        # replaces a connection the server dropped.
        self.pg = await asyncpg.create_pool(
            s.pg_dsn.get_secret_value(), min_size=1, max_size=3, init=register_vector
        )
        # The peer's and the ceiling's Neo4j lookups get the index the adapter's
        # Entity label has (dropped at the end).
        for name, label in INDEXES.items():
            await self._neo4j(
                f"CREATE INDEX {name} IF NOT EXISTS FOR (n:{label}) ON (n.tenant_id, n.id)"
            )
        # The workers' schema, migrated once here rather than raced by two workers.
        stores = await open_stores(s)
        await stores.aclose()

    async def _purge_graph(self) -> None:
        """Delete every tenant-scoped node of this run, of every side."""
        for label in TENANT_LABELS:
            statement = (
                f"MATCH (n:{label}) WHERE n.tenant_id STARTS WITH $p "
                "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS"
            )
            await retrying(lambda statement=statement: self._neo4j(statement, p=self.prefix))

    async def fresh_stores(self) -> dict[str, int]:
        """Remove what the run's earlier sides (and the warm-up) left in both
        stores, untimed, so that every side writes into stores of the same
        size: before, a side later in a round wrote into a graph holding every
        earlier side's (at ``large``, 350,000 nodes and edges a side against a
        128 MB page cache), and the replay phase, last, into all of them.
        (Neo4j Community has no ``db.checkpoint()`` to flush the deletion's
        pages before the next side.) Returns what was left before (nodes in
        Neo4j, rows in the workers' Postgres schema)."""
        counted = await self._neo4j(
            "MATCH (n) WHERE n.tenant_id STARTS WITH $p RETURN count(n) AS n", p=self.prefix
        )
        left = {"graph_nodes": int(counted[0]["n"]), "vector_rows": 0}
        await self._purge_graph()
        for schema in [s for s in self.pg_schemas if s != self.schema]:
            await self.pg.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            self.pg_schemas.remove(schema)
        tables = await self.pg.fetch(
            "SELECT table_name FROM information_schema.columns "
            "WHERE table_schema = $1 AND column_name = 'tenant_id'",
            self.schema,
        )
        for row in tables:
            table = f'"{self.schema}"."{row["table_name"]}"'
            status = await self.pg.execute(
                f"DELETE FROM {table} WHERE starts_with(tenant_id, $1)", self.prefix
            )
            left["vector_rows"] += int(status.split()[-1])
            await self.pg.execute(f"VACUUM {table}")
        return left

    async def cleanup(self) -> None:
        from streams.kafka.topics import admin_client

        if self.driver is not None:
            await self._purge_graph()
            statements = ["MATCH (c:Checkpoint) WHERE c.topic STARTS WITH $p DELETE c"]
            statements += [f"DROP INDEX {name} IF EXISTS" for name in INDEXES]
            for statement in statements:
                await retrying(lambda statement=statement: self._neo4j(statement, p=self.prefix))
            await self.driver.close()
        if self.pg is not None:
            for schema in self.pg_schemas:
                await retrying(
                    lambda schema=schema: self.pg.execute(
                        f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'
                    )
                )
            await self.pg.close()
        admin = admin_client(self.settings)
        names = [t for topic in self.topics for t in (topic, f"{topic}.dlq")]
        if names:
            for future in admin.delete_topics(names, request_timeout=30).values():
                with contextlib.suppress(Exception):
                    future.result()
        if self.groups:
            for future in admin.delete_consumer_groups(self.groups, request_timeout=30).values():
                with contextlib.suppress(Exception):
                    future.result()

    def drop_topics(self, names: Sequence[str]) -> None:
        """Delete these topics (and their dead-letter topics) now: at the larger
        sizes a round's topics hold gigabytes."""
        from streams.kafka.topics import admin_client

        doomed = [t for topic in names for t in (topic, f"{topic}.dlq")]
        if not doomed:
            return
        admin = admin_client(self.settings)
        for future in admin.delete_topics(doomed, request_timeout=30).values():
            with contextlib.suppress(Exception):
                future.result()
        self.topics = [t for t in self.topics if t not in names]

    # -- topics and publishing --

    def topic_settings(self, topic: str, partitions: int = PARTITIONS) -> Any:
        return self.settings.model_copy(update={"topic": topic, "partitions": partitions})

    async def publish(
        self, label: str, workload: Workload, partitions: int = PARTITIONS
    ) -> tuple[str, list[str]]:
        """A fresh topic of ``partitions`` holding the workload under this
        label's tenants (tenant i on partition i mod ``partitions``)."""
        from streams.kafka.producer import AsyncProducer
        from streams.kafka.topics import create_topics, describe_topic

        topic = f"{self.prefix}{label}"
        settings = self.topic_settings(topic, partitions)
        create_topics(settings)
        self.topics.append(topic)
        describe_topic(settings)  # waits for the partitions' leaders
        tenants = tenant_names(f"{self.prefix}{label}-", workload.tenants, partitions)
        producer = AsyncProducer(settings)
        try:
            futures = []
            for event in workload.events:
                key, value = render(event, tenants)
                headers: list[tuple[str, str | bytes | None]] = [
                    ("event_type", event.kind.encode()),
                    ("schema_version", b"1"),
                ]
                futures.append(producer.send(topic, key, value, headers))
            await asyncio.gather(*futures)
        finally:
            await asyncio.to_thread(producer.close)
        return topic, tenants

    def highs(self, topic: str) -> dict[int, int]:
        from streams.kafka.topics import describe_topic

        info = describe_topic(self.topic_settings(topic))
        return {p.partition: p.high for p in info.partitions}

    # -- what is visible --

    async def _neo4j(self, statement: str, **params: Any) -> list[Any]:
        async with self.driver.session(database=self.settings.neo4j_database) as session:
            result = await session.run(statement, **params)
            return [record async for record in result]

    async def visible(self, topic: str) -> dict[int, int]:
        """Per partition, the lower of the two stores' checkpoints."""
        return await retrying(lambda: self._visible(topic))

    async def _visible(self, topic: str) -> dict[int, int]:
        records = await self._neo4j(
            "MATCH (c:Checkpoint) WHERE c.topic = $t AND c.offset IS NOT NULL "
            "RETURN c.partition AS p, c.offset AS o",
            t=topic,
        )
        graph = {r["p"]: r["o"] for r in records}
        rows = await self.pg.fetch(
            f'SELECT partition, last_offset FROM "{self.schema}".checkpoints '
            "WHERE topic = $1 AND last_offset IS NOT NULL",
            topic,
        )
        vector = {r["partition"]: r["last_offset"] for r in rows}
        return {p: min(o, vector[p]) for p, o in graph.items() if p in vector}

    @staticmethod
    def done(visible: dict[int, int], highs: dict[int, int]) -> int:
        return sum(min(visible.get(p, -1) + 1, high) for p, high in highs.items())

    # -- the sides --

    async def ceiling(self, rnd: int, workload: Workload) -> Side:
        from adapters.neo4j.rows import order_key  # noqa: F401  (the ceiling's stored shape)
        from bench.neo4j_write import Batch, ceiling_batch
        from bench.pgvector_write import TABLE_DDL, unnest_insert
        from contracts.domain import Entity, Relationship, VectorRecord
        from contracts.ids import EntityId, TenantId

        label = f"r{rnd}-ceiling"
        tenants = tenant_names(f"{self.prefix}{label}-", workload.tenants, PARTITIONS)
        schema = f"{self.schema}_c{rnd}"
        self.pg_schemas.append(schema)
        s = f'"{schema}"'
        await self.pg.execute(f"CREATE SCHEMA {s};" + TABLE_DDL.format(s=s, dim=DIMENSION))
        await self.pg.execute(
            f"CREATE TABLE {s}.aliases (tenant_id text, alias_id text, canonical_id text, "
            "PRIMARY KEY (tenant_id, alias_id))"
        )
        pool = workload.pool

        def rows(chunk: Sequence[Planned]) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
            docs: dict[str, Any] = {}
            merges: list[tuple[str, str, str]] = []
            for ev in chunk:
                tenant = TenantId(tenants[ev.tenant])
                p = ev.payload
                if ev.kind == "EntitiesMerged":
                    merges += [(tenant, a, p["canonical_id"]) for a in p["absorbed_ids"]]
                    continue
                if ev.kind == "EntitiesUnmerged":
                    merges += [(tenant, a, "") for a in p["restored_ids"]]
                    continue
                batch, vectors = docs.setdefault(tenant, (Batch([], []), []))
                for e, k in zip(p["entities"], ev.embeddings, strict=True):
                    eid = EntityId(e["id"])
                    batch.entities.append(
                        Entity(tenant, eid, e["name"], e["type"], e["properties"])
                    )
                    vectors.append(
                        VectorRecord(
                            tenant,
                            eid,
                            pool[k],
                            {
                                "entity_type": e["type"],
                                "name": e["name"],
                                "document_id": p["document_id"],
                            },
                        )
                    )
                for r in p["relationships"]:
                    batch.relationships.append(
                        Relationship(
                            tenant,
                            EntityId(r["source"]),
                            EntityId(r["target"]),
                            r["type"],
                            r["confidence"],
                            r["properties"],
                        )
                    )
            return docs, merges

        database = self.settings.neo4j_database

        async def graph(docs: dict[str, Any], merges: list[tuple[str, str, str]]) -> None:
            async with self.driver.session(database=database) as session:
                for tenant, (batch, _) in docs.items():
                    await ceiling_batch(session, tenant, batch)
                if merges:
                    await (
                        await session.run(
                            "UNWIND $rows AS row MERGE (x:BenchCeilingAlias "
                            "{tenant_id: row[0], id: row[1]}) SET x.canonical = row[2]",
                            rows=[list(m) for m in merges],
                        )
                    ).consume()

        async def vector(
            docs: dict[str, Any], merges: list[tuple[str, str, str]], offset: int
        ) -> None:
            async with self.pg.acquire() as conn:
                write_vectors = unnest_insert(conn, s)
                for tenant, (_, vectors) in docs.items():
                    await write_vectors(tenant, vectors, offset)
                if merges:
                    await conn.executemany(
                        f"INSERT INTO {s}.aliases VALUES ($1, $2, $3) ON CONFLICT (tenant_id, "
                        "alias_id) DO UPDATE SET canonical_id = EXCLUDED.canonical_id",
                        merges,
                    )

        timeline: list[tuple[float, int]] = []
        started = time.time()
        done = 0
        for offset, start in enumerate(range(0, len(workload.events), CHUNK)):
            chunk = workload.events[start : start + CHUNK]
            docs, merges = rows(chunk)
            # Both stores at once; a side a server restart interrupted is
            # written again (upserts: the same rows).
            await asyncio.gather(
                retrying(lambda d=docs, m=merges: graph(d, m)),
                retrying(lambda d=docs, m=merges, o=offset: vector(d, m, o)),
            )
            done += len(chunk)
            timeline.append((time.time() - started, done))
        seconds = time.time() - started
        return Side(
            "ceiling",
            rnd,
            len(workload.events),
            workload.entities,
            workload.relationships,
            seconds,
            timeline,
        )

    async def kafka_ceiling(self, rnd: int, topic: str, workload: Workload) -> Side:
        def consume() -> tuple[float, list[tuple[float, int]]]:
            from confluent_kafka import Consumer, TopicPartition

            group = f"{self.prefix}r{rnd}-kafka"
            consumer = Consumer(
                {
                    **librdkafka_config(self.settings),
                    "group.id": group,
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                }
            )
            consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
            timeline: list[tuple[float, int]] = []
            started = time.time()
            seen = 0
            try:
                while seen < len(workload.events):
                    messages = consumer.consume(500, timeout=0.05)
                    seen += sum(1 for m in messages if m.error() is None)
                    timeline.append((time.time() - started, seen))
                    if time.time() - started > 300:
                        raise TimeoutError("the bare consumer did not reach the end in 300 s")
            finally:
                consumer.close()
            return time.time() - started, timeline

        seconds, timeline = await asyncio.to_thread(consume)
        return Side(
            "kafka",
            rnd,
            len(workload.events),
            workload.entities,
            workload.relationships,
            seconds,
            timeline,
        )

    async def redstring(
        self,
        rnd: int,
        workers: int,
        topic: str,
        workload: Workload,
        *,
        while_running: Callable[[float], Awaitable[None]] | None = None,
        profile: bool = False,
        extra_env: dict[str, str] | None = None,
        name: str | None = None,
    ) -> Side:
        """``workers`` worker processes on ``topic`` until both stores hold it;
        the side is called ``name``, by default "redstring <workers>w"."""
        group = f"{topic}-group"
        self.groups.append(group)
        procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        highs = self.highs(topic)
        total = sum(highs.values())
        spy: subprocess.Popen[bytes] | None = None
        for i in range(workers):
            log = self.results / f"{topic.removeprefix(self.prefix)}-w{i}.log"
            env = {
                **os.environ,
                "REDSTRING_TOPIC": topic,
                "REDSTRING_GROUP_ID": group,
                "REDSTRING_PG_SCHEMA": self.schema,
                "REDSTRING_CONTROL_KEY": CONTROL_KEY,
                "REDSTRING_HTTP_PORT": str(_free_port()),
                "REDSTRING_HTTP_HOST": "127.0.0.1",
                "REDSTRING_SESSION_TIMEOUT_S": "6",
                "REDSTRING_WORKER_ID": f"{group}-{i}",
                "REDSTRING_LOG_LEVEL": "INFO",
                **(extra_env or {}),
                "PYTHONUNBUFFERED": "1",
            }
            with log.open("wb") as out:
                proc = subprocess.Popen(  # noqa: ASYNC220 (a benchmark harness)
                    [sys.executable, "-m", "streams", "worker"],
                    env=env,
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            procs.append((proc, log))
        if profile:
            spy = subprocess.Popen(  # noqa: ASYNC220
                [
                    str(Path(sys.executable).with_name("py-spy")),
                    "record",
                    "--pid",
                    str(procs[0][0].pid),
                    "--rate",
                    "50",
                    "--format",
                    "raw",
                    "--output",
                    str(self.results / "worker-profile.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        started = time.time()
        servers_before = servers_cpu()
        at_ready: tuple[list[float], dict[str, float]] | None = None
        samples: list[tuple[float, int]] = []
        try:
            deadline = started + max(180.0, total / 5)
            while True:
                done = self.done(await self.visible(topic), highs)
                samples.append((time.time(), done))
                if at_ready is None and any(_log_time(log, READY_LINE) for _, log in procs):
                    # The CPU counted is the projection's, from the first
                    # worker's readiness on (as its time is), not start-up's.
                    at_ready = ([cpu_seconds(p.pid) for p, _ in procs], servers_cpu())
                if done >= total:
                    break
                for proc, log in procs:
                    if proc.poll() is not None:
                        raise RuntimeError(f"a worker exited ({proc.returncode}); see {log}")
                if time.time() > deadline:
                    raise TimeoutError(
                        f"{topic}: {done}/{total} visible after {deadline - started:.0f}s"
                    )
                await asyncio.sleep(0.2)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
                spy = None
            ready = [t for _, log in procs if (t := _log_time(log, READY_LINE)) is not None]
            t0 = min(ready) if ready else started
            # CPU of the projection alone (not of what runs next on the worker).
            cpu = [cpu_seconds(p.pid) for p, _ in procs]
            server_cpu = cpu_delta(
                servers_before if at_ready is None else at_ready[1], servers_cpu()
            )
            if at_ready is not None:
                cpu = [round(b - a, 2) for a, b in zip(at_ready[0], cpu, strict=True)]
            if while_running is not None:
                await while_running(total / max(1e-9, samples[-1][0] - t0))
            rss = [peak_rss_mb(p.pid) for p, _ in procs]
            assignment = await _settled_assignment([log for _, log in procs], set(highs))
            settled = [t for _, log in procs if (t := _last_log_time(log, READY_LINE)) is not None]
            settle = max(0.0, max(settled) - t0) if settled else 0.0
        finally:
            if spy is not None and spy.poll() is None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
            for proc, _ in procs:
                _stop(proc)
        return Side(
            name or f"redstring {workers}w",
            rnd,
            len(workload.events),
            workload.entities,
            workload.relationships,
            samples[-1][0] - t0,
            [(t - t0, d) for t, d in samples if t >= t0],
            rss,
            cpu,
            server_cpu,
            assignment=assignment,
            settle_s=round(settle, 2),
        )

    # -- the peer --

    def quix_python(self) -> Path:
        python = QUIX_VENV / "bin" / "python"
        if not python.exists():
            print(f"  creating {QUIX_VENV} (Quix Streams, its own confluent-kafka pin)")
            QUIX_VENV.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "venv", str(QUIX_VENV)], check=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", *QUIX_PACKAGES], check=True
            )
        return python

    async def quix(self, rnd: int, topic: str, workload: Workload) -> Side:
        from confluent_kafka import Consumer, TopicPartition

        python = self.quix_python()
        schema = f"{self.schema}_q{rnd}"
        self.pg_schemas.append(schema)
        # Constraint names unique to this schema: the sink reads a table's primary
        # key by joining information_schema on the constraint name alone, so a
        # ``vectors_pkey`` in another schema (the workers') would confuse it.
        await self.pg.execute(
            f'CREATE SCHEMA "{schema}";'
            f'CREATE TABLE "{schema}".vectors ("timestamp" timestamp, __key text, '
            f"tenant_id text, id text, embedding vector({DIMENSION}), name text, type text, "
            f"document_id text, CONSTRAINT {schema}_vectors_pk PRIMARY KEY (tenant_id, id));"
            f'CREATE TABLE "{schema}".aliases ("timestamp" timestamp, __key text, '
            "tenant_id text, alias_id text, canonical_id text, "
            f"CONSTRAINT {schema}_aliases_pk PRIMARY KEY (tenant_id, alias_id))"
        )
        neo = urlparse(self.settings.neo4j_uri)
        pg = urlparse(self.settings.pg_dsn.get_secret_value())
        group = f"{topic}-quix"
        self.groups.append(group)
        config = {
            "bootstrap": self.settings.kafka_bootstrap,
            "topic": topic,
            "group": group,
            "neo4j_host": neo.hostname,
            "neo4j_port": neo.port or 7687,
            "neo4j_user": self.settings.neo4j_user,
            "neo4j_password": self.settings.neo4j_password.get_secret_value(),
            "pg_host": pg.hostname,
            "pg_port": pg.port or 5432,
            "pg_dbname": pg.path.lstrip("/"),
            "pg_user": pg.username or "postgres",
            "pg_password": pg.password or "",
            "pg_schema": schema,
        }
        highs = self.highs(topic)
        total = sum(highs.values())
        log = self.results / f"{topic.removeprefix(self.prefix)}-quix.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(  # noqa: ASYNC220 (a benchmark harness)
                [str(python), str(ROOT / "bench" / "quix_peer.py"), json.dumps(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.results,
            )
        watcher = Consumer({**librdkafka_config(self.settings), "group.id": group})
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        samples: list[tuple[float, int]] = []
        started = time.time()
        servers_before = servers_cpu()
        at_first: tuple[float, dict[str, float]] | None = None
        try:
            deadline = started + max(180.0, total / 5)
            while True:
                committed = await asyncio.to_thread(watcher.committed, parts, 10)
                done = sum(max(0, tp.offset) for tp in committed)
                samples.append((time.time(), done))
                if at_first is None and '{"event": "first"' in log.read_text(errors="replace"):
                    # CPU from its first message on, as its time (and the workers')
                    at_first = (cpu_seconds(proc.pid), servers_cpu())
                if done >= total:
                    break
                if proc.poll() is not None:
                    raise RuntimeError(f"the Quix peer exited ({proc.returncode}); see {log}")
                if time.time() > deadline:
                    raise TimeoutError(f"quix: {done}/{total} committed; see {log}")
                await asyncio.sleep(0.2)
            t0 = started
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith('{"event": "first"'):
                    t0 = json.loads(line)["t"]
            rss, cpu = [peak_rss_mb(proc.pid)], [cpu_seconds(proc.pid)]
            server_cpu = cpu_delta(
                servers_before if at_first is None else at_first[1], servers_cpu()
            )
            if at_first is not None:
                cpu = [round(cpu[0] - at_first[0], 2)]
        finally:
            watcher.close()
            _stop(proc)
        return Side(
            "quix",
            rnd,
            len(workload.events),
            workload.entities,
            workload.relationships,
            samples[-1][0] - t0,
            [(t - t0, d) for t, d in samples if t >= t0],
            rss,
            cpu,
            server_cpu,
        )

    # -- latency at a fixed offered load --

    async def latency(
        self, topic: str, tenants: list[str], rate: float, seconds: float, level: int = 0
    ) -> dict[str, float]:
        """Publish at ``rate`` for ``seconds``; per event, publish to visible in
        both stores. ``level`` picks the log (distinct event ids per level: an
        id already applied would be skipped, not projected)."""
        from streams.kafka.producer import AsyncProducer

        count = max(10, int(rate * seconds))
        events = generate(self.seed + 1000 + level, len(tenants), count).events
        producer = AsyncProducer(self.topic_settings(topic))
        pending: list[tuple[float, asyncio.Future[Any]]] = []
        latencies: list[float] = []
        # Each event's publish and visible times and partition, for a tail's
        # cause (which events, when, on which partitions): latency-<rate>.json.
        timeline: list[tuple[float, float, int]] = []

        async def pace() -> None:
            start = time.time()
            for i, event in enumerate(events):
                delay = start + i / rate - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                key, value = render(event, tenants)
                headers: list[tuple[str, str | bytes | None]] = [
                    ("event_type", event.kind.encode()),
                    ("schema_version", b"1"),
                ]
                sent = time.time()
                pending.append((sent, producer.send(topic, key, value, headers)))

        pacer = asyncio.ensure_future(pace())
        deadline = time.time() + seconds + 120
        try:
            while not pacer.done() or pending:
                await asyncio.sleep(0.05)
                visible = await self.visible(topic)
                now = time.time()
                still = []
                for sent, future in pending:
                    if future.done():
                        pos = future.result()
                        if visible.get(pos.partition, -1) >= pos.offset:
                            latencies.append((now - sent) * 1000)
                            timeline.append((round(sent, 4), round(now, 4), pos.partition))
                            continue
                    still.append((sent, future))
                pending[:] = still
                if now > deadline:
                    raise TimeoutError(f"latency phase: {len(pending)} events not visible")
            await pacer
        finally:
            pacer.cancel()
            await asyncio.to_thread(producer.close)
        (self.results / f"latency-{rate:g}.json").write_text(json.dumps(sorted(timeline)))
        return {
            "offered_per_s": rate,
            "events": len(latencies),
            "p50": percentile(latencies, 0.50),
            "p95": percentile(latencies, 0.95),
            "p99": percentile(latencies, 0.99),
            "max": max(latencies),
        }

    # -- replay of one large tenant --

    async def replay(self) -> tuple[dict[str, float], dict[str, float]]:
        from pydantic import SecretStr

        from contracts.domain import StreamPartition
        from contracts.ids import TenantId
        from streams.kafka.topics import describe_topic
        from streams.ops.replay import publish_control
        from streams.wiring import open_stores

        workload = generate(self.seed + 2, 1, self.size.replay_events)
        topic, tenants = await self.publish("replay", workload)
        tenant = TenantId(tenants[0])
        settings = self.topic_settings(topic).model_copy(
            update={"control_key": SecretStr(CONTROL_KEY), "pg_schema": self.schema}
        )
        result: dict[str, float] = {}

        async def replay_now(rate: float) -> None:
            info = describe_topic(settings)
            part = StreamPartition(topic, 0, info.topic_id)
            # The replay's time runs from its request in the log, as the first
            # projection's runs from a ready worker with the log in place: the
            # control producer's start-up and this side's store connections
            # are no part of what the worker does (publishing is reported
            # beside it).
            stores = await open_stores(settings)
            try:
                began = time.time()
                position = await publish_control(settings, "TenantReplayRequested", tenant, "bench")
                requested = time.time()
                result["publish_s"] = requested - began
                while True:
                    marks = [
                        m
                        for store in (stores.graph, stores.vector)
                        for m in await store.rebuild_markers(part)
                        if m.tenant_id == tenant
                    ]
                    checkpoints = [await s.checkpoint(part) for s in (stores.graph, stores.vector)]
                    if not marks and min(checkpoints) >= position.offset:
                        break
                    if time.time() - requested > 600:
                        raise TimeoutError("the replay did not finish in 600 s")
                    await asyncio.sleep(0.05)
            finally:
                await stores.aclose()
            result["replay_s"] = time.time() - requested

        # Small batches: one tenant is one partition, and its progress shows
        # only as each batch commits; the growth figure needs many steps.
        first = await self.redstring(
            0,
            1,
            topic,
            workload,
            while_running=replay_now,
            extra_env={"REDSTRING_BATCH_SIZE": str(REPLAY_BATCH)},
        )
        result["first_s"] = first.seconds
        result["events"] = first.events
        result["ratio"] = result["replay_s"] / first.seconds
        return result, growth(first.timeline, first.events)


def growth(timeline: Sequence[tuple[float, int]], total: int) -> dict[str, float]:
    """Seconds per 1000 events early in a run and over its last 10%. "Early" is
    the second tenth (10% to 20%): the first tenth is mostly the time to the
    first batch's commit (start-up and one batch of latency), not the cost of
    writing into a small graph."""

    def at(fraction: float) -> float:
        goal = fraction * total
        previous = (0.0, 0)
        for t, done in timeline:
            if done >= goal:
                (t1, d1) = previous
                return t1 + (t - t1) * (goal - d1) / max(1, done - d1)
            previous = (t, done)
        return timeline[-1][0]

    first = (at(0.2) - at(0.1)) * 1000 / (0.1 * total)
    last = (at(1.0) - at(0.9)) * 1000 / (0.1 * total)
    steps = len({done for _, done in timeline})
    return {
        "first10_s_per_1k": first,
        "last10_s_per_1k": last,
        "ratio": last / first,
        "steps": steps,
    }


async def retrying(
    attempt: Callable[[], Awaitable[Any]], *, tries: int = 60, delay: float = 1.0
) -> Any:
    """Store calls of the harness itself: the shared servers get restarted by
    other test runs, so transient failures are waited out (up to a minute)."""
    for n in range(tries):
        try:
            return await attempt()
        except Exception as exc:
            if n == tries - 1:
                raise
            print(f"  (store call failed: {type(exc).__name__}; retrying)", file=sys.stderr)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


_PORTS_GIVEN: set[int] = set()


def _free_port() -> int:
    """A port for a worker's web server: free now, not handed to another worker
    of this run, and below the kernel's ephemeral range (a port from ``bind(0)``
    is an ephemeral one, which a client connection can take meanwhile)."""
    import random
    import socket

    while True:
        port = random.randrange(20000, 32000)
        if port in _PORTS_GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        _PORTS_GIVEN.add(port)
        return port


# -- the run ------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    with contextlib.suppress(PackageNotFoundError):
        out["redstring"] = version("redstring-projector")  # the distribution's name
    for name in ("faust-streaming", "aiokafka", "confluent-kafka", "neo4j", "asyncpg"):
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    quix = QUIX_VENV / "lib"
    for meta in quix.glob("python*/site-packages/quixstreams-*.dist-info"):
        out["quixstreams"] = meta.name.removeprefix("quixstreams-").removesuffix(".dist-info")
    kafka = sorted((Path.home() / ".cache" / "redstring").glob("kafka-*"))
    if kafka:
        out["kafka"] = kafka[-1].name.split("-")[1]
    return out


async def _server_versions(bench: Bench) -> dict[str, str]:
    out: dict[str, str] = {}
    with contextlib.suppress(Exception):
        async with bench.driver.session(database=bench.settings.neo4j_database) as session:
            result = await session.run(
                "CALL dbms.components() YIELD versions RETURN versions[0] AS v"
            )
            record = await result.single()
            out["neo4j-server"] = str(record["v"]) if record else "?"
    with contextlib.suppress(Exception):
        out["postgres"] = str(await bench.pg.fetchval("SHOW server_version")).split()[0]
        out["pgvector"] = str(
            await bench.pg.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        )
    return out


def _machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {
        "system": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "load_at_start": round(load[0], 1),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


async def run_suite(
    size_name: str,
    seed: int,
    results: Path,
    *,
    peer: bool,
    profile: bool,
    keep: bool,
    accumulate: bool = False,
    only: Sequence[str] = (),
    capacity: tuple[int, int] | None = None,
    latency_rate: float | None = None,
    latency_seconds: float | None = None,
    latency_levels: Sequence[float] = LATENCY_LEVELS,
) -> Report:
    """``capacity``: (partitions, workers) of the capacity side, if it runs;
    ``latency_rate``: the rate whose fractions the latency phases offer, instead
    of the measured 1-worker rate (two builds compared at the same load);
    ``latency_seconds`` and ``latency_levels``: each phase's length instead of
    the size's, and which of the levels run (a long phase at one level tells
    two builds' tails apart where 20 s do not)."""
    load_stack_env()
    size = SIZES[size_name]
    bench = Bench(size, seed, results, peer=peer, profile=profile)
    workload = generate(seed, size.tenants, size.events)
    sizes = [len(e.template) for e in workload.events]
    check_disk(workload, size, sides=5 if peer else 4, capacity=capacity is not None)
    report = Report(
        run=bench.run,
        size=size_name,
        seed=seed,
        started=datetime.now().astimezone().isoformat(timespec="seconds"),
        workload={
            "tenants": size.tenants,
            "events": len(workload.events),
            "kinds": workload.counts(),
            "entities": workload.entities,
            "relationships": workload.relationships,
            "mean_event_kb": round(sum(sizes) / len(sizes) / 1024, 1),
            "largest_tenant_events": max(len(workload.for_tenant(i)) for i in range(size.tenants)),
            "partitions": PARTITIONS,
            "rounds": size.rounds,
            "replay_tenant_events": size.replay_events,
        },
        machine=_machine(),
    )
    report.partition_events[str(PARTITIONS)] = partition_events(workload, PARTITIONS)
    if capacity is not None:
        report.capacity = {"partitions": capacity[0], "workers": capacity[1]}
        report.partition_events[str(capacity[0])] = partition_events(workload, capacity[0])
    print(
        f"run {bench.run}: {len(workload.events)} events, {workload.entities} entities, "
        f"{workload.relationships} relationships, {size.tenants} tenants, {size.rounds} round(s)"
    )
    await bench.open()
    try:
        report.machine["versions"] = {**_versions(), **await _server_versions(bench)}
        sides = ("ceiling", "kafka", "redstring 1w", "redstring 2w", "quix", "capacity")
        rounds = size.rounds if not only or any(name in only for name in sides) else 0
        if rounds:
            report.warmup = await warm_up(
                bench,
                seed,
                min(WARMUP_EVENTS, size.events),
                # The smoke test's size: the loop, not a warm server.
                passes=2 if size == SIZES["tiny"] else WARMUP_PASSES,
            )
        for rnd in range(1, rounds + 1):
            topic1, tenants1 = await bench.publish(f"r{rnd}-1w", workload)
            topic2, _ = await bench.publish(f"r{rnd}-2w", workload)
            round_topics = [topic1, topic2]
            last = rnd == size.rounds

            async def measure_latency(
                rate: float, tenants: list[str] = tenants1, topic: str = topic1
            ) -> None:
                if latency_rate is not None:
                    rate = latency_rate
                    report.latency_rate = latency_rate
                seconds = latency_seconds or size.latency_seconds
                for level, fraction in enumerate(LATENCY_LEVELS):
                    if fraction not in latency_levels:
                        continue
                    offered = max(2.0, round(rate * fraction, 1))
                    print(
                        f"  latency at {offered} events/s offered ({fraction:.0%} of "
                        f"{rate:.1f}) for {seconds:.0f}s"
                    )
                    measured = await bench.latency(topic, tenants, offered, seconds, level)
                    report.latency_ms[str(fraction)] = {"fraction": fraction, **measured}

            steps: list[tuple[str, Callable[[], Awaitable[Side]]]] = [
                ("ceiling", lambda rnd=rnd: bench.ceiling(rnd, workload)),
                # The bare consumer and the peer read the 2-worker side's topic:
                # the latency phase appends to the 1-worker side's.
                ("kafka", lambda rnd=rnd, t=topic2: bench.kafka_ceiling(rnd, t, workload)),
                (
                    "redstring 1w",
                    lambda rnd=rnd, t=topic1, last=last, f=measure_latency: bench.redstring(
                        rnd,
                        1,
                        t,
                        workload,
                        while_running=f if last else None,
                        profile=profile and rnd == 1,
                    ),
                ),
                ("redstring 2w", lambda rnd=rnd, t=topic2: bench.redstring(rnd, 2, t, workload)),
            ]
            if peer:
                steps.append(("quix", lambda rnd=rnd, t=topic2: bench.quix(rnd, t, workload)))
            if capacity is not None and (not only or "capacity" in only):
                partitions, workers = capacity
                topic3, _ = await bench.publish(f"r{rnd}-cap", workload, partitions)
                round_topics.append(topic3)
                steps.append(
                    (
                        "capacity",
                        lambda rnd=rnd, t=topic3, w=workers: bench.redstring(
                            rnd, w, t, workload, name="capacity"
                        ),
                    )
                )
            if only:
                steps = [step for step in steps if step[0] in only]
            order = rotated(steps, rnd)
            report.order.append([name for name, _ in order])
            print(f"  round {rnd}: " + ", ".join(name for name, _ in order))
            for name, step in order:
                left = {} if accumulate else await bench.fresh_stores()
                servers_before = servers_cpu()
                side = await step()
                side.store_before = left
                if not side.server_cpu:
                    side.server_cpu = cpu_delta(servers_before, servers_cpu())
                side.load = round(os.getloadavg()[0], 1)
                report.sides.append(side)
                cpu = f", cpu {sum(side.cpu_seconds):.1f}s" if side.cpu_seconds else ""
                if side.server_cpu:
                    cpu += ", servers " + " ".join(
                        f"{k} {v:.1f}s" for k, v in sorted(side.server_cpu.items())
                    )
                print(
                    f"  round {rnd} {name:<13} {side.rate:9.1f} events/s "
                    f"({side.seconds:6.1f}s{cpu}), load {side.load:.1f}"
                )
            if not keep:
                bench.drop_topics(round_topics)
        if not only or "replay" in only:
            print("  replay of one large tenant")
            try:
                if not accumulate:
                    report.replay_store_before = await bench.fresh_stores()
                report.replay, report.growth = await bench.replay()
            except Exception as exc:  # the rounds' figures stand without it
                report.notes.append(f"the replay phase failed: {type(exc).__name__}: {exc}")
                print(f"  {report.notes[-1]}", file=sys.stderr)
        report.machine["load_at_end"] = round(os.getloadavg()[0], 1)
        # Read again: a first run on a machine creates the peer's virtualenv
        # only when its side starts, after the versions above were read.
        report.machine["versions"].update(_versions())
    finally:
        if keep:
            print(f"kept topics, groups, tenants and schemas of run {bench.run}")
        else:
            await bench.cleanup()
    print("\n" + write_results(report, results, bench.results))
    return report


#: Events of each untimed warm-up pass (round 0).
WARMUP_EVENTS = 300
#: The warm-up goes on while the Java servers' JIT compiler threads spend more
#: than this share of the servers' CPU, for at most WARMUP_PASSES passes.
JIT_QUIET = 0.15
WARMUP_PASSES = 8


async def warm_up(
    bench: Bench, seed: int, events: int, passes: int = WARMUP_PASSES
) -> dict[str, float]:
    """Untimed passes of a short log through the ceiling and one worker (the
    worker alone after the first), so that no timed side pays for a cold
    server: right after the stack started, Neo4j's JIT and caches made round
    1's ceiling 3x slower than round 2's (199 against 579 events/s, run
    943322), which rotating the sides' order spreads over them but does not
    remove. One pass was not enough on a freshly started stack: Neo4j's JIT
    compilers went on taking half of its CPU for minutes (docs/performance.md,
    "A cold Neo4j"), so the passes go on until the compilers are quiet."""
    began = time.time()
    shares: dict[str, float] = {}
    most, passes = passes, 0
    while passes < most:
        passes += 1
        warm = generate(seed + passes, PARTITIONS, events)
        before = servers_cpu()
        if passes == 1:
            # The ceiling's few statements are hot after one pass; the
            # worker's many take longer.
            await bench.ceiling(0, warm)
        topic, _ = await bench.publish(f"r0-1w-{passes}", warm)
        await bench.redstring(0, 1, topic, warm)
        bench.drop_topics([topic])
        spent = cpu_delta(before, servers_cpu())
        shares = jit_shares(spent)
        print(
            f"  warm-up pass {passes}: {events} events through "
            + ("the ceiling and one worker" if passes == 1 else "one worker")
            + "".join(f", {k}'s JIT {v:.0%} of its CPU" for k, v in sorted(shares.items()))
        )
        # Together: a server that barely works (Kafka: 0.3 s a pass) has a
        # share that swings with a single compile, and costs nothing.
        java = [server for server in spent if f"{server} jit" in spent]
        busy = sum(spent[server] for server in java)
        if sum(spent[f"{server} jit"] for server in java) <= JIT_QUIET * busy:
            break
    seconds = round(time.time() - began, 1)
    print(f"  warm-up: {passes} pass(es), untimed ({seconds}s)")
    return {
        "events": events,
        "passes": passes,
        "seconds": seconds,
        **{f"{k} jit share": round(v, 3) for k, v in shares.items()},
    }


def warmup_passes(warmup: dict[str, float]) -> str:
    """The report's words for the warm-up passes after the first, and how busy
    the Java servers' JIT compilers were in the last."""
    passes = int(warmup.get("passes", 1))
    jit = ", ".join(
        f"{k.removesuffix(' jit share')} {v:.0%}"
        for k, v in sorted(warmup.items())
        if k.endswith(" jit share")
    )
    more = f", then {passes - 1} more of as many through the worker alone" if passes > 1 else ""
    return more + (
        f" (the JIT compilers' share of each server's CPU in the last: {jit})" if jit else ""
    )


def rotated(steps: Sequence[Any], rnd: int) -> list[Any]:
    """The sides' order in round ``rnd`` (from 1): the list rotated by one more
    place each round, so that no side always runs first (on cold servers) or
    last. (Each side keeps its neighbours: a rotation is no shuffle.)"""
    turn = (rnd - 1) % len(steps) if steps else 0
    return [*steps[turn:], *steps[:turn]]


def partition_events(workload: Workload, partitions: int) -> list[int]:
    """Events per partition when tenant i is on partition i mod ``partitions``
    (the layout ``tenant_names`` gives every side)."""
    out = [0] * partitions
    for event in workload.events:
        out[event.tenant % partitions] += 1
    return out


#: Postgres bytes per entity mention written by a side (a vector row of 384
#: float4 and its metadata, with the table's overhead): an over-estimate, as
#: re-extractions update rows in place.
PG_BYTES_PER_ENTITY = 2200


def disk_needed(workload: Workload, size: Size, *, sides: int, capacity: bool) -> int:
    """Bytes a run may hold at its peak: one round's topics (the 1- and
    2-worker sides', and the capacity side's) plus the replay topic, and every
    side's Postgres rows over all rounds (they stay until the end)."""
    log = sum(len(e.template) for e in workload.events)
    topics = (3 if capacity else 2) * log + log * size.replay_events // max(1, len(workload.events))
    writing_sides = sides - 1 + (1 if capacity else 0)  # the bare consumer writes nothing
    rows = workload.entities * PG_BYTES_PER_ENTITY * writing_sides * size.rounds
    return topics + rows


def check_disk(workload: Workload, size: Size, *, sides: int, capacity: bool) -> None:
    """Refuse to start a run the local stack's disk cannot hold."""
    import shutil

    needed = disk_needed(workload, size, sides=sides, capacity=capacity)
    free = shutil.disk_usage(ROOT / ".devstack" if (ROOT / ".devstack").exists() else ROOT).free
    print(f"disk: this run may hold up to {needed / 2**30:.1f} GB; {free / 2**30:.1f} GB free")
    if needed > 0.8 * free:
        raise SystemExit(
            f"not enough free disk for this size: needs about {needed / 2**30:.1f} GB, "
            f"{free / 2**30:.1f} GB free"
        )


def write_results(report: Report, results: Path, run_dir: Path) -> str:
    results.mkdir(parents=True, exist_ok=True)
    (results / "latest.json").write_text(json.dumps(asdict(report), indent=1))
    markdown = render_markdown(report)
    (results / "latest.md").write_text(markdown)
    (run_dir / "report.md").write_text(markdown)
    write_plot(report, results / "throughput.png")
    return markdown


# -- the report ---------------------------------------------------------------------

LABELS = {
    "ceiling": "ceiling: direct writes, no Kafka",
    "kafka": "Kafka ceiling: bare consumer",
    "redstring 1w": "redstring, 1 worker",
    "redstring 2w": "redstring, 2 workers",
    "quix": "peer: Quix Streams sinks",
}


def side_labels(report: Report) -> dict[str, str]:
    """The table's sides in order, with their labels."""
    labels = dict(LABELS)
    if report.capacity:
        c = report.capacity
        labels = {
            **{k: v for k, v in labels.items() if k != "quix"},
            "capacity": f"redstring, {c['workers']} workers, {c['partitions']} partitions",
            **({"quix": labels["quix"]} if "quix" in labels else {}),
        }
    return labels


def ratios(report: Report) -> dict[str, float]:
    totals = report.totals()
    out: dict[str, float] = {}
    one = totals.get("redstring 1w")
    if one and "capacity" in totals:
        out["capacity/1w"] = totals["capacity"].rate / one.rate
    if one and "ceiling" in totals:
        out["1w/ceiling"] = one.rate / totals["ceiling"].rate
    if one and "quix" in totals:
        out["1w/quix"] = one.rate / totals["quix"].rate
    if one and "redstring 2w" in totals:
        out["2w/1w"] = totals["redstring 2w"].rate / one.rate
        if "ceiling" in totals:
            out["2w/ceiling"] = totals["redstring 2w"].rate / totals["ceiling"].rate
    if one and "kafka" in totals:
        out["1w/kafka"] = one.rate / totals["kafka"].rate
    return out


def per_round(report: Report, a: str, b: str) -> list[float]:
    by = {(s.name, s.round): s for s in report.sides}
    rounds = sorted({s.round for s in report.sides})
    return [by[(a, r)].rate / by[(b, r)].rate for r in rounds if (a, r) in by and (b, r) in by]


def render_markdown(report: Report) -> str:
    from streams.settings import Settings

    default_batch = Settings.model_fields["batch_size"].default
    totals = report.totals()
    r = ratios(report)
    w = report.workload
    v = report.machine.get("versions", {})
    ceiling = totals.get("ceiling")
    quix = totals.get("quix")
    kinds = ", ".join(f"{n} {k}" for k, n in w["kinds"].items())
    lines = [
        f"Generated by `python -m bench.e2e --size {report.size} --seed {report.seed}` "
        f"(run {report.run}, {report.started}).",
        "",
        f"- **Machine**: {report.machine['system']}, {report.machine['cpus']} cores, "
        f"{report.machine['memory_gb']} GB, shared with other test runs (load average "
        f"{report.machine['load_at_start']} at the start, {report.machine.get('load_at_end', '?')} "
        "at the end).",
        "- **Versions**: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"- **Workload**: {w['events']:,} events ({kinds}) from {w['tenants']} tenants of "
        f"Zipf-like sizes (largest {w['largest_tenant_events']} events), "
        f"{w['entities']:,} entities and {w['relationships']:,} relationships, a 384-dimension "
        f"embedding per entity in the events ({w['mean_event_kb']} KB per event on average), "
        f"{w['partitions']} partitions; {w['rounds']} round(s), the sides' order rotating"
        + (" (" + "; ".join(", ".join(o) for o in report.order) + ")" if report.order else "")
        + (
            f", after an untimed warm-up of {report.warmup['events']:.0f} events through the "
            "ceiling and one worker" + warmup_passes(report.warmup)
            if report.warmup
            else ""
        )
        + ".",
        "- **Load average** when each side ended: "
        + ", ".join(f"{s.name} (round {s.round}) {s.load}" for s in report.sides)
        + ".",
        "- **Stores**: " + stores_line(report),
        "",
        "| side | events/s | entities/s | relationships/s | / ceiling | / peer | "
        "process CPU ms/event | Neo4j / Postgres / Kafka CPU ms/event | peak RSS MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, label in side_labels(report).items():
        side = totals.get(name)
        if side is None:
            continue
        to_ceiling = f"{side.rate / ceiling.rate:.2f}" if ceiling else "-"
        to_peer = f"{side.rate / quix.rate:.2f}" if quix else "-"
        cpu = f"{1000 * sum(side.cpu_seconds) / side.events:.1f}" if side.cpu_seconds else "-"
        rss = f"{max(side.peak_rss_mb):.0f}" if side.peak_rss_mb else "-"
        servers = (
            " / ".join(
                f"{1000 * side.server_cpu.get(k, 0.0) / side.events:.1f}"
                for k in ("neo4j", "postgres", "kafka")
            )
            if side.server_cpu
            else "-"
        )
        lines.append(
            f"| {label} | {side.rate:,.1f} | {side.entities / side.seconds:,.0f} | "
            f"{side.relationships / side.seconds:,.0f} | {to_ceiling} | {to_peer} | {cpu} | "
            f"{servers} | {rss} |"
        )
    lines += ["", "| figure | value |", "| --- | --- |"]
    if "1w/ceiling" in r:
        rounds = ", ".join(f"{x:.2f}" for x in per_round(report, "redstring 1w", "ceiling"))
        lines.append(
            "| redstring (1 worker) events/s as a fraction of the ceiling | "
            f"**{r['1w/ceiling']:.2f}** "
            f"(per round: {rounds}) |"
        )
    if "1w/quix" in r:
        rounds = ", ".join(f"{x:.2f}" for x in per_round(report, "redstring 1w", "quix"))
        lines.append(
            f"| redstring (1 worker) events/s as a multiple of the peer | **{r['1w/quix']:.2f}** "
            f"(per round: {rounds}) |"
        )
    if "2w/1w" in r:
        rounds = ", ".join(f"{x:.2f}" for x in per_round(report, "redstring 2w", "redstring 1w"))
        lines.append(
            f"| scaling, 2 workers / 1 worker ({PARTITIONS} partitions) | **{r['2w/1w']:.2f}** "
            f"(per round: {rounds}; {settled(report, 'redstring 2w')}) |"
        )
    if "capacity/1w" in r:
        c = report.capacity
        rounds = ", ".join(f"{x:.2f}" for x in per_round(report, "capacity", "redstring 1w"))
        lines.append(
            f"| scaling, {c['workers']} workers on {c['partitions']} partitions / 1 worker on "
            f"{PARTITIONS} | **{r['capacity/1w']:.2f}** (per round: {rounds}; "
            f"{totals['capacity'].rate:.1f} events/s; {settled(report, 'capacity')}) |"
        )
    lines += capacity_rows(report)
    for key in sorted(report.latency_ms, key=float):
        lat = report.latency_ms[key]
        p99 = f"**{lat['p99']:.0f} ms**" if float(key) == 0.5 else f"{lat['p99']:.0f} ms"
        of = (
            "the 1-worker rate"
            if report.latency_rate is None
            else f"{report.latency_rate:g} events/s (--latency-rate)"
        )
        lines.append(
            f"| end-to-end latency, publish to visible in both stores, at {float(key):.0%} of "
            f"{of} ({lat['offered_per_s']} events/s offered, {lat['events']:.0f} "
            f"events) | p50 {lat['p50']:.0f} ms, p95 {lat['p95']:.0f} ms, p99 {p99} |"
        )
    if report.replay:
        rp = report.replay
        lines.append(
            f"| online replay / first projection, one tenant of {rp['events']:.0f} events "
            f"(batches of {REPLAY_BATCH}) | "
            f"**{rp['ratio']:.2f}** ({rp['replay_s']:.1f} s vs {rp['first_s']:.1f} s"
            + (
                f"; from the request in the log, whose publishing took {rp['publish_s']:.2f} s"
                if "publish_s" in rp
                else ""
            )
            + ") |"
        )
    workers = [
        (name, max(side.peak_rss_mb))
        for name in ("redstring 1w", "redstring 2w", "capacity")
        if (side := totals.get(name)) is not None and side.peak_rss_mb
    ]
    if workers:
        each = ", ".join(
            f"{side_labels(report)[n].removeprefix('redstring, ')} {mb:.0f}" for n, mb in workers
        )
        lines.append(
            f"| worker peak RSS (VmHWM), default batch ({default_batch} events) | "
            f"**{max(mb for _, mb in workers):.0f} MB** (largest worker per side: {each} MB) |"
        )
    if report.growth:
        g = report.growth
        steps = int(g.get("steps", 0))
        caveat = (
            f"; only {steps} commits: too few to read, see --size large or xlarge"
            if steps < GROWTH_STEPS
            else ""
        )
        lines.append(
            "| cost per event as the graph grows, last 10% / 10-20% of that projection "
            f"(the replay tenant, batches of {REPLAY_BATCH}) | "
            f"**{g['ratio']:.2f}** ({g['last10_s_per_1k']:.1f} vs "
            f"{g['first10_s_per_1k']:.1f} s per 1k events{caveat}) |"
        )
    for note in report.notes:
        lines.append(f"| note | {note} |")
    if "1w/kafka" in r:
        lines.append(
            f"| redstring (1 worker) events/s as a fraction of the bare Kafka consumer | "
            f"{r['1w/kafka']:.3f} |"
        )
    lines.append("")
    return "\n".join(lines)


def stores_line(report: Report) -> str:
    """How the sides found the stores: emptied of the run's earlier data
    before each side (the default), or holding it (--accumulate)."""
    cleared = [s.store_before for s in report.sides if s.store_before]
    if not cleared:
        return "each side wrote beside what the run's earlier sides had left (--accumulate)."
    nodes = max(c["graph_nodes"] for c in cleared)
    rows = max(c["vector_rows"] for c in cleared)
    return (
        "every side started on stores without the run's earlier data, removed untimed "
        f"before it (at most {nodes:,} Neo4j nodes and {rows:,} rows of the workers' "
        "Postgres schema); the replay phase too."
    )


def settled(report: Report, name: str) -> str:
    """Per round, the side's events/s after its group settled (the workers'
    joins each rebalance the group, which stops every worker for a while)
    over the 1-worker side's, and how long settling took."""
    from bench.capacity import steady_rate

    by = {(s.name, s.round): s for s in report.sides}
    parts = [
        f"{steady_rate(asdict(side)) / by[('redstring 1w', rnd)].rate:.2f} after "
        f"{side.settle_s:.1f} s of settling"
        for (n, rnd), side in sorted(by.items())
        if n == name and ("redstring 1w", rnd) in by
    ]
    return "after the group settled, per round: " + ", ".join(parts) if parts else ""


def capacity_rows(report: Report) -> list[str]:
    """docs/scaling.md's model against the multi-worker sides (bench/capacity.py)."""
    from bench.capacity import check

    try:
        checks = check(asdict(report))
    except (KeyError, ValueError, ZeroDivisionError):  # a side left out (--only)
        return []
    by_side: dict[tuple[str, int, int], list[str]] = {}
    for k in checks:
        by_side.setdefault((k.side, k.workers, k.partitions), []).append(
            f"round {k.round}: {k.predicted:.0f} ({k.binding}) vs {k.measured:.1f}, "
            f"{k.steady:.1f} after settling, {k.busy_cores:.2f} cores busy"
        )
    return [
        f"| capacity model (docs/scaling.md), {workers} workers on {partitions} partitions: "
        f"predicted events/s (binding bound) vs measured | {'; '.join(rounds)} |"
        for (_, workers, partitions), rounds in by_side.items()
    ]


def write_plot(report: Report, path: Path) -> None:
    from bench.plot import from_report

    # Events visible against time: the slope is the throughput. (A rolling
    # rate reads badly for the peer, whose offsets move every 5 s.)
    from_report(asdict(report), path)


def capacity_shape(text: str) -> tuple[int, int]:
    """``PxW`` -> (P partitions, W workers), W at most P (a worker beyond the
    partition count would hold nothing)."""
    partitions, sep, workers = text.lower().partition("x")
    try:
        shape = (int(partitions), int(workers))
    except ValueError:
        shape = (0, 0)
    if not sep or not 1 <= shape[1] <= shape[0]:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected PxW, P partitions and 1 <= W <= P workers (e.g. 24x3)"
        )
    return shape


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-peer", action="store_true", help="skip the Quix Streams peer")
    parser.add_argument("--profile", action="store_true", help="py-spy the 1-worker side")
    parser.add_argument(
        "--capacity",
        type=capacity_shape,
        default=None,
        metavar="PxW",
        help="also run W workers on a topic of P partitions (e.g. 24x3) in every round, "
        "for the capacity model of docs/scaling.md",
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--keep", action="store_true", help="leave topics, tenants, schemas")
    parser.add_argument(
        "--accumulate",
        action="store_true",
        help="leave each side's data in the stores for the sides after it (the behaviour "
        "before 2026-12-04); by default every side starts on stores without the run's data",
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated sides to run (ceiling, kafka, redstring 1w, redstring 2w, quix, "
        "capacity, replay); for debugging: ratios need all of them",
    )
    parser.add_argument(
        "--plot", type=Path, default=None, help=f"also copy the plot here (e.g. {PLOT})"
    )
    parser.add_argument(
        "--latency-rate",
        type=float,
        default=None,
        metavar="EVENTS_PER_S",
        help="offer the latency phases 25/50/90%% of this rate instead of the measured "
        "1-worker rate, which moves from run to run: for comparing two builds at the "
        "same offered load",
    )
    parser.add_argument(
        "--latency-seconds",
        type=float,
        default=None,
        metavar="S",
        help="pace each latency phase for S seconds instead of the size's (20 s at small)",
    )
    parser.add_argument(
        "--latency-levels",
        default=",".join(str(level) for level in LATENCY_LEVELS),
        metavar="FRACTIONS",
        help="comma-separated latency levels to run, of %(default)s",
    )
    args = parser.parse_args()
    levels = [float(level) for level in args.latency_levels.split(",") if level.strip()]
    if not set(levels) <= set(LATENCY_LEVELS):
        parser.error(f"--latency-levels: each one of {LATENCY_LEVELS}, not {levels}")
    asyncio.run(
        run_suite(
            args.size,
            args.seed,
            args.results,
            peer=not args.no_peer,
            profile=args.profile,
            keep=args.keep,
            accumulate=args.accumulate,
            only=[name.strip() for name in args.only.split(",") if name.strip()],
            capacity=args.capacity,
            latency_rate=args.latency_rate,
            latency_seconds=args.latency_seconds,
            latency_levels=levels,
        )
    )
    if args.plot is not None:
        args.plot.write_bytes((args.results / "throughput.png").read_bytes())


if __name__ == "__main__":
    main()
