"""Prometheus metrics of a worker (docs/design.md 7.4).

docs/operations.md lists every family served on /metrics, and
tests/unit/test_metrics_docs.py holds the two together. Every label has a
bounded set of values: a store name, a partition of the events topic, a seek
or pause reason from a fixed list, the build's versions. Tenants never appear.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

#: The stores, in the order of the projector's folds (streams.wiring.build_folds).
STORES = ("graph", "vector")
#: Why the loop or the projector sought a partition (redstring_seeks_total).
SEEK_REASONS = ("ahead", "hole", "replay", "stalled", "resumed")
#: Why a partition is paused (redstring_partition_paused): a newer schema
#: version, a corrupt store, a store call that kept failing with an error that
#: is not transient, or anything else.
PAUSE_REASONS = ("schema_version", "store_corrupt", "store_failed", "other")

DISTRIBUTION = "redstring-projector"

# The `_created` series prometheus_client adds to every counter and histogram
# double the series count and are not read by any rule or panel.
disable_created_metrics()  # type: ignore[no-untyped-call]


def build_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What the lag timer learned about one partition this worker holds."""

    partition: int
    log_end: int
    #: Each store's next needed offset, by store name.
    positions: Mapping[str, int]
    #: Each store's open rebuild windows, by store name, as opaque identities
    #: (never shown: they name a tenant).
    windows: Mapping[str, Collection[Hashable]] = field(default_factory=dict)
    #: The least scanned fraction of its open rebuild windows (1.0: none).
    progress: float = 1.0
    #: One of PAUSE_REASONS, or None when the partition is not paused.
    paused: str | None = None


class Metrics:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self._clock = clock
        r = self.registry
        # The standard process_* and python_* families, which only the default
        # registry gets by itself.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.build_info = Gauge(
            "redstring_build_info",
            "The worker's build: always 1, with the versions as labels",
            ["version", "python_version"],
            registry=r,
        )
        self.build_info.labels(build_version(), platform.python_version()).set(1)
        self.applied = Counter("redstring_events_applied", "Events applied", ["store"], registry=r)
        self.skipped = Counter(
            "redstring_events_skipped", "Events skipped (already applied)", ["store"], registry=r
        )
        self.collapsed = Counter(
            "redstring_edges_collapsed", "Edges collapsed onto one entity", ["store"], registry=r
        )
        self.dead_lettered = Counter(
            "redstring_events_dead_lettered", "Records sent to the dead-letter topic", registry=r
        )
        self.store_retries = Counter(
            "redstring_store_retries", "Store or broker calls retried", registry=r
        )
        self.seeks = Counter(
            "redstring_seeks", "Seeks back to the stores' position", ["reason"], registry=r
        )
        self.units_shared = Counter(
            "redstring_units_shared",
            "Passes of several partitions written in one unit of work per store "
            "(committed) or handed back to each partition (declined)",
            ["outcome"],
            registry=r,
        )
        self.batch_size = Histogram(
            "redstring_batch_records",
            "Records per batch applied to the stores",
            registry=r,
            buckets=(1, 10, 50, 100, 250, 500, 1000, 2500, 5000),
        )
        self.intake_bytes = Histogram(
            "redstring_intake_bytes",
            "Bytes of values per batch the applier takes from the intake "
            "(REDSTRING_READ_AHEAD_BYTES bounds it)",
            registry=r,
            buckets=(1e4, 1e5, 1e6, 4e6, 8e6, 16e6, 32e6, 64e6, 128e6),
        )
        self.batch_latency = Histogram(
            "redstring_batch_seconds", "Time to fold one batch into both stores", registry=r
        )
        self.lag = Gauge(
            "redstring_consumer_lag",
            "Records between the log end and the lower of the stores' next needed offsets",
            ["partition"],
            registry=r,
        )
        self.store_lag = Gauge(
            "redstring_store_lag_records",
            "Records between the log end and the store's next needed offset",
            ["partition", "store"],
            registry=r,
        )
        self.replay_progress = Gauge(
            "redstring_rebuild_progress_ratio",
            "Least scanned fraction of the partition's open rebuild windows (1: none open)",
            ["partition"],
            registry=r,
        )
        self.windows_open = Gauge(
            "redstring_rebuild_windows_open",
            "Rebuild windows open in the store on the partitions this worker holds",
            ["store"],
            registry=r,
        )
        self.window_age = Gauge(
            "redstring_rebuild_window_age_seconds",
            "Time since this worker first saw the partition's oldest open rebuild window",
            ["partition", "store"],
            registry=r,
        )
        self.paused = Gauge(
            "redstring_partition_paused",
            "1 for each partition this worker holds paused, with why",
            ["partition", "reason"],
            registry=r,
        )
        # Every label set known in advance is served from the start (at 0), so
        # that rate() and increase() see the first increment.
        for store in STORES:
            self.applied.labels(store=store)
            self.skipped.labels(store=store)
            self.collapsed.labels(store=store)
            self.windows_open.labels(store=store)
        for reason in SEEK_REASONS:
            self.seeks.labels(reason=reason)
        for outcome in ("committed", "declined"):
            self.units_shared.labels(outcome=outcome)
        # When this worker first saw each open rebuild window, by store,
        # partition and the window's identity.
        self._seen: dict[tuple[str, int, Hashable], float] = {}

    def show_partitions(self, views: Sequence[PartitionView]) -> None:
        """Replace the per-partition gauges with these views of the partitions
        this worker holds now: a partition it no longer holds disappears.
        Runs without awaiting, so a scrape never sees them half replaced."""
        now = self._clock()
        seen: dict[tuple[str, int, Hashable], float] = {}
        for view in views:
            for store, windows in view.windows.items():
                for window in windows:
                    key = (store, view.partition, window)
                    seen[key] = self._seen.get(key, now)
        self._seen = seen
        for gauge in (self.lag, self.store_lag, self.replay_progress, self.window_age):
            gauge.clear()
        self.paused.clear()
        open_by_store = dict.fromkeys(STORES, 0)
        for view in views:
            partition = str(view.partition)
            positions = view.positions.values()
            self.lag.labels(partition).set(max(0, view.log_end - min(positions, default=0)))
            for store, position in view.positions.items():
                self.store_lag.labels(partition, store).set(max(0, view.log_end - position))
            self.replay_progress.labels(partition).set(view.progress)
            for store, windows in view.windows.items():
                if not windows:
                    continue
                open_by_store[store] = open_by_store.get(store, 0) + len(windows)
                first = min(seen[(store, view.partition, window)] for window in windows)
                self.window_age.labels(partition, store).set(now - first)
            if view.paused is not None:
                self.paused.labels(partition, view.paused).set(1)
        for store, count in open_by_store.items():
            self.windows_open.labels(store=store).set(count)
