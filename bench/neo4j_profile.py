"""Neo4j's work per statement for one unit of work of the graph fold, against
the direct-write ceiling's: ``python -m bench.neo4j_profile``.

    python -m bench.neo4j_profile [--size small] [--seed 7] [--per-unit 150] [--rebuild]

Folds bench/e2e.py's workload (``bench.workload``) through the real graph fold
(``projections.graph.GraphProjection``) and ``Neo4jGraphStore`` on the local
stack, ``--per-unit`` records per partition per ``apply`` (12 partitions,
tenant *i* on partition *i* mod 12, as bench/e2e.py lays them out), and writes
the same rows the way bench/e2e.py's ceiling does (bench/neo4j_write.py's two
UNWIND statements per tenant, one transaction per partition and batch, plus
its alias rows for merges). Every statement is captured by wrapping the
driver the store is given, here only: production code has no hook.

Three passes, each into fresh tenants and a fresh topic: a warm-up (plan
caches, pools), one with every statement run under ``PROFILE`` (database hits
and rows, which are deterministic for a given workload, code and plan), and one
plain (server time: the result summary's ``result_available_after`` +
``result_consumed_after``, and the client's round trip, ``COMMIT`` included).
Prints a markdown table per side, per unit of work. ``--rebuild`` adds a
third side: a replay's rebuild, the fold through rebuild windows into
tenants just purged (folded once, deleted by ``delete_by_tenant``, their
applied ids forgotten), to tell whether Neo4j writes a rebuilt tenant
dearer than a new one. A statement whose plan scanned an index or a label
(where every statement means to seek) has its heaviest such call's plan
printed after its side's table: Neo4j replans as statistics move, and a
plan that moved shows only there.
Everything it wrote is deleted at the end. Wall-clock numbers; no test
asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from neo4j import AsyncDriver, AsyncGraphDatabase, NotificationMinimumSeverity

from adapters.neo4j import Neo4jGraphStore, ledger_cypher
from adapters.neo4j import cypher as graph_cypher
from bench.e2e import servers_cpu
from bench.neo4j_write import CEILING_ENTITIES, CEILING_RELATIONSHIPS, Batch, ceiling_params
from bench.neo4j_write import _endpoints as neo4j_endpoints
from bench.workload import SIZES, Planned, generate
from contracts.domain import Entity, RebuildMarker, Relationship, StreamPartition
from contracts.events import parse_event
from contracts.ids import EntityId, TenantId
from projections.graph import GraphProjection
from projections.records import LogRecord

PARTITIONS = 12

CEILING_ALIASES = (
    "UNWIND $rows AS row MERGE (x:BenchCeilingAlias {tenant_id: row[0], id: row[1]}) "
    "SET x.canonical = row[2]"
)


def _statement_names(max_alias_depth: int) -> dict[str, str]:
    names = {
        CEILING_ENTITIES: "ceiling: CEILING_ENTITIES",
        CEILING_RELATIONSHIPS: "ceiling: CEILING_RELATIONSHIPS",
        CEILING_ALIASES: "ceiling: alias rows",
    }
    # Statements rendered with the alias bound (their names changed over time).
    for rendered in ("alias_depths", "upsert_alias_checked", "upsert_aliases_checked"):
        if hasattr(graph_cypher, rendered):
            names[getattr(graph_cypher, rendered)(max_alias_depth)] = rendered
    for module in (graph_cypher, ledger_cypher):
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str):
                names.setdefault(value, name)
    return names


@dataclass
class Stat:
    calls: int = 0
    hits: int = 0
    rows: int = 0
    server_ms: float = 0.0
    wall_ms: float = 0.0


@dataclass
class Capture:
    """What one pass's statements cost, by statement."""

    names: dict[str, str]
    profile: bool
    stats: dict[str, Stat] = field(default_factory=lambda: defaultdict(Stat))
    units: int = 0
    #: The Neo4j server's CPU seconds over the pass (the local stack's only).
    neo4j_cpu: float | None = None
    #: The plan of each statement's call with the most db hits among those
    #: that scanned (an operator reading more than SCAN_HITS by a scan, where
    #: the statements mean to seek): a plan that moved shows here.
    heavy: dict[str, tuple[int, str]] = field(default_factory=dict)

    def name(self, query: str) -> str:
        return self.names.get(query) or query.strip().splitlines()[0][:40]

    async def run(self, runner: Any, query: str, params: dict[str, Any]) -> list[Any]:
        text = "PROFILE " + query if self.profile else query
        started = time.perf_counter()
        result = await runner.run(text, params)
        records = [record async for record in result]
        summary = await result.consume()
        stat = self.stats[self.name(query)]
        stat.calls += 1
        stat.rows += len(records)
        stat.wall_ms += (time.perf_counter() - started) * 1000
        stat.server_ms += (summary.result_available_after or 0) + (
            summary.result_consumed_after or 0
        )
        if self.profile and summary.profile is not None:
            hits = _db_hits(summary.profile)
            stat.hits += hits
            name = self.name(query)
            scanned = _scan_hits(summary.profile) > SCAN_HITS
            if scanned and hits > self.heavy.get(name, (0, ""))[0]:
                self.heavy[name] = (hits, _plan_text(summary.profile))
        return records

    async def commit(self, tx: Any) -> None:
        started = time.perf_counter()
        await tx.commit()
        stat = self.stats["COMMIT"]
        stat.calls += 1
        stat.wall_ms += (time.perf_counter() - started) * 1000


