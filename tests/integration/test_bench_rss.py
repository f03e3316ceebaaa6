"""bench/rss.py runs, tiny, against the real stores: both sides apply every
event and report a peak RSS. No time or memory figure is asserted."""

from __future__ import annotations

import pytest

from bench.rss import run_side, table

pytestmark = pytest.mark.services


@pytest.mark.timeout(300)
def test_the_rss_bench_runs_both_sides(stack_environ: dict[str, str]) -> None:
    rows = [run_side(False, 2, 50), run_side(True, 1, 50)]
    assert [row["side"] for row in rows] == ["bounded", "previous"]
    for row in rows:
        assert row["peak_rss_mb"] > 0 and row["events_per_s"] > 0
    assert "| bounded | 2 | 50 |" in table(rows)
