"""Which stores the scenario harness folds into.

The harness asks the active ``StoreFactory`` for empty stores whenever a
delivery mode needs fresh ones. The default is the in-memory reference pair.
A real adapter plugs in by implementing the factory (its stores must start
empty: wipe, or use a fresh namespace such as a Postgres schema) and running
the same cases inside ``use_stores``::

    @pytest.mark.parametrize(("name", "mode", "seed"), CASES)
    async def test_pinned_history_on_neo4j(name, mode, seed, neo4j_factory):
        with use_stores(neo4j_factory):
            await run_pinned(name, mode, seed)

Only the graph or only the vector side may be replaced: a factory returns the
memory store for the side it does not own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import EmbeddingIdentity
from contracts.ports.graph import ProjectedGraphStore
from contracts.ports.vector import ProjectedVectorStore


class StoreFactory(Protocol):
    async def graph(self) -> ProjectedGraphStore:
        """A graph store holding nothing (data and ledger)."""
        ...

    async def vector(self, identity: EmbeddingIdentity) -> ProjectedVectorStore:
        """A vector store holding nothing, bound to ``identity``."""
        ...


class MemoryStores:
    async def graph(self) -> ProjectedGraphStore:
        return InMemoryGraphStore()

    async def vector(self, identity: EmbeddingIdentity) -> ProjectedVectorStore:
        return InMemoryVectorStore(identity)


_ACTIVE: ContextVar[StoreFactory | None] = ContextVar("scenario_stores", default=None)


def active() -> StoreFactory:
    return _ACTIVE.get() or MemoryStores()


@contextmanager
def use_stores(factory: StoreFactory) -> Iterator[None]:
    token = _ACTIVE.set(factory)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