#: A call whose scans read more than this many db hits has its plan printed.
SCAN_HITS = 1_000


def _scan_hits(plan: dict[str, Any]) -> int:
    """The db hits of a plan's scan operators (index, label or all-node scans)."""
    own = int(plan.get("dbHits", 0)) if "Scan" in str(plan.get("operatorType", "")) else 0
    return own + sum(_scan_hits(c) for c in plan.get("children", []))


def _plan_text(plan: dict[str, Any], depth: int = 0) -> str:
    """A profiled plan as indented lines: operator, db hits, rows, details."""
    args = plan.get("args", {})
    line = (
        f"{'  ' * depth}{plan.get('operatorType', '?')} hits={plan.get('dbHits', 0)} "
        f"rows={plan.get('rows', 0)} {str(args.get('Details', ''))[:160]}"
    )
    children = [_plan_text(c, depth + 1) for c in plan.get("children", [])]
    return "\n".join([line, *children])


def _db_hits(plan: dict[str, Any]) -> int:
    return int(plan.get("dbHits", 0)) + sum(_db_hits(c) for c in plan.get("children", []))


class _Records:
    """A consumed result, as the store reads one."""

    def __init__(self, records: list[Any]) -> None:
        self._records = records

    async def __aiter__(self) -> AsyncIterator[Any]:
        for record in self._records:
            yield record

    async def consume(self) -> None:
        return None


class _Tx:
    def __init__(self, tx: Any, capture: Capture) -> None:
        self._tx = tx
        self._capture = capture

    async def run(self, query: str, parameters: dict[str, Any] | None = None, **kw: Any) -> Any:
        return _Records(await self._capture.run(self._tx, query, {**(parameters or {}), **kw}))

    async def commit(self) -> None:
        await self._capture.commit(self._tx)

    async def rollback(self) -> None:
        await self._tx.rollback()


class _Session:
    def __init__(self, session: Any, capture: Capture) -> None:
        self._session = session
        self._capture = capture

    async def __aenter__(self) -> _Session:
        await self._session.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._session.__aexit__(*exc)

    async def begin_transaction(self, **config: Any) -> _Tx:
        self._capture.units += 1
        return _Tx(await self._session.begin_transaction(**config), self._capture)


class _Driver:
    """The driver the store is given: sessions and direct calls captured."""

    def __init__(self, driver: AsyncDriver, capture: Capture) -> None:
        self._driver = driver
        self.capture = capture

    def session(self, **config: Any) -> _Session:
        return _Session(self._driver.session(**config), self.capture)

    async def execute_query(self, query: str, params: dict[str, Any], **config: Any) -> Any:
        async with self._driver.session(database=config.get("database_", "neo4j")) as session:
            records = await self.capture.run(session, query, params)
        return records, None, None

    async def close(self) -> None:
        return None


def _records(workload: list[Planned], tenants: list[str]) -> dict[int, list[LogRecord]]:
    """Each partition's log, offsets from 0, tenant i on partition i mod 12."""
    logs: dict[int, list[LogRecord]] = defaultdict(list)
    for planned in workload:
        name = tenants[planned.tenant]
        value = planned.template.replace(b"__TENANT__", name.encode(), 1)
        log = logs[planned.tenant % PARTITIONS]
        log.append(LogRecord(len(log), TenantId(name), parse_event(value)))
    return logs


def _batches(logs: dict[int, list[LogRecord]], per_unit: int) -> Iterator[tuple[int, int]]:
    """(partition, start) in the order the passes write them: round robin."""
    longest = max(len(log) for log in logs.values())
    for start in range(0, longest, per_unit):
        for p in sorted(logs):
            if start < len(logs[p]):
                yield p, start


