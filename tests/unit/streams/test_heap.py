"""The heap trim between batches (streams.worker.heap): at most once per
interval, never at 0, and glibc's malloc_trim really called where it exists."""

from __future__ import annotations

import sys

import pytest

from streams.worker.heap import HeapTrim, malloc_trim


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_trims_at_most_once_per_interval() -> None:
    clock, calls = Clock(), []
    heap = HeapTrim(1.0, lambda: calls.append(clock.now), clock)
    for step in (0.0, 0.5, 0.25, 0.25, 0.5, 1.0):
        clock.now += step
        heap.maybe()
    assert calls == [100.0, 101.0, 102.5]
    assert heap.count == 3


def test_an_interval_of_zero_never_trims() -> None:
    calls: list[int] = []
    heap = HeapTrim(0.0, lambda: calls.append(1), Clock())
    heap.maybe()
    heap.maybe()
    assert calls == [] and heap.count == 0


def test_without_a_trim_function_it_is_a_no_op() -> None:
    heap = HeapTrim(1.0, None, Clock())
    heap.maybe()
    assert heap.count == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_glibc_malloc_trim_is_found_and_callable() -> None:
    trim = malloc_trim()
    assert trim is not None
    assert trim() in (0, 1)  # 1: memory was released, 0: there was none to release
