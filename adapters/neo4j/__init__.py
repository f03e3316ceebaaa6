"""The Neo4j graph store adapter (docs/adr/0004-neo4j-graph-store.md)."""

from adapters.neo4j.store import Neo4jGraphStore

__all__ = ["Neo4jGraphStore"]
