"""``decode`` is total (docs/design.md 5.10, issue 15): whatever bytes arrive under
whatever key, it returns a ``Decoded`` (an event, or a dead letter with a
reason) or raises ``SchemaVersionTooNewError``, and only for a well-formed
envelope whose key matches its tenant. And what it decodes, the folds can
build: every domain value the graph and vector folds make of an event
(projections/graph.py, projections/vector.py) constructs, and the stores'
own encodings accept it."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, example, find, given, settings
from hypothesis import strategies as st

from adapters.pgvector.codec import encode_metadata, float32_vector, storable_text
from contracts import signing
from contracts.domain import Alias, Entity, Relationship, VectorRecord
from contracts.errors import SchemaVersionTooNewError, SignatureError
from contracts.events import (
    MAX_BLOCKING_KEY_BYTES,
    DocumentExtractedEvent,
    EntitiesMergedEvent,
    EntitiesUnmergedEvent,
    Event,
    ExtractedRelationship,
    event_to_json,
    parse_event,
)
from contracts.ids import EntityId, TenantId
from projections.vector import vector_metadata
from streams.worker.decode import Decoded, decode

CONTROL_KEY = b"totality"

# -- JSON text with room for what json.dumps cannot write ---------------------


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is (a literal, a huge number, deep nesting)."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """An object whose members may repeat."""

    items: tuple[tuple[str, Any], ...]


def write(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{write(v)}" for k, v in value.items) + "}"
    if isinstance(value, dict):
        return write(Pairs(tuple(value.items())))
    if isinstance(value, list):
        return "[" + ",".join(write(v) for v in value) + "]"
    return json.dumps(value)  # NaN and Infinity included, as Python writes them


ODD_TEXT = [
    " ",
    "\u00a0",
    "\u3000",
    "\u200b",
    "acme\u200b",
    "\u202e",
    "\ufeff",
    "\u00ad",
    "\x85",
    "\u2028",
    "\U000e0041",
    "\ufe0f",
    "\u3164",
    "\ufdfa" * 300,
    "\u6771" * 3000,
    "a\\b",
    '"',
    '":',
    "é",
    "🙂",
    "\ud800",
    "\udfff",
    "A" * 300,
    "\x00",
    "\t",
    "",
]
ODD_RAW = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1e39",
    "3.4028234663852886e38",
    "3.5e38",
    "9" * 5000,
    "-" + "9" * 400,
    "1" * 39,
    "0." + "1" * 3000,
    "1e-400",
    "-0",
    "[" * 3000 + "]" * 3000,
    '{"a":' * 300 + "1" + "}" * 300,
    "[" * 150 + "]" * 150,
    "true",
    "null",
    '"1"',
    "1.0",
    "2",
    "99",
    str(2**31),
    str(2**63),
    '"\\ud800"',
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=6),
    st.sampled_from(ODD_TEXT),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["id", "name", "type", "k", "payload"]), inner, max_size=3
        )
    ),
    max_leaves=6,
)
odd_values = st.one_of(json_values, st.sampled_from(ODD_RAW).map(Raw), st.sampled_from(ODD_TEXT))

# -- valid envelopes, and mutations of them -----------------------------------

TENANTS = ["acme", "other", "t-1"]
ids = st.one_of(
    st.sampled_from(["a", "b", "c", "é", "a b", "x" * 256]), st.text(min_size=1, max_size=4)
)
names = st.one_of(
    st.sampled_from(["A", "Ann", "東京", "\u200b", "n" * 8192, " ", "\u00a0", "\ufdfa" * 300]),
    st.text(min_size=1, max_size=8),
)
property_values = st.one_of(
    st.text(max_size=8),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.lists(st.integers(-5, 5), max_size=3),
    st.lists(st.text(max_size=3), max_size=3),
)
properties = st.dictionaries(
    st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,8}\Z"), property_values, max_size=3
)
components = st.one_of(
    st.floats(-3.4028234663852886e38, 3.4028234663852886e38),
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.integers(-(10**38), 10**38),
    st.sampled_from([0.0, -0.0, 5e-324, 1e-50, 3.4028234663852886e38]),
    # Beyond float32, now and then: decode must refuse these.
    st.sampled_from([1e39, -3.5e38, 1e300, 10**39]),
)


@st.composite
def document_payloads(draw: st.DrawFn) -> dict[str, Any]:
    entity_ids = draw(st.lists(ids, min_size=1, max_size=3, unique=True))
    dimension = draw(st.sampled_from([1, 3, 384]))
    entities = []
    for entity_id in entity_ids:
        entity: dict[str, Any] = {"id": entity_id, "name": draw(names), "type": "Thing"}
        if draw(st.booleans()):
            entity["properties"] = draw(properties)
        if draw(st.booleans()):
            entity["embedding"] = draw(st.lists(components, min_size=dimension, max_size=dimension))
        entities.append(entity)
    relationships = []
    if len(entity_ids) > 1:
        for _ in range(draw(st.integers(0, 3))):
            source, target = draw(st.permutations(entity_ids))[:2]
            relationships.append(
                {
                    "source": source,
                    "target": target,
                    "type": draw(st.sampled_from(["KNOWS", "R_1"])),
                    "confidence": draw(st.one_of(st.floats(0, 1), st.sampled_from([0, 1]))),
                    "properties": draw(properties),
                }
            )
    return {
        "document_id": draw(ids),
        "extraction_model": draw(st.text(min_size=1, max_size=5)),
        "entities": entities,
        "relationships": relationships,
    }


@st.composite
def decision_payloads(draw: st.DrawFn, listed: str, added: str) -> dict[str, Any]:
    canonical = draw(ids)
    others = draw(
        st.lists(ids.filter(lambda i: i != canonical), min_size=1, max_size=3, unique=True)
    )
    edge = st.fixed_dictionaries(
        {"source": ids, "target": ids, "type": st.just("R")},
        optional={"confidence": st.floats(0, 1), "properties": properties},
    )
    payload = {
        "canonical_id": canonical,
        listed: others,
        "edges_to_remove": draw(
            st.lists(
                edge.map(lambda e: {k: e[k] for k in ("source", "target", "type")}), max_size=2
            )
        ),
        added: draw(st.lists(edge.filter(lambda e: e["source"] != e["target"]), max_size=2)),
    }
    if listed == "absorbed_ids":
        payload["reason"] = draw(st.text(max_size=5))
    return payload


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    event_type = draw(
        st.sampled_from(
            [
                "DocumentExtracted",
                "EntitiesMerged",
                "EntitiesUnmerged",
                "TenantErased",
                "TenantReplayRequested",
            ]
        )
    )
    if event_type == "DocumentExtracted":
        payload = draw(document_payloads())
    elif event_type == "EntitiesMerged":
        payload = draw(decision_payloads("absorbed_ids", "edges_to_add"))
    elif event_type == "EntitiesUnmerged":
        payload = draw(decision_payloads("restored_ids", "edges_to_restore"))
    else:
        payload = {"requested_by": draw(st.text(min_size=1, max_size=5))}
    return {
        "event_id": str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))),
        "event_type": event_type,
        "schema_version": 1,
        "tenant_id": draw(st.sampled_from(TENANTS)),
        "occurred_at": draw(
            st.sampled_from(["2026-11-01T09:00:00Z", "2026-11-01T09:00:00.5+05:30"])
        ),
        "producer": draw(st.text(min_size=1, max_size=5)),
        "payload": payload,
    }


def nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (dict keys and list indices)."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(nodes(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(nodes(item, (*path, index)))
    return found


def replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: replace(v, rest, new) if k == head else v for k, v in value.items()}
    return [replace(v, rest, new) if i == head else v for i, v in enumerate(value)]


def get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A valid envelope with up to three mutations anywhere in it: a member
    dropped, repeated or retyped, a string made odd, a node made deep or huge."""
    data: Any = draw(envelopes())
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(nodes(data)))
        target = get(data, path)
        action = draw(st.sampled_from(["drop", "repeat", "retype", "odd", "schema_version"]))
        if action == "drop" and path:
            parent = get(data, path[:-1])
            if isinstance(parent, dict):
                data = replace(data, path[:-1], {k: v for k, v in parent.items() if k != path[-1]})
        elif action == "repeat" and isinstance(target, dict) and target:
            key = draw(st.sampled_from(sorted(target)))
            items = [*target.items()]
            items.insert(draw(st.integers(0, len(items))), (key, draw(odd_values)))
            data = replace(data, path, Pairs(tuple(items)))
            break  # a Pairs node is not walked into again
        elif action == "retype":
            data = replace(data, path, draw(odd_values))
        elif action == "odd" and isinstance(target, str):
            data = replace(
                data,
                path,
                draw(st.sampled_from(ODD_TEXT)) + target + draw(st.sampled_from(["", *ODD_TEXT])),
            )
        elif action == "schema_version" and isinstance(data, dict):
            data = {**data, "schema_version": draw(st.one_of(st.integers(), odd_values))}
        if not isinstance(data, dict):
            break
    return write(data)


