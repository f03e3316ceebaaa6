"""The in-memory vector store: the reference every vector adapter is held to.

Search is exact: cosine similarity over every visible record of the tenant,
filtered by tenant and ``entity_type`` before ranking (never top-k then drop).
A zero vector has no direction, so its cosine with anything is defined as 0.0,
whichever side it is on; pgvector answers NaN there, and its adapter must map
that to 0.0 too (the compliance suite pins it).

Visibility follows this store's own alias facts: an id with an alias is hidden
from ``search`` and still returned by ``get``.
"""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from adapters.alias_depth import DEFAULT_MAX_ALIAS_DEPTH, check_alias_write, check_resolved_depth
from adapters.direct_calls import reads, writes
from adapters.isolation import Partition, erasure_sweep, tenant_scope
from adapters.memory.ledger import LedgerState, MemoryLedger
from contracts.domain import (
    ENTITY_TYPE_KEY,
    EmbeddingIdentity,
    ErasureSweep,
    StreamPartition,
    VectorMatch,
    VectorRecord,
)
from contracts.errors import AliasCycleError, DimensionMismatchError
from contracts.ids import EntityId, TenantId
from contracts.ports.ledger import lock_order
from contracts.ports.lifecycle import ClosingContext
from contracts.ports.vector import VectorUnitOfWork
from contracts.validation import check_id_text, check_query_vector

if TYPE_CHECKING:
    from contracts.ports.ledger import UnitsAcrossPartitions
    from contracts.ports.vector import ProjectedVectorStore

__all__ = ["InMemoryVectorStore", "VectorState"]

T = TypeVar("T")


@dataclass
class VectorState:
    records: dict[tuple[TenantId, EntityId], VectorRecord] = field(default_factory=dict)
    #: (tenant, absorbed id) -> the id it was merged into.
    aliases: dict[tuple[TenantId, EntityId], EntityId] = field(default_factory=dict)
    ledger: LedgerState = field(default_factory=LedgerState)
    #: Alias hops from any id to its canonical (adapters.alias_depth).
    max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH

    def copy(self) -> VectorState:
        # Stored records are frozen and never mutated in place (an upsert
        # replaces the whole record), so a shallow copy of each map isolates a
        # transaction's snapshot.
        return VectorState(
            records=dict(self.records),
            aliases=dict(self.aliases),
            ledger=self.ledger.copy(),
            max_alias_depth=self.max_alias_depth,
        )


def _fresh(record: VectorRecord) -> VectorRecord:
    return VectorRecord(
        tenant_id=record.tenant_id,
        id=record.id,
        vector=tuple(float(x) for x in record.vector),
        metadata=copy.deepcopy(record.metadata),
    )


