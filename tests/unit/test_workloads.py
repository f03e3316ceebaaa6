"""The many-tenant workload generator (tests/workloads.py): it reaches the
shapes that matter, its bytes decode as its oracle records say, and both of
its choosers build the same kind of workload."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

from hypothesis import HealthCheck, given, settings

from streams.kafka.partitioning import partition_for
from streams.worker.decode import decode
from tests.scenarios.harness import run_mode
from tests.workloads import DUPLICATIONS, POISONS, Workload, workload_from_seed, workloads

REQUIRED = (
    "chain_of_3_merges",
    "unmerge_of_chained_merge",
    "refused_cycle_merge",
    "replay_mid_history",
    "erasure",
    "duplicate_event_id",
    "duplicated_record",
    "retry",
    "tenants_sharing_a_partition",
    *(f"poison:{kind}" for kind in POISONS),
)


def test_seeded_workloads_reach_the_shapes_that_matter() -> None:
    """Guard the generator: a workload test that never refuses a merge, never
    chains three, never replays mid-history, never duplicates, never sends a
    poison value or never puts tenants side by side in a partition says
    nothing about them."""
    seen: Counter[str] = Counter()
    for seed in range(12):
        workload = workload_from_seed(seed, tenants=30, duplication=DUPLICATIONS[seed % 3])
        seen.update(set(workload.features()))
    missing = [name for name in REQUIRED if seen[name] < 3]
    assert not missing, f"the generator rarely or never reaches {missing}: {dict(seen)}"


def test_drawn_workloads_reach_the_shapes_that_matter() -> None:
    seen: Counter[str] = Counter()

    @settings(
        max_examples=40,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(workloads(min_tenants=4, max_tenants=12, min_steps=3))
    def draw(workload: Workload) -> None:
        seen.update(set(workload.features()))

    draw()
    missing = [name for name in REQUIRED if seen[name] < 2]
    assert not missing, f"the strategy rarely or never reaches {missing}: {dict(seen)}"


def _check_records(workload: Workload) -> None:
    offsets: dict[int, int] = {}
    for record in workload.records:
        assert record.key == record.tenant.encode()
        assert record.partition == partition_for(record.tenant, workload.partitions)
        assert record.offset == offsets.get(record.partition, 0)
        offsets[record.partition] = record.offset + 1
        decoded = decode(
            record.offset,
            record.key,
            record.value,
            workload.control_key,
            topic_id=workload.topic_id,
            partition=record.partition,
            partitions=workload.partitions,
        )
        if record.event is None:
            assert decoded.dead_letter_reason, (record.kind, record.value)
        else:
            assert decoded.dead_letter_reason is None, (record.kind, decoded.dead_letter_reason)
            assert decoded.record.event == record.event, record.kind


def test_the_bytes_decode_as_the_oracle_records_say() -> None:
    """A worker dead-letters exactly the records the oracle steps over, and
    decodes every other value to the event the oracle is given."""
    for seed in range(3):
        _check_records(workload_from_seed(seed, tenants=40, duplication="random"))


def test_duplication_adds_copies_and_keeps_each_tenants_order() -> None:
    once = workload_from_seed(5, tenants=25, duplication="none")
    for mode in ("twice", "random"):
        copied = workload_from_seed(5, tenants=25, duplication=mode)
        originals = [(r.tenant, r.value) for r in copied.records if not r.copy]
        assert originals == [(r.tenant, r.value) for r in once.records]
        for tenant in once.tenants:
            mine = [r for r in copied.records if r.tenant == tenant]
            # Every copy comes right after its original in the tenant's order.
            for before, record in itertools.pairwise(mine):
                assert not record.copy or (before.value == record.value and not before.copy)
    twice = workload_from_seed(5, tenants=25, duplication="twice")
    pairs = zip(twice.records[::2], twice.records[1::2], strict=True)
    assert all(a.value == b.value and b.copy and not a.copy for a, b in pairs)


def test_namespaces_and_seeds() -> None:
    a = workload_from_seed(3, tenants=10, namespace="ns-a-")
    assert a == workload_from_seed(3, tenants=10, namespace="ns-a-")
    b = workload_from_seed(3, tenants=10, namespace="ns-b-")
    assert all(t.startswith("ns-b-") for t in b.tenants)
    ids_a = {str(r.event.event_id) for r in a.records if r.event is not None}
    ids_b = {str(r.event.event_id) for r in b.records if r.event is not None}
    assert not ids_a & ids_b


def test_the_in_memory_folds_agree_with_the_oracle_on_workloads() -> None:
    """The shapes the generator adds (retried merges and replay requests,
    duplicated erasures, poison of every kind) are ones the folds and the oracle
    agree on, so a real run that differs from the oracle points at delivery."""
    for seed, mode in ((0, "twice"), (1, "random")):
        workload = workload_from_seed(seed, tenants=15, duplication=mode)
        for records in workload.partition_logs().values():
            if records:
                asyncio.run(run_mode("random_batches", records, 0, seed))
