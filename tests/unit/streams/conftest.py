from __future__ import annotations

import pytest
from aiokafka.consumer import fetcher
from aiokafka.record import memory_records

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore


@pytest.fixture
def stores() -> tuple[InMemoryGraphStore, InMemoryVectorStore]:
    return InMemoryGraphStore(), InMemoryVectorStore(HashingEmbedder(dimension=16).identity)


@pytest.fixture(autouse=True)
def record_readers_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_app`` installs the lenient record reader for the whole process
    (streams.kafka.lenient_records); each test here starts without it."""
    monkeypatch.setattr(fetcher, "MemoryRecords", fetcher.MemoryRecords)
    monkeypatch.setattr(memory_records, "DefaultRecordBatch", memory_records.DefaultRecordBatch)
