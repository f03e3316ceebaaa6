"""Domain values shared by the ports, the folds and the adapters.

Values are frozen dataclasses. Their ``properties`` and ``metadata`` mappings
are plain dicts, so every adapter returns fresh objects from every read (the
compliance suites check it): a caller mutating a result must never change the
store.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar

from contracts.ids import EntityId, TenantId
from contracts.validation import (
    check_id_text,
    check_metadata,
    check_properties,
    check_string,
    check_type_name,
    finite_numbers,
)

PropertyValue: TypeAlias = (
    str | int | float | bool | list[str] | list[int] | list[float] | list[bool]
)
Properties: TypeAlias = dict[str, PropertyValue]


_Value = TypeVar("_Value")
#: Each frozen, slotted dataclass's maker (see ``_prechecked``).
_MAKERS: dict[type, Callable[..., Any]] = {}


def _maker(cls: type[_Value]) -> Callable[..., _Value]:
    """A function of ``cls``'s fields, in order, that makes the instance
    holding them without ``__init__`` and ``__post_init__``: the object made
    by ``object.__new__``, then each slot's own setter, which a frozen
    dataclass's ``__setattr__`` does not guard (about half the time of
    ``object.__setattr__`` by name). Its text is generated once per class, as
    ``dataclasses`` generates ``__init__``: a loop over the setters cost
    two and a half times as much per value (a worker builds about forty such
    values per event)."""
    names = cls.__slots__  # type: ignore[attr-defined]
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for index, name in enumerate(names):
        scope[f"_set{index}"] = cls.__dict__[name].__set__
    params = ", ".join(f"v{i}" for i in range(len(names)))
    sets = "".join(f"    _set{i}(made, v{i})\n" for i in range(len(names)))
    exec(f"def make({params}):\n    made = _new(_cls)\n{sets}    return made\n", scope)
    made: Callable[..., _Value] = scope["make"]
    return made


def _prechecked(cls: type[_Value], *values: object) -> _Value:
    """An instance of the frozen, slotted dataclass ``cls`` holding ``values``
    (its fields, in order), made without ``__init__`` and ``__post_init__``:
    for the ``prechecked`` constructors below, whose callers have made every
    check ``__post_init__`` would make."""
    make = _MAKERS.get(cls)
    if make is None:
        make = _MAKERS.setdefault(cls, _maker(cls))
    made: _Value = make(*values)
    return made


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
        check_string(self.name, "entity name")
        check_type_name(self.type, "entity type")
        check_properties(self.properties, f"entity {self.id!r} properties")

    @classmethod
    def prechecked(
        cls, tenant_id: TenantId, id: EntityId, name: str, type: str, properties: Properties
    ) -> Entity:
        """The entity of these fields, without ``__post_init__``'s checks: for
        the fields of an ``ExtractedEntity`` that ``parse_event`` accepted,
        whose validators make every one of them (and a stricter id check).
        The graph fold builds each extracted entity this way: the checks cost
        about a tenth of a worker's CPU per event, made a second time
        (docs/adr/0019-checks-made-once.md).
        ``test_extracted_values_pass_the_domain_checks`` holds the event
        contract to it."""
        return _prechecked(cls, tenant_id, id, name, type, properties)

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

    @classmethod
    def prechecked(
        cls,
        tenant_id: TenantId,
        source_id: EntityId,
        target_id: EntityId,
        type: str,
        confidence: float,
        properties: Properties,
    ) -> Relationship:
        """The relationship of these fields, without ``__post_init__``'s checks
        (see ``Entity.prechecked``): for an ``ExtractedRelationship`` that
        ``parse_event`` accepted (its type, confidence and properties), between
        two distinct ids of entities that exist (each was checked when it was
        written). The graph fold writes only such edges: it collapses an edge
        whose ends resolve to one entity and leaves out one with an end that
        does not exist."""
        return _prechecked(cls, tenant_id, source_id, target_id, type, confidence, properties)

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
        check_string(self.reason, "alias reason")


#: The one metadata key a vector store interprets: ``search`` filters on it.
ENTITY_TYPE_KEY = "entity_type"


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
        if not finite_numbers(self.vector):
            raise ValueError(f"vector {self.id!r} has a non-finite or non-numeric component")
        check_metadata(self.metadata, f"vector {self.id!r} metadata")

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
        check_metadata(metadata, f"vector {id!r} metadata")
        return _prechecked(cls, tenant_id, id, vector, metadata)

    @classmethod
    def prechecked(
        cls,
        tenant_id: TenantId,
        id: EntityId,
        vector: tuple[float, ...],
        metadata: dict[str, Any],
    ) -> VectorRecord:
        """The record of these fields, without ``__post_init__``'s checks (see
        ``Entity.prechecked``): for the embedding an accepted
        ``ExtractedEntity`` carries (at least one component, each a finite
        float32 ``float``), under its id, with metadata of exact strings that
        its validators checked (``projections.vector.vector_metadata``: its
        type, its name and the document's id)."""
        return _prechecked(cls, tenant_id, id, vector, metadata)


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
