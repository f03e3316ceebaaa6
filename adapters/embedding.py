"""A deterministic embedder for tests and the demo: feature hashing, no model.

Words and character trigrams are hashed with BLAKE2b into signed buckets and
the result is L2-normalised, so texts that share words or spellings land near
each other. The model name keys the hash: two identities with different model
names produce unrelated vectors, as two real models would. Documents and
queries carry different prefixes (docs/adr/0015-embedding-identity.md), so the same text embeds
differently on each side, as it does with E5-style models.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from contracts.domain import EmbeddingIdentity

__all__ = ["HashingEmbedder"]

_WORD = re.compile(r"[^\W_]+")
# Whole words decide most of the similarity; trigrams add a little tolerance
# for inflections and typos without letting shared spelling dominate.
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5


class HashingEmbedder:
    def __init__(
        self,
        dimension: int = 384,
        model: str = "redstring-hashing-v1",
        document_prefix: str = "passage: ",
        query_prefix: str = "query: ",
    ) -> None:
        self._identity = EmbeddingIdentity(
            model=model,
            dimension=dimension,
            document_prefix=document_prefix,
            query_prefix=query_prefix,
        )
        self._key = hashlib.blake2b(model.encode("utf-8"), digest_size=32).digest()

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(self._identity.document_prefix + text) for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._embed(self._identity.query_prefix + text)

    def _embed(self, text: str) -> list[float]:
        dimension = self._identity.dimension
        vector = [0.0] * dimension
        for feature, weight in _features(text):
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, key=self._key)
            value = int.from_bytes(digest.digest(), "big")
            sign = 1.0 if value & 1 else -1.0
            vector[(value >> 1) % dimension] += sign * weight
        norm = math.sqrt(math.fsum(x * x for x in vector))
        # A text with no words has no direction; it stays the zero vector, which
        # vector stores score 0.0 against everything.
        return vector if norm == 0.0 else [x / norm for x in vector]


def _features(text: str) -> list[tuple[str, float]]:
    features: list[tuple[str, float]] = []
    for word in _WORD.findall(text.casefold()):
        features.append((f"w:{word}", _WORD_WEIGHT))
        padded = f"#{word}#"
        features.extend((f"c:{padded[i : i + 3]}", _TRIGRAM_WEIGHT) for i in range(len(padded) - 2))
    return features
