"""``python -m streams`` under tracemalloc, for ``python -m bench.memory
--heap``: a diagnostic path only, never how the worker runs.

Every two seconds a thread looks at the traced total; when it reaches a new
high (by 5% or more), it writes the top allocations, by line and by
traceback, to ``$BENCH_HEAP_OUT-<n>.txt``. The last file written is
the heap at (near) its peak.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
import tracemalloc

FRAMES = 12


def _dump(path: str, snapshot: tracemalloc.Snapshot, current: int) -> None:
    snapshot = snapshot.filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
    )
    with open(path, "w") as out:
        out.write(f"traced now {current / 2**20:.1f} MB\n\n== by line ==\n")
        for stat in snapshot.statistics("lineno")[:40]:
            out.write(f"{stat}\n")
        out.write("\n== by file ==\n")
        for stat in snapshot.statistics("filename")[:25]:
            out.write(f"{stat}\n")
        out.write("\n== by traceback ==\n")
        for stat in snapshot.statistics("traceback")[:15]:
            out.write(f"\n{stat.size / 2**20:.1f} MB in {stat.count} blocks\n")
            for line in stat.traceback.format(most_recent_first=True):
                out.write(f"{line}\n")


def _watch(prefix: str) -> None:
    high = 0
    n = 0
    while True:
        time.sleep(2.0)
        current, _ = tracemalloc.get_traced_memory()
        if current > high * 1.05:
            high = current
            n += 1
            _dump(f"{prefix}-{n:03d}.txt", tracemalloc.take_snapshot(), current)


def main() -> None:
    tracemalloc.start(FRAMES)
    prefix = os.environ.get("BENCH_HEAP_OUT", "heap")
    threading.Thread(target=_watch, args=(prefix,), daemon=True).start()
    sys.argv = ["streams", *sys.argv[1:]]
    runpy.run_module("streams", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