def _norm(vector: Sequence[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def _cosine(query: Sequence[float], query_norm: float, vector: Sequence[float]) -> float:
    norm = _norm(vector)
    if query_norm == 0.0 or norm == 0.0:
        return 0.0
    return math.fsum(a * b for a, b in zip(query, vector, strict=True)) / (query_norm * norm)


def _has_type(record: VectorRecord, entity_type: str) -> bool:
    # Stored metadata is arbitrary JSON: the value may be a list or a dict, which
    # cannot be hashed, or a bool or number. Only an equal string matches.
    value = record.metadata.get(ENTITY_TYPE_KEY)
    return isinstance(value, str) and value == entity_type


class _Retired:
    """Stands in for the state of a unit of work that has ended, so that a view
    kept past its ``async with`` fails loudly instead of writing, unlocked, into
    committed state (or into a discarded copy, silently)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("this unit of work has ended; open a new one to read or write")


_RETIRED = _Retired()


class VectorView(MemoryLedger, ClosingContext):
    """``VectorStore`` + ``ProjectionLedger`` over one ``VectorState``: the
    committed state for reads, or a unit of work's private copy."""

    def __init__(self, state: VectorState, identity: EmbeddingIdentity) -> None:
        super().__init__(state.ledger)
        self._state = state
        self._identity = identity

    def _retire(self) -> None:
        self._state = cast(VectorState, _RETIRED)
        self._ledger = cast(LedgerState, _RETIRED)

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    @property
    def dimension(self) -> int:
        return self._identity.dimension

    def _check_dimension(self, vector: Sequence[float], where: str) -> None:
        if len(vector) != self.dimension:
            raise DimensionMismatchError(self.dimension, len(vector), where)

    # -- writes ------------------------------------------------------------

    async def upsert(self, tenant_id: TenantId, record: VectorRecord) -> None:
        await self.upsert_many(tenant_id, [record])

    async def upsert_many(self, tenant_id: TenantId, records: Sequence[VectorRecord]) -> None:
        where = "memory.vector.upsert"
        with tenant_scope(tenant_id):
            partition = Partition.current(where=where)
            # Everything is checked before anything is written: one bad record
            # leaves the store as it was.
            checked = partition.only(records, tenant_of=lambda r: r.tenant_id)
            for record in checked:
                self._check_dimension(record.vector, f"{where} {record.id!r}")
            for record in checked:
                self._state.records[(partition.tenant, record.id)] = _fresh(record)

    async def hide_merged(
        self, tenant_id: TenantId, alias_id: EntityId, canonical_id: EntityId
    ) -> None:
        check_id_text(alias_id, "alias id")
        check_id_text(canonical_id, "canonical id")
        if alias_id == canonical_id:
            raise ValueError(f"alias {alias_id!r} would point at itself")
        with tenant_scope(tenant_id):
            partition = Partition.current(where="memory.vector.hide_merged")
            pairs = {
                absorbed: canonical
                for (t, absorbed), canonical in self._state.aliases.items()
                if t == partition.tenant
            }
            check_alias_write(
                partition.tenant, pairs, alias_id, canonical_id, self._state.max_alias_depth
            )
            self._state.aliases[(partition.tenant, alias_id)] = canonical_id

    async def unhide(self, tenant_id: TenantId, alias_id: EntityId) -> bool:
        with tenant_scope(tenant_id):
            partition = Partition.current(where="memory.vector.unhide")
            return self._state.aliases.pop((partition.tenant, alias_id), None) is not None

    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep:
        with tenant_scope(tenant_id):
            tenant = Partition.current(where="memory.vector.delete_by_tenant").tenant
            for key in [k for k in self._state.records if k[0] == tenant]:
                del self._state.records[key]
            for key in [k for k in self._state.aliases if k[0] == tenant]:
                del self._state.aliases[key]
            return erasure_sweep(
                tenant,
                {
                    "vectors": sum(1 for t, _ in self._state.records if t == tenant),
                    "aliases": sum(1 for t, _ in self._state.aliases if t == tenant),
                },
            )

    # -- reads -------------------------------------------------------------

    async def get(self, tenant_id: TenantId, entity_id: EntityId) -> VectorRecord | None:
        with tenant_scope(tenant_id):
            partition = Partition.current(where="memory.vector.get")
            found = self._state.records.get((partition.tenant, entity_id))
            checked = partition.one(found, tenant_of=lambda r: r.tenant_id)
            return None if checked is None else _fresh(checked)

    async def search(
        self,
        tenant_id: TenantId,
        vector: Sequence[float],
        k: int,
        entity_type: str | None = None,
    ) -> list[VectorMatch]:
        where = "memory.vector.search"
        with tenant_scope(tenant_id):
            partition = Partition.current(where=where)
            self._check_dimension(vector, where)
            check_query_vector(vector, where)
            if k <= 0:
                return []
            tenant = partition.tenant
            candidates = [
                record
                for (owner, entity), record in self._state.records.items()
                if owner == tenant
                and (tenant, entity) not in self._state.aliases
                and (entity_type is None or _has_type(record, entity_type))
            ]
            query_norm = _norm(vector)
            scored = sorted(
                ((_cosine(vector, query_norm, r.vector), r) for r in candidates),
                key=lambda pair: (-pair[0], pair[1].id),
            )[:k]
            checked = partition.only(scored, tenant_of=lambda pair: pair[1].tenant_id)
            return [VectorMatch(record=_fresh(r), score=score) for score, r in checked]

    async def resolve_entity_ids(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> dict[EntityId, EntityId]:
        with tenant_scope(tenant_id):
            tenant = Partition.current(where="memory.vector.resolve_entity_ids").tenant
            aliases = self._state.aliases
            # A walk longer than every alias of the tenant has revisited an id;
            # the + 1 lets the longest legal chain (every alias in one line) end.
            limit = sum(1 for t, _ in aliases if t == tenant) + 1
            resolved: dict[EntityId, EntityId] = {}
            for start in entity_ids:
                current = start
                hops = 0
                for hops in range(limit):  # noqa: B007 (read after the loop)
                    parent = aliases.get((tenant, current))
                    if parent is None:
                        break
                    current = parent
                else:
                    raise AliasCycleError(tenant, start)
                check_resolved_depth(tenant, start, hops, self._state.max_alias_depth)
                resolved[start] = current
            return resolved

    # -- lifecycle ---------------------------------------------------------

    async def aclose(self) -> None:
        """Nothing to release: the unit of work that made this view owns it."""


class InMemoryVectorStore(ClosingContext):
    """``ProjectedVectorStore`` in memory.

    Direct reads see committed state; each direct write is a unit of work of
    one call. ``unit_of_work`` serialises transactions on one lock, which stands
    in for a real store's lock on the partition's checkpoint row.
    """

    def __init__(
        self, identity: EmbeddingIdentity, *, max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH
    ) -> None:
        self._identity = identity
        self._state = VectorState(max_alias_depth=max_alias_depth)
        self._lock = asyncio.Lock()
        self._holder: asyncio.Task[Any] | None = None

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    @property
    def dimension(self) -> int:
        return self._identity.dimension

    def _committed(self) -> VectorView:
        return VectorView(self._state, self._identity)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[VectorView]:
        task = asyncio.current_task()
        if task is not None and task is self._holder:
            # asyncio.Lock is not re-entrant: waiting here would hang forever.
            raise RuntimeError(
                "a direct write or a nested unit of work inside this store's own unit "
                "of work would deadlock; write through the unit of work instead"
            )
        async with self._lock:
            self._holder = task
            view = VectorView(self._state.copy(), self._identity)
            try:
                yield view
                self._state = view._state
            finally:
                view._retire()
                self._holder = None

    def unit_of_work(
        self, partition: StreamPartition
    ) -> AbstractAsyncContextManager[VectorUnitOfWork]:
        del partition  # one lock covers every partition of an in-memory store
        return self._transaction()

    def unit_of_work_across(
        self, partitions: Sequence[StreamPartition]
    ) -> AbstractAsyncContextManager[VectorUnitOfWork]:
        """contracts.ports.ledger.UnitsAcrossPartitions: the one lock covers them all."""
        lock_order(partitions)
        return self._transaction()

    async def _direct_read(self, name: str, call: Callable[[VectorView], Awaitable[T]]) -> T:
        return await call(self._committed())

    async def _direct_write(self, name: str, call: Callable[[VectorView], Awaitable[T]]) -> T:
        async with self._transaction() as view:
            return await call(view)

    # -- VectorStore: reads on committed state, writes as one-call units of work

    get = reads(VectorView.get)
    search = reads(VectorView.search)
    resolve_entity_ids = reads(VectorView.resolve_entity_ids)
    upsert = writes(VectorView.upsert)
    upsert_many = writes(VectorView.upsert_many)
    hide_merged = writes(VectorView.hide_merged)
    unhide = writes(VectorView.unhide)
    delete_by_tenant = writes(VectorView.delete_by_tenant)

    # -- ProjectionLedger: the same split ------------------------------------

    checkpoint = reads(VectorView.checkpoint)
    checkpoints = reads(VectorView.checkpoints)
    rebuild_markers = reads(VectorView.rebuild_markers)
    is_rebuilding = reads(VectorView.is_rebuilding)
    erasure_tombstone = reads(VectorView.erasure_tombstone)
    applied_event_ids = reads(VectorView.applied_event_ids)
    advance_checkpoint = writes(VectorView.advance_checkpoint)
    put_rebuild_marker = writes(VectorView.put_rebuild_marker)
    close_rebuild_marker = writes(VectorView.close_rebuild_marker)
    put_erasure_tombstone = writes(VectorView.put_erasure_tombstone)
    record_applied_events = writes(VectorView.record_applied_events)
    forget_applied_events = writes(VectorView.forget_applied_events)
    expire_applied_events = writes(VectorView.expire_applied_events)
    acted_control_events = reads(VectorView.acted_control_events)
    record_control_event = writes(VectorView.record_control_event)

    # -- lifecycle ---------------------------------------------------------

    async def aclose(self) -> None:
        """Nothing to release; the data lives as long as the object."""


if TYPE_CHECKING:
    # mypy proves the store and its units of work conform to the ports.
    _store: type[ProjectedVectorStore] = InMemoryVectorStore
    _across: type[UnitsAcrossPartitions[VectorUnitOfWork]] = InMemoryVectorStore
    _unit: type[VectorUnitOfWork] = VectorView
