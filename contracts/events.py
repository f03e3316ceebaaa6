"""The event contract (docs/design.md 3): the product's most public interface.

A Kafka value is a UTF-8 JSON envelope; the key is the tenant id. Parsing is
strict and total: JSON types exactly as docs/events.md gives them (no "1" for
1, no number for a timestamp), no member twice in one object, nothing the
domain values or the stores would refuse later. Anything else is refused here
with a reason (``InvalidEventError``), and the caller dead-letters it. A
well-formed envelope with a newer ``schema_version`` than this build knows is
*not* invalid: it raises ``SchemaVersionTooNewError`` so that the agent pauses
the partition instead. No other exception leaves :func:`parse_event`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeAlias
from uuid import UUID

import pydantic_core
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from contracts.domain import PropertyValue, RelationshipKey, blocking_key
from contracts.errors import InvalidEventError, SchemaVersionTooNewError
from contracts.ids import EntityId, TenantId, tenant_id
from contracts.validation import (
    BASE64_PATTERN,
    FLOAT32_MAX,
    MAX_ID_LENGTH,
    TYPE_PATTERN,
    base64_length,
    check_event_id_text,
    check_properties,
    check_storable_text,
    check_type_name,
    float32_le_base64,
    float32_le_components,
)

#: The newest schema version this build understands.
SCHEMA_VERSION = 1
#: Larger values are refused (Kafka's default max.message.bytes is about 1 MiB).
MAX_EVENT_BYTES = 1_000_000
MAX_ENTITIES_PER_DOCUMENT = 10_000
MAX_RELATIONSHIPS_PER_DOCUMENT = 50_000
MAX_IDS_PER_DECISION = 1_000
MAX_EMBEDDING_DIMENSION = 4096
#: A ``schema_version`` above this is not a version at all: dead-lettered,
#: never a pause.
MAX_SCHEMA_VERSION = 2**31 - 1
#: The UTF-8 length of an entity name's blocking key (NFKC-folded, case-folded,
#: ``contracts.domain.blocking_key``) is capped: Neo4j indexes it beside the
#: tenant id, and its range index refuses keys above about 8 KB (8,167 bytes
#: for the whole composite key). NFKC can make a short name long (one U+FDFA
#: becomes 18 characters), so the limit is on the folded key, not the name.
MAX_BLOCKING_KEY_BYTES = 4096
#: An integer literal longer than this is refused as it is read: no field
#: takes one (64-bit properties, float32 embeddings), and Python refuses to
#: convert one of more than 4,300 digits at all.
MAX_INTEGER_DIGITS = 100
#: How much of an offending value a refusal quotes.
_QUOTE = 80

DOCUMENT_EXTRACTED = "DocumentExtracted"
ENTITIES_MERGED = "EntitiesMerged"
ENTITIES_UNMERGED = "EntitiesUnmerged"
TENANT_REPLAY_REQUESTED = "TenantReplayRequested"
TENANT_ERASED = "TenantErased"
EVENT_TYPES = (
    DOCUMENT_EXTRACTED,
    ENTITIES_MERGED,
    ENTITIES_UNMERGED,
    TENANT_REPLAY_REQUESTED,
    TENANT_ERASED,
)


def _quote(value: object) -> str:
    """``repr(value)``, cut short: a refusal names what it refused without
    copying a megabyte of it into a dead-letter header."""
    text = repr(value)
    return text if len(text) <= _QUOTE else f"{text[: _QUOTE - 5]}...{text[-2:]}"


class _Strict(BaseModel):
    # strict: JSON types exactly as documented, never converted ("1" is not 1,
    # 1.0 is not 1, true is not 1, a number is not a timestamp). Integers are
    # accepted where a float is, as JSON has one number type.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


IdText = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]
#: An embedding component: finite and representable as a float32.
Float32 = Annotated[float, Field(allow_inf_nan=False, ge=-FLOAT32_MAX, le=FLOAT32_MAX)]


class ExtractedEntity(_Strict):
    """An entity found in a document."""

    # The JSON Schema's word for "not both embeddings" (null means absent).
    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "required": ["embedding", "embedding_b64"],
                "properties": {
                    "embedding": {"type": "array"},
                    "embedding_b64": {"type": "string"},
                },
            }
        }
    )

    id: IdText = Field(description="Producer-assigned entity id, unique within the tenant.")
    name: str = Field(min_length=1, max_length=8192, description="Display name.")
    type: str = Field(description="Entity type, e.g. Person; letters, digits, '_'.")
    properties: dict[str, PropertyValue] = Field(
        default_factory=dict,
        description="Strings, numbers, booleans or homogeneous lists of one of those.",
    )
    embedding: list[Float32] | None = Field(
        default=None,
        max_length=MAX_EMBEDDING_DIMENSION,
        description="Optional precomputed embedding (finite float32 components); "
        "otherwise the worker embeds the name. At most one of embedding and embedding_b64.",
    )
    embedding_b64: str | None = Field(
        default=None,
        description="The same embedding, compact: standard base64 (RFC 4648, padded) of "
        "its components as little-endian IEEE 754 float32, 4 bytes each, every one "
        "finite. At most one of embedding and embedding_b64.",
        json_schema_extra={
            "contentEncoding": "base64",
            "pattern": BASE64_PATTERN,
            "minLength": 8,
            "maxLength": base64_length(4 * MAX_EMBEDDING_DIMENSION),
        },
    )

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        return check_event_id_text(v, "entity id")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        check_storable_text(v, "entity name")
        # What contracts.domain.Entity refuses: a name of whitespace only.
        if not v.strip():
            raise ValueError("entity name is blank (whitespace only)")
        # An ASCII name folds to at most its own length.
        if not (v.isascii() and len(v) <= MAX_BLOCKING_KEY_BYTES):
            size = len(blocking_key(v).encode("utf-8"))
            if size > MAX_BLOCKING_KEY_BYTES:
                raise ValueError(
                    f"entity name folds to a blocking key of {size} UTF-8 bytes; "
                    f"the limit is {MAX_BLOCKING_KEY_BYTES}"
                )
        return v

    @field_validator("type")
    @classmethod
    def _type(cls, v: str) -> str:
        return check_type_name(v, "entity type")

    @field_validator("properties", mode="before")
    @classmethod
    def _properties(cls, v: Any) -> Any:
        if isinstance(v, dict):
            check_properties(v, "entity properties")
        return v

    @field_validator("embedding")
    @classmethod
    def _embedding(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and not v:
            raise ValueError("embedding must not be empty (omit it instead)")
        return v

    @model_validator(mode="after")
    def _compact_embedding(self) -> ExtractedEntity:
        # The folds read ``embedding`` only: a compact one is decoded into it,
        # so what the stores receive cannot depend on the encoding. The model
        # is frozen, hence the write to its __dict__, made before anyone sees it.
        if self.embedding_b64 is None:
            return self
        if self.embedding is not None:
            raise ValueError("entity has both embedding and embedding_b64; send one of them")
        self.__dict__["embedding"] = float32_le_components(
            self.embedding_b64, "embedding_b64", MAX_EMBEDDING_DIMENSION
        )
        self.__dict__["embedding_b64"] = None
        return self


class EdgeRef(_Strict):
    """Names an edge by its key: (source, target, type)."""

    source: IdText
    target: IdText
    type: str

    @field_validator("source", "target")
    @classmethod
    def _ids(cls, v: str) -> str:
        return check_event_id_text(v, "edge endpoint")

    @field_validator("type")
    @classmethod
    def _type(cls, v: str) -> str:
        return check_type_name(v, "relationship type")

    @property
    def key(self) -> RelationshipKey:
        return (EntityId(self.source), EntityId(self.target), self.type)


class ExtractedRelationship(EdgeRef):
    """A directed, typed edge found in a document (or carried by a merge)."""

    confidence: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    properties: dict[str, PropertyValue] = Field(default_factory=dict)

    @field_validator("properties", mode="before")
    @classmethod
    def _properties(cls, v: Any) -> Any:
        if isinstance(v, dict):
            check_properties(v, "relationship properties")
        return v

    @model_validator(mode="after")
    def _no_self_loop(self) -> ExtractedRelationship:
        if self.source == self.target:
            raise ValueError(f"relationship {self.source!r} -[{self.type}]-> itself is a self-loop")
        return self


class DocumentExtracted(_Strict):
    document_id: IdText
    extraction_model: str = Field(min_length=1, max_length=256)
    entities: list[ExtractedEntity] = Field(max_length=MAX_ENTITIES_PER_DOCUMENT)
    relationships: list[ExtractedRelationship] = Field(
        default_factory=list, max_length=MAX_RELATIONSHIPS_PER_DOCUMENT
    )

    @field_validator("document_id")
    @classmethod
    def _doc(cls, v: str) -> str:
        return check_event_id_text(v, "document id")

    @field_validator("extraction_model")
    @classmethod
    def _model(cls, v: str) -> str:
        return check_storable_text(v, "extraction_model")

    @model_validator(mode="after")
    def _consistent(self) -> DocumentExtracted:
        ids = [e.id for e in self.entities]
        if len(set(ids)) != len(ids):
            raise ValueError("an entity id appears twice in one document")
        known = set(ids)
        for rel in self.relationships:
            for end in (rel.source, rel.target):
                if end not in known:
                    raise ValueError(
                        f"relationship endpoint {end!r} is not among the document's entities"
                    )
        dims = {len(e.embedding) for e in self.entities if e.embedding is not None}
        if len(dims) > 1:
            raise ValueError(f"embeddings in one document have different lengths {sorted(dims)}")
        return self


def _check_decision_ids(canonical: str, others: list[str], what: str) -> None:
    if len(set(others)) != len(others):
        raise ValueError(f"{what} contains an id twice")
    if canonical in others:
        raise ValueError(f"{what} contains the canonical id {canonical!r}")


class EntitiesMerged(_Strict):
    """The write model merged ``absorbed_ids`` into ``canonical_id`` and computed
    the edge redirection that goes with it."""

    canonical_id: IdText
    absorbed_ids: list[IdText] = Field(min_length=1, max_length=MAX_IDS_PER_DECISION)
    reason: str = Field(default="", max_length=8192)
    edges_to_remove: list[EdgeRef] = Field(default_factory=list)
    edges_to_add: list[ExtractedRelationship] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ids(self) -> EntitiesMerged:
        check_event_id_text(self.canonical_id, "canonical id")
        for a in self.absorbed_ids:
            check_event_id_text(a, "absorbed id")
        _check_decision_ids(self.canonical_id, self.absorbed_ids, "absorbed_ids")
        check_storable_text(self.reason, "reason")
        return self


class EntitiesUnmerged(_Strict):
    """The write model undid (part of) a merge: ``restored_ids`` stand alone again."""

    canonical_id: IdText
    restored_ids: list[IdText] = Field(min_length=1, max_length=MAX_IDS_PER_DECISION)
    edges_to_restore: list[ExtractedRelationship] = Field(default_factory=list)
    edges_to_remove: list[EdgeRef] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ids(self) -> EntitiesUnmerged:
        check_event_id_text(self.canonical_id, "canonical id")
        for r in self.restored_ids:
            check_event_id_text(r, "restored id")
        _check_decision_ids(self.canonical_id, self.restored_ids, "restored_ids")
        return self


class ControlPayload(_Strict):
    requested_by: str = Field(min_length=1, max_length=256)
    reason: str = Field(default="", max_length=8192)

    @model_validator(mode="after")
    def _text(self) -> ControlPayload:
        check_storable_text(self.requested_by, "requested_by")
        check_storable_text(self.reason, "reason")
        return self


class TenantReplayRequested(ControlPayload):
    """Rebuild the tenant from the start of the log (signed)."""


class TenantErased(ControlPayload):
    """Delete the tenant everywhere and never bring its older events back (signed)."""


UUID_TEXT = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
#: RFC 3339 section 5.6 ``date-time``, the offset required; fractions of a
#: second beyond microseconds are accepted and truncated.
RFC3339_TEXT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _uuid_text(v: object) -> object:
    if not isinstance(v, UUID) and not (isinstance(v, str) and UUID_TEXT.fullmatch(v)):
        raise ValueError(
            "event_id must be a UUID string, 8-4-4-4-12 hex digits "
            "(e.g. 00000000-0000-4000-8000-000000000001)"
        )
    return v


def _timestamp_text(v: object) -> object:
    if not isinstance(v, datetime) and not (isinstance(v, str) and RFC3339_TEXT.fullmatch(v)):
        raise ValueError(
            "occurred_at must be an RFC 3339 timestamp string with an offset "
            "(e.g. 2026-11-01T09:00:00Z)"
        )
    return v


def _utc_representable(v: datetime) -> datetime:
    # 9999-12-31T23:59:59-01:00 is a valid timestamp no datetime can hold in
    # UTC: refuse it here rather than let a later comparison overflow.
    try:
        v.astimezone(UTC)
    except OverflowError:
        raise ValueError("occurred_at is out of range in UTC") from None
    return v


class _EnvelopeFields(_Strict):
    """The envelope fields every schema version has."""

    event_id: Annotated[UUID, Strict(False)] = Field(
        description="Producer-assigned; reuse it when retrying a publish."
    )
    schema_version: int = Field(ge=1, le=SCHEMA_VERSION)
    tenant_id: str = Field(description="Also the Kafka key.")
    occurred_at: Annotated[AwareDatetime, Strict(False)] = Field(
        description="RFC 3339 with an offset."
    )
    producer: str = Field(min_length=1, max_length=256)

    check_event_id = field_validator("event_id", mode="before")(_uuid_text)
    check_occurred_at = field_validator("occurred_at", mode="before")(_timestamp_text)
    check_occurred_at_utc = field_validator("occurred_at")(_utc_representable)

    @field_validator("tenant_id")
    @classmethod
    def _tenant(cls, v: str) -> str:
        return tenant_id(v)

    @field_validator("producer")
    @classmethod
    def _producer(cls, v: str) -> str:
        return check_storable_text(v, "producer")


class _FutureEnvelope(_EnvelopeFields):
    """What a newer schema version must still be for its record to pause the
    partition rather than be dead-lettered: the fields every version has,
    well formed (any others are allowed: a newer version may add some)."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = Field(ge=SCHEMA_VERSION + 1, le=MAX_SCHEMA_VERSION)
    event_type: str = Field(pattern=TYPE_PATTERN.pattern)
    payload: dict[str, Any]


