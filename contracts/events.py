"""The event contract (DESIGN section 3): the product's most public interface.

A Kafka value is a UTF-8 JSON envelope; the key is the tenant id. Parsing is
strict: anything the stores could not hold, or that would need guessing, is
refused here with a reason, and the caller dead-letters it. A value with a newer
``schema_version`` than this build knows is *not* invalid: it raises
``SchemaVersionTooNewError`` so that the agent pauses the partition instead.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from typing import Annotated, Any, Literal, TypeAlias
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from contracts.domain import (
    PropertyValue,
    RelationshipKey,
    check_properties,
    check_type_name,
)
from contracts.errors import InvalidEventError, SchemaVersionTooNewError
from contracts.ids import EntityId, TenantId, check_id_text, tenant_id

#: The newest schema version this build understands.
SCHEMA_VERSION = 1
#: Larger values are refused (Kafka's default max.message.bytes is about 1 MiB).
MAX_EVENT_BYTES = 1_000_000
MAX_ENTITIES_PER_DOCUMENT = 10_000
MAX_RELATIONSHIPS_PER_DOCUMENT = 50_000
MAX_IDS_PER_DECISION = 1_000
MAX_EMBEDDING_DIMENSION = 4096

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
CONTROL_EVENT_TYPES = frozenset({TENANT_REPLAY_REQUESTED, TENANT_ERASED})


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _no_nul(value: str, what: str) -> str:
    """Text both stores can hold: no NUL byte, no lone surrogate."""
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL byte")
    if _LONE_SURROGATE.search(value):
        raise ValueError(f"{what} contains a lone surrogate (not valid Unicode)")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


IdText = Annotated[str, Field(min_length=1, max_length=256)]


class ExtractedEntity(_Strict):
    """An entity found in a document."""

    id: IdText = Field(description="Producer-assigned entity id, unique within the tenant.")
    name: str = Field(min_length=1, max_length=8192, description="Display name.")
    type: str = Field(description="Entity type, e.g. Person; letters, digits, '_'.")
    properties: dict[str, PropertyValue] = Field(
        default_factory=dict,
        description="Strings, numbers, booleans or homogeneous lists of one of those.",
    )
    embedding: list[float] | None = Field(
        default=None,
        max_length=MAX_EMBEDDING_DIMENSION,
        description="Optional precomputed embedding; otherwise the worker embeds the name.",
    )

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        return check_id_text(v, "entity id")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _no_nul(v, "entity name")

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


class EdgeRef(_Strict):
    """Names an edge by its key: (source, target, type)."""

    source: IdText
    target: IdText
    type: str

    @field_validator("source", "target")
    @classmethod
    def _ids(cls, v: str) -> str:
        return check_id_text(v, "edge endpoint")

    @field_validator("type")
    @classmethod
    def _type(cls, v: str) -> str:
        return check_type_name(v, "relationship type")

    @property
    def key(self) -> RelationshipKey:
        return (EntityId(self.source), EntityId(self.target), self.type)


class ExtractedRelationship(EdgeRef):
    """A directed, typed edge found in a document (or carried by a merge)."""

    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
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
        return check_id_text(v, "document id")

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
        check_id_text(self.canonical_id, "canonical id")
        for a in self.absorbed_ids:
            check_id_text(a, "absorbed id")
        _check_decision_ids(self.canonical_id, self.absorbed_ids, "absorbed_ids")
        _no_nul(self.reason, "reason")
        return self


class EntitiesUnmerged(_Strict):
    """The write model undid (part of) a merge: ``restored_ids`` stand alone again."""

    canonical_id: IdText
    restored_ids: list[IdText] = Field(min_length=1, max_length=MAX_IDS_PER_DECISION)
    edges_to_restore: list[ExtractedRelationship] = Field(default_factory=list)
    edges_to_remove: list[EdgeRef] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ids(self) -> EntitiesUnmerged:
        check_id_text(self.canonical_id, "canonical id")
        for r in self.restored_ids:
            check_id_text(r, "restored id")
        _check_decision_ids(self.canonical_id, self.restored_ids, "restored_ids")
        return self


class ControlPayload(_Strict):
    requested_by: str = Field(min_length=1, max_length=256)
    reason: str = Field(default="", max_length=8192)

    @model_validator(mode="after")
    def _text(self) -> ControlPayload:
        _no_nul(self.requested_by, "requested_by")
        _no_nul(self.reason, "reason")
        return self


class TenantReplayRequested(ControlPayload):
    """Rebuild the tenant from the start of the log (signed)."""


class TenantErased(ControlPayload):
    """Delete the tenant everywhere and never bring its older events back (signed)."""


class _Envelope(_Strict):
    event_id: UUID = Field(description="Producer-assigned; reuse it when retrying a publish.")
    schema_version: int = Field(ge=1, le=SCHEMA_VERSION)
    tenant_id: str = Field(description="Also the Kafka key.")
    occurred_at: AwareDatetime = Field(description="RFC 3339 with an offset.")
    producer: str = Field(min_length=1, max_length=256)
    signature: str | None = Field(
        default=None,
        description="HMAC-SHA256 (hex) over the canonical envelope; required on control events.",
    )

    @field_validator("tenant_id")
    @classmethod
    def _tenant(cls, v: str) -> str:
        return tenant_id(v)

    @field_validator("producer")
    @classmethod
    def _producer(cls, v: str) -> str:
        return _no_nul(v, "producer")

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
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def parse_event(value: bytes | str) -> Event:
    """Parse and validate one Kafka value.

    Raises ``InvalidEventError`` (dead-letter it, with ``reason``) or
    ``SchemaVersionTooNewError`` (pause the partition).

    pydantic parses the JSON itself (in Rust, straight into the models): the
    stdlib ``json`` module and the dict it builds were about half of the cost
    of a 37 KB event. Whenever that fails, or its result could differ from
    what the reference path gives, the value goes through the reference path
    (``json.loads`` then :func:`parse_event_dict`), which decides, and words,
    every refusal: a refused value costs two parses, an accepted one one.
    """
    raw = value.encode("utf-8") if isinstance(value, str) else value
    if len(raw) > MAX_EVENT_BYTES:
        raise InvalidEventError(f"value is {len(raw)} bytes; the limit is {MAX_EVENT_BYTES}")
    if b"\x00" in raw or b"\\u0000" in raw:
        raise InvalidEventError("value contains a NUL byte")
    try:
        event = EVENT_ADAPTER.validate_json(raw)
    except ValidationError:
        return _parse_event_reference(raw)
    if not _json_mode_agrees(event):
        return _parse_event_reference(raw)
    return event


def _json_mode_agrees(event: Event) -> bool:
    """False when ``validate_json`` may have accepted what the reference path
    refuses. The one known case: an integer beyond float64's range in an
    embedding is a ``float`` error after ``json.loads`` but becomes an infinity
    in JSON mode (tests/unit/test_event_parsing.py pins the two paths together).
    A sum is non-finite whenever a component is (and, rarely, when finite ones
    overflow it, which only costs the slower path)."""
    if isinstance(event, DocumentExtractedEvent):
        for entity in event.payload.entities:
            if entity.embedding is not None and not math.isfinite(sum(entity.embedding)):
                return False
    return True


def _parse_event_reference(raw: bytes) -> Event:
    """The reference parse: ``json.loads``, then :func:`parse_event_dict`."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidEventError("value is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InvalidEventError(f"value is not JSON: {exc.msg} at position {exc.pos}") from None
    return parse_event_dict(data)


def parse_event_dict(data: object) -> Event:
    if not isinstance(data, dict):
        raise InvalidEventError("value is not a JSON object")
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise SchemaVersionTooNewError(version, SCHEMA_VERSION)
    event_type = data.get("event_type")
    # A list or an object is unhashable: test the type first, or the lookup
    # raises TypeError instead of refusing the value (a stuck partition).
    if not isinstance(event_type, str) or event_type not in EVENT_MODELS:
        raise InvalidEventError(
            f"unknown event_type {event_type!r}; expected one of {', '.join(EVENT_TYPES)}"
        )
    try:
        return EVENT_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise InvalidEventError(f"invalid {event_type}: {_first_error(exc)}") from None


def event_to_json(event: Event) -> bytes:
    """The Kafka value for ``event``: compact UTF-8 JSON."""
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
