"""The optional sentence-transformers embedder, without the package: a clear
error when it is missing, and the wrapping logic against a stand-in module."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from adapters.sentence_embedder import INSTALL_HINT, SentenceTransformerEmbedder
from contracts.ports.embedder import Embedder


def test_a_missing_package_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    with pytest.raises(ImportError) as raised:
        SentenceTransformerEmbedder(tmp_path)
    assert str(raised.value) == INSTALL_HINT
    assert "redstring-projector[embed]" in INSTALL_HINT


def test_a_model_must_be_a_local_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing is downloaded"):
        SentenceTransformerEmbedder(tmp_path / "intfloat" / "e5-small-v2")


class _FakeModel:
    calls: list[dict[str, Any]] = []

    def __init__(self, path: str, device: str | None, local_files_only: bool) -> None:
        self.path = path
        self.local_files_only = local_files_only
        self.prompts = {"query": "query: ", "passage": "passage: "}

    def get_embedding_dimension(self) -> int:
        return 3

    def encode(self, texts: list[str], **options: Any) -> list[list[float]]:
        _FakeModel.calls.append({"texts": texts, **options})
        return [[float(len(t)), 0.0, 1.0] for t in texts]


async def test_it_embeds_with_the_models_own_prefixes_from_local_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = _FakeModel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    model_dir = tmp_path / "e5-small-v2"
    model_dir.mkdir()
    embedder = SentenceTransformerEmbedder(model_dir)
    assert isinstance(embedder, Embedder)
    assert embedder._model.local_files_only is True
    identity = embedder.identity
    assert (identity.model, identity.dimension) == ("e5-small-v2", 3)
    assert (identity.document_prefix, identity.query_prefix) == ("passage: ", "query: ")
    _FakeModel.calls.clear()
    assert await embedder.embed_documents(["ab"]) == [[len("passage: ab"), 0.0, 1.0]]
    assert await embedder.embed_query("ab") == [len("query: ab"), 0.0, 1.0]
    assert await embedder.embed_documents([]) == []
    assert [c["texts"] for c in _FakeModel.calls] == [["passage: ab"], ["query: ab"]]
    assert all(c["normalize_embeddings"] and c["prompt"] == "" for c in _FakeModel.calls)