keys = st.one_of(
    st.sampled_from([b"acme", b"other", b"t-1"]),
    st.none(),
    st.binary(max_size=8),
    st.text(max_size=8).map(lambda t: t.encode("utf-8", "surrogatepass")),
)
values = st.one_of(
    mutated().map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=64),
    json_values.map(write).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(ODD_RAW).map(str.encode),
    st.none(),
)

# -- the checks --------------------------------------------------------------

UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def members(value: bytes) -> Any:
    """``value`` parsed apart from the contract's code, refusing a repeated member."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        assert len(dict(pairs)) == len(pairs), f"a member repeats: {[k for k, _ in pairs]}"
        return dict(pairs)

    return json.loads(value, object_pairs_hook=unique)


def assert_well_formed_newer_envelope(key: bytes | None, value: bytes | None) -> None:
    """Judged apart from the contract's code: what may pause a partition."""
    assert value is not None and key is not None
    data = members(value)
    assert isinstance(data, dict)
    assert key.decode("utf-8") == data["tenant_id"]
    version = data["schema_version"]
    assert type(version) is int and 1 < version < 2**31
    assert re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,62}", data["tenant_id"])
    assert isinstance(data["event_id"], str) and UUID_TEXT.fullmatch(data["event_id"])
    assert isinstance(data["event_type"], str) and data["event_type"]
    assert isinstance(data["occurred_at"], str) and data["occurred_at"][:4].isdigit()
    assert isinstance(data["producer"], str) and data["producer"]
    assert isinstance(data["payload"], dict)


