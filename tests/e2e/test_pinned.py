"""Every pinned scenario (tests/scenarios/histories.py), published through Kafka
to a 3-partition topic and projected by a real worker process into Neo4j and
Postgres/pgvector, ends in the oracle's state in both stores.

All scenarios share one topic and one worker (each scenario under tenant ids
of its own, control events re-signed with the worker's key), so tenants of
different scenarios interleave on the partitions, as they would in
production; each scenario is then judged on its own tenants.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from streams.kafka.dead_letters import read_letters
from streams.wiring import open_stores
from tests.e2e.conftest import CONTROL_KEY, Deployment, deployed
from tests.e2e.histories import publish, rename, store_states
from tests.e2e.workers import caught_up, parse_metrics
from tests.scenarios.harness import describe_difference, oracle_refused_offsets
from tests.scenarios.histories import PINNED, Record
from tests.scenarios.oracle import Oracle

pytestmark = pytest.mark.services


@dataclass
class Projected:
    records: dict[str, list[Record]]
    states: dict[str, dict[str, dict[str, Any]]]
    letters: dict[str | None, int]
    metrics: dict[str, float]


def _renamed(deployment: Deployment) -> dict[str, list[Record]]:
    out = {}
    for index, (name, build) in enumerate(PINNED.items()):
        scenario = build()
        tenants = {t: deployment.tenant(f"s{index:02d}-{t}") for t in scenario.tenants()}
        out[name] = rename(scenario.records, tenants, CONTROL_KEY.encode(), deployment.topic_id)
    return out


@pytest.fixture(scope="module")
def projected(
    e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Projected]:
    with deployed(e2e_env, tmp_path_factory.mktemp("pinned")) as deployment:
        worker = deployment.worker("w1").start()
        worker.wait_ready()
        records = _renamed(deployment)

        async def go() -> Projected:
            # One scenario after the other, each in its own log order.
            for recs in records.values():
                await publish(deployment.settings, recs)
            stores = await open_stores(deployment.settings)
            try:
                await caught_up(
                    deployment.settings,
                    stores,
                    deployment.topic_id,
                    deployment.partitions,
                    workers=deployment.workers,
                )
                states = {name: await store_states(stores, recs) for name, recs in records.items()}
            finally:
                await stores.aclose()
            return Projected(records, states, {}, worker.metrics())

        result = asyncio.run(go())
        for letter in read_letters(deployment.settings):
            key = letter.key.decode() if letter.key is not None else None
            result.letters[key] = result.letters.get(key, 0) + 1
        worker.stop()
        yield result


@pytest.mark.parametrize("name", sorted(PINNED))
def test_pinned_scenario_through_kafka(name: str, projected: Projected) -> None:
    records = projected.records[name]
    oracle = Oracle().feed_all(records)
    actual = projected.states[name]
    expected = {tenant: oracle.state(tenant) for tenant in actual}
    assert set(oracle.states()) <= set(actual)
    if actual != expected:
        raise AssertionError(describe_difference(f"kafka/{name}", expected, actual))

    # Dead letters: every value that failed validation and every refused merge,
    # no more (a rescan for a replay must not dead-letter the same record again).
    tenants = {key for _, key, _ in records} | {
        str(e.tenant_id) for _, _, e in records if e is not None
    }
    poison = sum(1 for _, _, e in records if e is None)
    refused = len(oracle_refused_offsets(records))
    letters = sum(n for key, n in projected.letters.items() if key in tenants or key is None)
    if name != "poison_record":
        letters -= projected.letters.get(None, 0)
    assert letters == poison + refused, (
        f"{name}: {letters} dead letters, expected {poison + refused}"
    )


def test_worker_reports_health_and_metrics(projected: Projected) -> None:
    """/metrics answered with the counters the issue lists, and they add up."""
    metrics = projected.metrics
    total = sum(len(r) for r in projected.records.values())
    for store in ("graph", "vector"):
        applied = metrics[f'redstring_events_applied_total{{store="{store}"}}']
        skipped = metrics[f'redstring_events_skipped_total{{store="{store}"}}']
        # Replays re-apply their tenant's history, so more than one per event.
        assert applied > total / 2
        assert skipped >= 0
    assert metrics["redstring_events_dead_lettered_total"] >= 1
    assert "redstring_batch_seconds_count" in metrics
    assert parse_metrics('a 1\n# x\nb{c="d"} 2.5') == {"a": 1.0, 'b{c="d"}': 2.5}
