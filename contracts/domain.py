"""Domain values shared by the ports, the folds and the adapters.

Values are frozen dataclasses. Their ``properties`` and ``metadata`` mappings
are plain dicts, so every adapter returns fresh objects from every read (the
compliance suites check it): a caller mutating a result must never change the
store.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from contracts.ids import EntityId, TenantId, check_id_text

PropertyValue: TypeAlias = (
    str | int | float | bool | list[str] | list[int] | list[float] | list[bool]
)
Properties: TypeAlias = dict[str, PropertyValue]

#: Property keys become Neo4j property names (behind a prefix) and JSON keys.
PROPERTY_KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
#: Edge and entity types are stored as values, never as labels, but they are
#: still kept to a simple alphabet so that they read well in every store.
TYPE_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
MAX_STRING_LENGTH = 8192
MAX_LIST_LENGTH = 1024


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_scalar(value: object, where: str) -> type:
    if isinstance(value, bool):
        return bool
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"{where}: integer {value} does not fit in 64 bits")
        return int
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value} is not a finite number")
        return float
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{where}: string contains a NUL byte")
        if not _encodable(value):
            raise ValueError(f"{where}: string contains a lone surrogate (not valid Unicode)")
        if len(value) > MAX_STRING_LENGTH:
            raise ValueError(f"{where}: string longer than {MAX_STRING_LENGTH} characters")
        return str
    raise ValueError(
        f"{where}: {type(value).__name__} is not a storable value "
        "(use a string, number, boolean or a list of one of those)"
    )


def check_property_value(value: object, where: str) -> None:
    """Raise ``ValueError`` unless both stores can hold ``value`` as it is."""
    if isinstance(value, list):
        if len(value) > MAX_LIST_LENGTH:
            raise ValueError(f"{where}: list longer than {MAX_LIST_LENGTH} items")
        kinds = {_check_scalar(item, where) for item in value}
        if len(kinds) > 1:
            names = ", ".join(sorted(k.__name__ for k in kinds))
            raise ValueError(f"{where}: list mixes {names}; lists must be homogeneous")
        return
    _check_scalar(value, where)


_INT64_MIN, _INT64_END = -(2**63), 2**63


def check_properties(properties: Mapping[str, object], where: str) -> None:
    for key, value in properties.items():
        if not isinstance(key, str) or not PROPERTY_KEY_PATTERN.fullmatch(key):
            raise ValueError(
                f"{where}: property key {key!r} must match {PROPERTY_KEY_PATTERN.pattern}"
            )
        # Numbers and booleans, most property values, pass here without the
        # calls below (properties are checked per entity and edge, twice per event).
        if type(value) is float:
            if math.isfinite(value):
                continue
        elif type(value) is int:
            if _INT64_MIN <= value < _INT64_END:
                continue
        elif type(value) is bool:
            continue
        check_property_value(value, f"{where}.{key}")


def check_type_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not TYPE_PATTERN.fullmatch(value):
        raise ValueError(f"{what} {value!r} must match {TYPE_PATTERN.pattern}")
    return value


def blocking_key(name: str) -> str:
    """The key candidate lookups block on: the name, NFKC-folded, case-folded,
    with runs of whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return " ".join(folded.split())


@dataclass(frozen=True, slots=True)
class Entity:
    tenant_id: TenantId
    id: EntityId
    name: str
    type: str
    properties: Properties = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_id_text(self.id, "entity id")
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"entity {self.id!r} must have a non-empty name")
        _check_scalar(self.name, "entity name")
        check_type_name(self.type, "entity type")
        check_properties(self.properties, f"entity {self.id!r} properties")

    @property
    def blocking_key(self) -> str:
        return blocking_key(self.name)

    def merged_with(self, newer: Entity) -> Entity:
        """What an upsert of ``newer`` over this entity stores: name and type from
        the newer extraction, properties merged key by key (newer wins)."""
        return Entity(
            tenant_id=self.tenant_id,
            id=self.id,
            name=newer.name,
            type=newer.type,
            properties={**self.properties, **newer.properties},
        )


RelationshipKey: TypeAlias = tuple[EntityId, EntityId, str]


