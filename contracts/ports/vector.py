"""The vector store port: three capabilities composed
(docs/adr/0014-store-ports-as-capabilities.md).

Every vector stays under its own entity id. An entity is visible to ``search``
exactly when it has no alias (it is not merged away); the store keeps the
alias facts it needs itself and never reads the graph store. A store is bound
to one ``EmbeddingIdentity``; every method that takes or returns a vector
raises ``DimensionMismatchError`` on a wrong length.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from contracts.domain import (
    EmbeddingIdentity,
    ErasureSweep,
    StreamPartition,
    VectorMatch,
    VectorRecord,
)
from contracts.ids import EntityId, TenantId
from contracts.ports.ledger import ProjectionLedger
from contracts.ports.lifecycle import AsyncClosable


@runtime_checkable
class VectorWriter(AsyncClosable, Protocol):
    @property
    def dimension(self) -> int: ...

    async def upsert(self, tenant_id: TenantId, record: VectorRecord) -> None:
        """Create or replace the vector and metadata stored under ``record.id``.
        Visibility is not touched: an aliased id stays hidden."""
        ...

    async def upsert_many(self, tenant_id: TenantId, records: Sequence[VectorRecord]) -> None:
        """``upsert`` for each, in order, as one write."""
        ...

    async def hide_merged(
        self, tenant_id: TenantId, alias_id: EntityId, canonical_id: EntityId
    ) -> None:
        """Record that ``alias_id`` was merged into ``canonical_id``: keyed on the
        absorbed id, idempotent, last write wins; the absorbed id leaves search."""
        ...

    async def unhide(self, tenant_id: TenantId, alias_id: EntityId) -> bool:
        """Forget ``alias_id``'s alias (it is visible again); True if there was one."""
        ...


@runtime_checkable
class VectorReader(AsyncClosable, Protocol):
    @property
    def dimension(self) -> int: ...

    async def get(self, tenant_id: TenantId, entity_id: EntityId) -> VectorRecord | None:
        """The stored record, visible or hidden."""
        ...

    async def search(
        self,
        tenant_id: TenantId,
        vector: Sequence[float],
        k: int,
        entity_type: str | None = None,
    ) -> list[VectorMatch]:
        """The ``k`` visible records nearest ``vector`` by cosine similarity, the
        tenant (and ``entity_type``, when given) filtered inside the query before
        ranking. Ordered by score, then id. Exact, not approximate."""
        ...

    async def resolve_entity_ids(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> dict[EntityId, EntityId]:
        """As ``AliasStore.resolve_entity_ids``, over this store's own alias facts."""
        ...


@runtime_checkable
class VectorPurge(AsyncClosable, Protocol):
    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep:
        """Delete the tenant's vectors and alias facts, then count what remains."""
        ...


@runtime_checkable
class VectorStore(VectorWriter, VectorReader, VectorPurge, Protocol):
    """The whole vector port."""

    @property
    def identity(self) -> EmbeddingIdentity: ...


@runtime_checkable
class VectorUnitOfWork(VectorStore, ProjectionLedger, Protocol):
    """One transaction over the vector store and its ledger (see GraphUnitOfWork)."""


@runtime_checkable
class ProjectedVectorStore(VectorStore, ProjectionLedger, Protocol):
    def unit_of_work(
        self, partition: StreamPartition
    ) -> AbstractAsyncContextManager[VectorUnitOfWork]: ...
