"""``VectorStore`` over one Postgres connection.

Used as it is by a unit of work (one transaction) and, one call per short
transaction, by ``PgVectorStore``'s direct methods: one body per method.

Everything that takes a vector is checked (tenant, isolation, dimension,
finiteness, what float32 and Postgres text can hold) by ``plan_upsert`` and
``plan_search``, which run no SQL, so the store can call them before it even
takes a connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from pgvector import Vector

from adapters.alias_depth import DEFAULT_MAX_ALIAS_DEPTH, check_resolved_depth
from adapters.isolation import Partition, erasure_sweep, tenant_scope
from adapters.pgvector.codec import (
    WireVector,
    decode_metadata,
    encode_metadata,
    float32_vector,
    query_components,
    storable_text,
)
from adapters.pgvector.errors import translated
from adapters.pgvector.sql import Statements
from contracts.domain import EmbeddingIdentity, ErasureSweep, VectorMatch, VectorRecord
from contracts.errors import (
    AliasChainTooDeepError,
    AliasCycleError,
    DimensionMismatchError,
    PermanentStoreError,
)
from contracts.ids import EntityId, TenantId
from contracts.validation import check_id_text, check_query_vector

__all__ = ["DELETE_BATCH", "PgVectorOps", "SearchPlan", "UpsertPlan", "plan_search", "plan_upsert"]

#: Rows per DELETE while wiping a tenant: bounded statements, bounded WAL bursts.
DELETE_BATCH = 5000
#: LIMIT is a bigint; a k beyond every row a tenant can hold means "all of them".
_MAX_K = 2**62


#: (id, vector, metadata as JSON text)
Row = tuple[str, WireVector, str]


@dataclass(frozen=True)
class UpsertPlan:
    tenant: TenantId
    rows: list[Row]


@dataclass(frozen=True)
class SearchPlan:
    partition: Partition
    query: Vector
    k: int
    entity_type: str | None


def _check_dimension(dimension: int, vector: Sequence[float], where: str) -> None:
    if len(vector) != dimension:
        raise DimensionMismatchError(dimension, len(vector), where)


def plan_upsert(tenant_id: TenantId, records: Sequence[VectorRecord], dimension: int) -> UpsertPlan:
    where = "pgvector.upsert"
    with tenant_scope(tenant_id):
        partition = Partition.current(where=where)
        checked = partition.only(records, tenant_of=lambda r: r.tenant_id)
        for record in checked:
            _check_dimension(dimension, record.vector, f"{where} {record.id!r}")
        # In-order semantics: the last occurrence of an id is what survives.
        latest = {record.id: record for record in checked}
        rows: list[Row] = []
        refused: list[str] = []
        for record in latest.values():
            vector = float32_vector(record.vector) if storable_text(record.id) else None
            if vector is None:
                refused.append(record.id)
            else:
                rows.append((record.id, vector, encode_metadata(record.metadata)))
        if refused:
            raise PermanentStoreError(
                f"{where}: tenant {partition.tenant!r}: vectors {sorted(refused)!r} cannot be "
                "stored (an id Postgres text cannot hold, or a component beyond float32's range)"
            )
        return UpsertPlan(partition.tenant, rows)


def plan_search(
    tenant_id: TenantId,
    vector: Sequence[float],
    k: int,
    entity_type: str | None,
    dimension: int,
) -> SearchPlan | None:
    """None when the answer is known to be empty without asking."""
    where = "pgvector.search"
    with tenant_scope(tenant_id):
        partition = Partition.current(where=where)
    _check_dimension(dimension, vector, where)
    check_query_vector(vector, where)
    if k <= 0 or (entity_type is not None and not storable_text(entity_type)):
        return None
    return SearchPlan(partition, Vector(query_components(vector)), min(k, _MAX_K), entity_type)


class PgVectorOps:
    #: Alias hops from any id to its canonical (adapters.alias_depth); the
    #: store sets it on every view it makes.
    max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH

    def __init__(
        self,
        conn: asyncpg.Connection,
        sql: Statements,
        identity: EmbeddingIdentity,
        approximate: bool,
    ) -> None:
        self._conn = conn
        self._sql = sql
        self._identity = identity
        self._approximate = approximate

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    @property
    def dimension(self) -> int:
        return self._identity.dimension

    def _record(self, row: Any, where: str) -> VectorRecord:
        components = row["embedding"].to_list()  # float32 widened: float instances only
        _check_dimension(self.dimension, components, where)
        return VectorRecord.from_floats(
            tenant_id=row["tenant_id"],
            id=row["id"],
            floats=components,
            metadata=decode_metadata(row["metadata"]),
        )

    # -- writes ---------------------------------------------------------------

    async def upsert(self, tenant_id: TenantId, record: VectorRecord) -> None:
        await self.upsert_many(tenant_id, [record])

    async def upsert_many(self, tenant_id: TenantId, records: Sequence[VectorRecord]) -> None:
        await self.apply_upsert(plan_upsert(tenant_id, records, self.dimension))

    async def apply_upsert(self, plan: UpsertPlan) -> None:
        if not plan.rows:
            return
        try:
            ids, vectors, metadata = (list(column) for column in zip(*plan.rows, strict=True))
            with translated("pgvector.upsert"):
                await self._conn.execute(self._sql.upsert, plan.tenant, ids, vectors, metadata)
        except PermanentStoreError as error:
            ids = sorted(row[0] for row in plan.rows)
            raise PermanentStoreError(
                f"tenant {plan.tenant!r}: the store refused the batch of vectors {ids!r}: {error}"
            ) from error

    async def hide_merged(
        self, tenant_id: TenantId, alias_id: EntityId, canonical_id: EntityId
    ) -> None:
        check_id_text(alias_id, "alias id")
        check_id_text(canonical_id, "canonical id")
        if alias_id == canonical_id:
            raise ValueError(f"alias {alias_id!r} would point at itself")
        where = "pgvector.hide_merged"
        with tenant_scope(tenant_id):
            tenant = Partition.current(where=where).tenant
        if not (storable_text(alias_id) and storable_text(canonical_id)):
            raise PermanentStoreError(
                f"{where}: tenant {tenant!r}: ids {alias_id!r}, {canonical_id!r} "
                "cannot be stored as Postgres text"
            )
        limit = self.max_alias_depth
        with translated(where):
            depths = await self._conn.fetchrow(
                self._sql.alias_depths, tenant, alias_id, canonical_id, limit
            )
        if depths is not None and depths["below"] + 1 + depths["above"] > limit:
            raise AliasChainTooDeepError(tenant, alias_id, limit)
        with translated(where):
            await self._conn.execute(self._sql.hide, tenant, alias_id, canonical_id)

    async def unhide(self, tenant_id: TenantId, alias_id: EntityId) -> bool:
        where = "pgvector.unhide"
        with tenant_scope(tenant_id):
            tenant = Partition.current(where=where).tenant
        if not storable_text(alias_id):
            return False  # never stored, so there is no alias to forget
        with translated(where):
            status = await self._conn.execute(self._sql.unhide, tenant, alias_id)
        return bool(status == "DELETE 1")

    async def delete_batch(self, tenant_id: TenantId, table: str, limit: int) -> int:
        """Delete up to ``limit`` of the tenant's rows of ``table``; how many went."""
        where = "pgvector.delete_by_tenant"
        with tenant_scope(tenant_id):
            tenant = Partition.current(where=where).tenant
        with translated(where):
            status = await self._conn.execute(self._sql.delete_some(table), tenant, limit)
        return int(status.split()[-1])

    async def sweep(self, tenant_id: TenantId) -> ErasureSweep:
        where = "pgvector.delete_by_tenant"
        with tenant_scope(tenant_id):
            tenant = Partition.current(where=where).tenant
        with translated(where):
            row = await self._conn.fetchrow(self._sql.sweep, tenant)
        return erasure_sweep(tenant, {"vectors": row["vectors"], "aliases": row["aliases"]})

    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep:
        size = DELETE_BATCH
        for table in ("vectors", "vector_aliases"):
            while await self.delete_batch(tenant_id, table, size) == size:
                pass
        return await self.sweep(tenant_id)

    # -- reads ----------------------------------------------------------------

    async def get(self, tenant_id: TenantId, entity_id: EntityId) -> VectorRecord | None:
        where = "pgvector.get"
        with tenant_scope(tenant_id):
            partition = Partition.current(where=where)
        if not storable_text(entity_id):
            return None
        with translated(where):
            row = await self._conn.fetchrow(self._sql.get, partition.tenant, entity_id)
        found = partition.one(row, tenant_of=lambda r: r["tenant_id"])
        return None if found is None else self._record(found, where)

    async def search(
        self,
        tenant_id: TenantId,
        vector: Sequence[float],
        k: int,
        entity_type: str | None = None,
    ) -> list[VectorMatch]:
        plan = plan_search(tenant_id, vector, k, entity_type, self.dimension)
        return [] if plan is None else await self.apply_search(plan)

    async def apply_search(self, plan: SearchPlan) -> list[VectorMatch]:
        where = plan.partition.where
        by_type = plan.entity_type is not None
        args: list[object] = [plan.partition.tenant, plan.query, plan.k]
        if by_type:
            args.append(plan.entity_type)
        statement = self._sql.search(by_type=by_type, approximate=self._approximate)
        with translated(where):
            rows = await self._conn.fetch(statement, *args)
        checked = plan.partition.only(rows, tenant_of=lambda r: r["tenant_id"])
        # score = 1 - distance is exact and strictly monotone here (pgvector
        # computes the distance as 1 - similarity in float8), so the SQL order
        # by (distance, id) is the order by (score desc, id) the port promises.
        return [
            VectorMatch(record=self._record(row, where), score=1.0 - row["distance"])
            for row in checked
        ]

    async def resolve_entity_ids(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> dict[EntityId, EntityId]:
        where = "pgvector.resolve_entity_ids"
        with tenant_scope(tenant_id):
            tenant = Partition.current(where=where).tenant
        starts = list(dict.fromkeys(entity_ids))
        asked = [s for s in starts if storable_text(s)]
        steps: dict[str, tuple[int, str]] = {}
        looped: set[str] = set()
        if asked:
            with translated(where):
                rows = await self._conn.fetch(self._sql.resolve, tenant, asked)
            for row in rows:
                start = row["start"]
                if row["looped"]:
                    looped.add(start)
                elif row["depth"] >= steps.get(start, (-1, ""))[0]:
                    steps[start] = (row["depth"], row["current"])
        resolved: dict[EntityId, EntityId] = {}
        for start in starts:
            if start in looped:
                raise AliasCycleError(tenant, start)
            if start in steps:
                check_resolved_depth(tenant, start, steps[start][0], self.max_alias_depth)
            resolved[start] = EntityId(steps[start][1]) if start in steps else start
        return resolved