@dataclass(frozen=True, slots=True)
class Relationship:
    """A directed, typed edge. At most one per (source, target, type) per tenant."""

    tenant_id: TenantId
    source_id: EntityId
    target_id: EntityId
    type: str
    confidence: float = 1.0
    properties: Properties = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_id_text(self.source_id, "relationship source")
        check_id_text(self.target_id, "relationship target")
        check_type_name(self.type, "relationship type")
        if self.source_id == self.target_id:
            raise ValueError(f"relationship {self.key} is a self-loop")
        if not (isinstance(self.confidence, int | float) and 0.0 <= self.confidence <= 1.0):
            raise ValueError(f"relationship confidence {self.confidence!r} is not in [0, 1]")
        check_properties(self.properties, f"relationship {self.key} properties")

    @property
    def key(self) -> RelationshipKey:
        return (self.source_id, self.target_id, self.type)

    def merged_with(self, newer: Relationship) -> Relationship:
        return Relationship(
            tenant_id=self.tenant_id,
            source_id=self.source_id,
            target_id=self.target_id,
            type=self.type,
            confidence=newer.confidence,
            properties={**self.properties, **newer.properties},
        )


@dataclass(frozen=True, slots=True)
class Alias:
    """The fact that ``alias_id`` was merged into ``canonical_id``.

    Keyed by (tenant, alias_id): an entity has at most one canonical parent.
    """

    tenant_id: TenantId
    alias_id: EntityId
    canonical_id: EntityId
    reason: str = ""

    def __post_init__(self) -> None:
        check_id_text(self.alias_id, "alias id")
        check_id_text(self.canonical_id, "canonical id")
        if self.alias_id == self.canonical_id:
            raise ValueError(f"alias {self.alias_id!r} would point at itself")
        if not isinstance(self.reason, str):
            raise ValueError("alias reason must be a string")
        _check_scalar(self.reason, "alias reason")


#: The one metadata key a vector store interprets: ``search`` filters on it.
ENTITY_TYPE_KEY = "entity_type"
_MAX_METADATA_DEPTH = 32


def _check_json_text(value: str, where: str) -> None:
    # Postgres JSONB holds neither NUL nor a lone surrogate; refusing them here
    # keeps every adapter agreeing on which records are legal.
    if "\x00" in value:
        raise ValueError(f"{where}: string contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{where}: string contains a lone surrogate") from None


def check_metadata_value(value: object, where: str, depth: int = 0) -> None:
    """Raise ``ValueError`` unless ``value`` is JSON that reads back unchanged
    from every store: None, bool, int, finite float, str, list or str-keyed dict
    (no tuples, which would come back as lists)."""
    if depth > _MAX_METADATA_DEPTH:
        raise ValueError(f"{where}: nested deeper than {_MAX_METADATA_DEPTH} levels")
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value} is not a finite number")
        return
    if isinstance(value, str):
        _check_json_text(value, where)
        return
    if isinstance(value, list):
        for item in value:
            check_metadata_value(item, where, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} is not a string")
            _check_json_text(key, where)
            check_metadata_value(item, f"{where}.{key}", depth + 1)
        return
    raise ValueError(f"{where}: {type(value).__name__} is not JSON metadata")


#: The text ``_check_json_text`` refuses: a NUL or a lone surrogate (which
#: ``str.encode("utf-8")`` refuses, and nothing else).
_NOT_JSON_TEXT = re.compile(r"[\x00\ud800-\udfff]")
_TEXT = frozenset({str})


def _check_metadata(metadata: object, where: str) -> None:
    """:func:`check_metadata_value`, with a fast path for the common shape, a
    flat dict of strings (what the vector fold writes): one type set and one
    search over all its text instead of a call and an encode per string."""
    if type(metadata) is dict:
        texts = [*metadata, *metadata.values()]
        if set(map(type, texts)) == _TEXT and not _NOT_JSON_TEXT.search("".join(texts)):
            return
    check_metadata_value(metadata, where)


_PLAIN_NUMBERS = frozenset({float, int, bool})
_FLOATS = frozenset({float})


def _finite_numbers(values: tuple[object, ...]) -> bool:
    """Every component an int or float and finite. The common case (plain
    floats) runs in C: a record is built per entity per event, and a Python
    loop over 384 components was about 7% of a worker's CPU (bench/e2e.py).

    When every component is a ``float``, one ``sum`` settles it: adding floats
    never raises, and a NaN or an infinity makes the sum NaN or infinite. A
    non-finite sum of finite floats (it overflowed) goes on to the check per
    component. ``sum`` takes about a quarter of the time of ``map(isfinite)``;
    ints are left to ``isfinite``, which refuses one too large for a float."""
    kinds = set(map(type, values))
    if kinds <= _PLAIN_NUMBERS:
        if kinds == _FLOATS and math.isfinite(sum(values)):  # type: ignore[arg-type]
            return True
        return all(map(math.isfinite, values))  # type: ignore[arg-type]
    return all(isinstance(x, int | float) and math.isfinite(x) for x in values)


