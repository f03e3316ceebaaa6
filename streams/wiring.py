"""The composition root: opens the two stores and the embedder from the
settings (for writing, or read-only for readers), and builds the folds over
them. The worker, the dry run
(``redstring fold``) and the tools (``redstring skip``) all build their folds
here, so that they apply events alike."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from adapters.embedding import HashingEmbedder
from contracts.ports.embedder import Embedder
from contracts.ports.graph import ProjectedGraphStore
from contracts.ports.vector import ProjectedVectorStore
from projections.chunks import DEFAULT_CHUNK
from projections.fold import Fold
from projections.graph import GraphProjection
from projections.vector import VectorProjection
from streams.settings import Settings

HASHING_MODEL = "redstring-hashing-v1"


@dataclass
class Stores:
    """What ``open_stores`` or ``open_readers`` opened: the graph store, the
    vector store and the embedder the vectors are made with. ``aclose``
    closes both stores."""

    graph: ProjectedGraphStore
    vector: ProjectedVectorStore
    embedder: Embedder
    _exit: AsyncExitStack

    async def aclose(self) -> None:
        await self._exit.aclose()


def make_embedder(settings: Settings) -> Embedder:
    """The embedder the workers use, built from the settings; readers build
    theirs the same way so that their queries match the stored vectors
    (docs/readers.md).

    Args:
        settings: ``settings.embedding_model`` picks the model:
            ``"redstring-hashing-v1"`` (the default) is the built-in hashing
            embedder of ``settings.embedding_dimension`` dimensions (default
            384); anything else is a local sentence-transformers model
            directory, whose own dimension applies (nothing is downloaded).

    Returns:
        The ``Embedder``; its ``identity`` is what ``PgVectorStore.open``
        checks against the vector store's schema.

    Raises:
        FileNotFoundError: ``settings.embedding_model`` is neither the hashing
            model nor a directory.

    Example:
        ```python
        embedder = make_embedder(Settings())
        query = await embedder.embed_query("who wrote about the engine?")
        ```
    """
    if settings.embedding_model == HASHING_MODEL:
        return HashingEmbedder(dimension=settings.embedding_dimension)
    from adapters.sentence_embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(settings.embedding_model)


async def open_stores(settings: Settings) -> Stores:
    """Open Neo4j and Postgres/pgvector as configured.

    Builds the embedder (``make_embedder``), then opens the graph store with
    ``Neo4jGraphStore.open`` and the vector store with ``PgVectorStore.open``
    bound to the embedder's identity, each with its schema bootstrapped or
    migrated. Either both stores are returned open or neither is: if the
    second fails to open, the first is closed before the error propagates.
    The caller closes them with ``Stores.aclose``. Readers open them with
    ``open_readers`` instead (docs/readers.md).

    Args:
        settings: The ``REDSTRING_*`` configuration: ``neo4j_uri``,
            ``neo4j_user``, ``neo4j_password``, ``neo4j_database``,
            ``pg_dsn``, ``pg_schema``, ``embedding_model``,
            ``embedding_dimension``, ``max_alias_depth`` and
            ``transaction_timeout_s``.

    Returns:
        ``Stores`` holding the open ``graph`` and ``vector`` stores and the
        ``embedder``.

    Raises:
        FileNotFoundError: The embedding model directory does not exist.
        EmbeddingIdentityMismatchError: The vector schema holds vectors of
            another model or dimension.
        neo4j.exceptions.ServiceUnavailable: Neo4j is unreachable.
        neo4j.exceptions.Neo4jError: Neo4j refuses the credentials or the
            schema (see ``Neo4jGraphStore.open``).
        TransientStoreError: Postgres stayed unreachable through every retry
            (see ``PgVectorStore.open`` for its other errors).

    Example:
        ```python
        from streams.settings import Settings
        from streams.wiring import open_stores

        stores = await open_stores(Settings())
        try:
            entity = await stores.graph.get_entity("acme", "ada")
            query = await stores.embedder.embed_query("analytical engine")
            matches = await stores.vector.search("acme", query, k=5)
        finally:
            await stores.aclose()
        ```
    """
    return await _open(settings, read_only=False)


async def open_readers(settings: Settings) -> Stores:
    """Open Neo4j and Postgres/pgvector read-only, as configured: the one
    way a downstream service opens the stores (docs/readers.md).

    Builds the embedder (``make_embedder``), then opens the graph store and
    the vector store with ``read_only=True``, with the database, schema and
    alias depth of the settings, so a reader reads exactly what the workers
    of the same settings write. Nothing is created or written: each store
    checks that its schema is one this code reads and refuses to open
    otherwise, every statement runs in a read-only session, and a write
    raises ``ReadOnlyStoreError`` (docs/adr/0016-read-only-open.md). A
    Postgres role with only ``USAGE`` on the schema and ``SELECT`` on its
    tables is enough. Either both stores are returned open or neither is.
    The caller closes them with ``Stores.aclose``.

    Args:
        settings: The ``REDSTRING_*`` configuration: ``neo4j_uri``,
            ``neo4j_user``, ``neo4j_password``, ``neo4j_database``,
            ``pg_dsn``, ``pg_schema``, ``embedding_model``,
            ``embedding_dimension`` and ``max_alias_depth``; the same as
            the workers', except the credentials may be a read-only role's.

    Returns:
        ``Stores`` holding the read-only ``graph`` and ``vector`` stores and
        the ``embedder`` to embed queries with.

    Raises:
        FileNotFoundError: The embedding model directory does not exist.
        StoreSchemaError: A store is not initialised, has migrations
            pending, is newer than this code, or this role may not read it;
            the message says what to run.
        EmbeddingIdentityMismatchError: The vector schema holds vectors of
            another model or dimension than ``make_embedder(settings)``.
        neo4j.exceptions.ServiceUnavailable: Neo4j is unreachable.
        TransientStoreError: Postgres stayed unreachable through every
            retry.

    Example:
        ```python
        from streams.sdk import open_readers
        from streams.settings import Settings

        readers = await open_readers(Settings())
        try:
            canonical = (await readers.graph.resolve_entity_ids("acme", ["ada"]))["ada"]
            nearby = await readers.graph.neighbors("acme", canonical)
            query = await readers.embedder.embed_query("analytical engine")
            matches = await readers.vector.search("acme", query, k=5, entity_type="Person")
        finally:
            await readers.aclose()
        ```
    """
    return await _open(settings, read_only=True)


async def _open(settings: Settings, *, read_only: bool) -> Stores:
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
            read_only=read_only,
            transaction_timeout=settings.transaction_timeout_s,
        )
        stack.push_async_callback(graph.aclose)
        vector = await PgVectorStore.open(
            settings.pg_dsn.get_secret_value(),
            embedder.identity,
            schema=settings.pg_schema,
            max_alias_depth=settings.max_alias_depth,
            read_only=read_only,
            transaction_timeout=settings.transaction_timeout_s,
        )
        stack.push_async_callback(vector.aclose)
    except BaseException:
        await stack.aclose()
        raise
    return Stores(graph, vector, embedder, stack)


def build_folds(
    graph: ProjectedGraphStore,
    vector: ProjectedVectorStore,
    embedder: Embedder,
    *,
    chunk: int = DEFAULT_CHUNK,
) -> list[Fold[Any]]:
    """The two folds every writer applies a batch with: the graph, then the
    vectors. ``chunk``: the most entities one write carries
    (REDSTRING_WRITE_CHUNK_ENTITIES)."""
    return [
        GraphProjection(graph, embedding_dimension=vector.dimension, chunk=chunk),
        VectorProjection(vector, embedder, chunk=chunk),
    ]
