"""A worker reads ahead by bytes, not by count (issue 15, bounds): with
REDSTRING_READ_AHEAD_BYTES at its least (one maximum-size event), a backlog of
large events is handed over in batches that each stay within it, and nothing
is lost or stalled on the way: both stores end equal to the oracle."""

from __future__ import annotations

import asyncio

import pytest

from streams.wiring import Stores
from tests.e2e.conftest import Deployment
from tests.e2e.histories import assert_matches_oracle, publish
from tests.scenarios.histories import LogBuilder

pytestmark = pytest.mark.services

BUDGET = 1_000_000


async def test_large_events_are_handed_over_within_the_read_ahead_budget(
    deployment: Deployment, stores: Stores
) -> None:
    log = LogBuilder(deployment.tenant("read-ahead"))
    tenants = [deployment.tenant(f"t{i}") for i in range(4)]
    for i in range(30):
        tenant = tenants[i % len(tenants)]
        # About 150 KB each: several fit in the budget, never all of them. The
        # bytes are in a property, so that the stores have few rows to write.
        note = {"note": f"{i:04d}" * 250}
        entities = [(f"e{i % 7}-{j}", f"Entity {i % 7} {j}", "Person", note) for j in range(150)]
        rels = [(f"e{i % 7}-{j}", f"e{i % 7}-{j + 1}", "KNOWS") for j in range(0, 149, 5)]
        log.extract(tenant, f"doc-{i}", entities, rels)
        if i % 6 == 5:
            log.merge(tenant, f"e{i % 7}-0", [f"e{i % 7}-1", f"e{i % 7}-2"])
    await publish(deployment.settings, log.records)

    worker = deployment.worker("w1", REDSTRING_READ_AHEAD_BYTES=str(BUDGET)).start()
    await asyncio.to_thread(worker.wait_ready)
    await deployment.caught_up(stores, within=300)
    await assert_matches_oracle(stores, log.records, "read-ahead bounded by bytes")

    metrics = worker.metrics()
    batches = metrics["redstring_intake_bytes_count"]
    within = metrics['redstring_intake_bytes_bucket{le="1e+06"}']
    assert batches >= 5, f"the backlog came in {batches} batches: the budget did not cut it"
    assert within == batches, f"{batches - within} of {batches} batches held over {BUDGET} bytes"
