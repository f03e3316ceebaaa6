"""The in-memory graph store: the reference the real adapters are held to.

Committed state is one ``GraphState``. A unit of work holds the store's lock
(standing in for the lock on the partition's checkpoint), works on a private
copy and swaps it in on a normal exit, so an exception discards every write and
the checkpoint together. The methods live once, on ``GraphView``: the store
reads through a view over committed state and writes through a one-call unit
of work.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from adapters.alias_depth import DEFAULT_MAX_ALIAS_DEPTH, check_alias_write, check_resolved_depth
from adapters.direct_calls import reads, writes
from adapters.isolation import Partition, erasure_sweep, tenant_scope
from adapters.memory.ledger import LedgerState, MemoryLedger
from contracts.domain import (
    Alias,
    Entity,
    ErasureSweep,
    Relationship,
    RelationshipKey,
    StreamPartition,
)
from contracts.errors import AliasCycleError, MissingEntityError
from contracts.ids import EntityId, TenantId
from contracts.ports.ledger import lock_order
from contracts.ports.lifecycle import ClosingContext

if TYPE_CHECKING:
    from contracts.ports.graph import GraphUnitOfWork, ProjectedGraphStore
    from contracts.ports.ledger import UnitsAcrossPartitions

K = TypeVar("K", bound=Any)
V = TypeVar("V")
T = TypeVar("T")
Record = TypeVar("Record", Entity, Relationship, Alias)


@dataclass
class GraphState:
    entities: dict[tuple[TenantId, EntityId], Entity] = field(default_factory=dict)
    relationships: dict[tuple[TenantId, RelationshipKey], Relationship] = field(
        default_factory=dict
    )
    aliases: dict[tuple[TenantId, EntityId], Alias] = field(default_factory=dict)
    ledger: LedgerState = field(default_factory=LedgerState)
    #: Alias hops from any id to its canonical (adapters.alias_depth).
    max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH

    def copy(self) -> GraphState:
        # Stored values are frozen and never mutated in place (writes store
        # private copies and replace them whole), so snapshots may share them.
        return GraphState(
            entities=dict(self.entities),
            relationships=dict(self.relationships),
            aliases=dict(self.aliases),
            ledger=self.ledger.copy(),
            max_alias_depth=self.max_alias_depth,
        )


def _tenant_of(record: Entity | Relationship | Alias) -> TenantId:
    return record.tenant_id


def _entity(entity: Entity) -> Entity:
    return replace(entity, properties=copy.deepcopy(entity.properties))


def _relationship(rel: Relationship) -> Relationship:
    return replace(rel, properties=copy.deepcopy(rel.properties))


def _alias(alias: Alias) -> Alias:
    return replace(alias)


def _ordered(rows: Mapping[tuple[TenantId, K], V], tenant: TenantId) -> list[V]:
    """The tenant's rows ordered by their key within the tenant."""
    return [
        row for _, row in sorted(((k, r) for (t, k), r in rows.items() if t == tenant), key=_first)
    ]


def _drop(rows: dict[tuple[TenantId, K], V], tenant: TenantId) -> None:
    for key in [key for key in rows if key[0] == tenant]:
        del rows[key]


def _count(rows: Mapping[tuple[TenantId, K], Record], tenant: TenantId) -> int:
    # By the record's own tenant as well as the key's, so that a row filed
    # under the wrong key still shows up as remaining.
    return sum(1 for (t, _), r in rows.items() if tenant in (t, r.tenant_id))


def _first(pair: tuple[K, V]) -> K:
    return pair[0]


@contextmanager
def _scoped(tenant_id: TenantId, method: str) -> Iterator[Partition]:
    with tenant_scope(tenant_id):
        yield Partition.current(where=f"memory.graph.{method}")


