"""The worker's garbage collector settings (streams.worker.collector, ADR 0022)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from streams.worker.collector import YOUNG_THRESHOLD, collector_state, settle_for_batches


@pytest.fixture
def restored() -> Iterator[tuple[int, int, int]]:
    """This test process's collector, as it was before the test."""
    before = gc.get_threshold()
    try:
        yield before
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_settling_freezes_what_exists_and_raises_only_the_young_threshold(
    restored: tuple[int, int, int],
) -> None:
    assert gc.get_threshold()[0] != YOUNG_THRESHOLD
    settle_for_batches()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, *restored[1:])
    assert gc.get_freeze_count() > 0
    assert collector_state() == {
        "gc_threshold": [YOUNG_THRESHOLD, *restored[1:]],
        "gc_frozen": gc.get_freeze_count(),
    }


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_a_cycle_made_after_settling_is_collected_once_the_young_threshold_passes(
    restored: tuple[int, int, int],
) -> None:
    settle_for_batches()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # reference counting alone cannot free a cycle
    kept = [[] for _ in range(YOUNG_THRESHOLD + 1)]  # net allocations: a collection
    assert gone() is None
    del kept
