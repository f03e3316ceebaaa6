"""A producer that publishes in Kafka transactions (issue 14): each commit
marker takes an offset that no consumer is handed, so a partition's offsets
have holes. The worker must tell those from a record it was not handed (it
asks the broker), apply everything, and neither stall nor report a stall."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Producer

from contracts.events import event_headers, event_to_json
from streams.kafka.config import librdkafka_config
from streams.wiring import Stores
from tests.e2e.conftest import Deployment
from tests.e2e.histories import assert_matches_oracle, generate
from tests.e2e.workers import high_watermarks
from tests.scenarios.histories import Record

pytestmark = pytest.mark.services


def _publish_in_transactions(
    deployment: Deployment, records: list[Record], size: int
) -> dict[int, int]:
    """Publish in transactions of ``size`` records; returns, per partition, the
    offset after its last record (the log end counts the last commit marker too)."""
    producer = Producer(
        {
            **librdkafka_config(deployment.settings),
            "transactional.id": f"e2e-tx-{uuid.uuid4().hex[:8]}",
            "partitioner": "murmur2_random",
        }
    )
    producer.init_transactions(30)
    after: dict[int, int] = defaultdict(int)

    def delivered(error: object, message: object) -> None:
        assert error is None, error
        partition, offset = message.partition(), message.offset()  # type: ignore[attr-defined]
        after[partition] = max(after[partition], offset + 1)

    for start in range(0, len(records), size):
        producer.begin_transaction()
        for _, _, event in records[start : start + size]:
            assert event is not None
            producer.produce(
                deployment.settings.topic,
                key=event.tenant_id.encode(),
                value=event_to_json(event),
                headers=list(event_headers(event)),
                on_delivery=delivered,
            )
        producer.commit_transaction(30)
    producer.flush(30)
    return dict(after)


async def test_offsets_taken_by_transaction_markers_are_not_lost_records(
    deployment: Deployment, stores: Stores
) -> None:
    records = generate(
        deployment.tenant("tx"), [deployment.tenant(f"t{i}") for i in range(5)], 150, seed=3
    )
    after = await asyncio.to_thread(_publish_in_transactions, deployment, records, 7)
    ends = high_watermarks(deployment.settings, deployment.partitions)
    assert any(ends[p] > after.get(p, 0) for p in ends), "no commit marker after a record?"
    worker = deployment.worker("w1", REDSTRING_STALL_AFTER_S="1").start()
    await asyncio.to_thread(worker.wait_ready)
    await deployment.caught_up(
        stores,
        workers={"w1": worker},
        highs={p: after.get(p, 0) for p in range(deployment.partitions)},
    )
    await assert_matches_oracle(stores, records, "transactional producer")
    # The last offsets of each partition are commit markers: idle there is not a stall.
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        status, body = worker.get("/readyz")
        assert status == 200, json.loads(body)
        await asyncio.sleep(0.5)
