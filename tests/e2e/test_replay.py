"""Replay and erasure end to end (issue 8, item 4): `redstring replay` online
and offline and `redstring erase`, against worker processes on the real
stack. Every expected state comes from the oracle; a replay changes no
tenant's final state, it rebuilds it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from contracts import signing
from contracts.domain import StreamPartition
from contracts.events import make_event, parse_event_dict
from contracts.ids import EntityId, EventId, TenantId
from streams.kafka.dead_letters import read_letters
from streams.kafka.partitioning import partition_for
from streams.ops.replay import group_members, publish_control
from streams.sdk.publisher import Publisher
from streams.wiring import Stores, open_stores
from tests.e2e.conftest import CONTROL_KEY, PARTITIONS, PG_SCHEMA, Deployment, wipe_neo4j
from tests.e2e.flow import Flow
from tests.e2e.histories import assert_matches_oracle, generate, publish, rename, store_states
from tests.e2e.workers import caught_up
from tests.scenarios.harness import universe
from tests.scenarios.histories import PINNED, Record
from tests.scenarios.oracle import Oracle

pytestmark = pytest.mark.services


def _sharing_tenants(deployment: Deployment, n: int) -> list[str]:
    """``n`` tenants, the first of which shares its partition with at least one
    other (so a replay of it rescans records of a tenant it must not touch)."""
    names = [deployment.tenant(f"t{i}") for i in range(n)]
    home = partition_for(names[0], PARTITIONS)
    extra = 0
    while sum(1 for t in names[1:] if partition_for(t, PARTITIONS) == home) == 0:
        names[-1] = deployment.tenant(f"n{extra}")
        extra += 1
    return names


def _ids(records: Sequence[Record], tenant: str) -> list[EventId]:
    return [
        EventId(str(e.event_id))
        for _, _, e in records
        if e is not None and str(e.tenant_id) == tenant and not e.is_control
    ]


async def _start(deployment: Deployment, worker_id: str = "w1", **env: str) -> Any:
    worker = deployment.worker(worker_id, **env).start()
    await asyncio.to_thread(worker.wait_ready)
    return worker


async def _markers(stores: Stores, deployment: Deployment) -> list[Any]:
    found = []
    for p in range(deployment.partitions):
        part = StreamPartition(deployment.settings.topic, p, deployment.topic_id)
        for store in (stores.graph, stores.vector):
            found.extend(await store.rebuild_markers(part))
    return found


class Watcher:
    """Samples what the other tenants show while a replay runs: the event ids
    each store has applied for them and their entity count. A tenant that is
    not replayed must never show less than it showed before."""

    def __init__(self, stores: Stores, records: Sequence[Record], tenants: Sequence[str]) -> None:
        self.stores = stores
        self.ids = {t: _ids(records, t) for t in tenants}
        self.last: dict[tuple[str, str], tuple[int, int]] = {}
        self.samples = 0
        self.regressions: list[str] = []

    async def sample(self) -> None:
        for tenant, ids in self.ids.items():
            t = TenantId(tenant)
            for name, store in (("graph", self.stores.graph), ("vector", self.stores.vector)):
                applied = len(await store.applied_event_ids(t, ids))
                entities = (
                    len(await self.stores.graph.find_entities(t, limit=100_000))
                    if name == "graph"
                    else 0
                )
                now = (applied, entities)
                before = self.last.get((tenant, name), (0, 0))
                if now[0] < before[0] or now[1] < before[1]:
                    self.regressions.append(f"{tenant} in {name}: {before} then {now}")
                self.last[(tenant, name)] = now
        self.samples += 1

    async def run_until(self, task: asyncio.Future[Any]) -> None:
        while not task.done():
            await self.sample()
            await asyncio.sleep(0.1)
        await self.sample()


async def test_online_replay_during_live_traffic(deployment: Deployment, stores: Stores) -> None:
    """`redstring replay --tenant T --yes` while a producer keeps publishing for
    every tenant, T included: T ends equal to the oracle, the other tenants
    (one of them on T's partition) never show an older state than before,
    nothing is lost and nothing is dead-lettered."""
    tenants = _sharing_tenants(deployment, 4)
    target = tenants[0]
    records = generate(deployment.tenant("live"), tenants, 600, seed=21)
    first, live = records[:400], records[400:]
    await _start(deployment)
    await publish(deployment.settings, first)
    await deployment.caught_up(stores)

    watcher = Watcher(stores, records, tenants[1:])
    flow = Flow(deployment.settings, live, chunk=20, pause=0.2).start()
    replay = deployment.cli("replay", "--tenant", target, "--yes")
    await watcher.run_until(replay)
    status, output = replay.result()
    assert status == 0, output
    assert "replay requested at" in output and f"rebuilt {target}" in output, output
    await flow.done()
    await deployment.caught_up(stores)
    await assert_matches_oracle(stores, records, "online replay, live traffic")
    assert watcher.samples >= 3
    assert watcher.regressions == []
    assert await _markers(stores, deployment) == []
    assert read_letters(deployment.settings) == []


async def test_kill9_during_online_replay(deployment: Deployment, stores: Stores) -> None:
    """The worker is killed with SIGKILL while the rebuild window is open and
    partly scanned; after a restart the replay completes (the command, still
    waiting, sees both markers close) and the state equals the oracle."""
    tenants = _sharing_tenants(deployment, 3)
    target = tenants[0]
    records = generate(deployment.tenant("kill"), tenants, 500, seed=22)
    worker = await _start(deployment, REDSTRING_BATCH_SIZE="50")
    await publish(deployment.settings, records)
    await deployment.caught_up(stores)

    replay = deployment.cli("replay", "--tenant", target, "--yes")
    deadline = time.monotonic() + 120
    while True:
        open_ = [
            m
            for m in await _markers(stores, deployment)
            if m.state == "rebuilding" and m.applied_through > m.start_offset
        ]
        if open_:
            break
        assert not replay.done(), replay.result()
        assert time.monotonic() < deadline, "no rebuild window was opened and scanned"
        await asyncio.sleep(0.05)
    worker.kill9()
    assert await stores.graph.is_rebuilding(TenantId(target)) or await stores.vector.is_rebuilding(
        TenantId(target)
    )
    worker.start()
    status, output = await replay
    assert status == 0, output
    await deployment.caught_up(stores)
    await assert_matches_oracle(stores, records, "kill -9 during a replay")
    assert await _markers(stores, deployment) == []
    assert read_letters(deployment.settings) == []


async def test_offline_replay(deployment: Deployment, stores: Stores) -> None:
    """With a worker running, `replay --offline` is refused and deletes nothing.
    With the workers stopped it deletes the tenant in both stores, opens the
    windows and rewinds the group; the workers, started again, rebuild it to
    the oracle's state."""
    tenants = _sharing_tenants(deployment, 3)
    target = tenants[0]
    records = generate(deployment.tenant("offline"), tenants, 400, seed=23)
    worker = await _start(deployment)
    await publish(deployment.settings, records)
    await deployment.caught_up(stores)
    before = await store_states(stores, records)

    status, output = await deployment.cli("replay", "--tenant", target, "--offline", "--yes")
    assert status != 0 and "active members" in output, output
    assert await store_states(stores, records) == before
    assert await _markers(stores, deployment) == []

    assert await asyncio.to_thread(worker.stop) == 0
    # A static member is dropped when its session times out (6 s here).
    deadline = time.monotonic() + 60
    while await asyncio.to_thread(group_members, deployment.settings) > 0:
        assert time.monotonic() < deadline, "the stopped worker never left the group"
        await asyncio.sleep(0.5)
    status, output = await deployment.cli("replay", "--tenant", target, "--offline", "--yes")
    assert status == 0, output
    assert await stores.graph.find_entities(TenantId(target)) == []
    assert {m.tenant_id for m in await _markers(stores, deployment)} == {target}

    worker.start()
    await deployment.caught_up(stores)
    await assert_matches_oracle(stores, records, "offline replay")
    assert await _markers(stores, deployment) == []


def _chains_and_undo(tenant: str) -> list[Record]:
    """The pinned three-deep chain (a chained merge, and an unmerge in the
    middle of the chain), merge-then-undo and merge histories, as one tenant,
    each with entity ids of its own so that they do not interfere (no control
    events: nothing is signed, so no topic id is needed)."""
    out: list[Record] = []
    for name in ("three_deep_chain", "undo", "merge"):
        scenario = PINNED[name]()
        for _, key, event in rename(
            scenario.records, {"acme": tenant}, CONTROL_KEY.encode(), topic_id=""
        ):
            assert event is not None
            data = _prefix_ids(event.model_dump(mode="json", exclude_none=True), f"{name}-")
            out.append((len(out), key, parse_event_dict(data)))
    return out


def _prefix_ids(data: dict[str, Any], prefix: str) -> dict[str, Any]:
    payload = data["payload"]
    for entity in payload.get("entities", []):
        entity["id"] = prefix + entity["id"]
    for key in ("relationships", "edges_to_add", "edges_to_remove", "edges_to_restore"):
        for edge in payload.get(key, []):
            edge["source"], edge["target"] = prefix + edge["source"], prefix + edge["target"]
    for key in ("canonical_id",):
        if key in payload:
            payload[key] = prefix + payload[key]
    for key in ("absorbed_ids", "restored_ids"):
        if key in payload:
            payload[key] = [prefix + i for i in payload[key]]
    data["event_id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, prefix + data["event_id"]))
    return data


async def test_replay_of_merges_chains_and_unmerges_and_its_rate(
    deployment: Deployment, stores: Stores
) -> None:
    """A tenant whose history holds merges, a three-deep chain of merges into
    aliases, unmerges (one in the middle of a chain) and re-extractions is
    replayed online and ends equal to the oracle.

    Also measured, in this one run with the same warm worker: the first
    projection rate of the tenant's events (publish to both stores caught up)
    and the replay rate (signed request published to both windows closed),
    in events re-applied per second. Printed; no test asserts a time."""
    target = deployment.tenant("chained")
    pinned = _chains_and_undo(target)
    generated = generate(deployment.tenant("rate"), [target], 600, seed=24, merges=0.1)
    records = [*pinned, *[(len(pinned) + i, k, e) for i, (_, k, e) in enumerate(generated)]]
    oracle = Oracle().feed_all(records)
    assert any(o.event_type == "EntitiesUnmerged" for o in oracle.outcomes)
    await _start(deployment)

    started = time.monotonic()
    await publish(deployment.settings, records)
    await deployment.caught_up(stores, within=300)
    first = time.monotonic() - started
    await assert_matches_oracle(stores, records, "before the replay")

    started = time.monotonic()
    request = await publish_control(
        deployment.settings, "TenantReplayRequested", TenantId(target), "e2e"
    )
    await deployment.caught_up(stores, within=300)
    replayed = time.monotonic() - started
    await assert_matches_oracle(stores, records, "replay of merges, chains and unmerges")
    assert await _markers(stores, deployment) == []
    assert request.partition == partition_for(target, PARTITIONS)

    n = len(records)
    first_rate, replay_rate = n / first, n / replayed
    print(
        f"\nREPLAY events={n} first_projection={first:.1f}s ({first_rate:.0f}/s) "
        f"replay={replayed:.1f}s ({replay_rate:.0f}/s) "
        f"replay/first={replay_rate / first_rate:.2f}"
    )


async def test_unsigned_replay_request_is_dead_lettered(
    deployment: Deployment, stores: Stores
) -> None:
    """A TenantReplayRequested published by an ordinary producer (the SDK, no
    signature) is dead-lettered as unsigned and deletes nothing."""
    tenant = deployment.tenant("acme")
    records = rename(
        PINNED["merge"]().records, {"acme": tenant}, CONTROL_KEY.encode(), deployment.topic_id
    )
    await _start(deployment)
    await publish(deployment.settings, records)
    await deployment.caught_up(stores)
    before = await store_states(stores, records)

    forged = make_event("TenantReplayRequested", tenant, {"requested_by": "mallory"})
    async with Publisher(deployment.settings) as publisher:
        position = await publisher.publish(forged)
    await deployment.caught_up(stores)
    letters = read_letters(deployment.settings)
    assert [(letter.source_partition, letter.source_offset) for letter in letters] == [
        (position.partition, position.offset)
    ]
    assert "unsigned" in letters[0].reason
    assert await store_states(stores, records) == before
    assert await _markers(stores, deployment) == []
    await assert_matches_oracle(stores, records, "after an unsigned replay request")


async def test_erase_then_replay_then_rebuild_everything(
    deployment: Deployment, stores: Stores, e2e_env: dict[str, str]
) -> None:
    """`redstring erase` removes a tenant from both stores; a later `redstring
    replay` of it brings nothing back; neither does rebuilding everything from
    the log into fresh stores.

    Fresh stores on a shared stack: Postgres gets a new schema (a store that has
    never seen the topic). Neo4j Community has one database, so "fresh" is
    every node this test's tenants and topic own deleted (tenant data, applied
    ids, rebuild markers, erasure tombstones, checkpoints): from this topic's
    point of view an empty database. The worker, restarted on both, rebuilds
    from offset 0 (its group's committed offsets are ahead, which the stores'
    positions override), re-applying the erased tenant's old events and then the
    erasure: nothing of it remains, and the other tenants equal the oracle."""
    tenants = [deployment.tenant(f"t{i}") for i in range(3)]
    erased = tenants[0]
    records = generate(deployment.tenant("erase"), tenants, 300, seed=25)
    worker = await _start(deployment)
    await publish(deployment.settings, records)
    await deployment.caught_up(stores)
    assert await stores.graph.find_entities(TenantId(erased))

    status, output = await deployment.cli("erase", "--tenant", erased, "--yes")
    assert status == 0, output
    universe_ids = [EntityId(i) for i in universe(records)[erased]]

    async def assert_nothing_of_it(stores: Stores) -> None:
        t = TenantId(erased)
        assert await stores.graph.find_entities(t) == []
        assert await stores.graph.get_entities(t, universe_ids) == []
        assert await stores.graph.get_relationships_for(t, universe_ids) == []
        for entity in universe_ids:
            assert await stores.vector.get(t, entity) is None
        for store in (stores.graph, stores.vector):
            assert await store.applied_event_ids(t, _ids(records, erased)) == set()

    await assert_nothing_of_it(stores)
    # The oracle's view: the erasure comes after all of the tenant's events.
    erase_event = signing.sign(
        make_event("TenantErased", erased, {"requested_by": "e2e"}),
        CONTROL_KEY.encode(),
        topic_id=deployment.topic_id,
    )
    expected = [*records, (len(records), erased, erase_event)]

    status, output = await deployment.cli("replay", "--tenant", erased, "--yes")
    assert status == 0, output
    await deployment.caught_up(stores)
    await assert_nothing_of_it(stores)
    await assert_matches_oracle(stores, expected, "erased, then replayed")

    # Rebuild everything into fresh stores.
    assert await asyncio.to_thread(worker.stop) == 0
    await wipe_neo4j(e2e_env, deployment.tenant_prefix, deployment.settings.topic)
    schema = f"{PG_SCHEMA}_rebuild_{uuid.uuid4().hex[:6]}"
    worker.env["REDSTRING_PG_SCHEMA"] = schema
    fresh_settings = deployment.settings.model_copy(update={"pg_schema": schema})
    fresh = await open_stores(fresh_settings)
    try:
        worker.start()
        await caught_up(
            fresh_settings,
            fresh,
            deployment.topic_id,
            deployment.partitions,
            workers=deployment.workers,
            within=300,
        )
        await assert_nothing_of_it(fresh)
        await assert_matches_oracle(fresh, expected, "rebuilt into fresh stores")
        for store in (fresh.graph, fresh.vector):
            assert await store.erasure_tombstone(TenantId(erased)) is not None
    finally:
        await fresh.aclose()
