"""A real worker's memory on bench/e2e.py's workload (docs/performance.md,
"Peak memory").

    python -m bench.memory [--size large] [--seed 7] [--variant NAME[:VAR=VALUE,...]]...
                           [--rounds N] [--heap] [--events N]
    python -m bench.memory --decoded [--events 1000]

For each ``--variant`` (default: one, ``defaults``, with no extra setting),
in an order that rotates between rounds (``--rounds``), it publishes the
size's workload (bench/workload.py, the same events as ``bench.e2e``) to a
fresh topic of 12 partitions, starts one ``python -m streams worker`` with the
default settings plus the variant's variables, and samples the process's RSS
every half second until both stores hold the whole log. It reports the peak
(``VmHWM``) and the RSS at each quarter of the log, so that a peak one batch
makes can be told from memory that grows with the log. A variant's
``BENCH_ROOT=DIR`` runs its worker from another checkout (``git worktree add
DIR <commit>``): the worker is started in DIR, so ``python -m streams``
imports that tree's packages, and two versions of the code run side by side
in one run, each round in the rotated order, for their CPU per event.

``--heap`` runs the worker under ``bench.heap_worker`` (top allocations by
traceback written whenever the traced total reaches a new high). It distorts
the peak and the speed, and with millions of live blocks a snapshot takes
minutes: use it with a few hundred ``--events`` to say what holds the memory,
not how much. Everything is created under ``bench-<run>`` names and removed at
the end, as bench.e2e does.

``--decoded`` needs no stack: it decodes ``--events`` (default 1,000) of the
workload's values as the projector does (``contracts.events.parse_event``)
under tracemalloc and prints their bytes, the decoded objects' bytes and the
lines that allocated them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import e2e
from bench.e2e import (
    CONTROL_KEY,
    RESULTS,
    ROOT,
    Bench,
    _free_port,
    cpu_seconds,
    load_stack_env,
)
from bench.workload import SIZES, generate


@dataclass
class Run:
    variant: str
    round: int
    events: int
    seconds: float = 0.0
    peak_mb: float = 0.0
    #: (events visible, RSS MB) samples.
    samples: list[tuple[int, float]] = field(default_factory=list)
    cpu_s: float = 0.0
    load: tuple[float, float] = (0.0, 0.0)

    def rss_at(self, fraction: float) -> float:
        """The highest RSS sampled up to this fraction of the log."""
        seen = [mb for done, mb in self.samples if done <= fraction * self.events]
        return max(seen, default=0.0)


def status_mb(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0]) / 1024
    return out


def worker_command(heap: bool, out: Path) -> tuple[list[str], dict[str, str]]:
    if heap:
        return [sys.executable, "-m", "bench.heap_worker", "worker"], {
            "BENCH_HEAP_OUT": str(out / "heap"),
        }
    return [sys.executable, "-m", "streams", "worker"], {}


def decoded(events: int, seed: int) -> str:
    """What the workload's values take once decoded, by allocating line."""
    import gc
    import tracemalloc

    from bench.workload import render, tenant_names
    from contracts.events import parse_event

    workload = generate(seed, 60, events)
    tenants = tenant_names("t-", workload.tenants, 12)
    values = [render(event, tenants)[1] for event in workload.events]
    raw = sum(len(v) for v in values)
    gc.collect()
    tracemalloc.start()
    parsed = [parse_event(v) for v in values]
    held, _ = tracemalloc.get_traced_memory()
    top = tracemalloc.take_snapshot().statistics("lineno")[:5]
    tracemalloc.stop()
    lines = [
        f"{len(parsed)} events: {raw / 1e6:.1f} MB of values, {held / 1e6:.1f} MB decoded "
        f"({held / raw:.2f} x)",
        *(str(stat) for stat in top),
    ]
    return "\n".join(lines)