async def fold_pass(
    driver: AsyncDriver,
    capture: Capture,
    workload: list[Planned],
    tenants: list[str],
    topic: str,
    per_unit: int,
) -> None:
    store = Neo4jGraphStore(_Driver(driver, capture), owns_driver=False)  # type: ignore[arg-type]
    fold = GraphProjection(store)
    logs = _records(workload, tenants)
    for p, start in _batches(logs, per_unit):
        part = StreamPartition(topic, p, "profile")
        report = await fold.apply(part, logs[p][start : start + per_unit])
        assert report.outcome.__class__.__name__ == "Applied", report


async def open_windows(
    store: Neo4jGraphStore,
    driver: AsyncDriver,
    names: dict[str, str],
    workload: list[Planned],
    tenants: list[str],
    topic: str,
) -> None:
    """What a replay leaves before its rebuild: the tenants folded once, then
    purged (``delete_by_tenant``, applied ids forgotten) and a rebuild window
    opened over each one's records on ``topic``, whose checkpoints are past
    them, so that only the windows admit them again."""
    await fold_pass(driver, Capture(names, profile=False), workload, tenants, topic, 10**9)
    for tenant in tenants:
        await store.delete_by_tenant(TenantId(tenant))
        await store.forget_applied_events(TenantId(tenant))
    for p, log in _records(workload, tenants).items():
        part = StreamPartition(topic, p, "profile")
        for tenant in sorted({r.tenant_id for r in log if r.tenant_id is not None}):
            await store.put_rebuild_marker(RebuildMarker(tenant, part, 0, len(log), -1))


async def ceiling_pass(
    driver: AsyncDriver,
    capture: Capture,
    workload: list[Planned],
    tenants: list[str],
    per_unit: int,
) -> None:
    """bench/e2e.py's ceiling, cut into the fold's units of work."""
    logs: dict[int, list[Planned]] = defaultdict(list)
    for planned in workload:
        logs[planned.tenant % PARTITIONS].append(planned)
    proxy = _Driver(driver, capture)
    for p, start in _batches(logs, per_unit):  # type: ignore[arg-type]
        docs: dict[str, Batch] = {}
        merges: list[list[str]] = []
        for ev in logs[p][start : start + per_unit]:
            tenant = TenantId(tenants[ev.tenant])
            payload = ev.payload
            if ev.kind == "EntitiesMerged":
                merges += [[tenant, a, payload["canonical_id"]] for a in payload["absorbed_ids"]]
                continue
            if ev.kind == "EntitiesUnmerged":
                merges += [[tenant, a, ""] for a in payload["restored_ids"]]
                continue
            batch = docs.setdefault(tenant, Batch([], []))
            batch.entities.extend(
                Entity(tenant, EntityId(e["id"]), e["name"], e["type"], e["properties"])
                for e in payload["entities"]
            )
            batch.relationships.extend(
                Relationship(
                    tenant,
                    EntityId(r["source"]),
                    EntityId(r["target"]),
                    r["type"],
                    r["confidence"],
                    r["properties"],
                )
                for r in payload["relationships"]
            )
        async with proxy.session(database="neo4j") as session:
            tx = await session.begin_transaction()
            for tenant, batch in docs.items():
                entities, endpoints, edges = ceiling_params(batch)
                await tx.run(CEILING_ENTITIES, tenant=tenant, rows=entities)
                await tx.run(CEILING_RELATIONSHIPS, tenant=tenant, endpoints=endpoints, rows=edges)
            if merges:
                await tx.run(CEILING_ALIASES, rows=merges)
            await tx.commit()


