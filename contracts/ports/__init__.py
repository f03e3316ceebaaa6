"""The store ports: capability Protocols that every adapter implements.

``GraphStore`` and ``VectorStore`` are compositions of capabilities
(docs/adr/0014-store-ports-as-capabilities.md); a collaborator is typed
against the capability it uses. The projection ledger (checkpoints, rebuild
markers, tombstones, applied events) is a system-level capability beside
them, deliberately not tenant-scoped.
"""

from contracts.ports.embedder import Embedder
from contracts.ports.graph import (
    AliasStore,
    EntityReader,
    EntityWriter,
    GraphStore,
    GraphUnitOfWork,
    ProjectedGraphStore,
    RelationshipStore,
    TenantPurge,
)
from contracts.ports.ledger import ProjectionLedger
from contracts.ports.lifecycle import AsyncClosable
from contracts.ports.vector import (
    ProjectedVectorStore,
    VectorPurge,
    VectorReader,
    VectorStore,
    VectorUnitOfWork,
    VectorWriter,
)

__all__ = [
    "AliasStore",
    "AsyncClosable",
    "Embedder",
    "EntityReader",
    "EntityWriter",
    "GraphStore",
    "GraphUnitOfWork",
    "ProjectedGraphStore",
    "ProjectedVectorStore",
    "ProjectionLedger",
    "RelationshipStore",
    "TenantPurge",
    "VectorPurge",
    "VectorReader",
    "VectorStore",
    "VectorUnitOfWork",
    "VectorWriter",
]
