from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from contracts.domain import EmbeddingIdentity


@runtime_checkable
class Embedder(Protocol):
    """Turns text into vectors. Documents and queries are embedded differently
    (docs/adr/0015-embedding-identity.md): each side gets its own prefix from the identity."""

    @property
    def identity(self) -> EmbeddingIdentity: ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...
