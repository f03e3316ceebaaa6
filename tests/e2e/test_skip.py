"""A partition paused on a newer schema version, moved on by ``redstring skip``
while the worker runs (issue 15, item 4): the worker resumes it without a
restart, later records of the partition are applied, and the dead-letter
topic holds the skipped record."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from contracts.events import SCHEMA_VERSION, event_to_json
from contracts.ids import EntityId, TenantId
from streams.kafka.dead_letters import read_letters
from streams.kafka.partitioning import partition_for
from streams.kafka.producer import AsyncProducer
from streams.wiring import Stores
from tests.e2e.conftest import Deployment
from tests.e2e.workers import WorkerProcess, store_positions
from tests.unit.streams.test_projector import doc

pytestmark = pytest.mark.services


async def publish_raw(
    deployment: Deployment, items: list[tuple[bytes | None, bytes | None]], **config: object
) -> list[tuple[int, int]]:
    """The exact keys and values, with a plain producer; their (partition, offset)."""
    producer = AsyncProducer(deployment.settings, **config)
    try:
        futures = [producer.send(deployment.settings.topic, k, v, []) for k, v in items]
        return [(p.partition, p.offset) for p in await asyncio.gather(*futures)]
    finally:
        await asyncio.to_thread(producer.close)


def readyz(worker: WorkerProcess) -> tuple[int, list[str]]:
    status, body = worker.get("/readyz", timeout=5.0)
    return status, list(json.loads(body).get("reasons", []))


async def wait_paused(worker: WorkerProcess, partition: int, within: float = 60.0) -> str:
    """The pause reason /readyz gives for ``partition`` once it has one."""
    deadline = time.monotonic() + within
    last: object = None
    while time.monotonic() < deadline:
        worker.assert_alive()
        try:
            status, reasons = await asyncio.to_thread(readyz, worker)
        except OSError as exc:  # not listening yet
            last = exc
            await asyncio.sleep(0.2)
            continue
        last = (status, reasons)
        for reason in reasons:
            if reason.startswith(f"partition {partition}: ") and "schema_version" in reason:
                assert status == 503
                return reason
        await asyncio.sleep(0.2)
    raise AssertionError(f"partition {partition} not paused within {within}s: {last}")


def newer_version(tenant: str, entity: str) -> bytes:
    future = json.loads(event_to_json(doc(tenant, entity)))
    future["schema_version"] = SCHEMA_VERSION + 1
    return json.dumps(future).encode()


async def test_a_paused_partition_is_skipped_and_resumed_without_a_restart(
    deployment: Deployment, stores: Stores
) -> None:
    tenant = deployment.tenant("skip")
    partition = partition_for(tenant, deployment.partitions)
    key = tenant.encode()
    newer = newer_version(tenant, "newer")
    positions = await publish_raw(
        deployment,
        [
            (key, event_to_json(doc(tenant, "before"))),
            (key, newer),
            (key, event_to_json(doc(tenant, "after"))),
        ],
    )
    assert {p for p, _ in positions} == {partition}
    paused_offset = positions[1][1]
    # A short watchdog tick (stall_after / 3): the resume is noticed on a tick.
    worker = deployment.worker("w1", REDSTRING_STALL_AFTER_S="3").start()
    reason = await wait_paused(worker, partition)
    assert f"schema_version {SCHEMA_VERSION + 1}" in reason
    where = await store_positions(
        stores, deployment.settings.topic, deployment.topic_id, deployment.partitions
    )
    assert where["graph"][partition] == where["vector"][partition] == paused_offset
    t = TenantId(tenant)
    assert await stores.graph.get_entity(t, EntityId("before")) is not None
    assert await stores.graph.get_entity(t, EntityId("after")) is None

    # The wrong offset is refused, and says what the stores need.
    code, out = await deployment.cli(
        "skip", "--partition", str(partition), "--offset", str(paused_offset + 1), "--yes"
    )
    assert code != 0 and f"needs {paused_offset}" in out, out
    # Without --yes and without a terminal: refused, after showing the record.
    code, out = await deployment.cli(
        "skip", "--partition", str(partition), "--offset", str(paused_offset)
    )
    assert code != 0 and "pass --yes" in out, out
    assert f"DocumentExtracted of tenant {tenant}" in out, out
    assert read_letters(deployment.settings) == []

    code, out = await deployment.cli(
        "skip", "--partition", str(partition), "--offset", str(paused_offset), "--yes"
    )
    assert code == 0, out
    assert f"the stores now need {paused_offset + 1}" in out, out

    # The running worker resumes the partition: the record after it is applied,
    # and so is one published after the skip.
    more = await publish_raw(deployment, [(key, event_to_json(doc(tenant, "later")))])
    await asyncio.to_thread(worker.wait_ready, 60)
    await deployment.caught_up(stores, workers={"w1": worker}, within=60)
    for entity in ("before", "after", "later"):
        assert await stores.graph.get_entity(t, EntityId(entity)) is not None, entity
        assert await stores.vector.get(t, EntityId(entity)) is not None, entity
    assert await stores.graph.get_entity(t, EntityId("newer")) is None
    assert more[0][1] == paused_offset + 2
    [letter] = read_letters(deployment.settings)
    assert (letter.source_partition, letter.source_offset) == (partition, paused_offset)
    assert (letter.key, letter.value) == (key, newer)
    assert "skipped by an operator (redstring skip" in letter.reason
    assert worker.running
    resumed = worker.metrics().get('redstring_seeks_total{reason="resumed"}')
    assert resumed == 1.0, resumed


async def test_a_replay_of_another_tenant_passes_the_skipped_record(
    deployment: Deployment, stores: Stores
) -> None:
    """A replay of tenant a rescans its partition from the log start and meets
    b's skipped record again: no store would apply it, so the partition does
    not pause a second time (docs/operations.md, "A replay after a skip"); the
    replay completes, and the record is dead-lettered once."""
    a = deployment.tenant("rs-a")
    partition = partition_for(a, deployment.partitions)
    b = next(
        name
        for name in (deployment.tenant(f"rs-b{i}") for i in range(1000))
        if partition_for(name, deployment.partitions) == partition
    )
    positions = await publish_raw(
        deployment,
        [
            (a.encode(), event_to_json(doc(a, "x"))),
            (b.encode(), newer_version(b, "newer")),
            (a.encode(), event_to_json(doc(a, "y"))),
        ],
    )
    paused_offset = positions[1][1]
    worker = deployment.worker("w1", REDSTRING_STALL_AFTER_S="3").start()
    await wait_paused(worker, partition)
    code, out = await deployment.cli(
        "skip", "--partition", str(partition), "--offset", str(paused_offset), "--yes"
    )
    assert code == 0, out
    await asyncio.to_thread(worker.wait_ready, 60)
    await deployment.caught_up(stores, workers={"w1": worker}, within=60)

    code, out = await asyncio.wait_for(deployment.cli("replay", "--tenant", a, "--yes"), 120)
    assert code == 0 and f"rebuilt {a}" in out, out
    await deployment.caught_up(stores, workers={"w1": worker}, within=60)
    status, reasons = await asyncio.to_thread(readyz, worker)
    assert (status, reasons) == (200, []), reasons
    for entity in ("x", "y"):
        assert await stores.graph.get_entity(TenantId(a), EntityId(entity)) is not None
        assert await stores.vector.get(TenantId(a), EntityId(entity)) is not None
    letters = read_letters(deployment.settings)
    assert [(lt.source_partition, lt.source_offset) for lt in letters] == [
        (partition, paused_offset)
    ]
