"""What the read API answers, as pydantic models (they make its OpenAPI document)."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.domain import VectorMatch

#: The most items one page holds.
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
#: How far pages reach into one list (offset + limit): the ports answer a list
#: from its start, so a deeper page costs as much as every page before it.
MAX_WINDOW = 10_000
#: Ids one request may name (batch get, resolve).
MAX_IDS = 100
#: The most search hits one request may reach (offset + limit).
MAX_SEARCH_WINDOW = 1000

T = TypeVar("T")


class _FromDomain(BaseModel):
    # Built from the domain's frozen dataclasses by their attributes.
    model_config = ConfigDict(from_attributes=True)


class EntityOut(_FromDomain):
    tenant_id: str
    id: str
    name: str
    type: str
    properties: dict[str, Any]


class RelationshipOut(_FromDomain):
    tenant_id: str
    source_id: str
    target_id: str
    type: str
    confidence: float
    properties: dict[str, Any]


class AliasOut(_FromDomain):
    tenant_id: str
    alias_id: str
    canonical_id: str
    reason: str


class Page(BaseModel, Generic[T]):
    """One page of a list; ``next_offset`` is where the next page starts, null
    after the last one."""

    items: list[T]
    limit: int
    offset: int
    next_offset: int | None


class EntityBatch(Page[EntityOut]):
    missing: list[str] = Field(description="The ids asked for that name no entity.")


class Resolved(BaseModel):
    ids: dict[str, str] = Field(
        description="Each id asked for and its canonical id (itself when it has no alias)."
    )


class SearchRequest(BaseModel):
    """Search by ``vector`` or by ``text`` (embedded with the workers' model,
    on its query side); exactly one of them."""

    vector: list[Annotated[float, Field(allow_inf_nan=False)]] | None = Field(
        None, min_length=1, max_length=8192
    )
    text: str | None = Field(None, min_length=1, max_length=8192)
    limit: int = Field(10, ge=1, le=MAX_SEARCH_WINDOW)
    offset: int = Field(0, ge=0, lt=MAX_SEARCH_WINDOW)
    entity_type: str | None = Field(None, min_length=1, max_length=64)
    include_vectors: bool = False

    @model_validator(mode="after")
    def _one_query(self) -> SearchRequest:
        if (self.vector is None) == (self.text is None):
            raise ValueError("give exactly one of 'vector' and 'text'")
        if self.offset + self.limit > MAX_SEARCH_WINDOW:
            raise ValueError(f"offset + limit may be at most {MAX_SEARCH_WINDOW}")
        return self


class SearchHit(BaseModel):
    tenant_id: str
    id: str
    score: float
    metadata: dict[str, Any]
    vector: list[float] | None = None

    @classmethod
    def of(cls, match: VectorMatch, include_vector: bool) -> SearchHit:
        record = match.record
        return cls(
            tenant_id=record.tenant_id,
            id=record.id,
            score=match.score,
            metadata=record.metadata,
            vector=list(record.vector) if include_vector else None,
        )


class ProjectionPosition(BaseModel):
    """How far each store has projected the tenant's partition."""

    topic: str
    partition: int
    graph_checkpoint: int = Field(description="The last offset the graph store holds (-1: none).")
    vector_checkpoint: int = Field(description="The last offset the vector store holds.")
    offset: int | None = Field(None, description="The offset asked about, if any.")
    projected: bool | None = Field(
        None, description="Whether both stores hold ``offset`` (null when none was asked)."
    )
    rebuilding: bool = Field(description="Whether the tenant is being rebuilt (data partial).")


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorOut(BaseModel):
    error: ErrorBody


Direction = Literal["out", "in", "both"]