def table(title: str, capture: Capture, timed: Capture, events: int) -> str:
    units = capture.units
    lines = [
        f"**{title}**: {units} units of work, {events} events "
        f"({events / units:.1f} per unit of work)",
        "",
        "| statement | calls / unit | db hits / unit | rows / unit "
        "| server ms / unit | round trip ms / unit |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    total = Stat()
    order = sorted(capture.stats.items(), key=lambda kv: -kv[1].hits)
    for name, stat in order:
        t = timed.stats.get(name, Stat())
        lines.append(
            f"| {name} | {stat.calls / units:.2f} | {stat.hits / units:,.0f} "
            f"| {stat.rows / units:.1f} | {t.server_ms / units:.2f} | {t.wall_ms / units:.2f} |"
        )
        total.calls += stat.calls
        total.hits += stat.hits
        total.rows += stat.rows
        total.server_ms += t.server_ms
        total.wall_ms += t.wall_ms
    lines.append(
        f"| **total** | {(total.calls - capture.stats['COMMIT'].calls) / units:.2f} "
        f"| **{total.hits / units:,.0f}** | {total.rows / units:.1f} "
        f"| {total.server_ms / units:.2f} | {total.wall_ms / units:.2f} |"
    )
    lines += [
        "",
        f"Per event: {total.hits / events:.1f} db hits, "
        f"{total.server_ms / events:.3f} ms server time, "
        f"{total.wall_ms / events:.3f} ms round trips.",
        "(calls exclude COMMIT.)",
    ]
    if timed.neo4j_cpu is not None:
        lines[-1] += (
            f" Neo4j's CPU over the timed pass: {timed.neo4j_cpu * 1000 / events:.2f} ms per "
            "event (the whole server: other clients of a shared stack count too)."
        )
    return "\n".join(lines)


async def main(size: str, seed: int, per_unit: int, events: int | None, rebuild: bool) -> None:
    uri, user, password = neo4j_endpoints()
    bootstrap = await Neo4jGraphStore.open(uri, user, password)
    driver = AsyncGraphDatabase.driver(
        uri, auth=(user, password), notifications_min_severity=NotificationMinimumSeverity.OFF
    )
    workload = generate(seed, SIZES[size].tenants, SIZES[size].events)
    planned = workload.events[:events] if events else workload.events
    names = _statement_names(bootstrap.max_alias_depth)
    run = uuid.uuid4().hex[:6]
    sides = ("redstring", "ceiling", "rebuild") if rebuild else ("redstring", "ceiling")
    written: list[str] = []
    topics: list[str] = []
    captures: dict[str, Capture] = {}
    try:
        for label, profile in (("warm", False), ("profile", True), ("timed", False)):
            for side in sides:
                tenants = [f"prof-{run}-{label}-{side[0]}{i:02d}" for i in range(workload.tenants)]
                written += tenants
                capture = Capture(names, profile)
                topics.append(f"prof-{run}-{label}-{side}")
                if side == "rebuild":
                    await open_windows(bootstrap, driver, names, planned, tenants, topics[-1])
                before = servers_cpu().get("neo4j")
                if side in ("redstring", "rebuild"):
                    await fold_pass(driver, capture, planned, tenants, topics[-1], per_unit)
                else:
                    await ceiling_pass(driver, capture, planned, tenants, per_unit)
                after = servers_cpu().get("neo4j")
                if before is not None and after is not None:
                    capture.neo4j_cpu = after - before
                captures[f"{label} {side}"] = capture
    finally:
        for tenant in written:
            await bootstrap.delete_by_tenant(TenantId(tenant))
            await bootstrap.forget_applied_events(TenantId(tenant))
        async with driver.session(database="neo4j") as session:
            await (
                await session.run(
                    "UNWIND $tenants AS t MATCH (x:BenchCeilingAlias {tenant_id: t}) DELETE x",
                    tenants=written,
                )
            ).consume()
            await (
                await session.run(
                    "UNWIND $topics AS t UNWIND range(0, $n - 1) AS p "
                    "MATCH (c:Checkpoint {topic: t, partition: p}) DELETE c",
                    topics=topics,
                    n=PARTITIONS,
                )
            ).consume()
        await driver.close()
        await bootstrap.aclose()

    load = os.getloadavg()
    print(
        f"`python -m bench.neo4j_profile --size {size} --seed {seed} --per-unit {per_unit}"
        f"{f' --events {events}' if events else ''}{' --rebuild' if rebuild else ''}`: "
        f"{len(planned)} events, "
        f"{workload.tenants} tenants over {PARTITIONS} partitions; load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end.\n"
    )
    for side in sides:
        print(table(side, captures[f"profile {side}"], captures[f"timed {side}"], len(planned)))
        print()
        for name, (hits, plan) in sorted(captures[f"profile {side}"].heavy.items()):
            print(f"{side}: the heaviest call of {name} that scanned ({hits:,} db hits):\n")
            print("```\n" + plan + "\n```\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--per-unit", type=int, default=150, help="records per partition per unit")
    parser.add_argument("--events", type=int, default=None, help="only the first N events")
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="also fold into tenants just purged, as a replay's rebuild does",
    )
    args = parser.parse_args()
    asyncio.run(main(args.size, args.seed, args.per_unit, args.events, args.rebuild))
