"""Prometheus metrics of the read API (docs/readers.md, "The HTTP API")."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class ServeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # Labelled by route template, never by tenant or id: bounded cardinality.
        self.requests = Counter(
            "redstring_serve_requests",
            "Read API requests by route and status",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "redstring_serve_request_seconds",
            "Read API request time",
            ["route"],
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 30),
        )
        self.forbidden = Counter(
            "redstring_serve_forbidden",
            "Requests refused because the token is for another tenant",
            ["route"],
            registry=r,
        )
        self.unauthorized = Counter(
            "redstring_serve_unauthorized",
            "Requests refused for a missing or invalid token, by reason",
            ["reason"],
            registry=r,
        )
