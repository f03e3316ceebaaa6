"""The compact embedding (``embedding_b64``, docs/events.md): the same vector as
a JSON ``embedding`` list reaches the stores as the same floats, whichever
encoding the producer chose; the two are never sent together; and the
Publisher sends it when asked.

Honest about precision: base64 carries float32, so the JSON list it equals
is the list of those float32 values widened to float (``float32_values``). A
list of arbitrary floats is *not* equal to its compact form: the compact form
rounds each to float32, as pgvector does when it stores either one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import struct
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.errors import InvalidEventError
from contracts.events import (
    DocumentExtractedEvent,
    event_to_json,
    make_event,
    parse_event,
)
from contracts.schema import event_schemas
from streams.ops.dry_run import fold_lines
from streams.sdk import publisher as publisher_module
from streams.sdk.publisher import Publisher
from streams.settings import Settings
from tests.unit.streams.test_tracing import FakeProducer

DIMENSION = 384  # the dry run's HashingEmbedder
EID = "00000000-0000-4000-8000-000000000001"

finite_float32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
#: The store's dimension, from a few drawn components repeated: a draw of
#: 384 floats is too large for hypothesis to shrink.
vectors = st.lists(finite_float32, min_size=1, max_size=24).map(
    lambda drawn: (drawn * DIMENSION)[:DIMENSION]
)


def b64(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def float32_values(values: list[float]) -> list[float]:
    """What float32 makes of ``values``: the floats a compact form carries."""
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def envelope(*entities: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "event_id": EID,
            "event_type": "DocumentExtracted",
            "schema_version": 1,
            "tenant_id": "acme",
            "occurred_at": "2026-11-01T09:00:00Z",
            "producer": "p",
            "payload": {
                "document_id": "d",
                "extraction_model": "m",
                "entities": list(entities),
                "relationships": [{"source": "a", "target": "b", "type": "KNOWS"}],
            },
        }
    ).encode()


def entity(entity_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": entity_id, "name": entity_id.upper(), "type": "Thing", **fields}


def fold(value: bytes) -> tuple[dict[str, Any], list[tuple[int, str]]]:
    result = asyncio.run(fold_lines([value], control_key=None, trust_unsigned=False, batch_size=10))
    return result.state, result.dead_letters


@given(first=vectors, second=vectors)
def test_either_encoding_folds_to_the_same_state(first: list[float], second: list[float]) -> None:
    listed = envelope(entity("a", embedding=first), entity("b", embedding=second))
    compact = envelope(
        entity("a", embedding_b64=b64(first)), entity("b", embedding_b64=b64(second))
    )
    mixed = envelope(entity("a", embedding=first), entity("b", embedding_b64=b64(second)))
    # What the folds receive: the same floats, bit for bit (-0.0 included).
    events = [parse_event(value) for value in (listed, compact, mixed)]
    assert isinstance(events[0], DocumentExtractedEvent)
    assert events[0] == events[1] == events[2]
    for decoded in events:
        assert isinstance(decoded, DocumentExtractedEvent)
        got = [e.embedding for e in decoded.payload.entities]
        assert [[struct.pack("<d", x) for x in v or []] for v in got] == [
            [struct.pack("<d", x) for x in v] for v in (first, second)
        ]
    # What the stores hold and `redstring fold` prints.
    states = [fold(value) for value in (listed, compact, mixed)]
    assert states[0] == states[1] == states[2]
    state, dead = states[0]
    assert dead == []
    assert state["tenants"]["acme"]["visible_vectors"] == ["a", "b"]


def test_a_compact_embedding_is_the_float32_list_not_the_float64_one() -> None:
    values = [0.1, 1 / 3, -2.5, 1e-40]
    compact = parse_event(envelope(entity("a", embedding_b64=b64(values)), entity("b")))
    listed = parse_event(envelope(entity("a", embedding=values), entity("b")))
    widened = parse_event(envelope(entity("a", embedding=float32_values(values)), entity("b")))
    assert compact == widened != listed
    assert isinstance(compact, DocumentExtractedEvent)
    assert compact.payload.entities[0].embedding == [
        0.10000000149011612,
        0.3333333432674408,
        -2.5,
        9.99994610111476e-41,
    ]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"embedding": [0.5], "embedding_b64": b64([0.5])}, "both embedding and embedding_b64"),
        ({"embedding_b64": "AAAAAB=="}, "not canonical base64"),
        ({"embedding_b64": "AAAA"}, "not a whole number of float32s"),
        ({"embedding_b64": "AAAAAA="}, "embedding_b64 is not base64"),
        ({"embedding_b64": "AAAA\nAA=="}, "embedding_b64 is not base64"),
        ({"embedding_b64": ""}, "embedding_b64 must not be empty"),
        ({"embedding_b64": "AADAfw=="}, "component 0 is nan (bits 0x7fc00000)"),
        ({"embedding_b64": b64([0.5]) + b64([0.5])}, "not base64"),
        ({"embedding_b64": "A" * 21852}, "more than 4096 float32 components"),
        ({"embedding_b64": [0.5]}, "embedding_b64: Input should be a valid string"),
    ],
)
def test_a_bad_compact_embedding_is_refused_with_its_reason(
    fields: dict[str, Any], reason: str
) -> None:
    with pytest.raises(InvalidEventError, match="invalid DocumentExtracted") as refused:
        parse_event(envelope(entity("a", **fields), entity("b")))
    assert reason in refused.value.reason


def test_compact_embeddings_follow_the_dimension_rules() -> None:
    with pytest.raises(InvalidEventError, match="different lengths"):
        parse_event(envelope(entity("a", embedding=[0.5]), entity("b", embedding_b64=b64([1, 2]))))
    _, dead = fold(envelope(entity("a", embedding_b64=b64([0.5, 0.5])), entity("b")))
    assert len(dead) == 1 and "dimension" in dead[0][1]
    null = parse_event(envelope(entity("a", embedding=None, embedding_b64=b64([0.5])), entity("b")))
    assert isinstance(null, DocumentExtractedEvent)
    assert null.payload.entities[0].embedding == [0.5]  # null is absent


def test_an_event_sent_compact_reads_back_as_its_float32_values() -> None:
    values = [0.1, -0.0, 3.4028234663852886e38, 2.0]
    event = make_event(
        "DocumentExtracted",
        "acme",
        {
            "document_id": "d",
            "extraction_model": "m",
            "entities": [entity("a", embedding=values), entity("b")],
        },
    )
    wire = event_to_json(event, compact_embeddings=True)
    sent = json.loads(wire)["payload"]["entities"]
    assert sent[0]["embedding_b64"] == b64(values) and "embedding" not in sent[0]
    assert "embedding" not in sent[1] and "embedding_b64" not in sent[1]
    back = parse_event(wire)
    assert isinstance(back, DocumentExtractedEvent)
    assert back.payload.entities[0].embedding == float32_values(values)
    assert math.copysign(1, back.payload.entities[0].embedding[1]) == -1
    # Sent again, compact or not, it is the same event.
    assert (
        parse_event(event_to_json(back))
        == back
        == parse_event(event_to_json(back, compact_embeddings=True))
    )
    assert len(wire) < len(event_to_json(event))


def test_the_publisher_sends_compact_embeddings_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publisher_module, "AsyncProducer", FakeProducer)
    event = make_event(
        "DocumentExtracted",
        "acme",
        {"document_id": "d", "extraction_model": "m", "entities": [entity("a", embedding=[0.5])]},
    )

    async def send(**options: Any) -> dict[str, Any]:
        publisher = Publisher(Settings(), topic="events", **options)
        await publisher.publish(event)
        assert isinstance(publisher._producer, FakeProducer)
        value = publisher._producer.records[0][1]
        assert value is not None
        sent: dict[str, Any] = json.loads(value)["payload"]["entities"][0]
        return sent

    assert asyncio.run(send()) == entity("a", embedding=[0.5], properties={})
    compact = asyncio.run(send(compact_embeddings=True))
    assert compact == entity("a", embedding_b64=b64([0.5]), properties={})


def test_the_schema_describes_the_compact_embedding() -> None:
    schema = event_schemas()["DocumentExtracted"]["$defs"]["ExtractedEntity"]
    field = schema["properties"]["embedding_b64"]
    assert field["contentEncoding"] == "base64"
    assert field["maxLength"] == 21848  # 4,096 float32s
    assert schema["not"]["required"] == ["embedding", "embedding_b64"]


def test_the_exported_schema_takes_one_embedding_or_the_other() -> None:
    schema = event_schemas()["DocumentExtracted"]

    def valid(*entities: dict[str, Any]) -> bool:
        try:
            jsonschema.validate(json.loads(envelope(*entities)), schema)
        except jsonschema.ValidationError:
            return False
        return True

    assert valid(entity("a", embedding_b64=b64([0.5, 1.0])), entity("b", embedding=[0.5, 1.0]))
    assert valid(entity("a", embedding=None, embedding_b64=b64([0.5])), entity("b"))
    assert not valid(entity("a", embedding=[0.5], embedding_b64=b64([0.5])), entity("b"))
    for bad in ("AAAA", "AAAAAB==", "AAAAAA=", "", "AAAA\nAA=="):
        assert not valid(entity("a", embedding_b64=bad), entity("b")), bad