class _Envelope(_EnvelopeFields):
    key_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        description="The id of the control key that signed the event; required on "
        "control events (contracts/signing.py).",
    )
    signature: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="HMAC-SHA256 (64 lowercase hex digits) over the events topic's id, "
        "key_id and the canonical envelope; required on control events.",
    )

    @property
    def tenant(self) -> TenantId:
        return TenantId(self.tenant_id)

    @property
    def is_control(self) -> bool:
        return False


class DocumentExtractedEvent(_Envelope):
    event_type: Literal["DocumentExtracted"]
    payload: DocumentExtracted


class EntitiesMergedEvent(_Envelope):
    event_type: Literal["EntitiesMerged"]
    payload: EntitiesMerged


class EntitiesUnmergedEvent(_Envelope):
    event_type: Literal["EntitiesUnmerged"]
    payload: EntitiesUnmerged


class _ControlEnvelope(_Envelope):
    @property
    def is_control(self) -> bool:
        return True


class TenantReplayRequestedEvent(_ControlEnvelope):
    event_type: Literal["TenantReplayRequested"]
    payload: TenantReplayRequested


class TenantErasedEvent(_ControlEnvelope):
    event_type: Literal["TenantErased"]
    payload: TenantErased


Event: TypeAlias = Annotated[
    DocumentExtractedEvent
    | EntitiesMergedEvent
    | EntitiesUnmergedEvent
    | TenantReplayRequestedEvent
    | TenantErasedEvent,
    Field(discriminator="event_type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)

EVENT_MODELS: dict[str, type[_Envelope]] = {
    DOCUMENT_EXTRACTED: DocumentExtractedEvent,
    ENTITIES_MERGED: EntitiesMergedEvent,
    ENTITIES_UNMERGED: EntitiesUnmergedEvent,
    TENANT_REPLAY_REQUESTED: TenantReplayRequestedEvent,
    TENANT_ERASED: TenantErasedEvent,
}


def _first_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:3]:
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"] if len(err["msg"]) <= 300 else err["msg"][:297] + "..."
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def parse_event(value: bytes | str) -> Event:
    """Parse and validate one Kafka value.

    Raises ``InvalidEventError`` (dead-letter it, with ``reason``) or
    ``SchemaVersionTooNewError`` (pause the partition, if the Kafka key
    matches its ``tenant_id``: ``streams.worker.decode`` checks that); nothing else,
    whatever the bytes.

    pydantic parses the JSON itself (in Rust, straight into the models): the
    stdlib ``json`` module and the dict it builds were about half of the cost
    of a 37 KB event. That parse keeps the last of two members of one name, so
    an accepted value is counted: when the text may hold more members than the
    event has fields (:func:`_member_bound`, :func:`_member_count`) it is
    parsed again. Whenever that parse fails, or a member may repeat, the value
    goes through the reference path (:func:`_parse_event_reference`), which
    decides, and words, every refusal: a refused value costs two parses, an
    accepted one one and a count.
    """
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    if len(raw) > MAX_EVENT_BYTES:
        raise InvalidEventError(f"value is {len(raw)} bytes; the limit is {MAX_EVENT_BYTES}")
    # The quotes, colons and backslashes of the value, for _member_bound; one
    # pass in C, which also tells whether any string holds an escape.
    marks = raw.translate(None, _ALL_BUT_QUOTE_COLON_BACKSLASH)
    escaped = b"\\" in marks
    if b"\x00" in raw or (escaped and b"\\u0000" in raw):
        raise InvalidEventError("value contains a NUL byte")
    try:
        event = EVENT_ADAPTER.validate_json(raw)
    except ValidationError:
        return _parse_event_reference(raw)
    if _member_bound(raw, marks, escaped) != _member_count(event):
        return _parse_event_reference(raw)
    return event


#: Every byte but the quote, the colon and the backslash (for ``translate``).
_ALL_BUT_QUOTE_COLON_BACKSLASH = bytes(b for b in range(256) if b not in b'":\\')
#: The end of an object member's name: a quote, optional whitespace, a colon.
_MEMBER_END = re.compile(rb'"[ \t\n\r]*:')


def _member_bound(raw: bytes, marks: bytes, escaped: bool) -> int:
    """At least the number of object members in ``raw`` (valid JSON), and
    exactly that number when no string holds an escape. ``marks``: ``raw``
    with every byte but quotes, colons and backslashes deleted; ``escaped``:
    it holds a backslash.

    Without a backslash, every quote delimits a string, so the colons outside
    strings (every other piece of ``marks`` between quotes) are the members'
    colons. With escapes, a regex counts each member name's end, a quote,
    optional whitespace and a colon (a string holding a quote and a colon
    only adds to that count)."""
    if not escaped:
        return b"".join(marks.split(b'"')[::2]).count(b":")
    return len(_MEMBER_END.findall(raw))


def _member_count(event: Event) -> int:
    """How many object members ``event`` was built from, when no member
    repeated: every field given, every property. (A repeated member leaves one
    field or property for two members, so the text has more.)"""
    count = len(event.model_fields_set)
    payload = event.payload
    count += len(payload.model_fields_set)
    if isinstance(payload, DocumentExtracted):
        for entity in payload.entities:
            count += len(entity.model_fields_set) + len(entity.properties)
        for rel in payload.relationships:
            count += len(rel.model_fields_set) + len(rel.properties)
    elif isinstance(payload, EntitiesMerged | EntitiesUnmerged):
        for ref in payload.edges_to_remove:
            count += len(ref.model_fields_set)
        added = (
            payload.edges_to_add
            if isinstance(payload, EntitiesMerged)
            else payload.edges_to_restore
        )
        for rel in added:
            count += len(rel.model_fields_set) + len(rel.properties)
    return count


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s object hook: refuse a member name given twice (the last
    would win silently, so a signed TenantErased could name two tenants)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise InvalidEventError(f"duplicate key {_quote(key)} in a JSON object")
            seen.add(key)
    return obj


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise InvalidEventError(
            f"an integer of {len(text.lstrip('-'))} digits is out of range "
            f"(at most {MAX_INTEGER_DIGITS})"
        )
    return int(text)


def _parse_event_reference(raw: bytes) -> Event:
    """The reference parse: the JSON grammar (pydantic's parser, as on the fast
    path), ``json.loads`` for a dict whose objects have no repeated member,
    then :func:`parse_event_dict`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidEventError("value is not UTF-8") from None
    try:
        # Strict JSON: no NaN or Infinity, no escaped lone surrogate, no number
        # beyond 4,300 digits, at most 200-odd levels deep. Having passed here,
        # json.loads below cannot recurse deeply enough to raise RecursionError.
        pydantic_core.from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        raise InvalidEventError(f"value is not JSON: {exc}") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_members, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise InvalidEventError(f"value is not JSON: {exc.msg} at position {exc.pos}") from None
    return parse_event_dict(data)


def parse_event_dict(data: object) -> Event:
    """Validate an envelope already parsed from JSON (or built in Python).

    A ``schema_version`` newer than :data:`SCHEMA_VERSION` raises
    ``SchemaVersionTooNewError`` only when the rest of the envelope is well
    formed (:class:`_FutureEnvelope`); otherwise it is refused like any other
    value, so that no stray value can pause a partition."""
    if not isinstance(data, dict):
        raise InvalidEventError("value is not a JSON object")
    version = data.get("schema_version")
    if type(version) is int and version > SCHEMA_VERSION:
        try:
            future = _FutureEnvelope.model_validate(data)
        except ValidationError as exc:
            raise InvalidEventError(
                f"schema_version {_quote(version)} is not {SCHEMA_VERSION}, and the envelope "
                f"is not well formed (so this is no reason to pause): {_first_error(exc)}"
            ) from None
        raise SchemaVersionTooNewError(
            version, SCHEMA_VERSION, tenant_id=future.tenant_id, event_id=str(future.event_id)
        )
    event_type = data.get("event_type")
    # A list or an object is unhashable: test the type first, or the lookup
    # raises TypeError instead of refusing the value (a stuck partition).
    if not isinstance(event_type, str) or event_type not in EVENT_MODELS:
        raise InvalidEventError(
            f"unknown event_type {_quote(event_type)}; expected one of {', '.join(EVENT_TYPES)}"
        )
    try:
        return EVENT_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise InvalidEventError(f"invalid {event_type}: {_first_error(exc)}") from None


def event_to_json(event: Event, *, compact_embeddings: bool = False) -> bytes:
    """The Kafka value for ``event``: compact UTF-8 JSON.

    ``compact_embeddings``: each entity's ``embedding`` is sent as
    ``embedding_b64`` (float32, base64) instead: about a third of the bytes,
    and each component rounded to the nearest float32, which is what pgvector
    stores in any case (docs/events.md)."""
    if compact_embeddings and isinstance(event, DocumentExtractedEvent):
        entities = [
            entity
            if entity.embedding is None
            else entity.model_copy(
                update={"embedding": None, "embedding_b64": float32_le_base64(entity.embedding)}
            )
            for entity in event.payload.entities
        ]
        payload = event.payload.model_copy(update={"entities": entities})
        event = event.model_copy(update={"payload": payload})
    return event.model_dump_json(exclude_none=True).encode("utf-8")


def event_to_dict(event: Event) -> dict[str, Any]:
    return event.model_dump(mode="json", exclude_none=True)


def event_headers(event: Event) -> list[tuple[str, bytes]]:
    return [
        ("event_type", event.event_type.encode()),
        ("schema_version", str(event.schema_version).encode()),
    ]


def make_event(
    event_type: str,
    tenant: str,
    payload: dict[str, Any],
    *,
    event_id: UUID | str | None = None,
    occurred_at: datetime | None = None,
    producer: str = "redstring",
) -> Event:
    """Build and validate an envelope around ``payload`` (a convenience for
    producers and tests)."""
    from datetime import UTC
    from uuid import uuid4

    data: dict[str, Any] = {
        "event_id": str(event_id or uuid4()),
        "event_type": event_type,
        "schema_version": SCHEMA_VERSION,
        "tenant_id": tenant,
        "occurred_at": (occurred_at or datetime.now(UTC)).isoformat(),
        "producer": producer,
        "payload": payload,
    }
    return parse_event_dict(data)
