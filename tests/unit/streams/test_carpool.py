"""The carpool's groups (streams.worker.carpool): a batch's first passes in
units of at most N records, partitions in order, groups of one left alone;
and a carpool waits for every partition to come or leave, never longer."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence

from hypothesis import given
from hypothesis import strategies as st

from projections.records import LogRecord
from streams.worker.carpool import Carpool, Rider, groups_of


def _rider(partition: int, count: int) -> Rider:
    return Rider(partition, [LogRecord(o, None, None) for o in range(count)], 0)


def test_riders_are_grouped_in_partition_order_within_the_bound() -> None:
    riders = [_rider(3, 2), _rider(0, 1), _rider(1, 3), _rider(2, 9), _rider(4, 1), _rider(5, 1)]
    groups = groups_of(riders, 4)
    assert [[r.partition for r in group] for group in groups] == [[0, 1], [3, 4, 5]]
    # 2 alone: over the bound.


@given(
    sizes=st.lists(st.integers(1, 6), min_size=0, max_size=12),
    most=st.integers(1, 10),
)
def test_every_group_holds_two_riders_within_the_bound_each_rider_once(
    sizes: list[int], most: int
) -> None:
    riders = [_rider(p, n) for p, n in enumerate(sizes)]
    groups = groups_of(riders, most)
    seen = [r.partition for group in groups for r in group]
    assert len(seen) == len(set(seen))
    assert all(len(g) >= 2 and sum(len(r.records) for r in g) <= most for g in groups)
    assert seen == sorted(seen)
    # Nothing that could share is left out: two neighbours both left alone
    # would not fit in one group.
    alone = {r.partition for r in riders} - set(seen)
    for left, right in itertools.pairwise(riders):
        if left.partition in alone and right.partition in alone:
            assert len(left.records) + len(right.records) > most


async def test_groups_ride_at_once_and_a_failed_group_leaves_only_its_riders() -> None:
    running: set[int] = set()
    overlapped = False

    async def ride(group: Sequence[Rider]) -> Mapping[int, str] | None:
        nonlocal overlapped
        first = group[0].partition
        running.add(first)
        await asyncio.sleep(0.01)
        overlapped = overlapped or len(running) > 1
        running.discard(first)
        if first == 2:
            raise ConnectionError("the store is down")
        return {r.partition: f"shared from {first}" for r in group}

    pool: Carpool[str] = Carpool(range(6), ride, group_records=2)
    results = await asyncio.gather(*(pool.ride(_rider(p, 1)) for p in range(6)))
    assert results == ["shared from 0"] * 2 + [None, None] + ["shared from 4"] * 2
    assert overlapped


async def test_a_carpool_waits_for_partitions_to_come_or_leave() -> None:
    async def ride(group: Sequence[Rider]) -> Mapping[int, str]:
        return {r.partition: "shared" for r in group}

    pool: Carpool[str] = Carpool([0, 1, 2], ride, group_records=10)
    first = asyncio.ensure_future(pool.ride(_rider(0, 1)))
    second = asyncio.ensure_future(pool.ride(_rider(1, 1)))
    await asyncio.sleep(0.01)
    assert not first.done() and not second.done()  # partition 2 may still come
    pool.leave(2)
    assert await first == "shared" and await second == "shared"
    # A second pass of a partition, or one after the ride, runs on its own.
    assert await pool.ride(_rider(0, 1)) is None
