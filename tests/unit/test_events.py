"""The event contract: what is accepted, what is dead-lettered and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import signing
from contracts.errors import InvalidEventError, SchemaVersionTooNewError, SignatureError
from contracts.events import (
    EVENT_TYPES,
    MAX_EVENT_BYTES,
    SCHEMA_VERSION,
    event_to_json,
    make_event,
    parse_event,
)
from contracts.schema import export_schemas

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "quickstart.jsonl"


def envelope(payload: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    data = {
        "event_id": "00000000-0000-0000-0000-000000000001",
        "event_type": "DocumentExtracted",
        "schema_version": SCHEMA_VERSION,
        "tenant_id": "acme",
        "occurred_at": "2026-11-01T09:00:00Z",
        "producer": "test",
        "payload": payload,
    }
    data.update(overrides)
    return data


def doc(
    entities: list[dict[str, Any]], relationships: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "document_id": "d",
        "extraction_model": "m",
        "entities": entities,
        "relationships": relationships or [],
    }


def ent(i: str, **props: Any) -> dict[str, Any]:
    return {"id": i, "name": i.upper(), "type": "Thing", "properties": props}


def raw(data: Any) -> bytes:
    return json.dumps(data).encode()


def test_a_valid_extraction_parses_and_round_trips() -> None:
    value = raw(
        envelope(doc([ent("a", n=[1, 2]), ent("b")], [{"source": "a", "target": "b", "type": "R"}]))
    )
    event = parse_event(value)
    assert event.tenant == "acme"
    assert parse_event(event_to_json(event)) == event


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1, 2]", "not a JSON object"),
        (raw(envelope(doc([]), event_type="Nope")), "unknown event_type"),
        (raw(envelope(doc([]), event_type=["DocumentExtracted"])), "unknown event_type"),
        (raw(envelope(doc([]), event_type={"a": 1})), "unknown event_type"),
        (raw(envelope(doc([ent("a")]), tenant_id="")), "tenant"),
        (raw(envelope(doc([ent("a")]), tenant_id="Acme Corp")), "tenant"),
        (raw(envelope(doc([ent("a")]), occurred_at="2026-11-01T09:00:00")), "occurred_at"),
        (raw(envelope(doc([ent("a")]), surprise=1)), "surprise"),
        (
            raw(envelope(doc([ent("a"), ent("b")], [{"source": "a", "target": "a", "type": "R"}]))),
            "self-loop",
        ),
        (
            raw(envelope(doc([ent("a")], [{"source": "a", "target": "z", "type": "R"}]))),
            "not among",
        ),
        (raw(envelope(doc([ent("a", **{"bad key": 1})]))), "property key"),
        (raw(envelope(doc([ent("a", x=[1, "one"])]))), "homogeneous"),
        (raw(envelope(doc([ent("a", x={"nested": 1})]))), "properties"),
        (raw(envelope(doc([ent("a", x=[1, None])]))), "properties"),
        (raw(envelope(doc([ent("a", x=None)]))), "properties"),
        (raw(envelope(doc([ent("a"), ent("a")]))), "twice"),
        (raw(envelope(doc([ent("a", x="nul\u0000")]))), "NUL"),
        (
            b'{"event_type": "DocumentExtracted", "schema_version": 1, "tenant_id": "acme", '
            b'"event_id": "00000000-0000-0000-0000-000000000001", "producer": "p", '
            b'"occurred_at": "2026-11-01T09:00:00Z", "payload": {"document_id": "d", '
            b'"extraction_model": "m", "entities": [{"id": "a", "name": "\\ud800", "type": "T"}]}}',
            "not JSON",  # an escaped lone surrogate is not Unicode text
        ),
        (b'{"pad": "' + b"x" * MAX_EVENT_BYTES + b'"}', "limit"),
        (
            raw(
                envelope({"canonical_id": "a", "absorbed_ids": ["a"]}, event_type="EntitiesMerged")
            ),
            "canonical",
        ),
        (
            raw(envelope({"canonical_id": "a", "absorbed_ids": []}, event_type="EntitiesMerged")),
            "absorbed_ids",
        ),
    ],
)
def test_invalid_values_are_refused_with_a_reason(value: bytes, reason: str) -> None:
    with pytest.raises(InvalidEventError) as caught:
        parse_event(value)
    assert reason.lower() in caught.value.reason.lower()


def test_a_newer_schema_version_is_not_a_dead_letter() -> None:
    value = raw(envelope({"anything": "from the future"}, schema_version=SCHEMA_VERSION + 1))
    with pytest.raises(SchemaVersionTooNewError) as caught:
        parse_event(value)
    assert caught.value.version == SCHEMA_VERSION + 1
    assert not isinstance(caught.value, InvalidEventError)


def control(event_type: str = "TenantReplayRequested") -> Any:
    return make_event(event_type, "acme", {"requested_by": "ops"})


@pytest.mark.parametrize("event_type", ["TenantReplayRequested", "TenantErased"])
def test_control_events_must_carry_a_valid_signature(event_type: str) -> None:
    key = b"secret"
    event = control(event_type)
    with pytest.raises(SignatureError, match="unsigned"):
        signing.verify(event, key, topic_id="t")
    signed = signing.sign(event, key, topic_id="t")
    assert signed.key_id == signing.DEFAULT_KEY_ID
    signing.verify(signed, key, topic_id="t")
    signing.verify(parse_event(event_to_json(signed)), key, topic_id="t")  # survives the wire
    with pytest.raises(SignatureError, match="bad signature"):
        signing.verify(signed, b"other key", topic_id="t")
    tampered = json.loads(event_to_json(signed))
    tampered["tenant_id"] = "victim"
    with pytest.raises(SignatureError, match="bad signature"):
        signing.verify(parse_event(raw(tampered)), key, topic_id="t")
    with pytest.raises(SignatureError, match="no control key"):
        signing.verify(signed, None, topic_id="t")


def test_a_signature_that_is_not_ascii_is_refused_not_raised() -> None:
    """The contract admits 64 hex digits only; verify still refuses anything
    else rather than raise TypeError from hmac.compare_digest."""
    signed = signing.sign(control("TenantErased"), b"secret", topic_id="t")
    for odd in ("é" * 64, "\udc80" * 64, ""):
        with pytest.raises(SignatureError, match="bad signature"):
            signing.verify(signed.model_copy(update={"signature": odd}), b"secret", topic_id="t")


def test_ordinary_events_need_no_signature() -> None:
    signing.verify(parse_event(raw(envelope(doc([ent("a")])))), None, topic_id="t")


safe_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20
)
scalars = st.one_of(
    safe_text,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
values = st.one_of(
    scalars,
    st.lists(safe_text, max_size=3),
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=3),
    st.lists(st.booleans(), max_size=3),
)
keys = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,10}\Z")


#: Names the contract accepts (a name of whitespace only is refused: test_event_parsing).
names = safe_text.filter(lambda text: not text.isspace())


@given(props=st.dictionaries(keys, values, max_size=5), name=names)
def test_every_storable_property_survives_the_wire(props: dict[str, Any], name: str) -> None:
    event = make_event(
        "DocumentExtracted",
        "acme",
        {
            "document_id": "d",
            "extraction_model": "m",
            "entities": [{"id": "e", "name": name, "type": "Thing", "properties": props}],
        },
    )
    again = parse_event(event_to_json(event))
    assert again.payload.entities[0].properties == props  # type: ignore[union-attr]


def test_the_exported_schemas_accept_the_quickstart_events(tmp_path: Path) -> None:
    paths = export_schemas(tmp_path)
    assert {p.name.split(".")[0] for p in paths} == set(EVENT_TYPES)
    schemas = {p.name.split(".")[0]: json.loads(p.read_text()) for p in paths}
    lines = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line]
    assert lines
    for data in lines:
        jsonschema.validate(data, schemas[data["event_type"]])
    bad = dict(lines[0], tenant_id=123)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schemas[bad["event_type"]])
