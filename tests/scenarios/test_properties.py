"""Generated histories under generated at-least-once deliveries: the folded
state always equals the oracle's."""

from __future__ import annotations

import asyncio
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scenarios.generators import features, histories
from tests.scenarios.harness import run_mode
from tests.scenarios.histories import Scenario

#: Every mode that delivers at least once: random batch sizes, duplicated and
#: interleaved batches, zombies, crashes inside units of work, resumes ahead.
DELIVERIES = [
    "random_batches",
    "whole_log",
    "every_event_twice",
    "interleaved_redelivery",
    "zombie_batch",
    "crash_at_each_boundary",
    "resume_ahead",
    "crash_in_replay_window",
]


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    history=histories(),
    mode=st.sampled_from(DELIVERIES),
    seed=st.integers(0, 2**16),
)
def test_folded_state_equals_the_oracle(history: Scenario, mode: str, seed: int) -> None:
    asyncio.run(run_mode(mode, history.records, history.log_start, seed))


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(history=histories(min_steps=6, max_steps=30), seed=st.integers(0, 2**16))
def test_one_batch_at_a_time_equals_batches_of_any_size(history: Scenario, seed: int) -> None:
    """docs/design.md 5.3: a batch leaves what applying its events one by one would."""
    asyncio.run(run_mode("once", history.records, history.log_start, seed))
    asyncio.run(run_mode("random_batches", history.records, history.log_start, seed))


REQUIRED = (
    "chain_of_3_merges",
    "unmerge_of_chained_merge",
    "collapsing_edge",
    "refused_cycle_merge",
    "replay",
    "erasure",
    "duplicate_event_id",
    "duplicate_control_event",
    "several_tenants",
)


def test_the_generator_reaches_the_shapes_that_matter() -> None:
    """Guard the strategy: a property over histories that never chain three
    merges, never undo a chained merge, never collapse an edge, never refuse a
    cycle, never replay or erase, or never re-send a control event would pass
    while saying nothing about them."""
    seen: Counter[str] = Counter()

    @settings(
        max_examples=200,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(histories())
    def draw(history: Scenario) -> None:
        seen.update(set(features(history)))

    draw()
    missing = [name for name in REQUIRED if seen[name] < 3]
    assert not missing, f"the generator rarely or never reaches {missing}: {dict(seen)}"
