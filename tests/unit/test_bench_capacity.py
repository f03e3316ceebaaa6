"""bench/capacity.py: docs/scaling.md's capacity model applied to a run's
report: each bound from the recorded constants, the least one predicts."""

from __future__ import annotations

from typing import Any

import pytest

from bench.capacity import Constants, bounds, check, contiguous, render, steady_rate

ONE = Constants(
    worker_rate=100.0,
    worker_ms=6.0,
    server_ms={"neo4j": 4.0, "postgres": 0.5, "kafka": 1.5},
    cores=2,
)


def test_range_assignment_holds_every_partition_once() -> None:
    assert contiguous(12, 2) == [list(range(6)), list(range(6, 12))]
    assert contiguous(24, 3) == [list(range(0, 8)), list(range(8, 16)), list(range(16, 24))]
    held = contiguous(7, 3)
    assert sorted(p for h in held for p in h) == list(range(7))
    assert [len(h) for h in held] == [3, 2, 2]


def test_each_bound_follows_its_formula() -> None:
    # 4 partitions, the first holding half the log; two workers, one holding
    # partitions 0 and 1 (70% of the log).
    b = bounds(ONE, [50, 20, 20, 10], [[0, 1], [2, 3]])
    assert b["workers"] == pytest.approx(100.0 / 0.7)
    assert b["partition"] == pytest.approx(100.0 / 0.5)
    assert b["cpu"] == pytest.approx(2000 / 12.0)
    assert b["neo4j"] == pytest.approx(2000 / 4.0)
    # Evenly spread, more workers lift the workers bound and nothing else.
    even = bounds(ONE, [25, 25, 25, 25], [[0], [1], [2], [3]])
    assert even["workers"] == pytest.approx(400.0)
    assert even["cpu"] == b["cpu"]


def side(name: str, rnd: int, seconds: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "round": rnd,
        "events": 1000,
        "seconds": seconds,
        "cpu_seconds": [3.0, 3.0] if name != "redstring 1w" else [6.0],
        "server_cpu": {"neo4j": 4.0, "postgres": 0.5, "kafka": 1.5},
        "peak_rss_mb": [400.0] * (1 if name == "redstring 1w" else 2),
        "timeline": [[1.0, 0], [2.0, 100], [4.0, 400], [seconds, 1000]],
        **extra,
    }


def report() -> dict[str, Any]:
    return {
        "machine": {"cpus": 2},
        "workload": {"partitions": 4},
        "capacity": {"partitions": 4, "workers": 2},
        "partition_events": {"4": [500, 200, 200, 100]},
        "sides": [
            side("ceiling", 1, 5.0),
            side("redstring 1w", 1, 10.0),
            side("redstring 2w", 1, 8.0, assignment=[[0, 2], [1, 3]], settle_s=2.0),
            # Neo4j busy with someone else's work while it ran: the round's
            # least Neo4j CPU per event (the 1-worker side's 4 ms) is taken.
            side(
                "capacity",
                1,
                8.0,
                assignment=[[0], [1]],  # incomplete: the range guess
                server_cpu={"neo4j": 9.0, "postgres": 0.2, "kafka": 1.5},
            ),
        ],
    }


def test_the_check_takes_its_constants_from_the_rounds_one_worker_side() -> None:
    two, capacity = check(report())
    assert (two.side, two.workers, two.partitions) == ("redstring 2w", 2, 4)
    # r1 = 100 events/s; the recorded assignment puts 70% on one worker.
    assert two.bounds["workers"] == pytest.approx(100 / 0.7)
    assert two.bounds["cpu"] == pytest.approx(2000 / (6.0 + 4.0 + 0.2 + 1.5))
    assert two.predicted == pytest.approx(100 / 0.7) and two.binding == "workers"
    assert two.measured == pytest.approx(125.0)
    assert two.steady == pytest.approx((1000 - 100) / (8.0 - 2.0))
    assert two.busy_cores == pytest.approx(125.0 * 12.0 / 1000)
    # An assignment that misses partitions is replaced by the range guess.
    assert capacity.bounds["workers"] == pytest.approx(100 / 0.7)
    # Each server's least CPU per event in the round: Postgres from the
    # capacity side (0.2), Neo4j from the others (4.0).
    assert capacity.bounds["cpu"] == pytest.approx(2000 / (6.0 + 4.0 + 0.2 + 1.5))
    assert "| 2 workers, 4 partitions | 1 | 100.0 |" in render(report())


def test_without_a_recorded_settle_the_steady_rate_is_the_rate() -> None:
    assert steady_rate(side("x", 1, 10.0)) == pytest.approx(100.0)
