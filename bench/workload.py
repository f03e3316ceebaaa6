"""The end-to-end benchmark's synthetic workload, reproducible from a seed.

T tenants with Zipf-like sizes (tenant i gets a share proportional to
1 / (i + 1)); each event goes to a tenant drawn by those weights, so every
tenant's events are spread over the whole log. Events:

* ``DocumentExtracted`` (about 97.5%): 5-20 entities (about 30% of them
  re-extractions of ids the tenant already has), 5-30 relationships among the
  document's entities (no self-loops, distinct keys), every entity carrying a
  384-dimension embedding;
* ``EntitiesMerged`` (about 2%): one or two live entities absorbed into another
  live one (never a cycle);
* ``EntitiesUnmerged`` (about 0.5%): one absorbed id restored.

Events are kept as byte templates with a tenant placeholder, so that each side
of the benchmark gets the same log under its own tenant ids (``render``), and
as structured rows for the direct-write ceiling (``Planned``).
"""

from __future__ import annotations

import bisect
import json
import random
import uuid
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from streams.kafka.partitioning import partition_for

DIMENSION = 384
PLACEHOLDER = b"__TENANT__"
ENTITY_TYPES = ("Person", "Organization", "Place", "Product")
RELATIONSHIP_TYPES = ("KNOWS", "WORKS_AT", "LOCATED_IN", "MENTIONS", "PART_OF")
MERGE_SHARE = 0.02
UNMERGE_SHARE = 0.005
POOL = 128  # distinct embeddings, drawn per entity


@dataclass(frozen=True)
class Size:
    tenants: int
    events: int
    rounds: int
    latency_seconds: float  # the paced publishing of each offered-load level
    replay_events: int  # the large tenant's history for the replay phase


#: About 37 KB per event on a topic: ``small`` puts 55 MB on each side's topic,
#: ``large`` 450 MB and ``xlarge`` 1.9 GB (bench/e2e.py checks the free disk
#: before it starts and removes a round's topics when the round ends).
SIZES = {
    "tiny": Size(tenants=6, events=120, rounds=1, latency_seconds=4, replay_events=60),
    "small": Size(tenants=24, events=1500, rounds=2, latency_seconds=20, replay_events=600),
    "large": Size(tenants=60, events=12_000, rounds=2, latency_seconds=60, replay_events=4000),
    # A long projection, for the cost per event as the graph grows: the
    # replay tenant's 10,000 events and the whole log's 50,000.
    "xlarge": Size(tenants=100, events=50_000, rounds=2, latency_seconds=60, replay_events=10_000),
}


@dataclass(frozen=True)
class Planned:
    """One event, structured (no embeddings inlined) and as a byte template."""

    kind: str  # DocumentExtracted | EntitiesMerged | EntitiesUnmerged
    tenant: int  # index into the tenant list
    payload: dict[str, Any]
    embeddings: tuple[int, ...]  # pool index per entity, in payload order
    template: bytes

    @property
    def entity_count(self) -> int:
        return len(self.payload.get("entities", ()))

    @property
    def relationship_count(self) -> int:
        return len(self.payload.get("relationships", ()))


@dataclass
class _Tenant:
    next_id: int = 0
    live: list[str] = field(default_factory=list)  # extracted ids not absorbed
    absorbed: dict[str, str] = field(default_factory=dict)  # absorbed id -> canonical


@dataclass(frozen=True)
class Workload:
    seed: int
    tenants: int
    events: list[Planned]
    pool: list[tuple[float, ...]]

    def for_tenant(self, index: int) -> list[Planned]:
        return [e for e in self.events if e.tenant == index]

    @property
    def entities(self) -> int:
        return sum(e.entity_count for e in self.events)

    @property
    def relationships(self) -> int:
        return sum(e.relationship_count for e in self.events)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.events:
            out[e.kind] = out.get(e.kind, 0) + 1
        return out


def _embedding_pool(rng: random.Random) -> tuple[list[tuple[float, ...]], list[str]]:
    vectors = [
        tuple(round(rng.uniform(-1.0, 1.0), 4) for _ in range(DIMENSION)) for _ in range(POOL)
    ]
    return vectors, [json.dumps(list(v), separators=(",", ":")) for v in vectors]


def _envelope(rng: random.Random, kind: str, payload_json: str) -> bytes:
    head = json.dumps(
        {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "event_type": kind,
            "schema_version": 1,
            "tenant_id": "__TENANT__",
            "occurred_at": "2026-11-01T09:00:00Z",
            "producer": "bench",
        },
        separators=(",", ":"),
    )
    return (head[:-1] + ',"payload":' + payload_json + "}").encode()


