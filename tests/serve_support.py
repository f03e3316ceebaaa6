"""Shared by the read API's tests (unit, e2e) and its benchmark: tokens, a
small graph per tenant written through the ports, and one request per route
(docs/readers.md, "The HTTP API")."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import jwt

from contracts.domain import Alias, Entity, Relationship, VectorRecord
from contracts.ids import EntityId, TenantId
from contracts.ports.embedder import Embedder
from contracts.ports.graph import GraphStore
from contracts.ports.vector import VectorStore

SECRET = "serve-test-secret-of-32-bytes-at-least"


def token(tenant: str, *, secret: str = SECRET, expires_in: float = 600, **claims: Any) -> str:
    now = int(time.time())
    body = {"tenant_id": tenant, "iat": now, "exp": now + int(expires_in), **claims}
    return jwt.encode(body, secret, algorithm="HS256")


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


#: The entities every seeded tenant has: plain ids, one with '/', one with
#: spaces and non-ASCII letters; "ada-old" is merged into "ada".
ENTITIES = [
    ("ada", "Ada Lovelace", "Person"),
    ("ada-old", "A. Lovelace", "Person"),
    ("babbage", "Charles Babbage", "Person"),
    ("org/royal-society", "Royal Society", "Organization"),
    ("engine é 1", "Analytical Engine", "Machine"),
]
EDGES = [
    ("ada", "babbage", "WORKED_WITH"),
    ("babbage", "engine é 1", "DESIGNED"),
    ("ada", "engine é 1", "WROTE_ABOUT"),
    ("babbage", "org/royal-society", "MEMBER_OF"),
]


async def seed(
    tenant: TenantId, graph: GraphStore, vector: VectorStore, embedder: Embedder
) -> None:
    """Write the tenant's small graph and its vectors through the ports (each
    entity's ``marker`` property names the tenant, so a leak is visible)."""
    entities = [
        Entity(tenant, EntityId(i), name, kind, {"marker": tenant}) for i, name, kind in ENTITIES
    ]
    await graph.upsert_entities(tenant, entities)
    await graph.upsert_relationships(
        tenant,
        [
            Relationship(tenant, EntityId(s), EntityId(t), kind, 0.9, {"marker": tenant})
            for s, t, kind in EDGES
        ],
    )
    await graph.upsert_alias(tenant, Alias(tenant, EntityId("ada-old"), EntityId("ada"), "same"))
    vectors = await embedder.embed_documents([e.name for e in entities])
    await vector.upsert_many(
        tenant,
        [
            VectorRecord(tenant, e.id, tuple(v), {"entity_type": e.type, "marker": tenant})
            for e, v in zip(entities, vectors, strict=True)
        ],
    )
    await vector.hide_merged(tenant, EntityId("ada-old"), EntityId("ada"))


@dataclass(frozen=True)
class Call:
    """One request of a route: method, path under the tenant, query, body."""

    method: str
    path: str
    params: dict[str, Any] | list[tuple[str, str]] | None = None
    json: dict[str, Any] | None = None

    def url(self, tenant: str) -> str:
        return f"/v1/tenants/{quote(tenant, safe='')}{self.path}"


def calls(dimension: int) -> list[Call]:
    """One valid call of every tenant route (the tests check that each route
    of the OpenAPI document is among them)."""
    engine = quote("engine é 1", safe="")
    return [
        Call("GET", "/entities/ada"),
        Call("GET", "/entities/org/royal-society"),
        Call("GET", "/entities", [("id", "ada"), ("id", "babbage"), ("id", "nobody")]),
        Call("GET", "/entities", {"type": "Person", "limit": 2}),
        Call("GET", "/resolve", [("id", "ada-old"), ("id", "nobody")]),
        Call("GET", "/aliases/ada"),
        Call("GET", "/neighbors/babbage"),
        Call("GET", "/neighbors/ada-old", {"resolve": "true"}),
        Call("GET", f"/relationships/{engine}", {"direction": "in"}),
        Call("POST", "/search", json={"text": "Lovelace", "limit": 3}),
        Call("POST", "/search", json={"vector": [0.1] * dimension, "limit": 2, "offset": 1}),
        Call("GET", "/position", {"offset": 0}),
    ]


def tenants_in(answer: Any) -> set[str]:
    """Every tenant a JSON answer names (``tenant_id`` fields and ``marker``
    properties), at any depth."""
    found: set[str] = set()
    if isinstance(answer, dict):
        for key, value in answer.items():
            if key in ("tenant_id", "marker") and isinstance(value, str):
                found.add(value)
            else:
                found |= tenants_in(value)
    elif isinstance(answer, list):
        for item in answer:
            found |= tenants_in(item)
    return found
