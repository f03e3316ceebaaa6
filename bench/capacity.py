"""The capacity model of docs/scaling.md, applied to a benchmark run's report
(``bench/results/latest.json`` of ``python -m bench.e2e``)::

    python -m bench.capacity bench/results/latest.json [--cores N]

Per round, the model takes its constants from that round's 1-worker side
(events/s of one worker, and CPU milliseconds per event of the worker) and
each server's CPU milliseconds per event from the round's redstring side
that spent the least (the servers are shared with other users of the
machine, whose work can only add to what a side appears to cost), and
predicts the events/s of every side with more workers (the 2-worker side and
the ``--capacity PxW`` side) as the least of its bounds:

* ``workers``: X <= r1 / L_max, where L_max is the largest share of the log
  that one worker's partitions hold (each worker applies its partitions at
  most at one worker's rate r1; the partitions it held are in the report);
* ``partition``: X <= r1 / s_max, s_max the largest partition's share (one
  partition is applied in order by one worker at a time);
* ``cpu``: X <= 1000 C / (c_worker + c_neo4j + c_postgres + c_kafka), C the
  machine's cores (the benchmark's machine runs the servers and the workers
  on the same cores);
* ``neo4j``: X <= 1000 C_neo4j / c_neo4j, the one Neo4j server that every
  graph write goes through, given C_neo4j cores (here the machine's).

It prints predicted against measured events/s, and the cores the side kept
busy (measured events/s times its measured CPU per event).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVERS = ("neo4j", "postgres", "kafka")


@dataclass(frozen=True)
class Constants:
    """Measured per event on one worker's side."""

    worker_rate: float  # r1, events/s of one worker
    worker_ms: float  # the worker process's CPU per event
    server_ms: Mapping[str, float]  # each server's CPU per event
    cores: int

    @property
    def cpu_ms(self) -> float:
        return self.worker_ms + sum(self.server_ms.values())


def server_ms(side: Mapping[str, Any]) -> dict[str, float]:
    """Each server's CPU milliseconds per event while ``side`` ran."""
    return {k: 1000 * side["server_cpu"].get(k, 0.0) / side["events"] for k in SERVERS}


def side_constants(
    side: Mapping[str, Any], cores: int, others: Sequence[Mapping[str, Any]] = ()
) -> Constants:
    """The constants of a 1-worker ``side``; each server's CPU per event is the
    least over ``side`` and ``others`` (redstring sides of the same round)."""
    events = side["events"]
    measured = [server_ms(s) for s in (side, *others) if s.get("server_cpu")]
    return Constants(
        worker_rate=events / side["seconds"],
        worker_ms=1000 * sum(side["cpu_seconds"]) / events,
        server_ms={k: min(m[k] for m in measured) for k in SERVERS},
        cores=cores,
    )


def contiguous(partitions: int, workers: int) -> list[list[int]]:
    """Kafka's range assignment: worker w holds a contiguous run of partitions."""
    base, extra = divmod(partitions, workers)
    out, start = [], 0
    for w in range(workers):
        count = base + (1 if w < extra else 0)
        out.append(list(range(start, start + count)))
        start += count
    return out


def bounds(
    c: Constants, partition_events: Sequence[int], assignment: Sequence[Sequence[int]]
) -> dict[str, float]:
    """events/s each bound allows, for workers holding ``assignment``."""
    total = sum(partition_events)
    largest_worker = max(sum(partition_events[p] for p in held) for held in assignment) / total
    return {
        "workers": c.worker_rate / largest_worker,
        "partition": c.worker_rate / (max(partition_events) / total),
        "cpu": 1000 * c.cores / c.cpu_ms,
        "neo4j": 1000 * c.cores / c.server_ms["neo4j"],
    }


def steady_rate(side: Mapping[str, Any]) -> float:
    """events/s after the group settled (its last rebalance): the start-up
    the model leaves out."""
    settle = float(side.get("settle_s", 0.0))
    if settle <= 0 or settle >= side["seconds"]:
        return float(side["events"] / side["seconds"])
    before = [(0.0, 0)] + [(t, d) for t, d in side["timeline"] if t <= settle]
    done = before[-1][1]
    return float((side["events"] - done) / (side["seconds"] - settle))


@dataclass(frozen=True)
class Check:
    side: str
    round: int
    workers: int
    partitions: int
    bounds: dict[str, float]
    measured: float
    steady: float
    busy_cores: float  # measured events/s x measured CPU per event

    @property
    def predicted(self) -> float:
        return min(self.bounds.values())

    @property
    def binding(self) -> str:
        return min(self.bounds, key=lambda k: self.bounds[k])


def check(report: Mapping[str, Any], cores: int | None = None) -> list[Check]:
    cores = cores or int(report["machine"]["cpus"])
    sides = report["sides"]
    ones = {s["round"]: s for s in sides if s["name"] == "redstring 1w"}
    out = []
    for side in sides:
        if side["name"] not in ("redstring 2w", "capacity") or side["round"] not in ones:
            continue
        same_round = [
            s
            for s in sides
            if s["round"] == side["round"] and s["name"] in ("redstring 2w", "capacity")
        ]
        c = side_constants(ones[side["round"]], cores, same_round)
        workers = len(side["peak_rss_mb"]) or len(side.get("assignment", []))
        partitions = (
            report["capacity"]["partitions"]
            if side["name"] == "capacity"
            else report["workload"]["partitions"]
        )
        held = side.get("assignment") or []
        if sorted(p for h in held for p in h) != list(range(partitions)):
            held = contiguous(partitions, workers)  # not recorded: Kafka's range assignor
        per_partition = report["partition_events"][str(partitions)]
        measured = side["events"] / side["seconds"]
        used = sum(side["cpu_seconds"]) + sum(side["server_cpu"].get(k, 0.0) for k in SERVERS)
        out.append(
            Check(
                side["name"],
                side["round"],
                workers,
                partitions,
                bounds(c, per_partition, held),
                measured,
                steady_rate(side),
                measured * used / side["events"],
            )
        )
    return out


def render(report: Mapping[str, Any], cores: int | None = None) -> str:
    lines = [
        "| side | round | r1 (1 worker) | bounds: workers / partition / cpu / neo4j | "
        "predicted | measured | after settling | cores busy |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    ones = {s["round"]: s for s in report["sides"] if s["name"] == "redstring 1w"}
    for k in check(report, cores):
        r1 = ones[k.round]["events"] / ones[k.round]["seconds"]
        b = " / ".join(f"{v:.0f}" for v in k.bounds.values())
        lines.append(
            f"| {k.workers} workers, {k.partitions} partitions | {k.round} | {r1:.1f} | {b} | "
            f"{k.predicted:.0f} ({k.binding}) | {k.measured:.1f} | {k.steady:.1f} | "
            f"{k.busy_cores:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a run's latest.json")
    parser.add_argument("--cores", type=int, default=None, help="default: the run's machine's")
    args = parser.parse_args()
    print(render(json.loads(args.report.read_text()), args.cores), end="")


if __name__ == "__main__":
    main()