def generate(seed: int, tenants: int, events: int) -> Workload:
    """The same arguments give the same log."""
    rng = random.Random(seed)
    pool, pool_json = _embedding_pool(rng)
    weights = list(accumulate(1.0 / (i + 1) for i in range(tenants)))
    state = [_Tenant() for _ in range(tenants)]
    planned: list[Planned] = []
    for _ in range(events):
        t = bisect.bisect_left(weights, rng.random() * weights[-1])
        tenant = state[t]
        roll = rng.random()
        if roll < MERGE_SHARE and len(tenant.live) >= 4:
            planned.append(_merge(rng, t, tenant))
        elif roll < MERGE_SHARE + UNMERGE_SHARE and tenant.absorbed:
            planned.append(_unmerge(rng, t, tenant))
        else:
            planned.append(_document(rng, t, tenant, pool_json))
    return Workload(seed, tenants, planned, pool)


def _document(rng: random.Random, t: int, tenant: _Tenant, pool_json: list[str]) -> Planned:
    count = rng.randint(5, 20)
    ids: list[str] = []
    # About 30% re-extractions of ids the tenant already has.
    reuse = min(len(tenant.live), round(rng.random() * 0.6 * count))
    ids.extend(rng.sample(tenant.live, reuse))
    while len(ids) < count:
        ids.append(f"e{tenant.next_id}")
        tenant.live.append(ids[-1])
        tenant.next_id += 1
    entities: list[dict[str, Any]] = []
    parts: list[str] = []
    embeddings: list[int] = []
    for entity_id in ids:
        entity = {
            "id": entity_id,
            "name": f"Entity {entity_id} of {t}",
            "type": rng.choice(ENTITY_TYPES),
            "properties": {"score": round(rng.random(), 3), "rank": rng.randint(0, 99)},
        }
        k = rng.randrange(POOL)
        entities.append(entity)
        embeddings.append(k)
        text = json.dumps(entity, separators=(",", ":"))
        parts.append(text[:-1] + ',"embedding":' + pool_json[k] + "}")
    wanted = rng.randint(5, 30)
    keys: set[tuple[str, str, str]] = set()
    relationships: list[dict[str, Any]] = []
    for _ in range(wanted * 3):
        if len(relationships) >= wanted:
            break
        s, d = rng.sample(ids, 2)
        key = (s, d, rng.choice(RELATIONSHIP_TYPES))
        if key in keys:
            continue
        keys.add(key)
        relationships.append(
            {
                "source": s,
                "target": d,
                "type": key[2],
                "confidence": round(rng.random(), 3),
                "properties": {"weight": rng.randint(1, 9)},
            }
        )
    document_id = f"doc-{rng.getrandbits(40):x}"
    payload = {
        "document_id": document_id,
        "extraction_model": "bench-v1",
        "entities": entities,
        "relationships": relationships,
    }
    payload_json = (
        '{"document_id":'
        + json.dumps(document_id)
        + ',"extraction_model":"bench-v1","entities":['
        + ",".join(parts)
        + '],"relationships":'
        + json.dumps(relationships, separators=(",", ":"))
        + "}"
    )
    return Planned(
        "DocumentExtracted",
        t,
        payload,
        tuple(embeddings),
        _envelope(rng, "DocumentExtracted", payload_json),
    )


def _merge(rng: random.Random, t: int, tenant: _Tenant) -> Planned:
    canonical, *absorbed = rng.sample(tenant.live, rng.randint(2, 3))
    for a in absorbed:
        tenant.live.remove(a)
        tenant.absorbed[a] = canonical
    payload = {
        "canonical_id": canonical,
        "absorbed_ids": absorbed,
        "reason": "bench: same entity",
        "edges_to_remove": [],
        "edges_to_add": [],
    }
    return Planned(
        "EntitiesMerged",
        t,
        payload,
        (),
        _envelope(rng, "EntitiesMerged", json.dumps(payload, separators=(",", ":"))),
    )


def _unmerge(rng: random.Random, t: int, tenant: _Tenant) -> Planned:
    restored = rng.choice(sorted(tenant.absorbed))
    canonical = tenant.absorbed.pop(restored)
    tenant.live.append(restored)
    payload = {
        "canonical_id": canonical,
        "restored_ids": [restored],
        "edges_to_restore": [],
        "edges_to_remove": [],
    }
    return Planned(
        "EntitiesUnmerged",
        t,
        payload,
        (),
        _envelope(rng, "EntitiesUnmerged", json.dumps(payload, separators=(",", ":"))),
    )


def tenant_names(prefix: str, count: int, partitions: int) -> list[str]:
    """Tenant ids under ``prefix`` whose partitions are 0, 1, 2, ...: every side
    of the benchmark gets the same layout of tenants over partitions."""
    names = []
    for i in range(count):
        want = i % partitions
        n = 0
        while True:
            name = f"{prefix}t{i:02d}{'' if n == 0 else f'x{n}'}"
            if partition_for(name, partitions) == want:
                break
            n += 1
        names.append(name)
    return names


def render(event: Planned, tenants: list[str]) -> tuple[bytes, bytes]:
    """The Kafka key and value of ``event`` under this side's tenant ids."""
    name = tenants[event.tenant].encode()
    return name, event.template.replace(PLACEHOLDER, name, 1)
