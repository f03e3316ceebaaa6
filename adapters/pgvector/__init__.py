"""The pgvector adapter: ``VectorStore`` and its projection ledger on Postgres."""

from adapters.pgvector.errors import RetryPolicy
from adapters.pgvector.store import PgVectorStore

__all__ = ["PgVectorStore", "RetryPolicy"]
