"""The graph fold: events -> entities, relationships and aliases.

Resolve-before-write (docs/adr/0011-alias-surface.md): every edge endpoint goes through
``resolve_entity_ids`` before the edge is written, so a later extraction cannot
revert a merge; an edge whose endpoints resolve to one entity collapses (it is
deleted, counted, and not a failure).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TypeVar

from contracts.domain import Alias, Entity, Relationship, RelationshipKey
from contracts.errors import AliasCycleError, DimensionMismatchError
from contracts.events import (
    DocumentExtractedEvent,
    EdgeRef,
    EntitiesMergedEvent,
    EntitiesUnmergedEvent,
    ExtractedRelationship,
)
from contracts.ids import EntityId, TenantId
from contracts.ports.graph import (
    GraphUnitOfWork,
    ProjectedGraphStore,
    ResolutionAhead,
    TenantResolution,
    TenantUpserts,
)
from projections.batch import Admitted
from projections.chunks import DEFAULT_CHUNK, chunks
from projections.fold import Fold, MergeRefused
from projections.records import LogRecord, Tally

V = TypeVar("V", Entity, Relationship)


def _edge(
    tenant: TenantId, source: EntityId, target: EntityId, rel: ExtractedRelationship
) -> Relationship:
    # Only between two distinct entities that exist (the callers collapse or
    # leave out the rest), so the event's checks are the edge's.
    return Relationship.prechecked(
        tenant, source, target, rel.type, rel.confidence, dict(rel.properties)
    )


class _EdgeWriter:
    """Collects one tenant's edge writes for a unit of work, in order.

    Knows which entities exist at each point: those in the store when the run
    began plus those upserted by earlier events of the run, so that batching
    leaves the state that one-at-a-time application would.
    """

    def __init__(
        self,
        tenant: TenantId,
        resolved: dict[EntityId, EntityId],
        existing: set[EntityId],
        *,
        chunk: int = DEFAULT_CHUNK,
    ):
        self.tenant = tenant
        self.chunk = chunk
        self.resolved = resolved
        self.existing = existing
        self.upserts: list[Relationship] = []
        self.deletes: list[RelationshipKey] = []

    def resolve(self, entity_id: str) -> EntityId:
        return self.resolved.get(EntityId(entity_id), EntityId(entity_id))

    def write(self, rel: ExtractedRelationship, tally: Tally) -> None:
        source, target = self.resolve(rel.source), self.resolve(rel.target)
        if source == target:
            self.deletes.append(rel.key)
            tally.collapsed += 1
        elif source not in self.existing or target not in self.existing:
            tally.dangling += 1
        else:
            self.upserts.append(_edge(self.tenant, source, target, rel))

    def remove(self, ref: EdgeRef) -> None:
        self.deletes.append((self.resolve(ref.source), self.resolve(ref.target), ref.type))

    async def flush(self, uow: GraphUnitOfWork) -> None:
        # Deleted keys and upserted keys of one flush never overlap in a way that
        # depends on order: deletes name raw or resolved keys of removed edges,
        # and every call site flushes before a later write could touch them.
        await self.flush_deletes(uow)
        for edges in chunks(self.upserts, self.chunk):
            await uow.upsert_relationships(self.tenant, edges)
        self.upserts = []

    async def flush_deletes(self, uow: GraphUnitOfWork) -> None:
        for keys in chunks(self.deletes, self.chunk):
            await uow.delete_relationships(self.tenant, keys)
        self.deletes = []


def _endpoints(events: Sequence[DocumentExtractedEvent]) -> set[EntityId]:
    return {
        EntityId(end)
        for event in events
        for rel in event.payload.relationships
        for end in (rel.source, rel.target)
    }


def _unseen_endpoints(
    events: Sequence[DocumentExtractedEvent], resolved: dict[EntityId, EntityId]
) -> set[EntityId]:
    """The resolved endpoints whose existence only the store can tell: those
    an edge names before the run itself has upserted them. An edge usually
    joins entities of its own document, so most runs ask the store nothing."""
    upserted: set[EntityId] = set()
    unseen: set[EntityId] = set()
    for event in events:
        upserted.update(EntityId(e.id) for e in event.payload.entities)
        for rel in event.payload.relationships:
            for end in (rel.source, rel.target):
                target = resolved.get(EntityId(end), EntityId(end))
                if target not in upserted:
                    unseen.add(target)
    return unseen


async def _existing(
    uow: GraphUnitOfWork, tenant: TenantId, ids: Iterable[EntityId]
) -> set[EntityId]:
    wanted = sorted(set(ids))
    if not wanted:
        return set()
    return {e.id for e in await uow.get_entities(tenant, wanted)}


def _by_tenant(values: Sequence[V]) -> dict[TenantId, list[V]]:
    grouped: dict[TenantId, list[V]] = {}
    for value in values:
        grouped.setdefault(value.tenant_id, []).append(value)
    return grouped


class GraphProjection(Fold[GraphUnitOfWork]):
    """``embedding_dimension``: the vector store's dimension, when there is one.
    An event carrying embeddings of another length is refused here too, so that
    both stores skip the same events (docs/design.md 5.8)."""

    def __init__(
        self,
        store: ProjectedGraphStore,
        clock: Callable[[], datetime] | None = None,
        *,
        embedding_dimension: int | None = None,
        chunk: int = DEFAULT_CHUNK,
    ) -> None:
        super().__init__(store, clock=clock)
        self.embedding_dimension = embedding_dimension
        # Entities, ids or edges per store call: a run of large events is
        # written in bounded statements (the result is the same, in order).
        self.chunk = max(1, chunk)

    def _check_embeddings(self, event: DocumentExtractedEvent) -> None:
        if self.embedding_dimension is None:
            return
        for entity in event.payload.entities:
            if entity.embedding is not None and len(entity.embedding) != self.embedding_dimension:
                raise DimensionMismatchError(
                    self.embedding_dimension,
                    len(entity.embedding),
                    f"entity {entity.id!r} embedding",
                )

    def look_ahead(self, uow: GraphUnitOfWork, records: Sequence[LogRecord]) -> None:
        """The edge endpoints of the segment's extractions, for a store that
        resolves ids with its first statement (``ResolutionAhead``): what
        ``_resolve_run`` asks, for the events admission keeps. A segment with
        more of them than one chunk resolves them chunk by chunk, as before."""
        if not isinstance(uow, ResolutionAhead):
            return
        asks: dict[TenantId, set[EntityId]] = {}
        for record in records:
            if isinstance(record.event, DocumentExtractedEvent):
                asks.setdefault(record.event.tenant, set()).update(_endpoints([record.event]))
        if asks and sum(len(ids) for ids in asks.values()) <= self.chunk:
            uow.resolve_ahead({tenant: sorted(ids) for tenant, ids in asks.items()})

    async def apply_run(self, uow: GraphUnitOfWork, run: Sequence[Admitted], tally: Tally) -> None:
        by_tenant: dict[TenantId, list[DocumentExtractedEvent]] = {}
        for item in run:
            assert isinstance(item.event, DocumentExtractedEvent)
            self._check_embeddings(item.event)
            by_tenant.setdefault(item.event.tenant, []).append(item.event)
        # Tenants never touch each other's rows, so grouping by tenant keeps
        # each tenant's own order and the result of one-at-a-time application.
        resolved = await self._resolve_run(uow, by_tenant)
        if isinstance(uow, TenantUpserts):
            plans = [
                await self._extractions(uow, tenant, events, tally, resolved[tenant])
                for tenant, events in by_tenant.items()
            ]
            await self._write_tenants(uow, plans)
            return
        for tenant, events in by_tenant.items():
            entities, writer = await self._extractions(uow, tenant, events, tally, resolved[tenant])
            await self._write_tenant(uow, entities, writer)

    async def _resolve_run(
        self, uow: GraphUnitOfWork, by_tenant: dict[TenantId, list[DocumentExtractedEvent]]
    ) -> dict[TenantId, dict[EntityId, EntityId]]:
        """Every edge endpoint of the run, resolved, by tenant. Extractions
        write no aliases, so what an id resolves to at the start of the run is
        what it resolves to before its tenant's writes: a store that resolves
        several tenants at once (``TenantResolution``) is asked once per
        chunk of ids for the whole run, others tenant by tenant."""
        wanted = [
            (tenant, end)
            for tenant, events in by_tenant.items()
            for end in sorted(_endpoints(events))
        ]
        resolved: dict[TenantId, dict[EntityId, EntityId]] = {t: {} for t in by_tenant}
        for part in chunks(wanted, self.chunk):
            asked: dict[TenantId, list[EntityId]] = {}
            for tenant, end in part:
                asked.setdefault(tenant, []).append(end)
            if isinstance(uow, TenantResolution):
                found = await uow.resolve_entity_ids_by_tenant(asked)
                for tenant in asked:  # a tenant left out of the answer is a KeyError
                    resolved[tenant].update(found[tenant])
            else:
                for tenant, ids in asked.items():
                    resolved[tenant].update(await uow.resolve_entity_ids(tenant, ids))
        return resolved

    async def _extractions(
        self,
        uow: GraphUnitOfWork,
        tenant: TenantId,
        events: Sequence[DocumentExtractedEvent],
        tally: Tally,
        resolved: dict[EntityId, EntityId],
    ) -> tuple[list[Entity], _EdgeWriter]:
        """A tenant's part of a run: the entities to upsert, and its edge
        writes (the endpoints' existence read from the store first)."""
        unseen = sorted(_unseen_endpoints(events, resolved))
        already: set[EntityId] = set()
        for ids in chunks(unseen, self.chunk):
            already |= await _existing(uow, tenant, ids)
        entities = [
            Entity.prechecked(tenant, EntityId(e.id), e.name, e.type, dict(e.properties))
            for event in events
            for e in event.payload.entities
        ]
        writer = _EdgeWriter(tenant, resolved, already, chunk=self.chunk)
        for event in events:
            writer.existing.update(EntityId(e.id) for e in event.payload.entities)
            for rel in event.payload.relationships:
                writer.write(rel, tally)
        return entities, writer

    async def _write_tenant(
        self, uow: GraphUnitOfWork, entities: list[Entity], writer: _EdgeWriter
    ) -> None:
        for part in chunks(entities, self.chunk):
            await uow.upsert_entities(writer.tenant, part)
        await writer.flush(uow)

    async def _write_tenants(
        self, uow: GraphUnitOfWork, plans: list[tuple[list[Entity], _EdgeWriter]]
    ) -> None:
        """Every tenant's deletes, then every entity of the run and then every
        edge, in ``upsert_by_tenant`` calls of at most ``self.chunk`` entities
        and ``self.chunk`` edges: the last entities' call carries the first
        edges, as a tenant's entity upsert and edge upsert go together. Deletes
        and upserts of one run never touch the same edge (``_EdgeWriter.flush``),
        and tenants never touch each other's rows, so this leaves what writing
        tenant by tenant does, in as few calls as the chunks allow."""
        assert isinstance(uow, TenantUpserts)
        for _, writer in plans:
            await writer.flush_deletes(uow)
        entities = list(chunks((e for batch, _ in plans for e in batch), self.chunk)) or [[]]
        edges = list(chunks((r for _, writer in plans for r in writer.upserts), self.chunk)) or [[]]
        calls: list[tuple[list[Entity], list[Relationship]]] = [(p, []) for p in entities[:-1]]
        calls.append((entities[-1], edges[0]))
        calls.extend(([], part) for part in edges[1:])
        for entity_part, edge_part in calls:
            await uow.upsert_by_tenant(_by_tenant(entity_part), _by_tenant(edge_part))

    async def apply_merge(
        self, uow: GraphUnitOfWork, event: EntitiesMergedEvent, tally: Tally
    ) -> None:
        """Two resolutions and one existence lookup, whatever the edges: each
        read asks for every id that its step of the merge needs
        (bench/neo4j_profile.py counts the statements). The writes keep the
        order of applying the steps one at a time: removals, aliases, added
        edges, then the absorbed ids' edges moved."""
        tenant, payload = event.tenant, event.payload
        canonical = EntityId(payload.canonical_id)
        absorbed = [EntityId(a) for a in payload.absorbed_ids]
        merged = [canonical, *absorbed]
        # Removals name edges as the write model saw them before the merge, so
        # their endpoints resolve with the merge's own ids, before its aliases.
        # A cycle already in the store is corruption (AliasCycleError escapes).
        removed = {
            EntityId(end) for ref in payload.edges_to_remove for end in (ref.source, ref.target)
        }
        before = await uow.resolve_entity_ids(tenant, sorted({*merged, *removed}))
        await self._remove_edges(uow, tenant, payload.edges_to_remove, before)
        await uow.upsert_aliases(
            tenant, [Alias(tenant, alias_id, canonical, payload.reason) for alias_id in absorbed]
        )
        # Nothing the merge writes from here on touches an absorbed id's edges
        # except the collapsed added edges, left out of the move below.
        touching = await uow.get_relationships_for(tenant, absorbed)
        ends = {EntityId(end) for rel in payload.edges_to_add for end in (rel.source, rel.target)}
        ends.update(end for rel in touching for end in (rel.source_id, rel.target_id))
        resolved = await self._resolve_merged(uow, tenant, merged, ends)
        existing = await _existing(uow, tenant, {resolved[e] for e in ends})
        writer = _EdgeWriter(tenant, resolved, existing, chunk=self.chunk)
        for rel in payload.edges_to_add:
            writer.write(rel, tally)
        collapsed = set(writer.deletes)
        await writer.flush(uow)
        await self._repoint(
            uow, tenant, [rel for rel in touching if rel.key not in collapsed], writer, tally
        )

    @staticmethod
    async def _resolve_merged(
        uow: GraphUnitOfWork, tenant: TenantId, merged: list[EntityId], ends: set[EntityId]
    ) -> dict[EntityId, EntityId]:
        """The merge's ids and its edges' ends, resolved through its new aliases.
        A cycle that only the merge's own ids meet is one the merge closed: a
        refusal. One among the other ends was in the store before: corruption."""
        try:
            return await uow.resolve_entity_ids(tenant, sorted({*merged, *ends}))
        except AliasCycleError as exc:
            try:
                await uow.resolve_entity_ids(tenant, merged)
            except AliasCycleError:
                raise MergeRefused(
                    f"merging {', '.join(merged[1:])} into {merged[0]!r} would close an alias cycle"
                ) from exc
            raise

    async def apply_unmerge(
        self, uow: GraphUnitOfWork, event: EntitiesUnmergedEvent, tally: Tally
    ) -> None:
        tenant, payload = event.tenant, event.payload
        await self._remove_edges(uow, tenant, payload.edges_to_remove)
        for restored in payload.restored_ids:
            await uow.remove_alias(tenant, EntityId(restored))
        await self._add_edges(uow, tenant, payload.edges_to_restore, tally)

    async def _remove_edges(
        self,
        uow: GraphUnitOfWork,
        tenant: TenantId,
        refs: Sequence[EdgeRef],
        resolved: dict[EntityId, EntityId] | None = None,
    ) -> None:
        """Delete ``refs`` by their resolved keys; ``resolved`` when the caller
        has already resolved their ends."""
        if not refs:
            return
        if resolved is None:
            ids = {EntityId(end) for ref in refs for end in (ref.source, ref.target)}
            resolved = await uow.resolve_entity_ids(tenant, sorted(ids))
        writer = _EdgeWriter(tenant, resolved, set(), chunk=self.chunk)
        for ref in refs:
            writer.remove(ref)
        await writer.flush(uow)

    async def _add_edges(
        self,
        uow: GraphUnitOfWork,
        tenant: TenantId,
        rels: Sequence[ExtractedRelationship],
        tally: Tally,
    ) -> None:
        if not rels:
            return
        ids = {EntityId(end) for rel in rels for end in (rel.source, rel.target)}
        resolved = await uow.resolve_entity_ids(tenant, sorted(ids))
        writer = _EdgeWriter(
            tenant, resolved, await _existing(uow, tenant, resolved.values()), chunk=self.chunk
        )
        for rel in rels:
            writer.write(rel, tally)
        await writer.flush(uow)

    async def _repoint(
        self,
        uow: GraphUnitOfWork,
        tenant: TenantId,
        touching: Sequence[Relationship],
        writer: _EdgeWriter,
        tally: Tally,
    ) -> None:
        """An absorbed entity keeps no edges: move each to the resolved ids."""
        moved: list[Relationship] = []
        for rel in sorted(touching, key=lambda r: r.key):
            source, target = writer.resolve(rel.source_id), writer.resolve(rel.target_id)
            if source == target:
                tally.collapsed += 1
            elif source not in writer.existing or target not in writer.existing:
                tally.dangling += 1
            else:
                moved.append(
                    Relationship(tenant, source, target, rel.type, rel.confidence, rel.properties)
                )
        for keys in chunks([rel.key for rel in touching], self.chunk):
            await uow.delete_relationships(tenant, keys)
        for edges in chunks(moved, self.chunk):
            await uow.upsert_relationships(tenant, edges)
