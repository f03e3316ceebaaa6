"""Writes cases.jsonl: the hostile corpus (see __init__.py).

Every expected outcome here is written by hand from docs/events.md, never
taken from a run: tests/unit/test_hostile_corpus.py checks the code against
it. Run ``python -m tests.data.hostile.build`` and review the diff.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import struct
from typing import Any

from contracts import signing
from contracts.events import event_to_dict, parse_event_dict
from contracts.signing import ControlKeys
from streams.kafka.partitioning import partition_for
from tests.data.hostile import (
    CONTROL_KEY,
    CONTROL_KEYS,
    CORPUS,
    PARTITIONS,
    RETIRED_KEY_ID,
    TOPIC_ID,
    HostileCase,
    to_row,
)

T = "acme"
#: A field or member to leave out.
DROP: Any = object()
EID = "00000000-0000-4000-8000-000000000001"
WHEN = "2026-11-01T09:00:00Z"
FLOAT32_MAX = "3.4028234663852886e38"

cases: list[HostileCase] = []
_cls = ""


def section(name: str) -> None:
    global _cls
    _cls = name


def key_of(key: bytes | str | None) -> bytes | None:
    return key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key


def dead(
    name: str,
    value: bytes | str | None,
    reason: str,
    *,
    key: bytes | str | None = T,
    stage: str = "decode",
    partition: int | None = None,
    logged_at: str | None = None,
) -> None:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    cases.append(
        HostileCase(
            name,
            _cls,
            key_of(key),
            raw,
            "dead_letter",
            reason,
            stage,
            partition=partition,
            logged_at=logged_at,
        )
    )


def applied(
    name: str,
    value: bytes | str,
    entities: list[str],
    *,
    key: bytes | str = T,
    tenant: str = T,
    partition: int | None = None,
    logged_at: str | None = None,
) -> None:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    cases.append(
        HostileCase(
            name,
            _cls,
            key_of(key),
            raw,
            "applied",
            tenant=tenant,
            entities=tuple(entities),
            partition=partition,
            logged_at=logged_at,
        )
    )


def pause(
    name: str, value: bytes | str, *, key: bytes | str = T, partition: int | None = None
) -> None:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    cases.append(HostileCase(name, _cls, key_of(key), raw, "pause", partition=partition))


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


def entity(i: str = "a", **extra: Any) -> dict[str, Any]:
    return {"id": i, "name": i.upper(), "type": "Thing", **extra}


def doc(
    entities: list[dict[str, Any]] | None = None,
    relationships: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "document_id": "doc-1",
        "extraction_model": "m",
        "entities": [entity("a"), entity("b")] if entities is None else entities,
    }
    if relationships is not None:
        payload["relationships"] = relationships
    payload.update(extra)
    return payload


def envelope(
    payload: Any = None, event_type: Any = "DocumentExtracted", **fields: Any
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "event_id": EID,
        "event_type": event_type,
        "schema_version": 1,
        "tenant_id": T,
        "occurred_at": WHEN,
        "producer": "hostile",
        "payload": doc() if payload is None else payload,
    }
    if payload is DROP:
        del data["payload"]
    for name, value in fields.items():
        if value is DROP:
            data.pop(name, None)
        else:
            data[name] = value
    return data


def ev(payload: Any = None, event_type: Any = "DocumentExtracted", **fields: Any) -> str:
    return dumps(envelope(payload, event_type, **fields))


def with_entity(**fields: Any) -> str:
    """A document of one entity ``a`` with ``fields`` replacing or adding its own."""
    e = entity("a")
    for name, value in fields.items():
        if value is DROP:
            e.pop(name)
        else:
            e[name] = value
    return ev(doc([e]))


def raw_entity(member_text: str) -> str:
    """A document of one entity ``a`` whose members end with ``member_text``
    (raw JSON text: numbers, literals and repeated members as written)."""
    text = ev(doc([entity("a")]))
    return text.replace('"type": "Thing"}', '"type": "Thing", ' + member_text + "}", 1)


def signed(
    event_type: str,
    tenant: str = T,
    *,
    topic_id: str = TOPIC_ID,
    keys: ControlKeys = CONTROL_KEYS,
    key_id: str | None = None,
    **payload: Any,
) -> dict[str, Any]:
    """A control event signed as ``redstring erase`` signs it: by default with
    the signing key (``default``) for :data:`TOPIC_ID`."""
    event = parse_event_dict(
        envelope({"requested_by": "ops", **payload}, event_type, tenant_id=tenant)
    )
    return event_to_dict(signing.sign(event, keys, topic_id=topic_id, key_id=key_id))


def legacy_signed(event_type: str) -> dict[str, Any]:
    """A control event signed as before key ids and topic binding: an HMAC of
    the canonical envelope alone, no ``key_id``."""
    data = envelope({"requested_by": "ops"}, event_type)
    body = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {**data, "signature": hmac.new(CONTROL_KEY, body.encode(), hashlib.sha256).hexdigest()}


def right_partition(key: str = T) -> int:
    return partition_for(key, PARTITIONS)


def wrong_partition(key: str = T) -> int:
    return (partition_for(key, PARTITIONS) + 1) % PARTITIONS


def merge(**payload: Any) -> str:
    return ev({"canonical_id": "a", "absorbed_ids": ["b"], **payload}, "EntitiesMerged")


def unmerge(**payload: Any) -> str:
    return ev({"canonical_id": "a", "restored_ids": ["b"], **payload}, "EntitiesUnmerged")


def rel(source: str = "a", target: str = "b", **extra: Any) -> dict[str, Any]:
    return {"source": source, "target": target, "type": "KNOWS", **extra}


GOOD = ev()


def build() -> None:
    section("bytes")
    dead("empty value", b"", "not JSON")
    dead("tombstone (no value)", None, "tombstone")
    dead("whitespace only", b" \n\t ", "not JSON")
    dead("not UTF-8 (0xff)", b'{"event_id": "\xff"}', "not UTF-8")
    dead("overlong UTF-8 encoding", GOOD.replace('"A"', '"\xc0\xaf"').encode("latin-1"), "UTF-8")
    dead("encoded surrogate (CESU)", GOOD.encode().replace(b'"A"', b'"\xed\xa0\x80"'), "UTF-8")
    dead("random binary", bytes(range(256)) * 4, "NUL")
    dead("binary without NUL", bytes(range(1, 256)) * 4, "not UTF-8")
    dead("UTF-8 BOM before the envelope", b"\xef\xbb\xbf" + GOOD.encode(), "not JSON")
    dead("UTF-16 encoded envelope", GOOD.encode("utf-16"), "NUL")
    dead("raw NUL byte", GOOD.replace('"A"', '"A\x00"'), "NUL")
    dead("escaped NUL", GOOD.replace('"A"', '"A\\u0000"'), "NUL")
    dead("truncated envelope", GOOD[:-7], "not JSON")
    dead("trailing garbage", GOOD + " x", "not JSON")
    dead("two envelopes in one value", GOOD + GOOD, "not JSON")
    dead("one byte over the size limit", '{"pad": "' + "x" * 1_000_000 + '"}', "the limit is")
    dead("gzip magic", b"\x1f\x8b\x08\x00" + b"x" * 40, "NUL")
    dead("UTF-16 without NUL bytes", "\uaaaa\ubbbb".encode("utf-16-le"), "not UTF-8")

    section("json-structure")
    for shape, text in [
        ("array", "[1, 2]"),
        ("string", '"text"'),
        ("number", "42"),
        ("null", "null"),
        ("true", "true"),
    ]:
        dead(f"top level {shape}", text, "not a JSON object")
    dead("nested 1,000 levels (2 KB)", "[" * 1000 + "]" * 1000, "recursion limit")
    dead("nested 100,000 levels", "[" * 100_000, "recursion limit")
    dead(
        "deep nesting inside a property",
        raw_entity('"properties": {"x": ' + "[" * 1000 + "]" * 1000 + "}"),
        "recursion limit",
    )
    dead(
        "deep objects inside the payload",
        ev(doc()).replace(
            '"extraction_model"',
            '"deep": ' + '{"a":' * 500 + "1" + "}" * 500 + ', "extraction_model"',
        ),
        "recursion limit",
    )
    dead(
        "integer of 5,000 digits as schema_version",
        ev().replace('"schema_version": 1', '"schema_version": ' + "9" * 5000),
        "out of range",
    )
    dead(
        "integer of 4,301 digits in a property",
        raw_entity('"properties": {"n": ' + "1" * 4301 + "}"),
        "out of range",
    )
    dead(
        "integer of 400 digits in an embedding",
        raw_entity('"embedding": [' + "1" * 400 + "]"),
        "out of range",
    )
    dead(
        "float literal of 5,000 digits",
        raw_entity('"embedding": [0.' + "1" * 5000 + "]"),
        "dimension",
        stage="fold",
    )
    dead("NaN literal in a property", raw_entity('"properties": {"x": NaN}'), "not JSON")
    dead(
        "Infinity literal as confidence",
        ev(doc(relationships=[rel()])).replace(
            '"type": "KNOWS"', '"type": "KNOWS", "confidence": Infinity'
        ),
        "not JSON",
    )
    dead("escaped lone high surrogate", GOOD.replace('"A"', '"\\ud800"'), "not JSON")
    dead("escaped lone low surrogate", GOOD.replace('"A"', '"x\\udc00"'), "not JSON")
    dead("raw tab inside a string", GOOD.replace('"A"', '"a\tb"'), "not JSON")
    dead("raw newline inside a string", GOOD.replace('"A"', '"a\nb"'), "not JSON")
    dead("single-quoted strings", GOOD.replace('"A"', "'A'"), "not JSON")
    dead("trailing comma", GOOD.replace('"Thing"}', '"Thing",}', 1), "not JSON")
    dead("comment", "// hi\n" + GOOD, "not JSON")
    dead("hex number", GOOD.replace('"schema_version": 1', '"schema_version": 0x1'), "not JSON")
    dead("leading plus", GOOD.replace('"schema_version": 1', '"schema_version": +1'), "not JSON")
    dead("leading zero", GOOD.replace('"schema_version": 1', '"schema_version": 01'), "not JSON")

    section("duplicate-keys")
    dead(
        "tenant_id twice (last would win)",
        GOOD.replace('"tenant_id": "acme"', '"tenant_id": "acme", "tenant_id": "victim"'),
        "duplicate key 'tenant_id'",
    )
    dead(
        "event_type twice",
        GOOD.replace(
            '"event_type": "DocumentExtracted"',
            '"event_type": "EntitiesMerged", "event_type": "DocumentExtracted"',
        ),
        "duplicate key 'event_type'",
    )
    dead(
        "schema_version 1 then 99",
        GOOD.replace('"schema_version": 1', '"schema_version": 1, "schema_version": 99'),
        "duplicate key 'schema_version'",
    )
    dead(
        "payload twice",
        GOOD.replace('"producer": "hostile"', '"producer": "hostile", "payload": {}'),
        "duplicate key 'payload'",
    )
    dead(
        "document_id twice",
        GOOD.replace('"document_id": "doc-1"', '"document_id": "doc-1", "document_id": "doc-2"'),
        "duplicate key 'document_id'",
    )
    dead("entity name twice", raw_entity('"name": "B"'), "duplicate key 'name'")
    dead("entity id twice, escaped", raw_entity('"\\u0069d": "z"'), "duplicate key 'id'")
    dead("property key twice", raw_entity('"properties": {"k": 1, "k": 2}'), "duplicate key 'k'")
    dead(
        "relationship member twice",
        ev(doc(relationships=[rel()])).replace('"type": "KNOWS"', '"type": "KNOWS", "target": "a"'),
        "duplicate key 'target'",
    )
    dead(
        "members twice, pretty-printed",
        json.dumps(envelope(), indent=2).replace(
            '"producer": "hostile"', '"producer": "hostile",\n  "producer" : "other"'
        ),
        "duplicate key 'producer'",
    )
    erase_text = dumps(signed("TenantErased"))
    dead(
        "signed erase naming two tenants",
        erase_text.replace('"tenant_id": "acme"', '"tenant_id": "acme", "tenant_id": "victim"'),
        "duplicate key 'tenant_id'",
    )
    dead(
        "signed erase, tenant given twice the same",
        erase_text.replace('"tenant_id": "acme"', '"tenant_id": "acme", "tenant_id": "acme"'),
        "duplicate key 'tenant_id'",
    )
    applied(
        "a name holding a quote and a colon (not a repeat)",
        with_entity(name='He said ": hi'),
        ["a"],
    )
    applied("keys spaced before the colon", GOOD.replace('": ', '" : '), ["a", "b"])
    applied(
        "escapes in every name",
        json.dumps(envelope(doc([entity("é1"), entity("ü2")]))),
        ["é1", "ü2"],
    )

    section("envelope-types")
    for name, value, reason in [
        ("schema_version as a string", "1", "schema_version: Input should be a valid integer"),
        ("schema_version true", True, "schema_version: Input should be a valid integer"),
        ("schema_version 1.0", 1.0, "schema_version: Input should be a valid integer"),
        ("schema_version 0", 0, "schema_version: Input should be greater than or equal to 1"),
        ("schema_version -1", -1, "schema_version: Input should be greater than or equal to 1"),
        ("schema_version null", None, "schema_version: Input should be a valid integer"),
        ("schema_version 2.0", 2.0, "schema_version: Input should be a valid integer"),
        ('schema_version as "2"', "2", "schema_version: Input should be a valid integer"),
        ("schema_version missing", DROP, "schema_version: Field required"),
        ("event_id a number", 1, "event_id must be a UUID string"),
        ("event_id not a UUID", "not-a-uuid", "event_id must be a UUID string"),
        ("event_id as a URN", f"urn:uuid:{EID}", "event_id must be a UUID string"),
        ("event_id without hyphens", EID.replace("-", ""), "event_id must be a UUID string"),
        ("event_id in braces", "{" + EID + "}", "event_id must be a UUID string"),
        ("event_id missing", DROP, "event_id: Field required"),
        ("occurred_at an epoch number", 1_700_000_000, "occurred_at must be an RFC 3339"),
        ("occurred_at an epoch float", 1_700_000_000.5, "occurred_at must be an RFC 3339"),
        ("occurred_at an epoch string", "1700000000", "occurred_at must be an RFC 3339"),
        ("occurred_at without an offset", "2026-11-01T09:00:00", "occurred_at must be an RFC 3339"),
        ("occurred_at a date only", "2026-11-01", "occurred_at must be an RFC 3339"),
        ("occurred_at with a space", "2026-11-01 09:00:00Z", "occurred_at must be an RFC 3339"),
        ("occurred_at February 30", "2026-02-30T09:00:00Z", "occurred_at"),
        ("occurred_at hour 24", "2026-11-01T24:00:00Z", "occurred_at"),
        ("occurred_at beyond UTC's range", "9999-12-31T23:59:59-01:00", "out of range in UTC"),
        ("occurred_at null", None, "occurred_at must be an RFC 3339"),
        ("producer empty", "", "producer: String should have at least 1 character"),
        ("producer a number", 7, "producer: Input should be a valid string"),
        ("producer 257 characters", "p" * 257, "producer: String should have at most 256"),
        ("producer missing", DROP, "producer: Field required"),
        ("tenant_id uppercase", "Acme", "invalid tenant id"),
        ("tenant_id empty", "", "invalid tenant id"),
        ("tenant_id 64 characters", "a" * 64, "invalid tenant id"),
        ("tenant_id a number", 7, "tenant_id: Input should be a valid string"),
        ("tenant_id with a zero-width space", "acme\u200b", "invalid tenant id"),
        ("tenant_id with a trailing space", "acme ", "invalid tenant id"),
        ("tenant_id Cyrillic a", "\u0430cme", "invalid tenant id"),
        ("signature not hex", "zz" * 32, "signature: String should match pattern"),
        ("signature uppercase hex", "AB" * 32, "signature: String should match pattern"),
        ("signature a number", 1, "signature: Input should be a valid string"),
        ("unknown field", "x", "Extra inputs are not permitted"),
    ]:
        field = name.split(" ")[0]
        if field == "unknown":
            field = "surprise"
        dead(name, ev(**{field: value}), reason)
    dead("event_type unknown", ev(event_type="Nope"), "unknown event_type")
    dead("event_type a list", ev(event_type=["DocumentExtracted"]), "unknown event_type")
    dead("event_type an object", ev(event_type={"a": 1}), "unknown event_type")
    dead("event_type null", ev(event_type=None), "unknown event_type")
    dead("event_type lowercase", ev(event_type="documentextracted"), "unknown event_type")
    dead("event_type 1 MB", ev(event_type="X" * 900_000), "unknown event_type")
    dead("payload missing", ev(payload=DROP), "payload: Field required")
    dead("payload an array", ev(payload=[]), "payload: Input should be a valid dictionary")
    dead("payload a string", ev(payload="{}"), "payload: Input should be a valid dictionary")
    dead(
        "payload of another event type",
        ev(merge_payload := {"canonical_id": "a", "absorbed_ids": ["b"]}),
        "payload.document_id: Field required",
    )
    del merge_payload

    section("key")
    dead("key of another tenant", GOOD, "does not match tenant_id", key="other")
    dead("no key", GOOD, "does not match tenant_id", key=None)
    dead("empty key", GOOD, "does not match tenant_id", key=b"")
    dead("key not UTF-8", GOOD, "does not match tenant_id", key=b"\xff\xfe")
    dead("key uppercase", GOOD, "does not match tenant_id", key="ACME")
    dead("key with a trailing space", GOOD, "does not match tenant_id", key="acme ")
    dead("key with a trailing NUL", GOOD, "does not match tenant_id", key=b"acme\x00")
    dead("key with a zero-width space", GOOD, "does not match tenant_id", key="acme\u200b")
    dead("key of 100 KB", GOOD, "does not match tenant_id", key=b"k" * 100_000)
    dead(
        "tenant_id invalid, key matching it", ev(tenant_id="Acme"), "invalid tenant id", key="Acme"
    )
    applied(
        "key of another tenant, matching its envelope",
        ev(tenant_id="other"),
        ["a", "b"],
        key="other",
        tenant="other",
    )

    section("schema-version")
    pause("schema_version 2, well formed", ev(schema_version=2))
    pause(
        "schema_version 99, unknown type, extra fields",
        ev({"new": [1]}, "SomethingNew", schema_version=99, key_id="k1"),
    )
    pause("schema_version 2**31-1", ev(schema_version=2**31 - 1))
    pause("schema_version 2, payload not this version's", ev({"anything": "new"}, schema_version=2))
    dead("the 20-byte value", b'{"schema_version":99}', "no reason to pause", key="acme")
    dead("the 20-byte value, no key", b'{"schema_version":99}', "no reason to pause", key=None)
    dead(
        "schema_version 2, key of another tenant",
        ev(schema_version=2),
        "does not match tenant_id",
        key="other",
    )
    dead("schema_version 2, no key", ev(schema_version=2), "does not match tenant_id", key=None)
    dead(
        "schema_version 2, key not UTF-8",
        ev(schema_version=2),
        "does not match tenant_id",
        key=b"\xff",
    )
    dead("schema_version 2, payload an array", ev([], schema_version=2), "no reason to pause")
    dead(
        "schema_version 2, payload missing",
        ev(schema_version=2, payload=DROP),
        "no reason to pause",
    )
    dead(
        "schema_version 2, event_id missing",
        ev(schema_version=2, event_id=DROP),
        "no reason to pause",
    )
    dead(
        "schema_version 2, event_id not a UUID",
        ev(schema_version=2, event_id="x"),
        "no reason to pause",
    )
    dead(
        "schema_version 2, tenant invalid",
        ev(schema_version=2, tenant_id="Acme"),
        "no reason to pause",
        key="Acme",
    )
    dead(
        "schema_version 2, occurred_at epoch",
        ev(schema_version=2, occurred_at=1),
        "no reason to pause",
    )
    dead(
        "schema_version 2, producer empty", ev(schema_version=2, producer=""), "no reason to pause"
    )
    dead(
        "schema_version 2, event_type a number",
        ev(schema_version=2, event_type=5),
        "no reason to pause",
    )
    dead(
        "schema_version 2, event_type with spaces",
        ev(event_type="New Type", schema_version=2),
        "no reason to pause",
    )
    dead("schema_version 2**31", ev(schema_version=2**31), "no reason to pause")
    dead(
        "schema_version 2, repeated member",
        ev(schema_version=2).replace('"producer": "hostile"', '"producer": "a", "producer": "b"'),
        "duplicate key",
    )

    section("ids")
    for label, char in [
        ("zero-width space", "\u200b"),
        ("zero-width joiner", "\u200d"),
        ("zero-width non-joiner", "\u200c"),
        ("left-to-right mark", "\u200e"),
        ("right-to-left override", "\u202e"),
        ("left-to-right isolate", "\u2066"),
        ("word joiner", "\u2060"),
        ("BOM inside", "\ufeff"),
        ("soft hyphen", "\u00ad"),
        ("Arabic letter mark", "\u061c"),
        ("Mongolian vowel separator", "\u180e"),
        ("tag character", "\U000e0041"),
        ("variation selector", "\ufe0f"),
        ("Hangul filler", "\u3164"),
        ("combining grapheme joiner", "\u034f"),
        ("C1 control NEL", "\x85"),
        ("line separator", "\u2028"),
        ("paragraph separator", "\u2029"),
        ("escape control", "\x1b"),
        ("DEL", "\x7f"),
    ]:
        reason = "control character" if char in "\x1b\x7f" else "invisible or format character"
        dead(f"entity id with a {label}", with_entity(id="acme" + char), reason)
    dead("entity id with a leading space", with_entity(id=" a"), "whitespace")
    dead("entity id with a trailing no-break space", with_entity(id="a\u00a0"), "whitespace")
    dead("entity id only a space", with_entity(id=" "), "whitespace")
    dead("entity id empty", with_entity(id=""), "at least 1 character")
    dead("entity id 257 characters", with_entity(id="i" * 257), "at most 256")
    dead("entity id a number", with_entity(id=7), "Input should be a valid string")
    dead(
        "document id with a zero-width space",
        ev(doc(document_id="doc\u200b")),
        "document id contains the invisible",
    )
    dead(
        "edge endpoint with a bidi override",
        ev(doc(relationships=[rel("a", "b\u202e")])),
        "edge endpoint contains the invisible",
    )
    dead(
        "canonical id with a zero-width joiner",
        merge(canonical_id="a\u200d"),
        "canonical id contains the invisible",
    )
    dead(
        "absorbed id with a soft hyphen",
        merge(absorbed_ids=["b\u00ad"]),
        "absorbed id contains the invisible",
    )
    dead(
        "restored id with a BOM",
        unmerge(restored_ids=["\ufeffb"]),
        "restored id contains the invisible",
    )
    dead(
        "edge to remove with a tag character",
        merge(edges_to_remove=[rel("a", "c\U000e0001")]),
        "edge endpoint contains the invisible",
    )
    applied(
        "ids with visible Unicode",
        ev(doc([entity("é"), entity("東京"), entity("🙂"), entity("a b"), entity("x\u00a0y")])),
        ["a b", "x\u00a0y", "é", "東京", "🙂"],
    )
    applied("id of 256 characters", with_entity(id="i" * 256), ["i" * 256])
    applied("ids differing only in case", ev(doc([entity("a"), entity("A")])), ["A", "a"])

    section("names")
    for label, name in [
        ("a space", " "),
        ("a no-break space", "\u00a0"),
        ("an ideographic space", "\u3000"),
        ("an escaped tab", "\t"),
        ("a line separator", "\u2028"),
        ("spaces", "   "),
    ]:
        dead(f"name of {label}", with_entity(name=name), "entity name is blank")
    dead("name empty", with_entity(name=""), "at least 1 character")
    dead("name 8,193 characters", with_entity(name="n" * 8193), "at most 8192")
    dead("name a number", with_entity(name=5), "Input should be a valid string")
    dead("name null", with_entity(name=None), "Input should be a valid string")
    dead("name missing", with_entity(name=DROP), "Field required")
    dead(
        "name whose NFKC blows up (U+FDFA x 300)", with_entity(name="\ufdfa" * 300), "blocking key"
    )
    dead("name of 8,192 three-byte characters", with_entity(name="\u6771" * 8192), "blocking key")
    applied("name of 4,096 ASCII characters", with_entity(name="n" * 4096), ["a"])
    applied(
        "name of a zero-width space (visible text is not required)",
        with_entity(name="\u200b"),
        ["a"],
    )
    applied("name in right-to-left script", with_entity(name="\u05e9\u05dc\u05d5\u05dd"), ["a"])
    applied("name with an emoji sequence", with_entity(name="👩\u200d💻"), ["a"])
    dead("entity type with a space", with_entity(type="Bad Type"), "entity type")
    dead("entity type empty", with_entity(type=""), "entity type")
    dead("entity type 65 characters", with_entity(type="T" * 65), "entity type")
    dead("entity type 1 MB", with_entity(type="T" * 900_000), "entity type")
    dead("extraction_model empty", ev(doc(extraction_model="")), "at least 1 character")
    dead("requested_by with a NUL", ev({"requested_by": "a\u0000"}, "TenantErased"), "NUL")

    section("embedding")
    for label, text, reason, stage in [
        ("NaN", "[NaN]", "not JSON", "decode"),
        ("Infinity", "[Infinity]", "not JSON", "decode"),
        ("-Infinity", "[-Infinity]", "not JSON", "decode"),
        ("1e400", "[1e400]", "finite number", "decode"),
        ("-1e400", "[-1e400]", "finite number", "decode"),
        ("1e39 (beyond float32)", "[1e39]", "less than or equal to", "decode"),
        ("-1e39", "[-1e39]", "greater than or equal to", "decode"),
        ("3.5e38", "[3.5e38]", "less than or equal to", "decode"),
        ("an integer beyond float32", "[" + "9" * 39 + "]", "less than or equal to", "decode"),
        ("a number as a string", '["0.5"]', "Input should be a valid number", "decode"),
        ("a boolean", "[true]", "Input should be a valid number", "decode"),
        ("a null component", "[null]", "Input should be a valid number", "decode"),
        ("a nested list", "[[0.5]]", "Input should be a valid number", "decode"),
        ("empty", "[]", "embedding must not be empty", "decode"),
        ("an object", '{"0": 0.5}', "Input should be a valid list", "decode"),
        ("4,097 components", "[" + ",".join(["0.5"] * 4097) + "]", "at most 4096", "decode"),
        ("the wrong dimension for the store", "[0.5, 0.5]", "dimension", "fold"),
    ]:
        dead(f"embedding {label}", raw_entity(f'"embedding": {text}'), reason, stage=stage)
    dead(
        "embeddings of two lengths",
        ev(doc([entity("a", embedding=[0.5]), entity("b", embedding=[0.5, 0.5])])),
        "different lengths",
    )
    applied("embedding null (the worker embeds the name)", raw_entity('"embedding": null'), ["a"])
    dim = 384  # the dry run's HashingEmbedder and the workers' default model
    for label, component in [
        ("the largest float32", FLOAT32_MAX),
        ("-0", "-0"),
        ("subnormal", "1e-50"),
        ("integers", "1"),
    ]:
        vector = "[" + ",".join([component] + ["0.5"] * (dim - 1)) + "]"
        applied(f"embedding with {label}", raw_entity(f'"embedding": {vector}'), ["a"])

    # The compact form (embedding_b64): base64 of little-endian float32.
    def b64(*bits: int) -> str:
        return base64.b64encode(struct.pack(f"<{len(bits)}I", *bits)).decode()

    half = 0x3F000000  # 0.5
    for label, text, reason in [
        ("quiet NaN", b64(0x7FC00000), "component 0 is nan (bits 0x7fc00000)"),
        ("signalling NaN", b64(half, 0x7F800001), "component 1 is nan (bits 0x7f800001)"),
        ("negative NaN", b64(0xFFFFFFFF), "is nan (bits 0xffffffff)"),
        ("infinity", b64(0x7F800000), "component 0 is inf"),
        ("-infinity", b64(0xFF800000), "component 0 is -inf"),
        ("not base64", "not base64!", "embedding_b64 is not base64"),
        ("whitespace inside", "AAAA AD8=", "embedding_b64 is not base64"),
        ("padding missing", "AAAAPw", "embedding_b64 is not base64"),
        ("unused bits set", "AAAAPx==", "not canonical base64"),
        ("3 bytes", "AAAA", "decodes to 3 bytes, not a whole number of float32s"),
        ("6 bytes", "AAAAAAAA", "decodes to 6 bytes, not a whole number of float32s"),
        ("empty", "", "embedding_b64 must not be empty"),
        ("4,097 components", b64(*[half] * 4097), "more than 4096 float32 components"),
        ("a non-ASCII character", "AAAAé===", "embedding_b64 is not base64"),
    ]:
        dead(f"embedding_b64 {label}", with_entity(embedding_b64=text), reason)
    dead("embedding_b64 a number", with_entity(embedding_b64=0.5), "valid string")
    dead("embedding_b64 a list", with_entity(embedding_b64=[0.5]), "valid string")
    dead(
        "embedding_b64 of 1 MB",
        with_entity(embedding_b64="A" * 1_000_000),
        "the limit is 1000000",
    )
    dead(
        "embedding and embedding_b64 both",
        with_entity(embedding=[0.5], embedding_b64=b64(half)),
        "both embedding and embedding_b64",
    )
    dead(
        "embedding_b64 of the wrong dimension for the store",
        with_entity(embedding_b64=b64(half, half)),
        "dimension",
        stage="fold",
    )
    dead(
        "embedding and embedding_b64 of two lengths",
        ev(doc([entity("a", embedding=[0.5]), entity("b", embedding_b64=b64(half, half))])),
        "different lengths",
    )
    dead(
        "embedding_b64 twice",
        raw_entity(f'"embedding_b64": "{b64(half)}", "embedding_b64": "{b64(half)}"'),
        "duplicate key",
    )
    applied(
        "embedding_b64 of the store's dimension",
        with_entity(embedding_b64=b64(0x7F7FFFFF, 0x80000000, 0x00000001, *[half] * (dim - 3))),
        ["a"],
    )
    applied(
        "embedding null beside embedding_b64",
        with_entity(embedding=None, embedding_b64=b64(*[half] * dim)),
        ["a"],
    )
    applied(
        "embedding and embedding_b64 on two entities",
        ev(
            doc(
                [
                    entity("a", embedding=[0.5] * dim),
                    entity("b", embedding_b64=b64(*[half] * dim)),
                ]
            )
        ),
        ["a", "b"],
    )

    section("properties")
    for label, value, reason in [
        ("a nested map", {"x": 1}, "not a storable value"),
        ("null", None, "not a storable value"),
        ("a mixed list", [1, "one"], "homogeneous"),
        ("a list with a null", [1, None], "not a storable value"),
        ("a list of lists", [[1]], "not a storable value"),
        ("an integer beyond 64 bits", 2**63, "does not fit in 64 bits"),
        ("an integer below 64 bits", -(2**63) - 1, "does not fit in 64 bits"),
        ("a string of 8,193 characters", "s" * 8193, "longer than 8192"),
        ("a list of 1,025 items", [1] * 1025, "longer than 1024"),
        ("bools mixed with ints", [True, 1], "homogeneous"),
    ]:
        dead(f"property {label}", with_entity(properties={"p": value}), reason)
    for label, key in [
        ("with a space", "bad key"),
        ("starting with a digit", "9x"),
        ("65 characters", "k" * 65),
        ("empty", ""),
        ("non-ASCII", "é"),
        ("with a zero-width space", "k\u200b"),
    ]:
        dead(f"property key {label}", with_entity(properties={key: 1}), "property key")
    dead("properties a list", with_entity(properties=[1]), "Input should be a valid dictionary")
    applied(
        "every storable kind",
        with_entity(
            properties={
                "s": "x",
                "i": 2**63 - 1,
                "j": -(2**63),
                "f": 0.5,
                "b": True,
                "ls": ["a"],
                "li": [1],
                "lf": [1.5],
                "lb": [False],
                "e": [],
            }
        ),
        ["a"],
    )

    section("relationships")
    two = [entity("a"), entity("b")]
    relationship_cases: list[tuple[str, dict[str, Any], str]] = [
        (
            "confidence as a string",
            {"confidence": "0.5"},
            "confidence: Input should be a valid number",
        ),
        ("confidence true", {"confidence": True}, "confidence: Input should be a valid number"),
        ("confidence null", {"confidence": None}, "confidence: Input should be a valid number"),
        ("confidence 1.5", {"confidence": 1.5}, "less than or equal to 1"),
        ("confidence -0.1", {"confidence": -0.1}, "greater than or equal to 0"),
        ("type with a space", {"type": "BAD TYPE"}, "relationship type"),
        ("type a number", {"type": 1}, "Input should be a valid string"),
        ("properties with a nested map", {"properties": {"x": {}}}, "not a storable value"),
    ]
    for label, extra, reason in relationship_cases:
        dead(f"relationship {label}", ev(doc(two, [rel(**extra)])), reason)
    dead(
        "relationship confidence 1e400",
        ev(doc(two, [rel()])).replace('"type": "KNOWS"', '"type": "KNOWS", "confidence": 1e400'),
        "finite number",
    )
    dead("self-loop", ev(doc(two, [rel("a", "a")])), "self-loop")
    dead(
        "endpoint not in the document",
        ev(doc(two, [rel("a", "z")])),
        "not among the document's entities",
    )
    dead("entity id twice in one document", ev(doc([entity("a"), entity("a")])), "appears twice")
    dead(
        "relationship missing its target",
        ev(doc(two, [{"source": "a", "type": "R"}])),
        "Field required",
    )
    dead("relationships an object", ev(doc(two, {"a": 1})), "Input should be a valid list")
    applied(
        "confidence 0 and 1 as integers",
        ev(doc(two, [rel(confidence=0), rel("b", "a", confidence=1)])),
        ["a", "b"],
    )

    section("merges")
    dead("canonical among the absorbed", merge(absorbed_ids=["a"]), "canonical id")
    dead("absorbed empty", merge(absorbed_ids=[]), "at least 1 item")
    dead("absorbed twice", merge(absorbed_ids=["b", "b"]), "contains an id twice")
    dead("1,001 absorbed ids", merge(absorbed_ids=[f"x{i}" for i in range(1001)]), "at most 1000")
    dead("absorbed a string", merge(absorbed_ids="b"), "Input should be a valid list")
    dead("reason a number", merge(reason=1), "Input should be a valid string")
    dead("edge to add is a self-loop", merge(edges_to_add=[rel("a", "a")]), "self-loop")
    dead("restored holds the canonical", unmerge(restored_ids=["a"]), "canonical id")
    dead("restored empty", unmerge(restored_ids=[]), "at least 1 item")
    dead(
        "unmerge with a merge's fields",
        unmerge(absorbed_ids=["b"]),
        "Extra inputs are not permitted",
    )
    applied("merge of ids the stores do not hold", merge(), [])
    applied("unmerge of ids never merged", unmerge(), [])
    applied(
        "merge whose edges name unknown ids",
        merge(edges_to_add=[rel("a", "c", confidence=0.5)], edges_to_remove=[rel("b", "c")]),
        [],
    )

    section("control")
    erase = signed("TenantErased")
    replay = signed("TenantReplayRequested")
    applied("signed erase", dumps(erase), [])
    applied("signed replay request", dumps(replay), [])
    dead("unsigned erase", dumps({k: v for k, v in erase.items() if k != "signature"}), "unsigned")
    dead("erase with signature null", dumps({**erase, "signature": None}), "unsigned")
    dead("erase with a wrong signature", dumps({**erase, "signature": "0" * 64}), "bad signature")
    dead(
        "erase with a non-ASCII signature",
        dumps({**erase, "signature": "é" * 64}),
        "signature: String should match pattern",
    )
    dead(
        "erase with an uppercase signature",
        dumps({**erase, "signature": erase["signature"].upper()}),
        "signature: String should match pattern",
    )
    dead(
        "signed erase, tenant changed",
        dumps({**erase, "tenant_id": "victim"}),
        "bad signature",
        key="victim",
    )
    dead(
        "signed erase, replayed as a replay request",
        dumps({**erase, "event_type": "TenantReplayRequested"}),
        "bad signature",
    )
    dead("signed erase under another key", dumps(erase), "does not match tenant_id", key="victim")
    dead(
        "signed erase with an extra payload field",
        dumps({**erase, "payload": {**erase["payload"], "scope": "all"}}),
        "Extra inputs are not permitted",
    )
    dead(
        "erase with requested_by empty",
        ev({"requested_by": ""}, "TenantErased"),
        "at least 1 character",
    )
    dead("erase payload of a document", ev(doc(), "TenantErased"), "Extra inputs are not permitted")

    section("control-binding")
    # The signature covers the topic id and the key id (docs/adr/0008).
    applied(
        "erase signed with the retired key",
        dumps(signed("TenantErased", key_id=RETIRED_KEY_ID)),
        [],
    )
    dead(
        "erase signed for another topic",
        dumps(signed("TenantErased", topic_id="another-topic-id")),
        "signed for another topic",
    )
    dead(
        "replay request signed for another topic",
        dumps(signed("TenantReplayRequested", topic_id="another-topic-id")),
        "signed for another topic",
    )
    dead(
        "erase signed for no topic",
        dumps(signed("TenantErased", topic_id="")),
        "signed for another topic",
    )
    ghost = ControlKeys({"ghost": b"a key no worker holds"})
    dead(
        "erase signed with an unknown key id",
        dumps(signed("TenantErased", keys=ghost)),
        "which no worker key has",
    )
    dead(
        "erase whose key_id is changed to the retired key",
        dumps({**erase, "key_id": RETIRED_KEY_ID}),
        "bad signature",
    )
    dead(
        "erase whose key_id is changed to an unknown one",
        dumps({**erase, "key_id": "ghost"}),
        "which no worker key has",
    )
    dead(
        "erase without its key_id",
        dumps({k: v for k, v in erase.items() if k != "key_id"}),
        "names no key_id",
    )
    dead(
        "erase signed the old way (no key id, no topic)",
        dumps(legacy_signed("TenantErased")),
        "names no key_id",
    )
    dead(
        "erase with a key_id of bad characters",
        dumps({**erase, "key_id": "default\u200b"}),
        "key_id: String should match pattern",
    )
    dead("erase with key_id null", dumps({**erase, "key_id": None}), "names no key_id")
    dead("erase with a numeric key_id", dumps({**erase, "key_id": 1}), "key_id: Input should be")
    dead(
        "erase with key_id given twice",
        dumps(erase).replace('"key_id": "default"', '"key_id": "default", "key_id": "default"'),
        "duplicate key 'key_id'",
    )
    applied("a document carrying a key_id (ignored)", ev(key_id="anything"), ["a", "b"])
    # The age window, judged against the record's Kafka timestamp.
    dead(
        "erase replayed a day later",
        dumps(erase),
        "is too old",
        logged_at="2026-11-02T09:00:01Z",
    )
    dead(
        "replay request replayed a year later",
        dumps(replay),
        "is too old",
        logged_at="2027-11-01T09:00:00Z",
    )
    applied(
        "erase logged just inside the window", dumps(erase), [], logged_at="2026-11-02T09:00:00Z"
    )
    dead(
        "erase from the future",
        dumps(erase),
        "is from the future",
        logged_at="2026-11-01T08:54:59Z",
    )
    applied("erase within clock skew", dumps(erase), [], logged_at="2026-11-01T08:55:00Z")
    applied(
        "an old document (the window is for control events only)",
        GOOD,
        ["a", "b"],
        logged_at="2030-01-01T00:00:00Z",
    )

    section("partition")
    applied("a document on its partition", GOOD, ["a", "b"], partition=right_partition())
    dead(
        "a document on the wrong partition",
        GOOD,
        f"belongs on partition {right_partition()} of {PARTITIONS}",
        partition=wrong_partition(),
    )
    for other in range(PARTITIONS):
        if other not in (right_partition(), wrong_partition()):
            dead(
                f"a document on partition {other}",
                GOOD,
                "belongs on partition",
                partition=other,
            )
            break
    applied("a signed erase on its partition", dumps(erase), [], partition=right_partition())
    dead(
        "a signed erase on the wrong partition",
        dumps(erase),
        "belongs on partition",
        partition=wrong_partition(),
    )
    dead(
        "a newer schema_version on the wrong partition (no pause)",
        ev(schema_version=2),
        "belongs on partition",
        partition=wrong_partition(),
    )
    pause(
        "a newer schema_version on its partition", ev(schema_version=2), partition=right_partition()
    )
    dead(
        "another tenant's document on the wrong partition",
        ev(tenant_id="victim"),
        "belongs on partition",
        key="victim",
        partition=wrong_partition("victim"),
    )
    dead(
        "a key that is not UTF-8 (placement not judged, key refused)",
        GOOD,
        "does not match tenant_id",
        key=b"\xff",
        partition=0,
    )
    dead("no key on partition 0", GOOD, "does not match tenant_id", key=None, partition=0)

    section("valid")
    applied("a plain document", GOOD, ["a", "b"])
    applied("a compact document", json.dumps(envelope(), separators=(",", ":")), ["a", "b"])
    applied("a pretty-printed document", json.dumps(envelope(), indent=2), ["a", "b"])
    applied(
        "occurred_at with an offset and nanoseconds",
        ev(occurred_at="2026-11-01T09:00:00.123456789+05:30"),
        ["a", "b"],
    )
    applied("occurred_at in lowercase", ev(occurred_at="2026-11-01t09:00:00z"), ["a", "b"])
    applied("uppercase event_id", ev(event_id=EID.upper()), ["a", "b"])
    applied(
        "relationship with properties, producer of 256 characters",
        ev(doc(two, [rel(properties={"since": 2020})]), producer="p" * 256),
        ["a", "b"],
    )


def main() -> None:
    build()
    names = [case.name for case in cases]
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise SystemExit(f"case names repeat: {sorted(duplicates)}")
    with CORPUS.open("w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(to_row(case)) + "\n")
    print(f"wrote {len(cases)} cases to {CORPUS}")


if __name__ == "__main__":
    main()
