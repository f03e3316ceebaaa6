"""PgVectorStores for tests: one schema per (session, dimension), dropped after.

Shared by the compliance suite, the adapter's own tests and the scenarios, so
every one of them keeps its rows out of everybody else's way on a shared
database.
"""

from __future__ import annotations

import asyncpg

from adapters.pgvector import PgVectorStore
from contracts.domain import EmbeddingIdentity


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
        conn = await asyncpg.connect(self.dsn)
        try:
            for schema in schemas:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
