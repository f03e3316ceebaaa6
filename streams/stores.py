"""Opens the two stores and the embedder a worker writes with (the
composition root's side of the adapters)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

from adapters.embedding import HashingEmbedder
from contracts.ports.embedder import Embedder
from contracts.ports.graph import ProjectedGraphStore
from contracts.ports.vector import ProjectedVectorStore
from streams.settings import Settings

HASHING_MODEL = "redstring-hashing-v1"


@dataclass
class Stores:
    graph: ProjectedGraphStore
    vector: ProjectedVectorStore
    embedder: Embedder
    _exit: AsyncExitStack

    async def aclose(self) -> None:
        await self._exit.aclose()


def make_embedder(settings: Settings) -> Embedder:
    if settings.embedding_model == HASHING_MODEL:
        return HashingEmbedder(dimension=settings.embedding_dimension)
    from adapters.sentence_embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(settings.embedding_model)


async def open_stores(settings: Settings) -> Stores:
    """Open Neo4j and Postgres/pgvector as configured."""
    from adapters.neo4j import Neo4jGraphStore
    from adapters.pgvector import PgVectorStore

    embedder = make_embedder(settings)
    stack = AsyncExitStack()
    try:
        graph = await Neo4jGraphStore.open(
            settings.neo4j_uri,
            settings.neo4j_user,
            settings.neo4j_password.get_secret_value(),
            database=settings.neo4j_database,
            max_alias_depth=settings.max_alias_depth,
        )
        stack.push_async_callback(graph.aclose)
        vector = await PgVectorStore.open(
            settings.pg_dsn.get_secret_value(),
            embedder.identity,
            schema=settings.pg_schema,
            max_alias_depth=settings.max_alias_depth,
        )
        stack.push_async_callback(vector.aclose)
    except BaseException:
        await stack.aclose()
        raise
    return Stores(graph, vector, embedder, stack)