@dataclass(frozen=True, slots=True)
class VectorRecord:
    """An embedding stored under its entity's id. ``metadata`` is opaque JSON
    except for :data:`ENTITY_TYPE_KEY`, which ``search`` can filter on."""

    tenant_id: TenantId
    id: EntityId
    vector: tuple[float, ...]
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_id_text(self.id, "vector id")
        if not self.vector:
            raise ValueError("a vector must have at least one component")
        if not _finite_numbers(self.vector):
            raise ValueError(f"vector {self.id!r} has a non-finite or non-numeric component")
        _check_metadata(self.metadata, f"vector {self.id!r} metadata")

    @classmethod
    def from_floats(
        cls,
        tenant_id: TenantId,
        id: EntityId,
        floats: Sequence[float],
        metadata: dict[str, Any],
    ) -> VectorRecord:
        """The record the constructor makes of ``tuple(floats)``, for a caller
        whose components are all ``float`` instances (a validated pydantic
        ``list[float]``, or ``map(float, ...)``): their types are not checked
        again, which took about four times as long as the finiteness check
        (still made, by one ``sum``). The id and the metadata are checked as
        the constructor checks them, and anything refused is refused by the
        constructor itself, with its error."""
        vector = tuple(floats)
        try:
            # From 0.0, so that even an int too large for a float raises here.
            finite = bool(vector) and math.isfinite(sum(vector, 0.0))
        except (TypeError, ArithmeticError):  # not floats after all: the constructor says why
            finite = False
        if not finite:
            return cls(tenant_id, id, vector, metadata)
        check_id_text(id, "vector id")
        _check_metadata(metadata, f"vector {id!r} metadata")
        record = object.__new__(cls)
        object.__setattr__(record, "tenant_id", tenant_id)
        object.__setattr__(record, "id", id)
        object.__setattr__(record, "vector", vector)
        object.__setattr__(record, "metadata", metadata)
        return record


@dataclass(frozen=True, slots=True)
class VectorMatch:
    """A search hit. ``score`` is cosine similarity in [-1, 1], higher is nearer."""

    record: VectorRecord
    score: float


@dataclass(frozen=True, slots=True)
class EmbeddingIdentity:
    """What a vector store's vectors mean (docs/adr/0015-embedding-identity.md): vectors made
    by another model, dimension or prefix are not comparable with them."""

    model: str
    dimension: int
    document_prefix: str = ""
    query_prefix: str = ""

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("embedding model name must not be empty")
        if self.dimension <= 0:
            raise ValueError("embedding dimension must be positive")

    def first_difference(self, other: EmbeddingIdentity) -> tuple[str, object, object] | None:
        for name in ("model", "dimension", "document_prefix", "query_prefix"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                return name, mine, theirs
        return None


@dataclass(frozen=True, slots=True)
class StreamPartition:
    """One Kafka partition, identified also by the topic's id so that a deleted
    and recreated topic of the same name is never taken for the old one."""

    topic: str
    partition: int
    topic_id: str = ""


@dataclass(frozen=True, slots=True)
class Position:
    """Where a consumed event sits in the log."""

    topic: str
    partition: int
    offset: int


RebuildState = Literal["deleting", "rebuilding"]


@dataclass(frozen=True, slots=True)
class RebuildMarker:
    """An open rebuild of one tenant on one partition (docs/design.md 6).

    While open, the store applies an event of ``tenant_id`` only when
    ``applied_through < offset < end_offset`` and nothing of the tenant at or
    above ``end_offset``; it closes once ``[start_offset, end_offset)`` is covered.
    """

    tenant_id: TenantId
    partition: StreamPartition
    start_offset: int
    end_offset: int
    applied_through: int
    state: RebuildState = "rebuilding"

    @property
    def complete(self) -> bool:
        return self.state == "rebuilding" and self.applied_through >= self.end_offset - 1


@dataclass(frozen=True, slots=True)
class ErasureTombstone:
    """A tenant was erased at ``offset`` on ``partition``: nothing of the tenant
    below that offset may be applied again, by any replay or rebuild."""

    tenant_id: TenantId
    partition: StreamPartition
    offset: int


@dataclass(frozen=True, slots=True)
class ErasureSweep:
    """What each verification query counted after a tenant was deleted.

    A sweep that counted nothing is refused: verifying nothing is not evidence
    that nothing remains.
    """

    tenant_id: str
    remaining: Mapping[str, int]

    def __post_init__(self) -> None:
        if not self.remaining:
            raise ValueError("an erasure sweep must count at least one kind of artefact")
        object.__setattr__(self, "remaining", dict(self.remaining))

    @property
    def complete(self) -> bool:
        return all(count == 0 for count in self.remaining.values())

    @property
    def outstanding(self) -> dict[str, int]:
        return {name: count for name, count in self.remaining.items() if count}
