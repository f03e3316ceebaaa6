"""bench/memory.py's bookkeeping: variants as the command line gives them, and
the RSS at each part of the log, which is what tells a peak from growth."""

from __future__ import annotations

from bench.memory import Run, parse_variant


def test_a_variant_is_a_name_and_its_variables() -> None:
    assert parse_variant("defaults") == ("defaults", {})
    assert parse_variant("b:REDSTRING_BATCH_SIZE=24,REDSTRING_X=a=b") == (
        "b",
        {"REDSTRING_BATCH_SIZE": "24", "REDSTRING_X": "a=b"},
    )


def test_rss_at_a_fraction_is_the_highest_seen_up_to_it() -> None:
    run = Run(
        "v", 1, 100, samples=[(0, 150.0), (20, 300.0), (40, 250.0), (90, 260.0), (100, 255.0)]
    )
    assert [run.rss_at(q) for q in (0.25, 0.5, 0.75, 1.0)] == [300.0, 300.0, 300.0, 300.0]
    growing = Run("v", 1, 100, samples=[(10, 100.0), (50, 200.0), (75, 300.0), (100, 400.0)])
    assert [growing.rss_at(q) for q in (0.25, 0.5, 0.75, 1.0)] == [100.0, 200.0, 300.0, 400.0]