async def run_worker(
    bench: Bench, topic: str, variant: str, env_extra: dict[str, str], rnd: int, heap: bool
) -> Run:
    group = f"{topic}-group"
    bench.groups.append(group)
    highs = bench.highs(topic)
    total = sum(highs.values())
    out = bench.results / f"{variant}-r{rnd}"
    out.mkdir(parents=True, exist_ok=True)
    command, heap_env = worker_command(heap, out)
    extra = dict(env_extra)
    root = Path(extra.pop("BENCH_ROOT", ROOT))
    env = {
        **os.environ,
        "REDSTRING_TOPIC": topic,
        "REDSTRING_GROUP_ID": group,
        "REDSTRING_PG_SCHEMA": bench.schema,
        "REDSTRING_CONTROL_KEY": CONTROL_KEY,
        "REDSTRING_HTTP_PORT": str(_free_port()),
        "REDSTRING_HTTP_HOST": "127.0.0.1",
        "REDSTRING_SESSION_TIMEOUT_S": "6",
        "REDSTRING_WORKER_ID": group,
        "REDSTRING_LOG_LEVEL": "INFO",
        **heap_env,
        **extra,
        "PYTHONUNBUFFERED": "1",
    }
    run = Run(variant, rnd, total, load=(os.getloadavg()[0], 0.0))
    with (out / "worker.log").open("wb") as log:
        proc = subprocess.Popen(  # noqa: ASYNC220 (a benchmark harness)
            command, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT
        )
    started = time.time()
    try:
        deadline = started + max(300.0, total / 3)
        while True:
            done = bench.done(await bench.visible(topic), highs)
            mb = status_mb(proc.pid)
            if mb:
                run.samples.append((done, mb["VmRSS"]))
                run.peak_mb = max(run.peak_mb, mb["VmHWM"])
            if done >= total:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"the worker exited ({proc.returncode}); see {out}")
            if time.time() > deadline:
                raise TimeoutError(f"{topic}: {done}/{total} after {time.time() - started:.0f}s")
            await asyncio.sleep(0.5)
        run.seconds = time.time() - started
        run.cpu_s = cpu_seconds(proc.pid)
        run.peak_mb = max(run.peak_mb, status_mb(proc.pid).get("VmHWM", 0.0))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    run.load = (run.load[0], os.getloadavg()[0])
    return run


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    name, _, rest = text.partition(":")
    env = dict(pair.split("=", 1) for pair in rest.split(",") if pair)
    return name, env


def table(runs: list[Run]) -> str:
    lines = [
        "| variant | round | events | s | peak RSS MB | RSS MB at 25% / 50% / 75% / 100% "
        "| CPU s | CPU ms/event | load start / end |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        quarters = " / ".join(f"{r.rss_at(q):.0f}" for q in (0.25, 0.5, 0.75, 1.0))
        lines.append(
            f"| {r.variant} | {r.round} | {r.events} | {r.seconds:.0f} | {r.peak_mb:.0f} "
            f"| {quarters} | {r.cpu_s:.1f} | {1000 * r.cpu_s / max(1, r.events):.2f} "
            f"| {r.load[0]:.1f} / {r.load[1]:.1f} |"
        )
    return "\n".join(lines)


async def main_async(args: Any) -> None:
    load_stack_env()
    size = SIZES[args.size]
    variants = [parse_variant(v) for v in args.variant] or [("defaults", {})]
    workload = generate(args.seed, size.tenants, args.events or size.events)
    # Bench.open and cleanup create and drop indexes that only the ceiling and
    # the peer use: a bench.e2e running on the same stack meanwhile needs them.
    e2e.INDEXES.clear()
    bench = Bench(size, args.seed, Path(args.results), peer=False, profile=False)
    print(f"run {bench.run}: {len(workload.events)} events, results in {bench.results}")
    runs: list[Run] = []
    await bench.open()
    try:
        for rnd in range(1, args.rounds + 1):
            shift = (rnd - 1) % len(variants)
            for name, env in variants[shift:] + variants[:shift]:
                t0 = time.time()
                topic, _ = await bench.publish(f"{name}-r{rnd}", workload)
                print(f"  published {topic} in {time.time() - t0:.0f}s", flush=True)
                run = await run_worker(bench, topic, name, env, rnd, args.heap)
                runs.append(run)
                print(table([run]).splitlines()[-1], flush=True)
                bench.drop_topics([topic])
    finally:
        await bench.cleanup()
    text = table(runs)
    (bench.results / "memory.md").write_text(text + "\n")
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="large")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--events", type=int, default=0, help="override the size's event count")
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--heap", action="store_true", help="the worker under tracemalloc")
    parser.add_argument("--decoded", action="store_true", help="decoded size only, no stack")
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args()
    if args.decoded:
        print(decoded(args.events or 1000, args.seed))
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
