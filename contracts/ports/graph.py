"""The graph store port: five capabilities composed (docs/adr/0014-store-ports-as-capabilities.md).

Every method takes the tenant first and is scoped to it inside the store; no
unscoped read exists. There is no ``delete_entity`` (docs/adr/0011-alias-surface.md): a merge
records an alias, and the alias rows are the input that resolve-before-write
reads. A write whose values carry another tenant than the one named is refused
with ``TenantIsolationError``; every read returns fresh objects. "Ordered by id"
means by Unicode code point (Python's string order; ``COLLATE "C"`` in SQL).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from contracts.domain import (
    Alias,
    Entity,
    ErasureSweep,
    Relationship,
    RelationshipKey,
    StreamPartition,
)
from contracts.ids import EntityId, TenantId
from contracts.ports.ledger import ProjectionLedger
from contracts.ports.lifecycle import AsyncClosable


@runtime_checkable
class EntityReader(AsyncClosable, Protocol):
    async def get_entity(self, tenant_id: TenantId, entity_id: EntityId) -> Entity | None: ...

    async def get_entities(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> list[Entity]:
        """The entities that exist among ``entity_ids``, ordered by id."""
        ...

    async def find_entities(
        self, tenant_id: TenantId, entity_type: str | None = None, limit: int = 1000
    ) -> list[Entity]:
        """The tenant's entities (of one type, if given), ordered by id, at most ``limit``."""
        ...

    async def find_by_blocking_key(self, tenant_id: TenantId, key: str) -> list[Entity]:
        """Entities whose ``blocking_key`` equals ``key``, ordered by id."""
        ...

    async def find_by_blocking_keys(
        self, tenant_id: TenantId, keys: Iterable[str]
    ) -> dict[str, list[Entity]]:
        """``find_by_blocking_key`` for many keys in one call; every key asked is
        in the answer, with an empty list when nothing matches."""
        ...


@runtime_checkable
class EntityWriter(AsyncClosable, Protocol):
    async def upsert_entity(self, tenant_id: TenantId, entity: Entity) -> None:
        """Create the entity, or update it: name and type from ``entity``,
        properties merged key by key (see ``Entity.merged_with``)."""
        ...

    async def upsert_entities(self, tenant_id: TenantId, entities: Sequence[Entity]) -> None:
        """``upsert_entity`` for each, in order, as one write."""
        ...


