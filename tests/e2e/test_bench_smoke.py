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
    assert sides == {"ceiling", "kafka", "redstring 1w", "redstring 2w"}
    assert report["replay"]["replay_s"] > 0
    assert report["latency_ms"]["events"] > 0
    markdown = (tmp_path / "latest.md").read_text()
    assert "redstring, 1 worker" in markdown
    assert (tmp_path / "throughput.png").read_bytes().startswith(b"\x89PNG")
