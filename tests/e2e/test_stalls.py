"""A worker never sits idle while its stores are behind the log end (issue 14,
docs/design.md 5.9): when the stores fall behind a running worker that has nothing
left to read (here: the graph store loses this topic's data and checkpoints,
as a restore of an older backup would), the worker notices, seeks back, says
so in its log and its metrics, and both stores end equal to the oracle."""

from __future__ import annotations

import asyncio

import pytest

from streams.wiring import Stores
from tests.e2e.conftest import Deployment, wipe_neo4j
from tests.e2e.histories import assert_matches_oracle, generate, publish
from tests.e2e.workers import store_positions

pytestmark = pytest.mark.services


async def test_stores_fallen_behind_an_idle_worker_are_caught_up(
    deployment: Deployment, stores: Stores, e2e_env: dict[str, str]
) -> None:
    records = generate(
        deployment.tenant("stall"), [deployment.tenant(f"t{i}") for i in range(4)], 120, seed=11
    )
    worker = deployment.worker("w1", REDSTRING_STALL_AFTER_S="2").start()
    await asyncio.to_thread(worker.wait_ready)
    await publish(deployment.settings, records)
    settings = deployment.settings
    await deployment.caught_up(stores)
    assert worker.metrics().get('redstring_seeks_total{reason="stalled"}', 0) == 0

    # Nothing more is published: only the watchdog can bring the graph back.
    await wipe_neo4j(e2e_env, deployment.tenant_prefix, settings.topic)
    behind = await store_positions(
        stores, settings.topic, deployment.topic_id, deployment.partitions
    )
    assert set(behind["graph"].values()) == {0}, behind
    await deployment.caught_up(stores, within=60)
    await assert_matches_oracle(stores, records, "graph store restored behind an idle worker")
    assert worker.metrics()['redstring_seeks_total{reason="stalled"}'] >= 1
    assert "partition idle with lag" in worker.log_path.read_text()
    # Ready again once records flow (the watchdog looks every stall_after / 3).
    await asyncio.to_thread(worker.wait_ready, 10)
