"""PgVectorStores for tests: one schema per (session, dimension), dropped after.

Shared by the compliance suite, the adapter's own tests and the scenarios, so
every one of them keeps its rows out of everybody else's way on a shared
database.
"""

from __future__ import annotations

import asyncpg

from adapters.memory.graph import InMemoryGraphStore
from adapters.pgvector import PgVectorStore
from contracts.domain import EmbeddingIdentity
from contracts.ports.graph import ProjectedGraphStore
from contracts.ports.vector import ProjectedVectorStore


async def drop_schemas(dsn: str, *schemas: str) -> None:
    """Drop the schemas a test made, and everything in them."""
    conn = await asyncpg.connect(dsn)
    try:
        for schema in schemas:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


class PgStores:
    def __init__(self, dsn: str, prefix: str, *, max_size: int = 10) -> None:
        self.dsn = dsn
        self.prefix = prefix
        self._max_size = max_size
        self._open: dict[EmbeddingIdentity, PgVectorStore] = {}

    def schema_for(self, identity: EmbeddingIdentity) -> str:
        # One identity per schema (the dimension is its column type).
        index = list(self._open).index(identity) if identity in self._open else len(self._open)
        return f"{self.prefix}_{index}_d{identity.dimension}"

    async def get(self, identity: EmbeddingIdentity) -> PgVectorStore:
        if identity not in self._open:
            self._open[identity] = await PgVectorStore.open(
                self.dsn, identity, schema=self.schema_for(identity), max_size=self._max_size
            )
        return self._open[identity]

    async def close_and_drop(self) -> None:
        schemas = [store.schema for store in self._open.values()]
        for store in self._open.values():
            await store.aclose()
        self._open.clear()
        await drop_schemas(self.dsn, *schemas)


class ScenarioVectorStores:
    """A ``StoreFactory`` (tests/scenarios/stores.py) whose vector stores are
    PgVectorStores; the graph side stays the in-memory reference.

    Every ``vector()`` call gets its own schema, so stores alive at once in one
    case (a rebuild into fresh stores) never share rows or checkpoints. Schemas
    are reused across cases: ``release`` closes the case's stores and empties
    their schemas (TRUNCATE is far cheaper than creating tables again).
    """

    def __init__(self, dsn: str, prefix: str) -> None:
        self.dsn = dsn
        self.prefix = prefix
        self._free: list[str] = []
        self._made: list[str] = []
        self._live: list[PgVectorStore] = []

    async def graph(self) -> ProjectedGraphStore:
        return InMemoryGraphStore()

    async def vector(self, identity: EmbeddingIdentity) -> ProjectedVectorStore:
        if self._free:
            schema = self._free.pop()
        else:
            schema = f"{self.prefix}_{len(self._made)}"
            self._made.append(schema)
        store = await PgVectorStore.open(self.dsn, identity, schema=schema, max_size=4)
        self._live.append(store)
        return store

    @property
    def live(self) -> int:
        """How many PgVectorStores the current case has opened."""
        return len(self._live)

    async def release(self) -> None:
        """Close this case's stores and wipe their schemas for the next case."""
        live, self._live = self._live, []
        for store in live:
            await store.aclose()
        if not live:
            return
        conn = await asyncpg.connect(self.dsn)
        try:
            for store in live:
                s = f'"{store.schema}"'
                await conn.execute(
                    f"TRUNCATE {s}.vectors, {s}.vector_aliases, {s}.checkpoints, "
                    f"{s}.rebuild_markers, {s}.tombstones, {s}.applied_events, "
                    f"{s}.control_events"
                )
                self._free.append(store.schema)
        finally:
            await conn.close()

    async def drop_all(self) -> None:
        await self.release()
        conn = await asyncpg.connect(self.dsn)
        try:
            for schema in self._made:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
