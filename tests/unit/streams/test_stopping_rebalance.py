"""A rebalance that ends while the worker stops (streams.worker.app).

Faust answers it by closing aiokafka's consumer from the worker's own event
loop, not the consumer thread's; the worker then never exited on SIGTERM
(ADR 0006, "A rebalance while stopping"). The worker leaves the consumer to
its thread instead. tests/e2e/test_workers.py stops a real worker in a real
rebalance."""

from __future__ import annotations

from typing import Any

import faust

from tests.unit.streams.conftest import BuildWorker


def stopping(app: faust.App) -> list[str]:
    """The app as Service.stop leaves it first (should_stop), with its
    consumer's close recorded instead of run."""
    closed: list[str] = []
    consumer: Any = app.consumer
    consumer.close = lambda: closed.append("close")
    app._stopped.set()  # type: ignore[attr-defined]
    assert app.should_stop
    return closed


async def test_the_pinned_faust_closes_the_consumer_when_a_rebalance_ends_while_stopping() -> None:
    # What the worker guards against: a Faust that stops doing this fails here,
    # and the guard can go.
    plain = faust.App("plain", broker="kafka://localhost:9", store="memory://")
    closed = stopping(plain)
    await plain._on_partitions_revoked(set())  # type: ignore[attr-defined]
    await plain._on_partitions_assigned(set(), generation_id=3)  # type: ignore[attr-defined]
    assert closed == ["close", "close"]


async def test_the_worker_leaves_the_consumer_to_its_thread_when_a_rebalance_ends_while_stopping(
    build_worker: BuildWorker,
) -> None:
    app, _runtime = build_worker()
    closed = stopping(app)
    await app._on_partitions_revoked(set())  # type: ignore[attr-defined]
    await app._on_partitions_assigned(set(), generation_id=3)  # type: ignore[attr-defined]
    assert closed == []
