"""Histories for the end-to-end tests, and how they reach Kafka and are judged.

``generate`` writes a seeded multi-tenant history with merges (into aliases
too, so chains form), unmerges and re-extractions, keeping an oracle beside it
only to avoid merges that would close a cycle (those are dead-lettered by
design and have their own tests). What the stores must hold is always decided
by ``tests.scenarios.oracle.Oracle`` over the records as published.

``rename`` moves a pinned scenario to tenant ids of this test (re-signing its
control events with the workers' key), since the stores are shared.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from contracts import signing
from contracts.domain import Position
from contracts.events import Event, event_headers, event_to_json, parse_event_dict
from contracts.ids import EntityId, TenantId
from projections.snapshot import snapshot
from streams.kafka.producer import AsyncProducer
from streams.sdk.publisher import Publisher
from streams.settings import Settings
from streams.wiring import Stores
from tests.scenarios.harness import describe_difference, universe
from tests.scenarios.histories import LogBuilder, Record
from tests.scenarios.oracle import Oracle, resolve

POISON = b'{"this is": "not an event"}'


def rename(
    records: Sequence[Record], tenant: dict[str, str], control_key: bytes, topic_id: str
) -> list[Record]:
    """The records with every tenant id mapped through ``tenant``; control events
    are signed again (the signature covers the tenant id)."""
    out: list[Record] = []
    for offset, key, event in records:
        new_key = tenant[key] if key is not None else None
        if event is None:
            out.append((offset, new_key, None))
            continue
        data = event.model_dump(mode="json", exclude_none=True)
        data["tenant_id"] = tenant[str(event.tenant_id)]
        data.pop("signature", None)
        data.pop("key_id", None)
        if event.is_control:
            # Signed now: the workers refuse a control event older than
            # REDSTRING_CONTROL_MAX_AGE_S when it is published.
            data["occurred_at"] = datetime.now(UTC).isoformat()
        renamed = parse_event_dict(data)
        if renamed.is_control:
            renamed = signing.sign(renamed, control_key, topic_id=topic_id)
        out.append((offset, new_key, renamed))
    return out


def generate(
    name: str,
    tenants: Sequence[str],
    events: int,
    *,
    seed: int = 0,
    pool: int = 30,
    merges: float = 0.06,
    unmerges: float = 0.03,
) -> list[Record]:
    """A history of about ``events`` events spread over ``tenants``, in publish
    order; ``merges`` and ``unmerges`` are the chances of each step being one."""
    rng = random.Random(seed)
    log = LogBuilder(name)
    oracle = Oracle()
    fed = 0
    for step in range(events):
        tenant = rng.choice(tenants)
        state = oracle.tenants.get(tenant)
        aliases = dict(state.aliases) if state else {}
        known = sorted(state.entities) if state else []
        roll = rng.random()
        if roll < merges and len(known) >= 3:
            canonical = rng.choice(known)
            # Into an alias half the time: chains of merges.
            if aliases and rng.random() < 0.5:
                canonical = rng.choice(sorted(aliases))
            root = resolve(aliases, canonical)
            free = [e for e in known if resolve(aliases, e) != root]
            if free:
                absorbed = rng.sample(free, k=min(len(free), rng.randint(1, 2)))
                proposed = {**aliases, **dict.fromkeys(absorbed, canonical)}
                if not _cycle(proposed):
                    other = rng.choice([e for e in known if e != canonical])
                    log.merge(tenant, canonical, absorbed, add=[(canonical, other, "RELATED", 0.5)])
        elif roll < merges + unmerges and aliases:
            restored = rng.choice(sorted(aliases))
            other = rng.choice([e for e in known if e != restored])
            log.unmerge(
                tenant, aliases[restored], [restored], restore=[(restored, other, "KNOWS", 0.4)]
            )
        else:
            ids = rng.sample(range(pool), k=rng.randint(2, 4))
            ents = [
                (
                    f"e{i}",
                    f"Entity {i}{rng.choice(['', ' Jr', ' Sr'])}",
                    rng.choice(["Person", "Org", "Place"]),
                    {"seen": step % 7, f"k{i % 3}": rng.choice(["x", "y"])},
                )
                for i in ids
            ]
            rels = [
                (f"e{a}", f"e{b}", rng.choice(["KNOWS", "WORKS_AT", "NEAR"]), rng.random())
                for a, b in itertools.pairwise(ids)
            ]
            log.extract(tenant, f"doc-{rng.randrange(50)}", ents, rels)
        for offset, key, event in log.records[fed:]:
            oracle.feed(offset, key, event)
        fed = len(log.records)
    return log.records


def _cycle(aliases: dict[str, str]) -> bool:
    for start in aliases:
        seen, current = {start}, start
        while current in aliases:
            current = aliases[current]
            if current in seen:
                return True
            seen.add(current)
    return False


# -- to Kafka -----------------------------------------------------------------------


async def publish(settings: Settings, records: Iterable[Record]) -> list[Position]:
    """Publish the records in order: events through the SDK, a ``None`` event as a
    value that fails validation, keyed by its tenant."""
    batch = list(records)
    if all(event is not None for _, _, event in batch):
        async with Publisher(settings) as publisher:
            return await publisher.publish_many([e for _, _, e in batch if e is not None])
    # Poison needs the raw producer: the SDK validates before sending.
    producer = AsyncProducer(settings)
    try:
        futures = []
        for _, key, event in batch:
            raw_key = key.encode() if key is not None else None
            if event is None:
                futures.append(producer.send(settings.topic, raw_key, POISON, []))
            else:
                futures.append(
                    producer.send(
                        settings.topic,
                        event.tenant_id.encode(),
                        event_to_json(event),
                        list(event_headers(event)),
                    )
                )
        return list(await asyncio.gather(*futures))
    finally:
        producer.close()


def raw_value(event: Event) -> bytes:
    return json.dumps(event.model_dump(mode="json", exclude_none=True)).encode()


# -- judging ---------------------------------------------------------------------------


async def store_states(stores: Stores, records: Sequence[Record]) -> dict[str, dict[str, Any]]:
    """What both stores hold for every tenant of ``records``, over the ids they mention."""
    return {
        tenant: await snapshot(
            stores.graph, stores.vector, TenantId(tenant), [EntityId(i) for i in ids]
        )
        for tenant, ids in sorted(universe(records).items())
    }


async def assert_matches_oracle(
    stores: Stores, records: Sequence[Record], what: str = "e2e"
) -> dict[str, dict[str, Any]]:
    oracle = Oracle().feed_all(records)
    actual = await store_states(stores, records)
    expected = {tenant: oracle.state(tenant) for tenant in actual}
    if actual != expected:
        raise AssertionError(describe_difference(what, expected, actual))
    return actual
