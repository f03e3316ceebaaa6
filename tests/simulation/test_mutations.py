"""Mutation tests: each puts a known way of losing or stalling records back
into the real code (monkeypatched) and asserts that the simulation notices
within a bounded number of seeds, so that a passing simulation means something
(issue 14, "Done when")."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

import streams.ops.skip as skip_module
import streams.worker.bounds as bounds_module
import streams.worker.loop as loop_module
import streams.worker.projector as projector_module
import tests.simulation.runner as runner_module
from streams.worker.intake import Intake
from streams.worker.loop import WorkerLoop
from streams.worker.projector import Decision, RawRecord
from tests.simulation.runner import WEIGHTS, Knobs, SimulationFailure, simulate
from tests.workloads import workload_from_seed

#: Every mutation below is found in fewer seeds than this (most in the first
#: few; (b), a crash between the two stores' units of work, at seed 61 since
#: the agent's side gives the loop a turn before every value, as Faust does).
SEEDS = 100


#: Histories whose records of a newer schema version an operator skips, with
#: replays of other tenants rescanning past them (one partition).
PAUSES = {"tenants": 4, "partitions": 1, "max_steps": 20, "newer_versions": True}


def first_failure(knobs: Knobs | None = None, **shape: Any) -> tuple[int, str]:
    shape = shape or {"tenants": 4, "partitions": 2, "max_steps": 6}
    for seed in range(SEEDS):
        workload = workload_from_seed(seed, **shape)
        try:
            simulate(workload, seed, knobs)
        except SimulationFailure as failure:
            return seed, str(failure)
    pytest.fail(f"the simulation did not notice the mutation in {SEEDS} seeds")


def test_the_mutation_seeds_pass_unmutated() -> None:
    for seed in range(SEEDS):
        simulate(workload_from_seed(seed, tenants=4, partitions=2, max_steps=6), seed)
        simulate(workload_from_seed(seed, **PAUSES), seed)


def test_mutation_a_batch_not_cut_at_a_hole_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """(a) The bug of issue 14 put back: everything at or past the stores'
    position is applied, sorted, whatever is missing in between."""

    def no_holes(
        records: Sequence[RawRecord], start: int, *_: Any, **__: Any
    ) -> tuple[list[RawRecord], int | None]:
        by_offset = {r.offset: r for r in reversed(records) if r.offset >= start}
        return [by_offset[o] for o in sorted(by_offset)], None

    monkeypatch.setattr(projector_module, "contiguous_run", no_holes)
    seed, failure = first_failure()
    assert "differs from the oracle" in failure or "committed" in failure, (seed, failure)


def test_mutation_b_position_of_one_store_trusted_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(b) A remembered position that is not the stores' lowest: the projector
    trusts the first store's answer and report (``min`` over the stores takes
    the first), so a store left behind by a crash or an error between the two
    units of work is never corrected."""

    def first(*args: Any) -> Any:
        return next(iter(args[0])) if len(args) == 1 else builtins.min(*args)

    monkeypatch.setattr(projector_module, "min", first, raising=False)
    first_failure()


def test_mutation_c_watchdog_disabled_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """(c) A lost seek or delivery goes unnoticed: the watchdog never runs, so a
    partition handed nothing while its stores are behind stalls."""

    async def never(self: WorkerLoop) -> None:
        return None

    monkeypatch.setattr(WorkerLoop, "check_stalls", never)
    weights = {**WEIGHTS, "lose_seek": 4, "lose_record": 4}
    seed, failure = first_failure(Knobs(weights=weights))
    assert "no quiescence" in failure, (seed, failure)


