"""Prometheus metrics of a worker (docs/design.md 7)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
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
        self.batch_size = Histogram(
            "redstring_batch_size",
            "Records per batch",
            registry=r,
            buckets=(1, 10, 50, 100, 250, 500, 1000, 2500, 5000),
        )
        self.intake_bytes = Histogram(
            "redstring_intake_bytes",
            "Bytes of values per batch the consumer hands over (REDSTRING_READ_AHEAD_BYTES "
            "bounds it)",
            registry=r,
            buckets=(1e4, 1e5, 1e6, 4e6, 8e6, 16e6, 32e6, 64e6, 128e6),
        )
        self.batch_latency = Histogram(
            "redstring_batch_seconds", "Time to fold one batch into both stores", registry=r
        )
        self.lag = Gauge(
            "redstring_consumer_lag",
            "High watermark minus the stores' next needed offset",
            ["partition"],
            registry=r,
        )
        self.replay_progress = Gauge(
            "redstring_replay_progress",
            "Fraction of open rebuild windows scanned",
            ["partition"],
            registry=r,
        )
