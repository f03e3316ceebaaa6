"""Smoke test of the end-to-end benchmark (bench/e2e.py): the whole suite at
its tiny size on the real stack, so that the one command keeps working. No
timing assertions (docs/design.md 10): only that every side ran and the report was
written. The peer (Quix Streams in its own virtualenv) is left out: installing
it is a network step CI need not take on every run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.workload import generate, render, tenant_names
from contracts.events import DocumentExtractedEvent, parse_event
from streams.kafka.partitioning import partition_for

ROOT = Path(__file__).resolve().parents[2]


def test_workload_is_reproducible_valid_and_laid_out_alike() -> None:
    one, two = generate(3, 6, 200), generate(3, 6, 200)
    assert [e.template for e in one.events] == [e.template for e in two.events]
    tenants = tenant_names("bench-smoke-a-", 6, 12)
    assert [partition_for(t, 12) for t in tenants] == list(range(6))
    kinds = one.counts()
    assert kinds["DocumentExtracted"] > 180
    for event in one.events:
        key, value = render(event, tenants)
        parsed = parse_event(value)  # what a worker accepts
        assert parsed.tenant_id == key.decode()
        if isinstance(parsed, DocumentExtractedEvent):
            assert 5 <= len(parsed.payload.entities) <= 20
            assert 5 <= len(parsed.payload.relationships) <= 30
            assert all(len(e.embedding or ()) == 384 for e in parsed.payload.entities)


@pytest.mark.services
@pytest.mark.timeout(300)
def test_bench_suite_runs_at_tiny_size(stack_env: dict[str, str], tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.e2e",
            "--size",
            "tiny",
            "--no-peer",
            "--capacity",
            "6x2",
            "--results",
            str(tmp_path),
        ],
        cwd=ROOT,
        env={**os.environ, **stack_env},
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    sides = {side["name"] for side in report["sides"]}
    assert sides == {"ceiling", "kafka", "redstring 1w", "redstring 2w", "capacity"}
    assert report["order"] == [["ceiling", "kafka", "redstring 1w", "redstring 2w", "capacity"]]
    workers = {s["name"]: len(s["peak_rss_mb"]) for s in report["sides"] if s["peak_rss_mb"]}
    assert workers == {"redstring 1w": 1, "redstring 2w": 2, "capacity": 2}
    assert report["capacity"] == {"partitions": 6, "workers": 2}
    assert report["warmup"]["events"] == 120 and report["warmup"]["seconds"] > 0
    assert report["warmup"]["passes"] in (1, 2)
    assert 0 <= report["warmup"]["neo4j jit share"] <= 1
    assert sum(report["partition_events"]["6"]) == report["workload"]["events"]
    assert report["replay"]["replay_s"] > 0 and report["replay"]["publish_s"] > 0
    assert report["growth"]["ratio"] > 0 and report["growth"]["steps"] >= 1
    for side in report["sides"]:
        if side["name"] in ("redstring 2w", "capacity"):
            # What each worker held when it last logged an assignment: at this
            # size the group may still be rebalancing when the log is done, so
            # a worker's last assignment can be the whole topic.
            held = {p for h in side["assignment"] for p in h}
            assert held == set(range(12 if side["name"] == "redstring 2w" else 6))
            assert len(side["assignment"]) == len(side["peak_rss_mb"])
    # Each side starts on stores without the run's earlier data: what the
    # replay phase finds removed is the capacity side's projection alone (the
    # same workload as the 2-worker side's), not every side's before it.
    left = {side["name"]: side["store_before"] for side in report["sides"]}
    assert left["capacity"]["graph_nodes"] > 0 and left["capacity"]["vector_rows"] > 0
    assert report["replay_store_before"] == left["capacity"]
    levels = report["latency_ms"]
    assert sorted(levels, key=float) == ["0.25", "0.5", "0.9"]
    offered = [levels[k]["offered_per_s"] for k in ("0.25", "0.5", "0.9")]
    assert offered == sorted(offered) and all(levels[k]["events"] > 0 for k in levels)
    markdown = (tmp_path / "latest.md").read_text()
    for row in (
        "redstring, 1 worker",
        "redstring, 2 workers, 6 partitions",
        "| redstring (1 worker) events/s as a fraction of the ceiling |",
        "| scaling, 2 workers / 1 worker (12 partitions) |",
        "| scaling, 2 workers on 6 partitions / 1 worker on 12 |",
        "at 25% of the 1-worker rate",
        "at 50% of the 1-worker rate",
        "at 90% of the 1-worker rate",
        "| online replay / first projection,",
        "| worker peak RSS (VmHWM), default batch",
        "| cost per event as the graph grows, last 10% / 10-20% of that projection",
        "| capacity model (docs/scaling.md), 2 workers on 6 partitions:",
        "after an untimed warm-up of 120 events through the ceiling and one worker",
        "the JIT compilers' share of each server's CPU in the last: kafka ",
        "every side started on stores without the run's earlier data",
    ):
        assert row in markdown, row
    assert (tmp_path / "throughput.png").read_bytes().startswith(b"\x89PNG")
