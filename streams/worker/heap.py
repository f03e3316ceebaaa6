"""Giving a worker's freed heap back to the system between batches
(docs/adr/0025-heap-trim.md).

A batch's Kafka values (37 KB each on average) and its decoded events are
freed once it is written, but glibc's allocator keeps much of what is freed
in its arenas, outside Python's sight, and the process's RSS stays at the
high-water mark of the busiest batches. ``malloc_trim(0)`` hands the free
pages back; it takes a few milliseconds, so the worker calls it at most once
per REDSTRING_HEAP_TRIM_INTERVAL_S, as it takes a batch, when the last
batch's objects are gone and the next one's not yet decoded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Callable

Trim = Callable[[], object]


def malloc_trim() -> Trim | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none
    (musl, macOS): there the trim is a no-op."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return lambda: function(0)


class HeapTrim:
    """``maybe()`` trims when ``interval_s`` has passed since the last trim
    (never when it is 0, or without a ``trim``)."""

    def __init__(
        self,
        interval_s: float,
        trim: Trim | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_s = interval_s
        self._trim = trim if interval_s > 0 else None
        self._clock = clock
        self._last: float | None = None
        self.count = 0

    def maybe(self) -> None:
        if self._trim is None:
            return
        now = self._clock()
        if self._last is not None and now - self._last < self.interval_s:
            return
        self._last = now
        self._trim()
        self.count += 1
