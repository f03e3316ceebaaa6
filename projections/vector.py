"""The vector fold: extracted entities -> embeddings, merges -> visibility.

Every vector stays under its own entity id; an id is visible to search exactly
when it has no alias. The store keeps its own alias facts, so it refuses the
same merges as the graph fold without reading the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from contracts.domain import ENTITY_TYPE_KEY, VectorRecord
from contracts.errors import AliasCycleError, DimensionMismatchError
from contracts.events import (
    DocumentExtractedEvent,
    EntitiesMergedEvent,
    EntitiesUnmergedEvent,
    ExtractedEntity,
)
from contracts.ids import EntityId, TenantId
from contracts.ports.embedder import Embedder
from contracts.ports.vector import ProjectedVectorStore, VectorUnitOfWork
from projections.batch import Admitted
from projections.chunks import DEFAULT_CHUNK, chunks
from projections.fold import Fold, MergeRefused
from projections.records import Tally


def vector_metadata(entity: ExtractedEntity, document_id: str) -> dict[str, Any]:
    return {ENTITY_TYPE_KEY: entity.type, "name": entity.name, "document_id": document_id}


class VectorProjection(Fold[VectorUnitOfWork]):
    def __init__(
        self,
        store: ProjectedVectorStore,
        embedder: Embedder,
        clock: Callable[[], datetime] | None = None,
        *,
        chunk: int = DEFAULT_CHUNK,
    ) -> None:
        super().__init__(store, clock=clock)
        self.embedder = embedder
        # Entities per embedding call and per upsert: a run is embedded and
        # written a chunk at a time, so its vectors are never all in memory.
        self.chunk = max(1, chunk)
        self.dimension = store.dimension
        if embedder.identity.dimension != store.dimension:
            raise DimensionMismatchError(store.dimension, embedder.identity.dimension, "embedder")

    async def apply_run(self, uow: VectorUnitOfWork, run: Sequence[Admitted], tally: Tally) -> None:
        pending = (
            (item.event.tenant, entity, item.event.payload.document_id)
            for item in run
            if isinstance(item.event, DocumentExtractedEvent)
            for entity in item.event.payload.entities
        )
        for part in chunks(pending, self.chunk):
            await self._apply_chunk(uow, part)

    async def _apply_chunk(
        self, uow: VectorUnitOfWork, pending: Sequence[tuple[TenantId, ExtractedEntity, str]]
    ) -> None:
        by_tenant: dict[TenantId, list[VectorRecord]] = {}
        missing = [e.name for _, e, _ in pending if e.embedding is None]
        embedded = iter(await self.embedder.embed_documents(missing) if missing else [])
        for tenant, entity, document_id in pending:
            carried = entity.embedding
            vector = carried if carried is not None else next(embedded)
            if len(vector) != self.dimension:
                # A wrong carried embedding is this event's fault: the segment is
                # re-applied one event at a time and only this event is skipped.
                raise DimensionMismatchError(
                    self.dimension, len(vector), f"entity {entity.id!r} embedding"
                )
            metadata = vector_metadata(entity, document_id)
            by_tenant.setdefault(tenant, []).append(
                # A carried embedding, its id and its metadata passed the event
                # contract's checks, which are the record's (Float32: finite
                # float instances); an embedder's output is checked here.
                VectorRecord.prechecked(tenant, EntityId(entity.id), tuple(vector), metadata)
                if carried is not None
                else VectorRecord.from_floats(
                    tenant, EntityId(entity.id), list(map(float, vector)), metadata
                )
            )
        for tenant, records in by_tenant.items():
            await uow.upsert_many(tenant, records)

    async def apply_merge(
        self, uow: VectorUnitOfWork, event: EntitiesMergedEvent, tally: Tally
    ) -> None:
        tenant, payload = event.tenant, event.payload
        canonical = EntityId(payload.canonical_id)
        absorbed = [EntityId(a) for a in payload.absorbed_ids]
        await uow.resolve_entity_ids(tenant, [canonical, *absorbed])
        for alias_id in absorbed:
            await uow.hide_merged(tenant, alias_id, canonical)
        try:
            await uow.resolve_entity_ids(tenant, [canonical, *absorbed])
        except AliasCycleError as exc:
            raise MergeRefused(
                f"merging {', '.join(absorbed)} into {canonical!r} would close an alias cycle"
            ) from exc

    async def apply_unmerge(
        self, uow: VectorUnitOfWork, event: EntitiesUnmergedEvent, tally: Tally
    ) -> None:
        for restored in event.payload.restored_ids:
            await uow.unhide(event.tenant, EntityId(restored))