def test_mutation_d_commit_ahead_of_the_stores_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(d) The loop commits the last delivered offset + 1 (as Faust's acks did)."""
    original = WorkerLoop.on_batch

    async def commit_delivered(self: WorkerLoop, batch: Mapping[int, Sequence[RawRecord]]) -> None:
        await original(self, batch)
        await self.consumer.commit(
            {p: max(r.offset for r in records) + 1 for p, records in batch.items() if records}
        )

    monkeypatch.setattr(WorkerLoop, "on_batch", commit_delivered)
    seed, failure = first_failure()
    assert "docs/design.md 5.9" in failure, (seed, failure)


def test_mutation_e_prefetched_record_taken_for_the_target_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(e) After a seek, a record fetched before it is accepted as if it were
    the target: the batch's first record past the stores' position is taken as
    where the stores stand."""
    original = projector_module.contiguous_run

    def from_first_record(
        records: Sequence[RawRecord], start: int, *args: Any, **kwargs: Any
    ) -> tuple[list[RawRecord], int | None]:
        past = [r.offset for r in records if r.offset >= start]
        return original(records, min(past, default=start), *args, **kwargs)

    monkeypatch.setattr(projector_module, "contiguous_run", from_first_record)
    first_failure()


class _FirstAnswerOnly(dict[int, int]):
    """A memo that keeps the first position it was told per partition."""

    def __setitem__(self, partition: int, offset: int) -> None:
        if partition not in self:
            super().__setitem__(partition, offset)


def test_mutation_b_remembered_position_never_corrected_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(b) The remembered position is never corrected: neither the folds'
    reports nor a fresh read of the stores replace the first value the
    projector learnt for a partition. The loop then seeks back to it for ever
    (or drops what the stores need), and the partition never gets anywhere."""
    original = projector_module.Projector.__init__

    def init(self: projector_module.Projector, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._needed = _FirstAnswerOnly()

    monkeypatch.setattr(projector_module.Projector, "__init__", init)
    seed, failure = first_failure()
    assert "no quiescence" in failure or "differs from the oracle" in failure, (seed, failure)


def test_mutation_f_pipeline_commits_what_it_gathered_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(f) The pipelined intake commits what it has gathered as soon as the
    applier takes it (a sink's "fetched, so done"), before the stores hold it."""
    original = Intake.__init__

    class CommitFirst:
        def __init__(self, loop: WorkerLoop) -> None:
            self.loop = loop

        async def on_batch(self, batch: Mapping[int, Sequence[RawRecord]]) -> None:
            taken = {p: max(r.offset for r in rs) + 1 for p, rs in batch.items() if rs}
            await self.loop.consumer.commit(taken)
            await self.loop.on_batch(batch)

    def init(self: Intake, handler: WorkerLoop, **kwargs: Any) -> None:
        original(self, CommitFirst(handler), **kwargs)

    monkeypatch.setattr(Intake, "__init__", init)
    seed, failure = first_failure()
    assert "docs/design.md 5.9" in failure, (seed, failure)


@pytest.mark.parametrize("where", ["loop", "sub-batches"])
def test_mutation_g_remnants_sought_again_are_caught(
    monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """(g) A seek's remnants (records fetched before it landed, handed over
    after it, past its target) are answered with the same seek again: the
    loop never tells a remnant, or sub-batches lose the decision's reason by
    which it does (the bug of f91b3c0). Each such seek refetches the range
    behind what is still queued; the histories converge anyway, only late,
    so what catches it is the simulation's watch on the loop's seeks."""
    if where == "loop":
        monkeypatch.setattr(WorkerLoop, "_remnant", lambda *_: False)
    else:

        async def reasonless(*args: Any) -> Decision:
            decision = await original(*args)
            return dataclasses.replace(decision, reason=None)

        original = bounds_module.handle_bounded
        monkeypatch.setattr(loop_module, "handle_bounded", reasonless)
    seed, failure = first_failure()
    assert "remnants taken for a new gap" in failure, (seed, failure)


def test_mutation_h_a_rescan_pausing_on_every_newer_record_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(h) A rebuild window pauses on another tenant's newer record that an
    operator skipped before (the bug of 5894a53): every tenant on the
    partition waits for a second skip after each replay."""

    async def always(*_: Any) -> bool:
        return True

    monkeypatch.setattr(projector_module.Projector, "_admitted_anywhere", always)
    seed, failure = first_failure(**PAUSES)
    # Paused again, and for good where the operator's command sees that no
    # store would apply the record (it refuses to skip it a second time).
    assert "paused again on offset" in failure or "no quiescence" in failure, (seed, failure)


def test_mutation_i_the_paused_offset_asked_after_the_pause_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(i) The loop asks the stores which record paused the partition after
    the pause: a skip landing in between makes it the record after, and
    the partition is never resumed."""
    original = projector_module.Projector._decide

    async def forgetful(*args: Any) -> Decision:
        return dataclasses.replace(await original(*args), paused_at=None)

    monkeypatch.setattr(projector_module.Projector, "_decide", forgetful)
    seed, failure = first_failure(**PAUSES)
    assert "no quiescence" in failure or "not ready" in failure, (seed, failure)


def test_mutation_j_a_skip_stopped_midway_refused_again_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(j) ``redstring skip`` refuses while the stores are apart, so a skip
    stopped between them can never be finished (the bug of 8b60144)."""
    original = runner_module.check_skip

    async def strict(folds: Any, partition: Any, offset: int, *args: Any) -> Any:
        if len(set(await skip_module.positions(folds, partition))) > 1:
            raise skip_module.SkipRefused("the stores are at different positions")
        return await original(folds, partition, offset, *args)

    monkeypatch.setattr(runner_module, "check_skip", strict)
    seed, failure = first_failure(**PAUSES)
    assert "no quiescence" in failure or "not ready" in failure, (seed, failure)
