from __future__ import annotations

import pytest

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore


@pytest.fixture
def stores() -> tuple[InMemoryGraphStore, InMemoryVectorStore]:
    return InMemoryGraphStore(), InMemoryVectorStore(HashingEmbedder(dimension=16).identity)
