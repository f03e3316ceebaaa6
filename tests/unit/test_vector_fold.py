"""The vector fold's records: what ``VectorRecord`` made of ``map(float, ...)``
before it took carried embeddings as they are (pydantic's floats) and skipped
re-checking their types."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pytest

from contracts.domain import EmbeddingIdentity, VectorRecord
from contracts.errors import DimensionMismatchError, InvalidEventError
from contracts.events import DocumentExtractedEvent, parse_event
from contracts.ids import EntityId, TenantId
from projections.batch import Admitted
from projections.records import Tally
from projections.vector import VectorProjection, vector_metadata

DIMENSION = 3


class Store:
    dimension = DIMENSION


class Embedder:
    identity = EmbeddingIdentity("fake", DIMENSION)

    def __init__(self, vectors: list[Any]) -> None:
        self.vectors = vectors

    async def embed_documents(self, texts: Sequence[str]) -> list[Any]:
        assert len(texts) == len(self.vectors)
        return self.vectors

    async def embed_query(self, text: str) -> list[float]:
        raise NotImplementedError


class UnitOfWork:
    def __init__(self) -> None:
        self.written: list[tuple[TenantId, list[VectorRecord]]] = []

    async def upsert_many(self, tenant: TenantId, records: Sequence[VectorRecord]) -> None:
        self.written.append((tenant, list(records)))


def document(embeddings: list[str | None]) -> DocumentExtractedEvent:
    entities = []
    for i, embedding in enumerate(embeddings):
        text = f'{{"id": "e{i}", "name": "E {i}", "type": "T"'
        text += "}" if embedding is None else f', "embedding": {embedding}}}'
        entities.append(text)
    raw = (
        '{"event_id": "00000000-0000-0000-0000-000000000001", "event_type": "DocumentExtracted",'
        ' "schema_version": 1, "tenant_id": "acme", "occurred_at": "2026-11-01T09:00:00Z",'
        ' "producer": "p", "payload": {"document_id": "d", "extraction_model": "m",'
        f' "entities": [{", ".join(entities)}]}}}}'
    )
    event = parse_event(raw.encode())
    assert isinstance(event, DocumentExtractedEvent)
    return event


async def fold(event: DocumentExtractedEvent, embedded: list[Any]) -> list[VectorRecord]:
    uow = UnitOfWork()
    projection = VectorProjection(Store(), Embedder(embedded))  # type: ignore[arg-type]
    await projection.apply_run(uow, [Admitted(0, event)], Tally())  # type: ignore[arg-type]
    return [record for _, records in uow.written for record in records]


def as_before(event: DocumentExtractedEvent, embedded: list[Any]) -> list[VectorRecord]:
    """What the fold wrote before: ``VectorRecord`` of ``tuple(map(float, ...))``."""
    supplied = iter(embedded)
    return [
        VectorRecord(
            tenant_id=event.tenant,
            id=EntityId(entity.id),
            vector=tuple(map(float, entity.embedding or next(supplied))),
            metadata=vector_metadata(entity, event.payload.document_id),
        )
        for entity in event.payload.entities
    ]


def typed(records: list[VectorRecord]) -> list[tuple[object, ...]]:
    return [
        (r.tenant_id, r.id, type(r.vector), [(type(x), repr(x)) for x in r.vector], r.metadata)
        for r in records
    ]


class Real(float):
    pass


@pytest.mark.parametrize(
    ("embeddings", "embedded"),
    [
        (["[1, -0, 0.5]", "[-0.0, 1e23, 12345678901234567890123]"], []),
        (["[1e-400, 5e-324, 3.4028234663852886e38]", None], [[1, Real(0.25), True]]),
        ([None, None], [[0.5, 0.25, 0.125], ["1", "2.5", "-0"]]),
    ],
)
async def test_the_fold_writes_the_records_it_wrote_before(
    embeddings: list[str | None], embedded: list[Any]
) -> None:
    event = document(embeddings)
    written = await fold(event, embedded)
    assert typed(written) == typed(as_before(event, embedded))
    assert all(type(x) is float for record in written for x in record.vector)


@pytest.mark.parametrize(
    "embedding", ["[NaN, 0, 0]", "[0, Infinity, 0]", "[0, 0, -1e400]", "[0, 1e39, 0]"]
)
def test_a_carried_embedding_beyond_float32_never_reaches_the_fold(embedding: str) -> None:
    """The contract refuses it (docs/events.md), so the fold's own check
    (below) only ever meets an embedder's vector."""
    with pytest.raises(InvalidEventError, match=r"embedding|not JSON"):
        document([embedding])


async def test_a_non_finite_embedded_vector_is_refused_as_before() -> None:
    event = document([None])
    with pytest.raises(ValueError, match="non-finite or non-numeric component"):
        await fold(event, [[0.5, math.nan, 0.5]])


async def test_a_wrong_dimension_is_found_before_any_conversion() -> None:
    with pytest.raises(DimensionMismatchError):
        await fold(document([None]), [["not a number"]])
    with pytest.raises(DimensionMismatchError):
        await fold(document([json.dumps([0.5] * (DIMENSION + 1))]), [])