@runtime_checkable
class AliasStore(AsyncClosable, Protocol):
    async def upsert_alias(self, tenant_id: TenantId, alias: Alias) -> None:
        """Record that ``alias.alias_id`` was merged into ``alias.canonical_id``.

        Keyed on the absorbed id; idempotent; last write wins; neither endpoint
        needs to exist as an entity.
        """
        ...

    async def upsert_aliases(self, tenant_id: TenantId, aliases: Sequence[Alias]) -> None:
        """``upsert_alias`` for each, in order, as one write: each alias's depth
        is checked over the ones before it, and the first that would make a
        chain too deep raises ``AliasChainTooDeepError``. A direct call then
        writes none of them; in a unit of work, the ones before it are written
        and none after it, as a loop of ``upsert_alias`` leaves them."""
        ...

    async def remove_alias(self, tenant_id: TenantId, alias_id: EntityId) -> bool:
        """Forget the alias of ``alias_id``; True if there was one."""
        ...

    async def find_aliases(self, tenant_id: TenantId, canonical_id: EntityId) -> list[Alias]:
        """The aliases merged *directly* into ``canonical_id``, ordered by alias id."""
        ...

    async def resolve_entity_ids(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> dict[EntityId, EntityId]:
        """Map each id to its canonical id: total (an id with no alias, known or
        not, maps to itself) and transitive (chains are followed to their end).
        Resolution is bounded by the number of aliases plus one; a cycle raises
        ``AliasCycleError`` instead of answering."""
        ...


@runtime_checkable
class TenantResolution(Protocol):
    """What a unit of work may offer besides ``AliasStore``: the resolution of
    several tenants' ids at once, as ``resolve_entity_ids`` would answer each
    tenant's, so that the graph fold asks once per run of extractions instead
    of once per tenant of the run (a round trip each; measured by
    bench/neo4j_profile.py). A store without it is asked tenant by tenant."""

    async def resolve_entity_ids_by_tenant(
        self, asked: Mapping[TenantId, Iterable[EntityId]]
    ) -> dict[TenantId, dict[EntityId, EntityId]]:
        """For each tenant of ``asked``: ``resolve_entity_ids`` of its ids."""
        ...


@runtime_checkable
class ResolutionAhead(Protocol):
    """What a unit of work may offer besides ``TenantResolution``: being told,
    before its first call, the ids it is about to be asked to resolve, so that
    it may resolve them with its first statement instead of a statement of
    their own (a round trip per unit of work; docs/performance.md, "What a
    caught-up worker spends"). It changes no answer: a store that uses it
    answers ``resolve_entity_ids_by_tenant`` from what its first statement
    read only while nothing the unit of work wrote could change it, and asks
    again otherwise; a store may ignore it."""

    def resolve_ahead(self, asks: Mapping[TenantId, Sequence[EntityId]]) -> None:
        """The ids of each tenant that ``resolve_entity_ids_by_tenant`` will
        likely be asked about next (more may be asked; fewer is fine)."""
        ...


@runtime_checkable
class TenantUpserts(Protocol):
    """What a unit of work may offer besides ``EntityWriter`` and
    ``RelationshipStore``: several tenants' entities and edges in one write,
    so that the graph fold writes a run of extractions in one call instead of
    one per tenant (a round trip each; measured by bench/neo4j_profile.py).
    A store without it is written tenant by tenant."""

    async def upsert_by_tenant(
        self,
        entities: Mapping[TenantId, Sequence[Entity]],
        relationships: Mapping[TenantId, Sequence[Relationship]],
    ) -> None:
        """``upsert_entities`` for each tenant of ``entities``, then
        ``upsert_relationships`` for each of ``relationships``, as one write.
        If an edge misses an endpoint (after every entity of the call is
        written), no edge of the call is written and ``MissingEntityError``
        names the first such tenant of ``relationships`` and its missing ids.
        A value whose tenant is not its key's is refused
        (``TenantIsolationError``) before anything is written."""
        ...


@runtime_checkable
class RelationshipStore(AsyncClosable, Protocol):
    async def upsert_relationships(
        self, tenant_id: TenantId, relationships: Sequence[Relationship]
    ) -> None:
        """Create or update edges keyed by (source, target, type): confidence from
        the newer, properties merged. Both endpoints must exist as entities,
        else ``MissingEntityError`` and nothing is written."""
        ...

    async def delete_relationships(
        self, tenant_id: TenantId, keys: Iterable[RelationshipKey]
    ) -> int:
        """Delete edges by key; returns how many existed."""
        ...

    async def get_relationship(
        self, tenant_id: TenantId, key: RelationshipKey
    ) -> Relationship | None: ...

    async def get_relationships(
        self,
        tenant_id: TenantId,
        source_id: EntityId | None = None,
        target_id: EntityId | None = None,
        rel_type: str | None = None,
    ) -> list[Relationship]:
        """Edges matching every filter given, ordered by key."""
        ...

    async def get_relationships_for(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> list[Relationship]:
        """Edges with either endpoint among ``entity_ids``, ordered by key."""
        ...

    async def neighbors(self, tenant_id: TenantId, entity_id: EntityId) -> list[Entity]:
        """Entities one edge away, in either direction, ordered by id."""
        ...


@runtime_checkable
class TenantPurge(AsyncClosable, Protocol):
    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep:
        """Delete every entity, edge and alias of the tenant (in batches if large),
        then count what remains of each kind: the erasure sweep."""
        ...


@runtime_checkable
class GraphStore(EntityReader, EntityWriter, AliasStore, RelationshipStore, TenantPurge, Protocol):
    """The whole graph port."""


@runtime_checkable
class GraphUnitOfWork(GraphStore, ProjectionLedger, Protocol):
    """One transaction over the graph store and its ledger.

    Reads see the transaction's earlier writes. Leaving the ``async with``
    normally commits; an exception rolls everything back, checkpoint included.
    """


@runtime_checkable
class ProjectedGraphStore(GraphStore, ProjectionLedger, Protocol):
    """A graph store that projections write to: the port, its ledger, and units
    of work that commit both together."""

    def unit_of_work(
        self, partition: StreamPartition
    ) -> AbstractAsyncContextManager[GraphUnitOfWork]:
        """Open a transaction holding the store's lock on ``partition``'s checkpoint,
        so that two workers (a zombie and its successor) cannot interleave."""
        ...