class GraphView(MemoryLedger, ClosingContext):
    """GraphStore and ProjectionLedger over one ``GraphState``: the committed
    state for direct reads, or a unit of work's private copy."""

    def __init__(self, state: GraphState) -> None:
        self._state: GraphState | None = state
        super().__init__(state.ledger)

    # MemoryLedger keeps its state in ``_ledger``; routing it through ``_graph``
    # makes the ledger methods refuse an ended unit of work too.
    @property
    def _ledger(self) -> LedgerState:
        return self._graph.ledger

    @_ledger.setter
    def _ledger(self, value: LedgerState) -> None:
        if value is not self._graph.ledger:
            raise ValueError("a graph view's ledger is its graph state's ledger")

    @property
    def _graph(self) -> GraphState:
        if self._state is None:
            # After commit the state is the committed one: writing through a
            # leftover view would change it without the lock.
            raise RuntimeError("this unit of work has ended; open a new one")
        return self._state

    def end(self) -> None:
        self._state = None

    async def aclose(self) -> None:
        """A unit of work ends with its ``async with``; there is nothing to release."""

    # EntityReader

    async def get_entity(self, tenant_id: TenantId, entity_id: EntityId) -> Entity | None:
        with _scoped(tenant_id, "get_entity") as part:
            found = part.one(self._graph.entities.get((part.tenant, entity_id)), _tenant_of)
            return None if found is None else _entity(found)

    async def get_entities(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> list[Entity]:
        with _scoped(tenant_id, "get_entities") as part:
            entities = self._graph.entities
            found = (entities.get((part.tenant, i)) for i in sorted(set(entity_ids)))
            return [_entity(e) for e in part.only((e for e in found if e), _tenant_of)]

    async def find_entities(
        self, tenant_id: TenantId, entity_type: str | None = None, limit: int = 1000
    ) -> list[Entity]:
        if limit < 0:
            raise ValueError(f"limit must not be negative, got {limit}")
        with _scoped(tenant_id, "find_entities") as part:
            matching = [
                e
                for e in self._tenant_entities(part)
                if entity_type is None or e.type == entity_type
            ]
            return [_entity(e) for e in part.only(matching[:limit], _tenant_of)]

    async def find_by_blocking_key(self, tenant_id: TenantId, key: str) -> list[Entity]:
        return (await self.find_by_blocking_keys(tenant_id, [key]))[key]

    async def find_by_blocking_keys(
        self, tenant_id: TenantId, keys: Iterable[str]
    ) -> dict[str, list[Entity]]:
        with _scoped(tenant_id, "find_by_blocking_keys") as part:
            answer: dict[str, list[Entity]] = {key: [] for key in keys}
            for entity in part.only(self._tenant_entities(part), _tenant_of):
                if entity.blocking_key in answer:
                    answer[entity.blocking_key].append(_entity(entity))
            return answer

    def _tenant_entities(self, part: Partition) -> list[Entity]:
        """The tenant's entities ordered by id, filtered by the key's tenant."""
        return _ordered(self._graph.entities, part.tenant)

    # EntityWriter

    async def upsert_entity(self, tenant_id: TenantId, entity: Entity) -> None:
        await self.upsert_entities(tenant_id, [entity])

    async def upsert_entities(self, tenant_id: TenantId, entities: Sequence[Entity]) -> None:
        with _scoped(tenant_id, "upsert_entities") as part:
            stored = self._graph.entities
            for entity in part.only(entities, _tenant_of):
                key = (part.tenant, entity.id)
                existing = stored.get(key)
                stored[key] = _entity(entity) if existing is None else existing.merged_with(entity)

    # AliasStore

    async def upsert_alias(self, tenant_id: TenantId, alias: Alias) -> None:
        await self.upsert_aliases(tenant_id, [alias])

    async def upsert_aliases(self, tenant_id: TenantId, aliases: Sequence[Alias]) -> None:
        with _scoped(tenant_id, "upsert_aliases") as part:
            stored = self._graph.aliases
            pairs = {
                absorbed: row.canonical_id
                for (t, absorbed), row in stored.items()
                if t == part.tenant
            }
            for alias in part.only(aliases, _tenant_of):
                check_alias_write(
                    part.tenant,
                    pairs,
                    alias.alias_id,
                    alias.canonical_id,
                    self._graph.max_alias_depth,
                )
                stored[(part.tenant, alias.alias_id)] = _alias(alias)
                pairs[alias.alias_id] = alias.canonical_id

    async def remove_alias(self, tenant_id: TenantId, alias_id: EntityId) -> bool:
        with _scoped(tenant_id, "remove_alias") as part:
            return self._graph.aliases.pop((part.tenant, alias_id), None) is not None

    async def find_aliases(self, tenant_id: TenantId, canonical_id: EntityId) -> list[Alias]:
        with _scoped(tenant_id, "find_aliases") as part:
            direct = [
                alias
                for alias in _ordered(self._graph.aliases, part.tenant)
                if alias.canonical_id == canonical_id
            ]
            return [_alias(a) for a in part.only(direct, _tenant_of)]

    async def resolve_entity_ids(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> dict[EntityId, EntityId]:
        with _scoped(tenant_id, "resolve_entity_ids") as part:
            aliases = self._graph.aliases
            # A walk longer than every alias of the tenant has revisited an id;
            # the +1 is the final lookup that finds no alias at a chain's end.
            bound = sum(1 for (t, _) in aliases if t == part.tenant) + 1
            resolved: dict[EntityId, EntityId] = {}
            for start in entity_ids:
                current = start
                hops = 0
                for hops in range(bound):  # noqa: B007 (read after the loop)
                    alias = part.one(aliases.get((part.tenant, current)), _tenant_of)
                    if alias is None:
                        break
                    current = alias.canonical_id
                else:
                    raise AliasCycleError(part.tenant, start)
                check_resolved_depth(part.tenant, start, hops, self._graph.max_alias_depth)
                resolved[start] = current
            return resolved

    async def resolve_entity_ids_by_tenant(
        self, asked: Mapping[TenantId, Iterable[EntityId]]
    ) -> dict[TenantId, dict[EntityId, EntityId]]:
        """``resolve_entity_ids`` of each tenant of ``asked``
        (contracts.ports.graph.TenantResolution)."""
        return {
            TenantId(tenant): await self.resolve_entity_ids(tenant, ids)
            for tenant, ids in asked.items()
        }

    def resolve_ahead(self, asks: Mapping[TenantId, Sequence[EntityId]]) -> None:
        """Nothing to send ahead: resolution reads memory when asked
        (contracts.ports.graph.ResolutionAhead)."""

    # RelationshipStore

    async def upsert_relationships(
        self, tenant_id: TenantId, relationships: Sequence[Relationship]
    ) -> None:
        with _scoped(tenant_id, "upsert_relationships") as part:
            checked = part.only(relationships, _tenant_of)
            state = self._graph
            missing = {
                endpoint
                for rel in checked
                for endpoint in (rel.source_id, rel.target_id)
                if (part.tenant, endpoint) not in state.entities
            }
            if missing:
                raise MissingEntityError(part.tenant, missing)
            for rel in checked:
                key = (part.tenant, rel.key)
                existing = state.relationships.get(key)
                state.relationships[key] = (
                    _relationship(rel) if existing is None else existing.merged_with(rel)
                )

    async def upsert_by_tenant(
        self,
        entities: Mapping[TenantId, Sequence[Entity]],
        relationships: Mapping[TenantId, Sequence[Relationship]],
    ) -> None:
        """Every tenant's entities, then every tenant's edges
        (contracts.ports.graph.TenantUpserts)."""
        for tenant, batch in entities.items():
            with _scoped(tenant, "upsert_by_tenant") as part:
                part.only(batch, _tenant_of)
        for tenant, rels in relationships.items():
            with _scoped(tenant, "upsert_by_tenant") as part:
                part.only(rels, _tenant_of)
        for tenant, batch in entities.items():
            await self.upsert_entities(tenant, batch)
        for tenant, rels in relationships.items():
            with _scoped(tenant, "upsert_by_tenant") as part:
                stored = self._graph.entities
                ends = {end for rel in rels for end in (rel.source_id, rel.target_id)}
                missing = {end for end in ends if (part.tenant, end) not in stored}
                if missing:
                    raise MissingEntityError(part.tenant, missing)
        for tenant, rels in relationships.items():
            await self.upsert_relationships(tenant, rels)

    async def delete_relationships(
        self, tenant_id: TenantId, keys: Iterable[RelationshipKey]
    ) -> int:
        with _scoped(tenant_id, "delete_relationships") as part:
            stored = self._graph.relationships
            return sum(stored.pop((part.tenant, key), None) is not None for key in keys)

    async def get_relationship(
        self, tenant_id: TenantId, key: RelationshipKey
    ) -> Relationship | None:
        with _scoped(tenant_id, "get_relationship") as part:
            found = part.one(self._graph.relationships.get((part.tenant, key)), _tenant_of)
            return None if found is None else _relationship(found)

    async def get_relationships(
        self,
        tenant_id: TenantId,
        source_id: EntityId | None = None,
        target_id: EntityId | None = None,
        rel_type: str | None = None,
    ) -> list[Relationship]:
        with _scoped(tenant_id, "get_relationships") as part:
            matching = [
                rel
                for rel in self._tenant_relationships(part)
                if (source_id is None or rel.source_id == source_id)
                and (target_id is None or rel.target_id == target_id)
                and (rel_type is None or rel.type == rel_type)
            ]
            return [_relationship(r) for r in part.only(matching, _tenant_of)]

    async def get_relationships_for(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> list[Relationship]:
        with _scoped(tenant_id, "get_relationships_for") as part:
            ids = set(entity_ids)
            touching = [
                rel
                for rel in self._tenant_relationships(part)
                if rel.source_id in ids or rel.target_id in ids
            ]
            return [_relationship(r) for r in part.only(touching, _tenant_of)]

    async def neighbors(self, tenant_id: TenantId, entity_id: EntityId) -> list[Entity]:
        with _scoped(tenant_id, "neighbors") as part:
            edges = part.only(self._tenant_relationships(part), _tenant_of)
            ids = {r.target_id for r in edges if r.source_id == entity_id}
            ids |= {r.source_id for r in edges if r.target_id == entity_id}
            entities = self._graph.entities
            found = (entities.get((part.tenant, i)) for i in sorted(ids))
            return [_entity(e) for e in part.only((e for e in found if e), _tenant_of)]

    def _tenant_relationships(self, part: Partition) -> list[Relationship]:
        return _ordered(self._graph.relationships, part.tenant)

    # TenantPurge

    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep:
        with _scoped(tenant_id, "delete_by_tenant") as part:
            state = self._graph
            _drop(state.entities, part.tenant)
            _drop(state.relationships, part.tenant)
            _drop(state.aliases, part.tenant)
            remaining = {
                "entities": _count(state.entities, part.tenant),
                "relationships": _count(state.relationships, part.tenant),
                "aliases": _count(state.aliases, part.tenant),
            }
            return erasure_sweep(part.tenant, remaining)


class InMemoryGraphStore(ClosingContext):
    """The reference ``ProjectedGraphStore``."""

    def __init__(self, *, max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH) -> None:
        self._committed = GraphState(max_alias_depth=max_alias_depth)
        self._lock = asyncio.Lock()
        self._holder: asyncio.Task[object] | None = None
        self._closed = False

    @asynccontextmanager
    async def unit_of_work(self, partition: StreamPartition) -> AsyncIterator[GraphUnitOfWork]:
        # One lock for the whole store: every partition's checkpoint lives in
        # the one state, so per-partition locks would buy nothing here.
        async with self._transaction() as view:
            yield view

    @asynccontextmanager
    async def unit_of_work_across(
        self, partitions: Sequence[StreamPartition]
    ) -> AsyncIterator[GraphUnitOfWork]:
        """contracts.ports.ledger.UnitsAcrossPartitions: the one lock covers them all."""
        lock_order(partitions)
        async with self._transaction() as view:
            yield view

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[GraphView]:
        if self._closed:
            raise RuntimeError("the graph store is closed")
        if self._holder is not None and self._holder is asyncio.current_task():
            # asyncio.Lock is not reentrant: waiting would hang this task forever.
            raise RuntimeError(
                "this task already holds a unit of work on the graph store; "
                "make the call through that unit of work"
            )
        async with self._lock:
            self._holder = asyncio.current_task()
            view = GraphView(self._committed.copy())
            try:
                yield view
                self._committed = view._graph
            finally:
                view.end()
                self._holder = None

    def _reader(self) -> GraphView:
        if self._closed:
            raise RuntimeError("the graph store is closed")
        return GraphView(self._committed)

    async def aclose(self) -> None:
        self._closed = True

    async def _direct_read(self, name: str, call: Callable[[GraphView], Awaitable[T]]) -> T:
        return await call(self._reader())

    async def _direct_write(self, name: str, call: Callable[[GraphView], Awaitable[T]]) -> T:
        async with self._transaction() as tx:
            return await call(tx)

    # Reads see committed state; each write is its own unit of work.

    get_entity = reads(GraphView.get_entity)
    get_entities = reads(GraphView.get_entities)
    find_entities = reads(GraphView.find_entities)
    find_by_blocking_key = reads(GraphView.find_by_blocking_key)
    find_by_blocking_keys = reads(GraphView.find_by_blocking_keys)
    upsert_entity = writes(GraphView.upsert_entity)
    upsert_entities = writes(GraphView.upsert_entities)
    upsert_alias = writes(GraphView.upsert_alias)
    upsert_aliases = writes(GraphView.upsert_aliases)
    remove_alias = writes(GraphView.remove_alias)
    find_aliases = reads(GraphView.find_aliases)
    resolve_entity_ids = reads(GraphView.resolve_entity_ids)
    upsert_relationships = writes(GraphView.upsert_relationships)
    delete_relationships = writes(GraphView.delete_relationships)
    get_relationship = reads(GraphView.get_relationship)
    get_relationships = reads(GraphView.get_relationships)
    get_relationships_for = reads(GraphView.get_relationships_for)
    neighbors = reads(GraphView.neighbors)
    delete_by_tenant = writes(GraphView.delete_by_tenant)

    # ProjectionLedger, under the same rule.

    checkpoint = reads(GraphView.checkpoint)
    advance_checkpoint = writes(GraphView.advance_checkpoint)
    checkpoints = reads(GraphView.checkpoints)
    rebuild_markers = reads(GraphView.rebuild_markers)
    put_rebuild_marker = writes(GraphView.put_rebuild_marker)
    close_rebuild_marker = writes(GraphView.close_rebuild_marker)
    is_rebuilding = reads(GraphView.is_rebuilding)
    erasure_tombstone = reads(GraphView.erasure_tombstone)
    put_erasure_tombstone = writes(GraphView.put_erasure_tombstone)
    applied_event_ids = reads(GraphView.applied_event_ids)
    record_applied_events = writes(GraphView.record_applied_events)
    forget_applied_events = writes(GraphView.forget_applied_events)
    expire_applied_events = writes(GraphView.expire_applied_events)
    acted_control_events = reads(GraphView.acted_control_events)
    record_control_event = writes(GraphView.record_control_event)


if TYPE_CHECKING:
    # mypy proves the store and its units of work conform to the ports.
    _store: type[ProjectedGraphStore] = InMemoryGraphStore
    _across: type[UnitsAcrossPartitions[GraphUnitOfWork]] = InMemoryGraphStore
    _unit: type[GraphUnitOfWork] = GraphView
