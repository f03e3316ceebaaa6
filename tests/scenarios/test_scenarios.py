"""Every pinned history under every delivery mode, against the oracle."""

from __future__ import annotations

import pytest

from contracts.events import EVENT_TYPES, TENANT_REPLAY_REQUESTED
from tests.scenarios.harness import (
    MODES,
    PARTITION,
    once,
    run_mode,
    to_log,
    with_replays_of_every_tenant,
)
from tests.scenarios.histories import (
    PINNED,
    Scenario,
    edge_to_a_canonical_extracted_later_in_the_run,
)
from tests.scenarios.oracle import Oracle

#: Modes whose batching, redelivery or crashes are drawn from a seed get several.
SEEDED = {
    "random_batches",
    "interleaved_redelivery",
    "zombie_batch",
    "rebuild_into_fresh_stores",
    "crash_at_each_boundary",
    "resume_ahead",
    "crash_in_replay_window",
}
CASES = [
    pytest.param(name, mode, seed, id=f"{name}-{mode}" + (f"-seed{seed}" if mode in SEEDED else ""))
    for name in PINNED
    for mode in MODES
    for seed in ((0, 1, 2) if mode in SEEDED else (0,))
]


def _records(scenario: Scenario, mode: str) -> list:
    if mode == "crash_in_replay_window" and TENANT_REPLAY_REQUESTED not in scenario.event_types():
        return with_replays_of_every_tenant(scenario)
    return scenario.records


async def run_pinned(name: str, mode: str, seed: int) -> None:
    """One case of CASES, on the stores of the active factory."""
    scenario = PINNED[name]()
    await run_mode(mode, _records(scenario, mode), scenario.log_start, seed)


@pytest.mark.parametrize(("name", "mode", "seed"), CASES)
async def test_pinned_history_under_delivery_mode(name: str, mode: str, seed: int) -> None:
    await run_pinned(name, mode, seed)


@pytest.mark.parametrize("name", list(PINNED))
async def test_replaying_every_tenant_changes_nothing(name: str) -> None:
    """Wipe and replay online: a replay request per tenant at the end of the log
    leaves exactly the state before it (the oracle agrees with itself, and the
    folds agree with the oracle)."""
    scenario = PINNED[name]()
    extended = with_replays_of_every_tenant(scenario)
    before = Oracle(scenario.log_start).feed_all(scenario.records).states()
    after = Oracle(scenario.log_start).feed_all(extended).states()
    assert after == before
    for seed in (0, 1):
        await run_mode("random_batches", extended, scenario.log_start, seed)


@pytest.mark.parametrize("mode", ["once", "whole_log", "every_event_twice"])
async def test_an_edge_to_a_canonical_extracted_later_in_the_run(mode: str) -> None:
    """The graph fold asks the store whether an endpoint exists only when the
    run has not upserted it yet at that edge (projections/graph.py); an
    endpoint the run upserts later must still be looked up."""
    scenario = edge_to_a_canonical_extracted_later_in_the_run()
    await run_mode(mode, scenario.records, scenario.log_start, 0)


def test_every_event_type_is_emitted_by_a_pinned_scenario() -> None:
    emitted: set[str] = set()
    for build in PINNED.values():
        emitted |= build().event_types()
    missing = set(EVENT_TYPES) - emitted
    assert not missing, f"no pinned scenario emits {sorted(missing)}"


def test_the_gate_is_not_vacuous() -> None:
    assert len(EVENT_TYPES) >= 5
    assert len(PINNED) >= 16


def test_every_pinned_scenario_has_a_poison_free_oracle_run() -> None:
    """Guard the histories themselves: each one changes some state, so a mode
    that folds nothing cannot pass by comparing two empty states."""
    for name, build in PINNED.items():
        scenario = build()
        states = Oracle(scenario.log_start).feed_all(scenario.records).states()
        assert any(s["entities"] for s in states.values()), name


# -- report counts the semantics pin -------------------------------------------------


def _reports_for(run, offset: int) -> list:
    return [d for d in run.delivered if any(r.offset == offset for r in d.records)]


async def test_self_loop_re_extraction_counts_collapsed_not_failed() -> None:
    scenario = PINNED["self_loop_collapse"]()
    (offset,) = [o for o, mark in scenario.marks.items() if mark == "collapsed"]
    run = await once(to_log(scenario.records), scenario.log_start, 0)
    (delivered,) = _reports_for(run, offset)
    assert delivered.graph.collapsed == 1
    assert delivered.graph.failed == []
    assert delivered.vector.failed == []
    assert delivered.graph.applied == 1
    # Control: the edge did exist before the merge dropped it.
    before = Oracle().feed_all(scenario.records[:1]).state("acme")
    assert {"alice", "alicia"} <= {
        x for r in before["relationships"] for x in (r["source"], r["target"])
    }
    after = Oracle().feed_all(scenario.records).state("acme")
    assert all({r["source"], r["target"]} != {"alice", "alicia"} for r in after["relationships"])
    assert all(not d.graph.failed and not d.vector.failed for d in run.delivered)


