"""``parse_event`` lets pydantic parse the JSON (``validate_json``) and falls
back to the reference path (the JSON grammar, ``json.loads`` refusing repeated
members, then ``parse_event_dict``) whenever that fails or a member may
repeat. These tests hold the two together: on any value, the same event (the
same types: 1 is not 1.0, -0.0 is not 0.0) or the same error, with the same
message. What the contract refuses is pinned in tests/unit/test_events.py and
the hostile corpus (tests/data/hostile)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contracts import events
from contracts.errors import InvalidEventError, SchemaVersionTooNewError
from contracts.events import (
    EVENT_TYPES,
    MAX_EVENT_BYTES,
    Event,
    parse_event,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "quickstart.jsonl"


def reference_parse(value: bytes | str) -> Event:
    """``parse_event`` without its fast path: the size and NUL checks, then
    the reference path for every value."""
    raw = value.encode("utf-8") if isinstance(value, str) else value
    if len(raw) > MAX_EVENT_BYTES:
        raise InvalidEventError(f"value is {len(raw)} bytes; the limit is {MAX_EVENT_BYTES}")
    if b"\x00" in raw or b"\\u0000" in raw:
        raise InvalidEventError("value contains a NUL byte")
    return events._parse_event_reference(raw)


def outcome(parse: Any, raw: bytes) -> tuple[object, ...]:
    """What ``parse`` makes of ``raw``, comparable down to the types of numbers."""
    try:
        event = parse(raw)
    except Exception as exc:  # any error is an outcome to compare
        return ("error", type(exc), str(exc))
    return (
        "event",
        type(event),
        repr(event.model_dump()),
        repr(event.model_dump(exclude_unset=True)),
    )


def assert_same(raw: bytes) -> tuple[object, ...]:
    expected = outcome(reference_parse, raw)
    assert outcome(parse_event, raw) == expected
    return expected


# -- raw JSON text, written by hand so numbers, escapes and duplicates are ours --

#: 2**1024 - 2**970 is the first integer float() rounds to infinity (and refuses).
FLOAT_OVERFLOW = str(2**1024 - 2**970)
NUMBER_TEXTS = [
    "0", "-0", "-0.0", "0e0", "1", "1.0", "1e2", "1E+2", "0.5", "-1.5", "1e23",
    "12345678901234567890123", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "-9223372036854775809", "1e400", "-1e400", "1e-400",
    "NaN", "Infinity", "-Infinity", "1.7976931348623157e308",
    "1.7976931348623159e308", "2.2250738585072011e-308", "4.9e-324",
    "0.1000000000000000055511151231257827021181583404541015625000001",
    FLOAT_OVERFLOW, "-" + FLOAT_OVERFLOW, str(2**1024 - 2**970 - 1), "1" + "0" * 400,
    "01", "+1", "1.", ".5", "-", "1e", "0x10", "nan", "inf",
]  # fmt: skip
STRING_TEXTS = [
    '"x"', '"\\ud800"', '"a\\udc00"', '"\\ud83d\\ude00"', '"\\u00e9"', '"\\u001f"', '"\\u007f"',
    '"a\\tb"', '"a\tb"', '"\\/"', '"\\x41"', '"\\u12"', '"\u00e9"', '"\U0001f600"', '""', '" "',
    '"x\\nb"', '"\\"q\\""', '"\\\\"',
]  # fmt: skip


def often(draw: st.DrawFn, usual: st.SearchStrategy[str], odd: st.SearchStrategy[str]) -> str:
    """Mostly ``usual``: one odd value at a time keeps most events close enough
    to valid that the fast path is exercised, not only the refusals."""
    return draw(odd if draw(st.integers(0, 7)) == 7 else usual)


@st.composite
def decimals(draw: st.DrawFn) -> str:
    """JSON numbers as a producer might write them, up to 25 significant digits."""
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(st.from_regex(r"\A(0|[1-9][0-9]{0,25})\Z"))
    fraction = draw(st.sampled_from(["", "."])) and "." + draw(st.from_regex(r"\A[0-9]{1,25}\Z"))
    exponent = draw(st.sampled_from(["", "", "e", "E-", "e+"]))
    if exponent:
        exponent += str(draw(st.integers(0, 330)))
    return f"{sign}{whole}{fraction}{exponent}"


@st.composite
def numbers(draw: st.DrawFn) -> str:
    return often(draw, decimals(), st.sampled_from(NUMBER_TEXTS))


@st.composite
def strings(draw: st.DrawFn, usual: st.SearchStrategy[str] | None = None) -> str:
    text = st.text(max_size=8)  # any code point, lone surrogates included
    odd = st.one_of(
        st.sampled_from(STRING_TEXTS),
        st.builds(json.dumps, text),
        st.builds(lambda t: json.dumps(t, ensure_ascii=False), text),
    )
    plain = st.text(st.characters(codec="utf-8", exclude_categories=["Cc"]), min_size=1, max_size=8)
    return often(draw, st.builds(json.dumps, plain) if usual is None else usual, odd)


def obj(draw: st.DrawFn, pairs: list[tuple[str, str]]) -> str:
    """A JSON object; now and then a member repeats (the last one wins) or an
    extra one appears."""
    pairs = list(pairs)
    if pairs and draw(st.integers(0, 19)) == 19:
        key, _ = draw(st.sampled_from(pairs))
        pairs.insert(draw(st.integers(0, len(pairs))), (key, draw(values())))
    if draw(st.integers(0, 39)) == 39:
        pairs.append(("surprise", "1"))
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs) + "}"


def arr(items: list[str]) -> str:
    return "[" + ",".join(items) + "]"


def values() -> st.SearchStrategy[str]:
    """Any JSON value (or near-JSON text)."""
    leaves = st.one_of(numbers(), strings(), st.sampled_from(["true", "false", "null"]))
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3).map(arr)
            | st.dictionaries(st.sampled_from(["k", "n", "bad key"]), inner, max_size=2).map(
                lambda d: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in d.items()) + "}"
            )
        ),
        max_leaves=4,
    )


@st.composite
def property_values(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["number", "string", "bool", "list"]))
    if kind == "number":
        return draw(numbers())
    if kind == "string":
        return draw(strings())
    if kind == "bool":
        return draw(st.sampled_from(["true", "false"]))
    items = draw(st.sampled_from([numbers(), strings(), st.sampled_from(["true", "false"])]))
    return arr(draw(st.lists(items, max_size=3)))


@st.composite
def property_maps(draw: st.DrawFn) -> str:
    keys = draw(
        st.lists(
            st.sampled_from(["k", "n", "_x9"]) | st.sampled_from(["bad key", "9", "é"]),
            max_size=3,
            unique=True,
        )
    )
    return obj(draw, [(k, often(draw, property_values(), values())) for k in keys])


@st.composite
def entities(draw: st.DrawFn, entity_id: str, dimension: int) -> str:
    pairs = [
        ("id", entity_id),
        ("name", draw(strings())),
        (
            "type",
            often(draw, st.just('"Person"'), st.sampled_from(['"bad type"', "1", '"T\\u0000"'])),
        ),
    ]
    if draw(st.booleans()):
        pairs.append(("properties", draw(property_maps())))
    if draw(st.booleans()):
        embedding = st.lists(numbers(), min_size=dimension, max_size=dimension).map(arr)
        odd = st.sampled_from(["null", "[]", "[1, 2, 3, 4, 5]", '["0.5"]', "[true]", "{}"])
        pairs.append(("embedding", often(draw, embedding, odd)))
    return obj(draw, pairs)


@st.composite
def edges(draw: st.DrawFn, entity_ids: list[str], full: bool) -> str:
    if len(entity_ids) >= 2 and draw(st.integers(0, 7)) < 7:
        source, target = draw(st.permutations(entity_ids))[:2]
    else:
        source, target = (
            draw(st.sampled_from(['"a"', '"z"'])),
            draw(st.sampled_from(['"a"', '"z"'])),
        )
    pairs = [
        ("source", source),
        ("target", target),
        ("type", often(draw, st.just('"R"'), st.just('"bad type"'))),
    ]
    if full and draw(st.booleans()):
        pairs.append(
            ("confidence", often(draw, st.sampled_from(["0", "1", "0.5", "1.0"]), numbers()))
        )
    if full and draw(st.booleans()):
        pairs.append(("properties", draw(property_maps())))
    return obj(draw, pairs)


def ids() -> st.SearchStrategy[str]:
    return strings(st.sampled_from(['"a"', '"b"', '"c"', '"doc-1"']))


@st.composite
def payloads(draw: st.DrawFn, event_type: str) -> str:
    if event_type == "DocumentExtracted":
        entity_ids = draw(st.lists(ids(), min_size=1, max_size=3, unique=True))
        dimension = draw(st.integers(1, 4))
        pairs = [
            ("document_id", draw(ids())),
            ("extraction_model", draw(strings())),
            ("entities", arr([draw(entities(i, dimension)) for i in entity_ids])),
        ]
        if draw(st.booleans()):
            edge = edges(entity_ids, full=True)
            pairs.append(("relationships", arr(draw(st.lists(edge, max_size=3)))))
        return obj(draw, pairs)
    if event_type in ("EntitiesMerged", "EntitiesUnmerged"):
        listed = "absorbed_ids" if event_type == "EntitiesMerged" else "restored_ids"
        ends = ['"a"', '"b"', '"c"']
        pairs = [
            ("canonical_id", draw(ids())),
            (listed, arr(draw(st.lists(ids(), min_size=1, max_size=3, unique=True)))),
            ("edges_to_remove", arr(draw(st.lists(edges(ends, full=False), max_size=2)))),
        ]
        added = "edges_to_add" if event_type == "EntitiesMerged" else "edges_to_restore"
        pairs.append((added, arr(draw(st.lists(edges(ends, full=True), max_size=2)))))
        if event_type == "EntitiesMerged":
            pairs.append(("reason", draw(strings())))
        return obj(draw, pairs)
    if event_type in ("TenantReplayRequested", "TenantErased"):
        return obj(draw, [("requested_by", draw(strings())), ("reason", draw(strings()))])
    return draw(values())


@st.composite
def event_texts(draw: st.DrawFn) -> bytes:
    event_type = often(draw, st.sampled_from(EVENT_TYPES), st.just("Nope"))
    uuid = '"00000000-0000-0000-0000-000000000001"'
    odd_uuids = [
        '"00000000000000000000000000000001"',
        '"urn:uuid:00000000-0000-0000-0000-000000000001"',
        '"not-a-uuid"',
    ]
    when = '"2026-11-01T09:00:00Z"'
    odd_whens = [
        '"2026-11-01T09:00:00+02:00"',
        '"2026-11-01T09:00:00"',
        "1700000000",
        "1700000000.5",
        '"1700000000"',
    ]
    pairs = [
        ("event_id", often(draw, st.just(uuid), st.sampled_from(odd_uuids))),
        ("event_type", json.dumps(event_type)),
        (
            "schema_version",
            often(draw, st.just("1"), st.sampled_from(["1.0", "2", '"1"', "true"]) | numbers()),
        ),
        ("tenant_id", often(draw, st.just('"acme"'), st.sampled_from(['"Acme"', "7"]))),
        ("occurred_at", often(draw, st.just(when), st.sampled_from(odd_whens))),
        ("producer", draw(strings())),
        ("payload", draw(payloads(event_type))),
    ]
    if draw(st.booleans()):
        pairs.append(("signature", draw(st.sampled_from(["null", '"00ff"', "1"]))))
    text = obj(draw, draw(st.permutations(pairs)))
    text = often(draw, st.sampled_from(["", " \n"]), st.sampled_from(["\ufeff", "[", "x"])) + text
    text += often(draw, st.sampled_from(["", " \r\n"]), st.sampled_from(["x", ",", "]"]))
    return text.encode("utf-8", "surrogatepass")


ENTITY = '{"id": "a", "name": "A", "type": "T", "embedding": %s}'


def document(entity: str = ENTITY % "[0.5]", **envelope: str) -> bytes:
    fields = {
        "event_id": '"00000000-0000-0000-0000-000000000001"',
        "event_type": '"DocumentExtracted"',
        "schema_version": "1",
        "tenant_id": '"acme"',
        "occurred_at": '"2026-11-01T09:00:00Z"',
        "producer": '"test"',
        "payload": f'{{"document_id": "d", "extraction_model": "m", "entities": [{entity}]}}',
    }
    fields.update(envelope)
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}").encode()


@given(raw=event_texts())
@example(raw=document(ENTITY % f"[{FLOAT_OVERFLOW}]"))
@example(raw=document(ENTITY % "[1e308, 1e308]"))
def test_parse_event_agrees_with_the_reference_path(raw: bytes) -> None:
    assert_same(raw)


@pytest.mark.parametrize(
    "raw",
    [
        # An integer beyond float64 becomes an infinity in JSON mode, and is
        # too long for the reference path: refused by both.
        document(ENTITY % f"[{FLOAT_OVERFLOW}]"),
        document(ENTITY % f"[0.5, -{FLOAT_OVERFLOW}]"),
        document(ENTITY % ("[1" + "0" * 400 + "]")),
        # Non-finite or beyond float32: refused by both.
        document(ENTITY % "[NaN]"),
        document(ENTITY % "[Infinity, -Infinity]"),
        document(ENTITY % "[1e400]"),
        document(ENTITY % "[1e39, -3.4028234663852886e38]"),
        document(ENTITY % "[3.4028234663852886e38, -3.4028234663852886e38, 1e-50]"),
        # Numbers keep their kinds and values.
        document(ENTITY % "[-0, -0.0, 1, 1e23, 12345678901234567890123, 4.9e-324, 1e-400]"),
        document('{"id": "a", "name": "A", "type": "T", "properties": {}}'),
        document(
            '{"id": "a", "name": "A", "type": "T", "properties": '
            '{"i": 9223372036854775807, "j": -9223372036854775808, "f": 1.0, "g": 1e2, '
            '"z": -0, "b": true, "l": [1, 2], "m": [1.5, 2.5], "s": ["x"], "e": []}}'
        ),
        document('{"id": "a", "name": "A", "type": "T", "properties": {"i": 9223372036854775808}}'),
        document('{"id": "a", "name": "A", "type": "T", "properties": {"l": [1, 2.0]}}'),
        document('{"id": "a", "name": "A", "type": "T", "properties": {"x": NaN}}'),
        # Duplicate members: refused by both, at any depth; a string holding
        # a quote and a colon only costs the reference path.
        document('{"id": "a", "name": "A", "type": "T", "properties": {"a": 1, "b": 2, "a": 3}}'),
        document(tenant_id='"acme", "tenant_id": "other"'),
        document(event_type='"EntitiesMerged", "event_type": "DocumentExtracted"'),
        document(ENTITY.replace('"A"', '"A\\":"') % "[0.5]"),
        document(ENTITY.replace('"A"', '"A\\u00e9"') % "[0.5]"),
        document(ENTITY.replace('"A"', '"A\\u00e9", "name": "B"') % "[0.5]"),
        document(ENTITY.replace('"A"', '"A" , "name" :"B"') % "[0.5]"),
        document(ENTITY.replace('"A"', '"A" , "properties": {"x\\"": 1, "x\\u0022": 2}') % "[0.5]"),
        # A newer schema_version pauses the partition only when the envelope
        # is otherwise well formed.
        document(schema_version="2"),
        document(schema_version='1, "schema_version": 2'),
        document(schema_version="2", event_type='"Nope"'),
        document(schema_version="2", payload="[]"),
        document(schema_version=FLOAT_OVERFLOW),
        document(schema_version="2.0"),
        document(schema_version='"2"'),
        document(schema_version="true"),
        document(schema_version="1.0"),
        # Text: escapes, surrogates, control characters, encodings.
        document(ENTITY.replace('"A"', '"\\ud800"') % "[0.5]"),
        document(ENTITY.replace('"A"', '"\\ud83d\\ude00"') % "[0.5]"),
        document(ENTITY.replace('"A"', '"a\tb"') % "[0.5]"),
        document(ENTITY.replace('"A"', '"a\\u001fb"') % "[0.5]"),
        document(ENTITY.replace('"a"', '"a\\u007f"') % "[0.5]"),
        document(ENTITY.replace('"a"', '"a\\udfff"') % "[0.5]"),
        document(ENTITY % "[0.5]").replace(b'"A"', b'"A\xff"'),
        document(ENTITY % "[0.5]").replace(b'"A"', b'"\xed\xa0\x80"'),
        document(ENTITY % "[0.5]").replace(b'"A"', b'"\xc0\xaf"'),
        b"\xef\xbb\xbf" + document(),
        document() + b" x",
        document() + b" \r\n",
        b"[1, 2]",
        b"{not json",
        b"",
        b"null",
        b'"text"',
        b'{"event_type": "DocumentExtracted", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        document(occurred_at="1700000000"),
        document(occurred_at='"2026-11-01T09:00:00"'),
        document(event_id='"urn:uuid:00000000-0000-0000-0000-000000000001"'),
        document(event_id='"00000000000000000000000000000001"'),
    ],
)
def test_tricky_values_parse_as_they_did(raw: bytes) -> None:
    assert_same(raw)


def test_an_integer_beyond_float_range_in_an_embedding_is_refused() -> None:
    kind, error, message = assert_same(document(ENTITY % f"[{FLOAT_OVERFLOW}]"))
    assert (kind, error) == ("error", InvalidEventError)
    assert "out of range" in str(message)


def test_a_newer_schema_version_pauses_only_a_well_formed_envelope() -> None:
    with pytest.raises(SchemaVersionTooNewError) as caught:
        parse_event(document(schema_version="2", event_type='"SomethingNew"'))
    assert caught.value.tenant_id == "acme"
    for raw in (
        document(schema_version="2", payload="[]"),
        document(schema_version="2", event_type='"no such type"'),
        document(schema_version="2", tenant_id='"Acme"'),
        document(schema_version="2", occurred_at="1700000000"),
        b'{"schema_version": 99}',
    ):
        with pytest.raises(InvalidEventError, match="no reason to pause"):
            parse_event(raw)


@pytest.mark.parametrize(
    "raw",
    [
        document(tenant_id='"acme", "tenant_id": "other"'),
        document(ENTITY.replace('"A"', '"A", "name": "B"') % "[0.5]"),
        document('{"id": "a", "name": "A", "type": "T", "properties": {"a": 1, "a": 1}}'),
        document(ENTITY.replace('"A"', '"A\\u00e9", "name": "B"') % "[0.5]"),
        document(ENTITY.replace('"A"', '"A" ,\n "name" :"B"') % "[0.5]"),
        document(
            ENTITY.replace('"name"', '"n\\u0061me"').replace('"A"', '"A", "name": "B"') % "[1]"
        ),
    ],
)
def test_a_repeated_member_is_refused_at_any_depth(raw: bytes) -> None:
    with pytest.raises(InvalidEventError, match="duplicate key"):
        parse_event(raw)


def test_valid_events_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference path is only for refusals and the rare doubtful value: an
    ordinary event, embeddings included, never reaches it (it costs twice)."""

    def refuse(raw: bytes) -> Event:
        raise AssertionError(f"took the reference path for {raw[:80]!r}")

    monkeypatch.setattr(events, "_parse_event_reference", refuse)
    lines = [line.encode() for line in EXAMPLES.read_text().splitlines() if line]
    embedding = json.dumps([(i - 192) / 97 for i in range(384)])
    compact = json.dumps(json.loads(document(ENTITY % embedding)), separators=(",", ":"))
    pretty = json.dumps(json.loads(document(ENTITY % embedding)), indent=2)
    escaped = document(ENTITY.replace('"A"', '"A\\u00e9 \\"x\\""') % embedding)
    for raw in [
        *lines,
        document(ENTITY % embedding),
        document(ENTITY % "[1, -0, 1e-400]"),
        compact.encode(),
        pretty.encode(),
        escaped,
    ]:
        parse_event(raw)
        parse_event(raw.decode())
    with pytest.raises(AssertionError, match="reference path"):
        parse_event(document(ENTITY % "[NaN]"))