def build_domain_values(event: Event) -> None:
    """What the folds make of ``event``, the way they make it (and what the
    stores' encodings then do with it). Raises if anything refuses."""
    tenant = TenantId(event.tenant_id)
    relationships: list[ExtractedRelationship] = []
    if isinstance(event, DocumentExtractedEvent):
        payload = event.payload
        for e in payload.entities:
            entity = Entity(tenant, EntityId(e.id), e.name, e.type, dict(e.properties))
            assert len(entity.blocking_key.encode()) <= MAX_BLOCKING_KEY_BYTES
            assert storable_text(e.name) and storable_text(e.id)
            metadata = vector_metadata(e, payload.document_id)
            encode_metadata(metadata)
            if e.embedding is not None:
                VectorRecord(tenant, EntityId(e.id), tuple(e.embedding), metadata)
                VectorRecord.from_floats(tenant, EntityId(e.id), e.embedding, metadata)
                assert float32_vector(e.embedding) is not None
        relationships = list(payload.relationships)
    elif isinstance(event, EntitiesMergedEvent):
        for absorbed in event.payload.absorbed_ids:
            Alias(
                tenant,
                EntityId(absorbed),
                EntityId(event.payload.canonical_id),
                event.payload.reason,
            )
        relationships = list(event.payload.edges_to_add)
    elif isinstance(event, EntitiesUnmergedEvent):
        for restored in event.payload.restored_ids:
            assert restored != event.payload.canonical_id
        relationships = list(event.payload.edges_to_restore)
    for rel in relationships:
        Relationship(
            tenant,
            EntityId(rel.source),
            EntityId(rel.target),
            rel.type,
            rel.confidence,
            dict(rel.properties),
        )
    try:
        signing.verify(event, CONTROL_KEY, topic_id="")
    except SignatureError:
        pass


def check(key: bytes | None, value: bytes | None) -> Decoded | None:
    try:
        decoded = decode(7, key, value, CONTROL_KEY)
    except SchemaVersionTooNewError:
        assert_well_formed_newer_envelope(key, value)
        return None
    assert isinstance(decoded, Decoded)
    assert decoded.record.offset == 7
    if decoded.dead_letter_reason is not None:
        assert decoded.record.event is None
        assert decoded.dead_letter_reason.strip()
        assert len(decoded.dead_letter_reason) < 2000
    else:
        event = decoded.record.event
        assert event is not None
        assert key is not None and key.decode() == event.tenant_id == decoded.record.tenant_id
        assert value is not None
        data = members(value)
        # Strict types: the value held exactly what the event says.
        assert data["schema_version"] == 1 and type(data["schema_version"]) is int
        assert isinstance(data["occurred_at"], str) and isinstance(data["event_id"], str)
        assert parse_event(event_to_json(event)) == event
        build_domain_values(event)
    return decoded


@settings(
    max_examples=400, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(key=keys, value=values)
@example(key=b"acme", value=b'{"schema_version":99}')
@example(key=b"acme", value=b"[" * 1000 + b"]" * 1000)
@example(key=b"acme", value=b'{"schema_version":' + b"9" * 5000 + b"}")
def test_decode_is_total(key: bytes | None, value: bytes | None) -> None:
    check(key, value)


@settings(
    max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=envelopes(), key=st.sampled_from([None, b"match", b"other"]))
def test_every_decoded_event_builds_the_folds_domain_values(
    data: dict[str, Any], key: bytes | None
) -> None:
    """Valid envelopes with wide content (any text, float32 extremes, long
    names): those decode accepts, the folds' constructors accept too."""
    key_bytes = data["tenant_id"].encode() if key == b"match" else key
    check(key_bytes, write(data).encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("outcome", ["event", "dead", "pause"])
def test_the_generators_reach_every_outcome(outcome: str) -> None:
    """The strategies are not vacuous: mutated envelopes under tenant keys
    decode, dead-letter and pause."""

    def reaches(case: tuple[str, bytes]) -> bool:
        text, key = case
        decoded = check(key, text.encode("utf-8", "surrogatepass"))
        if decoded is None:
            return outcome == "pause"
        return outcome == ("dead" if decoded.dead_letter_reason else "event")

    find(
        st.tuples(mutated(), st.sampled_from([b"acme", b"other", b"t-1"])),
        reaches,
        settings=settings(
            max_examples=5000, database=None, suppress_health_check=list(HealthCheck)
        ),
    )
