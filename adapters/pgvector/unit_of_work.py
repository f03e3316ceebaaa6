"""``VectorStore`` + ``ProjectionLedger`` over one connection: what a unit of
work hands out, and what every direct call of ``PgVectorStore`` runs on."""

from __future__ import annotations

from typing import Any

import asyncpg

from adapters.pgvector.ledger import PgLedger
from adapters.pgvector.sql import Statements
from adapters.pgvector.vectors import PgVectorOps
from contracts.domain import EmbeddingIdentity
from contracts.ports.lifecycle import ClosingContext

__all__ = ["PgUnitOfWork"]


class _Retired:
    """Stands in for the connection once its unit of work has ended: a view
    kept past its ``async with`` fails loudly rather than writing on a
    connection that is back in the pool (possibly inside someone else's
    transaction)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("this unit of work has ended; open a new one to read or write")


class PgUnitOfWork(PgVectorOps, PgLedger, ClosingContext):
    def __init__(
        self,
        conn: asyncpg.Connection,
        sql: Statements,
        identity: EmbeddingIdentity,
        approximate: bool,
    ) -> None:
        PgVectorOps.__init__(self, conn, sql, identity, approximate)
        PgLedger.__init__(self, conn, sql)

    def retire(self) -> None:
        self._conn = _Retired()

    async def aclose(self) -> None:
        """Nothing to release: the unit of work that made this view owns it."""
