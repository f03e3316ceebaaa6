"""The worker loop under a simulated Kafka and Faust, with faults (issue 14).

Hypothesis draws a many-tenant workload (tests/workloads.py) and a seed for
the delivery and fault schedule; a failure prints both, shrunk. The fast layer
runs a fixed set (derandomized); ``make soak`` runs thousands of fresh ones
(REDSTRING_SIM_SEEDS) and prints what it did.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import StreamPartition
from tests.simulation.faults import WorkerCrash
from tests.simulation.runner import WEIGHTS, Knobs, simulate
from tests.workloads import Workload, workload_from_seed, workloads

SOAK = "REDSTRING_SIM_SEEDS" in os.environ
SEEDS = int(os.environ.get("REDSTRING_SIM_SEEDS", "300"))
#: Tenants per workload (at most) and partitions: ``make soak`` draws larger ones.
TENANTS = int(os.environ.get("REDSTRING_SIM_TENANTS", "6"))
PARTITIONS = int(os.environ.get("REDSTRING_SIM_PARTITIONS", "2"))
#: Steps per tenant (at most): deeper histories give each tenant more merges to refuse.
STEPS = int(os.environ.get("REDSTRING_SIM_STEPS", "6"))
#: Knobs for a soak of another shape, as "name=value,..." (integers), e.g.
#: "max_members=3,max_batch=64": tests.simulation.runner.Knobs. A name
#: "w_<step>" sets that step's weight in the schedule (runner.WEIGHTS), e.g.
#: "w_crash=6,w_rebalance=4" for a schedule of many more crashes.
_OVERRIDES: dict[str, int] = {
    name.strip(): int(value)
    for name, _, value in (
        item.partition("=") for item in os.environ.get("REDSTRING_SIM_KNOBS", "").split(",")
    )
    if name.strip()
}


def _knobs(overrides: dict[str, int]) -> Knobs:
    weights = {k.removeprefix("w_"): v for k, v in overrides.items() if k.startswith("w_")}
    unknown = set(weights) - set(WEIGHTS)
    if unknown:
        raise ValueError(f"REDSTRING_SIM_KNOBS: no step {sorted(unknown)}; steps: {list(WEIGHTS)}")
    rest: dict[str, Any] = {k: v for k, v in overrides.items() if not k.startswith("w_")}
    return Knobs(**rest, weights={**WEIGHTS, **weights})


KNOBS = _knobs(_OVERRIDES)
PART = StreamPartition("events", 0, "sim-topic-id")


@pytest.mark.parametrize("store", ["graph", "vector"])
async def test_a_crash_inside_a_unit_of_work_rolls_it_back(store: str) -> None:
    """The simulation's crash is a BaseException: the memory stores' units of
    work must discard their writes on it, as a real transaction would."""
    target = (
        InMemoryGraphStore()
        if store == "graph"
        else InMemoryVectorStore(HashingEmbedder(dimension=16).identity)
    )
    with pytest.raises(WorkerCrash):
        async with target.unit_of_work(PART) as uow:
            await uow.advance_checkpoint(PART, 7)
            raise WorkerCrash("kill -9")
    assert await target.checkpoint(PART) == -1
    async with target.unit_of_work(PART) as uow:  # the lock was released
        await uow.advance_checkpoint(PART, 3)
    assert await target.checkpoint(PART) == 3


def test_a_seed_replays_exactly() -> None:
    workload = workload_from_seed(7, tenants=4, partitions=2, max_steps=6)
    assert simulate(workload, 7) == simulate(workload, 7)


#: What a simulation of one partition cannot do: share a unit of work with another.
ALONE = ("units_shared_committed", "units_shared_declined")


def test_the_worker_loop_converges_under_faults() -> None:
    converges(
        SEEDS,
        derandomize=not SOAK,
        tenants=TENANTS,
        partitions=PARTITIONS,
        steps=STEPS,
        may_miss=ALONE if PARTITIONS == 1 else (),
    )


def test_deep_histories_quiesce_under_faults() -> None:
    """A few tenants of long histories on one partition: many replay requests,
    each rescanning the partition while the rest waits behind (the shape that
    found sub-batches losing a seek's reason). Fixed examples; ``make soak``
    draws fresh ones of this shape."""
    totals = converges(60, derandomize=True, tenants=4, partitions=1, steps=40, may_miss=ALONE)
    assert totals["seek_replay"] > 0, dict(totals)


def test_a_watchdog_passing_every_round_lets_the_loop_quiesce() -> None:
    """A ``stall_after`` below the virtual second between the quiesce's
    rounds, so the watchdog looks at every idle partition on every pass (and
    ticks five times as often): it committed each idle, caught-up partition
    again each time, so a commit was always in flight and the run never
    quiesced (found by a soak at ``stall_after=1``, where a pass a round
    apart fired only when the float sum of the ticks rounded up). Fixed
    examples."""
    knobs = dataclasses.replace(_knobs({**_OVERRIDES, "w_tick": 20}), stall_after=0.5)
    converges(
        40,
        derandomize=True,
        tenants=12,
        partitions=3,
        steps=10,
        knobs=knobs,
        may_miss=("operator_skips_interrupted",),  # 40 runs draw too few pauses
    )


def converges(
    examples: int,
    *,
    derandomize: bool,
    tenants: int,
    partitions: int,
    steps: int,
    knobs: Knobs = KNOBS,
    may_miss: tuple[str, ...] = (),
) -> Counter[str]:
    """Run the simulation over ``examples`` drawn workloads and seeds; what
    it injected, summed (every fault of the schedule at least once, but
    those in ``may_miss``)."""
    totals: Counter[str] = Counter()
    longest = 0
    started = time.monotonic()

    @settings(
        max_examples=examples,
        derandomize=derandomize,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        workload=workloads(
            min_tenants=1,
            max_tenants=tenants,
            partitions=partitions,
            max_steps=steps,
            newer_versions=True,
        ),
        seed=st.integers(0, 2**32 - 1),
    )
    def run(workload: Workload, seed: int) -> None:
        nonlocal longest
        note(f"seed {seed}: {workload.summary()}")
        for record in workload.records:
            note(f"  p{record.partition}@{record.offset} {record.tenant} {record.kind}")
        report = simulate(workload, seed, knobs)
        longest = max(longest, len(workload.records))
        totals.update(report.faults)
        totals["runs"] += 1
        totals["newer_records"] += sum(r.kind == "poison:newer_version" for r in workload.records)
        event(f"duplication {workload.duplication}")
        event("crashed" if report.faults["crashes"] else "no crash")
        event("zombie" if report.faults["zombies"] else "no zombie")

    run()
    elapsed = time.monotonic() - started
    print(
        f"\nsimulation: {totals['runs']} runs in {elapsed:.1f}s, longest history "
        f"{longest} records; faults: {dict(sorted(totals.items()))}"
    )
    # Guard the schedule: a simulation that never crashes a worker, never
    # delivers after a seek or never fences a zombie would pass saying nothing.
    for fault in (
        "crashes",
        "zombies",
        "late_seeks",
        "lost_commits",
        "transient_errors",
        "ended_transactions",
        "gathered_while_applying",
        "read_ahead_cuts",
        "operator_skips",
        "operator_skips_interrupted",
        "seek_resumed",
        "units_shared_committed",
        "units_shared_declined",
    ):
        if fault not in may_miss:
            assert totals[fault] > 0, f"the schedule never injected {fault}: {dict(totals)}"
    return totals