async def test_a_merge_closing_a_cycle_is_refused_and_reported() -> None:
    scenario = PINNED["cycle_merge_refused"]()
    refused = {o for o, mark in scenario.marks.items() if mark == "refused"}
    assert len(refused) == 2
    run = await once(to_log(scenario.records), scenario.log_start, 0)
    for offset in refused:
        (delivered,) = _reports_for(run, offset)
        assert [f.offset for f in delivered.graph.failed] == [offset]
        assert [f.offset for f in delivered.vector.failed] == [offset]
        assert all(f.reason for f in delivered.graph.failed + delivered.vector.failed)
    assert run.failed_offsets() == refused


async def test_redelivered_event_ids_are_skipped_not_applied() -> None:
    scenario = PINNED["redelivered_event_id"]()
    oracle = Oracle().feed_all(scenario.records)
    duplicates = [o.offset for o in oracle.outcomes if o.kind == "duplicate"]
    assert len(duplicates) == 2
    run = await once(to_log(scenario.records), scenario.log_start, 0)
    for offset in duplicates:
        (delivered,) = _reports_for(run, offset)
        assert (delivered.graph.applied, delivered.graph.skipped) == (0, 1)
        assert (delivered.vector.applied, delivered.vector.skipped) == (0, 1)


CONTROL_COPIES = ["replay_requested_twice", "replay_re_sent_later", "erasure_re_sent_later"]


@pytest.mark.parametrize("name", CONTROL_COPIES)
async def test_a_control_event_sent_again_is_skipped_not_acted_on(name: str) -> None:
    """docs/design.md 6.4: a copy of a replay request or erasure the partition has
    already acted on is counted skipped in both stores; no rebuild starts at it
    and each acted-on request starts exactly one."""
    scenario = PINNED[name]()
    copies = {o for o, mark in scenario.marks.items() if mark == "control_duplicate"}
    oracle = Oracle(scenario.log_start).feed_all(scenario.records)
    duplicates = {o.offset for o in oracle.outcomes if o.kind == "duplicate"}
    assert copies and copies == duplicates
    replays = [o.offset for o in oracle.outcomes if o.kind == "replay"]
    run = await once(to_log(scenario.records), scenario.log_start, 0)
    for offset in copies:
        deliveries = _reports_for(run, offset)
        assert deliveries
        for delivered in deliveries:
            for report in (delivered.graph, delivered.vector):
                assert (report.applied, report.skipped) == (0, 1)
                assert report.replays_started == []
    for side in ("graph", "vector"):
        started = [o for d in run.delivered for o in getattr(d, side).replays_started]
        assert started == replays, side
    assert await run.stores.graph.rebuild_markers(PARTITION) == []
    assert await run.stores.vector.rebuild_markers(PARTITION) == []


async def test_poison_records_are_stepped_over() -> None:
    scenario = PINNED["poison_record"]()
    run = await once(to_log(scenario.records), scenario.log_start, 0)
    poison = [o for o, _, e in scenario.records if e is None]
    for offset in poison:
        (delivered,) = _reports_for(run, offset)
        assert delivered.graph.applied == 0 and not delivered.graph.failed
        assert delivered.graph.next_needed_offset == offset + 1


async def test_the_modes_really_crash_and_seek_back() -> None:
    """Guard the harness: the crash and resume-ahead modes exercise what they
    claim to (a mode that never crashed would pass vacuously)."""
    scenario = PINNED["replay_during_live_traffic"]()
    crashes = 0
    seeks = 0
    for seed in range(3):
        run, _ = await run_mode("crash_at_each_boundary", scenario.records, 0, seed)
        crashes += run.stores.graph_trip.fired + run.stores.vector_trip.fired
        run, _ = await run_mode("resume_ahead", scenario.records, 0, seed)
        seeks += run.seeks_back
        run, _ = await run_mode("crash_in_replay_window", scenario.records, 0, seed)
        crashes += run.stores.graph_trip.fired + run.stores.vector_trip.fired
        run, _ = await run_mode("zombie_batch", scenario.records, 0, seed)
        assert any(d.kind == "zombie" for d in run.delivered)
    assert crashes >= 6
    assert seeks >= 3
