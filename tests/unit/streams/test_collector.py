"""The worker's garbage collector settings (streams.worker.collector, ADR 0022)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from streams.settings import Settings
from streams.worker.collector import collector_state, settle_for_batches


@pytest.fixture
def restored() -> Iterator[tuple[int, int, int]]:
    """This test process's collector, as it was before the test."""
    before = gc.get_threshold()
    try:
        yield before
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_settling_freezes_what_exists_and_sets_only_the_young_threshold(
    restored: tuple[int, int, int],
) -> None:
    young = Settings().gc_young_threshold
    assert restored[0] != young
    settle_for_batches(young)
    assert gc.get_threshold() == (young, *restored[1:])
    assert gc.get_freeze_count() > 0
    assert collector_state() == {
        "gc_threshold": [young, *restored[1:]],
        "gc_frozen": gc.get_freeze_count(),
    }


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.mark.parametrize("young", [1_000, 20_000])
def test_a_cycle_made_after_settling_is_collected_once_the_young_threshold_passes(
    restored: tuple[int, int, int], young: int
) -> None:
    settle_for_batches(young)
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # reference counting alone cannot free a cycle
    kept = [[] for _ in range(young + 1)]  # net allocations: a collection
    assert gone() is None
    del kept


def test_the_threshold_is_a_positive_setting() -> None:
    assert Settings(gc_young_threshold=1).gc_young_threshold == 1
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Settings(gc_young_threshold=0)
