"""An ``Embedder`` backed by sentence-transformers, for real embeddings.

Optional: ``pip install 'redstring-projector[embed]'`` (in a checkout,
``pip install -e '.[embed]'``) brings the package (and torch).
This module imports without it; constructing an embedder without it raises an
``ImportError`` that says what to install.

The model is loaded from a local directory only (``local_files_only=True``):
a worker never downloads weights at run time, so what it embeds with is
exactly what was deployed beside it. Prefixes (docs/adr/0015-embedding-identity.md) come from the
model's own configured prompts (``query`` and ``document``/``passage``, as
E5-style models ship them) unless given; they are part of the identity the
vector store is bound to, so a changed prefix is a new store.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contracts.domain import EmbeddingIdentity

__all__ = ["INSTALL_HINT", "SentenceTransformerEmbedder"]

INSTALL_HINT = (
    "the sentence-transformers package is not installed; install the optional extra with "
    "pip install 'redstring-projector[embed]' (in a checkout: pip install -e '.[embed]'), "
    "or use the built-in model 'redstring-hashing-v1'"
)


def _sentence_transformers() -> Any:
    try:
        return importlib.import_module("sentence_transformers")
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error


def _dimension_of(model: Any) -> int:
    # sentence-transformers 6 renamed get_sentence_embedding_dimension.
    getter = getattr(model, "get_embedding_dimension", None)
    if getter is None:
        getter = model.get_sentence_embedding_dimension
    return int(getter())


class SentenceTransformerEmbedder:
    def __init__(
        self,
        model_dir: str | Path,
        *,
        model_name: str | None = None,
        document_prefix: str | None = None,
        query_prefix: str | None = None,
        device: str | None = None,
        batch_size: int = 32,
    ) -> None:
        path = Path(model_dir)
        if not path.is_dir():
            raise FileNotFoundError(
                f"{path} is not a model directory: the embedding model must be a local "
                "directory (save it with SentenceTransformer.save); nothing is downloaded "
                "at run time"
            )
        module = _sentence_transformers()
        self._model = module.SentenceTransformer(str(path), device=device, local_files_only=True)
        prompts: dict[str, str] = dict(getattr(self._model, "prompts", None) or {})
        self._batch_size = batch_size
        self._identity = EmbeddingIdentity(
            # The directory's name by default: the identity must name the model,
            # not where this machine keeps it.
            model=model_name or path.resolve().name,
            dimension=int(_dimension_of(self._model)),
            document_prefix=(
                document_prefix
                if document_prefix is not None
                else prompts.get("document", prompts.get("passage", ""))
            ),
            query_prefix=query_prefix if query_prefix is not None else prompts.get("query", ""),
        )

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        prefix = self._identity.document_prefix
        return await self._encode([prefix + text for text in texts])

    async def embed_query(self, text: str) -> list[float]:
        (vector,) = await self._encode([self._identity.query_prefix + text])
        return vector

    async def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        # Encoding is CPU-bound: keep it off the event loop, which also serves
        # Kafka heartbeats and the health endpoints.
        array = await asyncio.to_thread(
            self._model.encode,
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
            # The identity's prefix is already on the text: an empty prompt keeps
            # the model's default_prompt_name from adding a second one.
            prompt="",
        )
        return [[float(x) for x in row] for row in array]
