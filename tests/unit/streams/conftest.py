from __future__ import annotations

from collections.abc import Callable

import faust
import pytest
from aiokafka.consumer import fetcher
from aiokafka.record import memory_records

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from streams.settings import Settings
from streams.worker.app import Runtime, build_app

BuildWorker = Callable[[], tuple[faust.App, Runtime]]


@pytest.fixture
def stores() -> tuple[InMemoryGraphStore, InMemoryVectorStore]:
    return InMemoryGraphStore(), InMemoryVectorStore(HashingEmbedder(dimension=16).identity)


@pytest.fixture(autouse=True)
def record_readers_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_app`` installs the lenient record reader for the whole process
    (streams.kafka.lenient_records); each test here starts without it."""
    monkeypatch.setattr(fetcher, "MemoryRecords", fetcher.MemoryRecords)
    monkeypatch.setattr(memory_records, "DefaultRecordBatch", memory_records.DefaultRecordBatch)


@pytest.fixture
def build_worker(monkeypatch: pytest.MonkeyPatch) -> BuildWorker:
    """Builds the worker's app as ``redstring worker`` does, against a broker
    nothing listens on: nothing here starts it."""
    monkeypatch.setenv("REDSTRING_KAFKA_BOOTSTRAP", "localhost:9")
    return lambda: build_app(Settings())
