"""GraphStore and ProjectionLedger on Neo4j, written once against a ``Runner``.

``Neo4jGraphStore`` runs its direct calls on this class over a managed runner
(each statement its own transaction); a unit of work is this class over the
open transaction. Every
method is one statement (the batched deletes repeat one), so a direct call is
atomic and a unit of work costs at most one round trip per call whatever the
number of rows; inside a unit of work, the ledger calls on its own partition
are served from memory or deferred to commit (ledger.LockedPartition).

Each method binds the tenant it names (adapters.isolation), refuses values of
another tenant before any I/O, filters by the tenant inside the statement, and
checks every returned record's tenant: a foreign one raises
``TenantIsolationError`` and nothing is returned.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from adapters.alias_depth import DEFAULT_MAX_ALIAS_DEPTH, check_resolved_depth
from adapters.isolation import Partition, erasure_sweep, tenant_scope
from adapters.neo4j import cypher as q
from adapters.neo4j import ledger
from adapters.neo4j.ledger import Neo4jLedger
from adapters.neo4j.rows import (
    alias_from,
    edge_rows,
    entity_from,
    entity_row,
    merged_edges_in_order,
    merged_in_order,
    relationship_from,
)
from adapters.neo4j.runner import Blame
from contracts.domain import Alias, Entity, ErasureSweep, Relationship, RelationshipKey
from contracts.errors import (
    AliasChainTooDeepError,
    AliasCycleError,
    MissingEntityError,
    PermanentStoreError,
)
from contracts.ids import EntityId, TenantId
from contracts.ports.lifecycle import ClosingContext

#: Sent with every entity upsert: a type label that is one of these is never removed.
_RESERVED = sorted(q.RESERVED_LABELS)

#: The statement a deferred entity upsert and the next one become together.
_JOINS = {q.UPSERT_RELATIONSHIPS: q.UPSERT_ENTITIES_AND_RELATIONSHIPS}
_LEDGER_JOINS = {q.UPSERT_RELATIONSHIPS: q.LEDGER_AND_UPSERT_ENTITIES_AND_RELATIONSHIPS}


def _tenant_of(record: Entity | Relationship | Alias) -> TenantId:
    return record.tenant_id


def _by_id(entity: Entity) -> EntityId:
    return entity.id


def _by_key(rel: Relationship) -> RelationshipKey:
    return rel.key


@contextmanager
def _scoped(tenant_id: TenantId, method: str) -> Iterator[Partition]:
    with tenant_scope(tenant_id):
        yield Partition.current(where=f"neo4j.graph.{method}")


class Neo4jGraphView(Neo4jLedger, ClosingContext):
    #: Alias hops from any id to its canonical (adapters.alias_depth); the
    #: store sets it, and gives its units of work the same.
    max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH

    async def aclose(self) -> None:
        """A unit of work ends with its ``async with``; there is nothing to release."""

    async def _run(
        self, query: Any, part: Partition, *, write: bool, blamed: Sequence[str] = (), **params: Any
    ) -> list[Any]:
        blame = Blame(part.where, part.tenant, blamed)
        return await self._statement(
            query, {"tenant": part.tenant, **params}, write=write, blame=blame
        )

    def _entities(self, part: Partition, records: Iterable[Any]) -> list[Entity]:
        return part.only((entity_from(r["e"]) for r in records), _tenant_of)

    def _edges(self, part: Partition, records: Iterable[Any]) -> list[Relationship]:
        edges: list[Relationship] = []
        for record in records:
            part.check(record["source_tenant"])
            part.check(record["target_tenant"])
            edges.append(relationship_from(record))
        return sorted(part.only(edges, _tenant_of), key=_by_key)

    # EntityReader

    async def get_entity(self, tenant_id: TenantId, entity_id: EntityId) -> Entity | None:
        with _scoped(tenant_id, "get_entity") as part:
            records = await self._run(q.GET_ENTITIES, part, write=False, ids=[entity_id])
            found = self._entities(part, records)
            return found[0] if found else None

    async def get_entities(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> list[Entity]:
        with _scoped(tenant_id, "get_entities") as part:
            ids = sorted(set(entity_ids))
            if not ids:
                return []
            records = await self._run(q.GET_ENTITIES, part, write=False, ids=ids)
            return sorted(self._entities(part, records), key=_by_id)

    async def find_entities(
        self, tenant_id: TenantId, entity_type: str | None = None, limit: int = 1000
    ) -> list[Entity]:
        if limit < 0:
            raise ValueError(f"limit must not be negative, got {limit}")
        with _scoped(tenant_id, "find_entities") as part:
            if entity_type is None:
                records = await self._run(q.FIND_ENTITIES, part, write=False, limit=limit)
            else:
                records = await self._run(
                    q.FIND_ENTITIES_OF_TYPE,
                    part,
                    write=False,
                    label=q.type_label(entity_type),
                    type=entity_type,
                    limit=limit,
                )
            return sorted(self._entities(part, records), key=_by_id)

    async def find_by_blocking_key(self, tenant_id: TenantId, key: str) -> list[Entity]:
        return (await self.find_by_blocking_keys(tenant_id, [key]))[key]

    async def find_by_blocking_keys(
        self, tenant_id: TenantId, keys: Iterable[str]
    ) -> dict[str, list[Entity]]:
        with _scoped(tenant_id, "find_by_blocking_keys") as part:
            answer: dict[str, list[Entity]] = {key: [] for key in keys}
            if not answer:
                return answer
            records = await self._run(
                q.FIND_BY_BLOCKING_KEYS, part, write=False, keys=sorted(answer)
            )
            for record in records:
                answer[record["key"]].extend(self._entities(part, [record]))
            return {key: sorted(found, key=_by_id) for key, found in answer.items()}

    # EntityWriter

    async def upsert_entity(self, tenant_id: TenantId, entity: Entity) -> None:
        await self.upsert_entities(tenant_id, [entity])

    async def upsert_entities(self, tenant_id: TenantId, entities: Sequence[Entity]) -> None:
        with _scoped(tenant_id, "upsert_entities") as part:
            merged = merged_in_order(part.only(entities, _tenant_of))
            if not merged:
                return
            rows = [entity_row(e) for e in merged]
            ids = [e.id for e in merged]
            # Nothing is read back: inside a unit of work it joins the edge
            # upsert that follows it (the graph fold's order) in one statement,
            # and carries the unit of work's deferred ledger write, if any.
            params = {"tenant": part.tenant, "entities": rows, "reserved": _RESERVED}
            blame = Blame(part.where, part.tenant, ids)
            deferred = self._take_deferred()
            if deferred is None:
                await self._defer(q.UPSERT_ENTITIES, params, blame, _JOINS)
            else:
                params.update(deferred)
                await self._defer(q.LEDGER_AND_UPSERT_ENTITIES, params, blame, _LEDGER_JOINS)

    # AliasStore

    async def upsert_alias(self, tenant_id: TenantId, alias: Alias) -> None:
        await self.upsert_aliases(tenant_id, [alias])

    async def upsert_aliases(self, tenant_id: TenantId, aliases: Sequence[Alias]) -> None:
        with _scoped(tenant_id, "upsert_aliases") as part:
            rows = part.only(aliases, _tenant_of)
            if not rows:
                return
            limit = self.max_alias_depth
            # The statement stops at the first alias whose chain would be too
            # deep, the ones before it written, as by single upserts; a direct
            # call's transaction then rolls them back (the store's _ONE_TRANSACTION).
            depths = await self._run(
                q.upsert_aliases_checked(limit),
                part,
                write=True,
                blamed=[i for a in rows for i in (a.alias_id, a.canonical_id)],
                rows=[
                    {"alias_id": a.alias_id, "canonical_id": a.canonical_id, "reason": a.reason}
                    for a in rows
                ],
                token=uuid.uuid4().hex,
            )
            for alias, depth in zip(rows, depths, strict=True):
                if depth["below"] + 1 + depth["above"] > limit:
                    raise AliasChainTooDeepError(part.tenant, alias.alias_id, limit)
                if not depth["reached"]:
                    # Only a refusal before it stops a row; anything else means
                    # the rows did not run in order, and the batch is not a loop.
                    raise RuntimeError("upsert_aliases: a row ran before the one before it")

    async def remove_alias(self, tenant_id: TenantId, alias_id: EntityId) -> bool:
        with _scoped(tenant_id, "remove_alias") as part:
            records = await self._run(
                q.REMOVE_ALIAS, part, write=True, blamed=[alias_id], alias_id=alias_id
            )
            return bool(records[0]["removed"])

    async def find_aliases(self, tenant_id: TenantId, canonical_id: EntityId) -> list[Alias]:
        with _scoped(tenant_id, "find_aliases") as part:
            records = await self._run(q.FIND_ALIASES, part, write=False, canonical_id=canonical_id)
            for record in records:
                part.check(record["alias_tenant"])
            aliases = part.only((alias_from(r, canonical_id) for r in records), _tenant_of)
            return sorted(aliases, key=lambda a: a.alias_id)

    async def resolve_entity_ids(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> dict[EntityId, EntityId]:
        with _scoped(tenant_id, "resolve_entity_ids") as part:
            asked = list(dict.fromkeys(entity_ids))
            if not asked:
                return {}
            records = await self._run(q.RESOLVE, part, write=False, ids=asked)
            return self._resolved(part, asked, {r["id"]: r for r in records})

    async def resolve_entity_ids_by_tenant(
        self, asked: Mapping[TenantId, Iterable[EntityId]]
    ) -> dict[TenantId, dict[EntityId, EntityId]]:
        """``resolve_entity_ids`` of each tenant of ``asked``, in one statement
        (contracts.ports.graph.TenantResolution)."""
        wanted: dict[TenantId, list[EntityId]] = {}
        for tenant, ids in asked.items():
            with _scoped(tenant, "resolve_entity_ids_by_tenant") as part:
                wanted[part.tenant] = list(dict.fromkeys(ids))
        rows = [{"tenant": t, "ids": ids} for t, ids in sorted(wanted.items()) if ids]
        walks: dict[TenantId, dict[str, Any]] = {tenant: {} for tenant in wanted}
        ahead = self._walked_ahead(wanted)
        if ahead is not None:
            walks = ahead
        elif rows:
            blame = Blame(
                "neo4j.graph.resolve_entity_ids_by_tenant",
                None,
                [i for ids in wanted.values() for i in ids],
            )
            records = await self._statement(
                q.RESOLVE_BY_TENANT, {"asks": rows}, write=False, blame=blame
            )
            for record in records:
                walks[TenantId(record["asked"])][record["id"]] = record
        resolved: dict[TenantId, dict[EntityId, EntityId]] = {}
        for tenant, ids in wanted.items():
            with _scoped(tenant, "resolve_entity_ids_by_tenant") as part:
                resolved[tenant] = self._resolved(part, ids, walks[tenant])
        return resolved

    def _walked_ahead(
        self, wanted: Mapping[TenantId, Sequence[EntityId]]
    ) -> dict[TenantId, dict[str, Any]] | None:
        """The walks of ``wanted``'s ids that the first statement read
        (``resolve_ahead``), if it read every one of them and nothing was
        written since; else None."""
        walked = self._walks_ahead
        if walked is None:
            return None
        for tenant, ids in wanted.items():
            if ids and not set(ids) <= self._asked_ahead.get(tenant, set()):
                return None
        return {tenant: walked.get(tenant, {}) for tenant in wanted}

    def _resolved(
        self, part: Partition, asked: Sequence[EntityId], walks: Mapping[str, Any]
    ) -> dict[EntityId, EntityId]:
        """Each id of ``asked`` to its canonical, from the walks ``RESOLVE``
        returned by start id (an id without one resolves to itself)."""
        resolved: dict[EntityId, EntityId] = {}
        for start in asked:
            walk = walks.get(start)
            if walk is None:
                resolved[start] = start
                continue
            for found in [walk["tenant_id"], *walk["tenants"]]:
                part.check(found)
            ends = set(walk["ends"])
            if not ends:
                # An outgoing alias edge and no chain end: the walk met a cycle.
                raise AliasCycleError(part.tenant, start)
            if len(ends) > 1:
                raise PermanentStoreError(
                    f"tenant {part.tenant!r}: alias chain of {start!r} forks into "
                    f"{sorted(ends)}; an id has at most one canonical (corrupt store)"
                )
            check_resolved_depth(part.tenant, start, walk["hops"], self.max_alias_depth)
            resolved[start] = EntityId(ends.pop())
        return resolved

    # RelationshipStore

    async def upsert_relationships(
        self, tenant_id: TenantId, relationships: Sequence[Relationship]
    ) -> None:
        with _scoped(tenant_id, "upsert_relationships") as part:
            merged = merged_edges_in_order(part.only(relationships, _tenant_of))
            if not merged:
                return
            endpoints, rows = edge_rows(merged)
            records = await self._run(
                q.UPSERT_RELATIONSHIPS,
                part,
                write=True,
                blamed=endpoints,
                endpoints=endpoints,
                rows=rows,
            )
            missing = records[0]["missing"]
            if missing:
                raise MissingEntityError(part.tenant, missing)

    async def upsert_by_tenant(
        self,
        entities: Mapping[TenantId, Sequence[Entity]],
        relationships: Mapping[TenantId, Sequence[Relationship]],
    ) -> None:
        """Every tenant's entities, then every tenant's edges, in one statement
        (contracts.ports.graph.TenantUpserts); like ``upsert_entities``, it
        carries the unit of work's deferred ledger write, if any."""
        entity_rows: list[dict[str, Any]] = []
        for tenant, batch in entities.items():
            with _scoped(tenant, "upsert_by_tenant") as part:
                entity_rows.extend(
                    entity_row(entity, part.tenant)
                    for entity in merged_in_order(part.only(batch, _tenant_of))
                )
        endpoints: list[dict[str, str]] = []
        rows: list[dict[str, Any]] = []
        for tenant, rels in relationships.items():
            with _scoped(tenant, "upsert_by_tenant") as part:
                merged = merged_edges_in_order(part.only(rels, _tenant_of))
                ends, edges = edge_rows(merged, part.tenant, first=len(endpoints))
                endpoints.extend({"tenant": part.tenant, "id": end} for end in ends)
                rows.extend(edges)
        if not entity_rows and not rows:
            return
        # Edges between two entities this statement writes skip the lock and
        # second look: the entity upsert's SET holds both ends' write locks
        # (cypher.UPSERT_RELATIONSHIPS).
        written = {(row["tenant"], row["id"]) for row in entity_rows}
        for row in rows:
            source, target = endpoints[row["s"]], endpoints[row["t"]]
            row["held"] = (source["tenant"], source["id"]) in written and (
                target["tenant"],
                target["id"],
            ) in written
        params = {
            "entities": entity_rows,
            "endpoints": endpoints,
            "rows": rows,
            "reserved": _RESERVED,
        }
        blamed = [row["id"] for row in entity_rows] + [end["id"] for end in endpoints]
        blame = Blame("neo4j.graph.upsert_by_tenant", None, blamed)
        query = q.UPSERT_BY_TENANT
        deferred = self._take_deferred()
        if deferred is not None:
            params.update(deferred)
            query = q.LEDGER_AND_UPSERT_BY_TENANT
        [record] = await self._statement(query, params, write=True, blame=blame)
        missing = record["missing"]
        if missing:
            first = TenantId(missing[0]["tenant"])
            raise MissingEntityError(first, [m["id"] for m in missing if m["tenant"] == first])

    async def delete_relationships(
        self, tenant_id: TenantId, keys: Iterable[RelationshipKey]
    ) -> int:
        with _scoped(tenant_id, "delete_relationships") as part:
            distinct = sorted(set(keys))
            if not distinct:
                return 0
            rows = [{"source": s, "target": t, "type": type_} for s, t, type_ in distinct]
            ids = sorted({end for s, t, _ in distinct for end in (s, t)})
            records = await self._run(
                q.DELETE_RELATIONSHIPS, part, write=True, blamed=ids, keys=rows
            )
            return int(records[0]["deleted"])

    async def get_relationship(
        self, tenant_id: TenantId, key: RelationshipKey
    ) -> Relationship | None:
        with _scoped(tenant_id, "get_relationship") as part:
            source, target, type_ = key
            records = await self._run(
                q.GET_RELATIONSHIP,
                part,
                write=False,
                source=source,
                target=target,
                type=type_,
            )
            found = self._edges(part, records)
            return found[0] if found else None

    async def get_relationships(
        self,
        tenant_id: TenantId,
        source_id: EntityId | None = None,
        target_id: EntityId | None = None,
        rel_type: str | None = None,
    ) -> list[Relationship]:
        with _scoped(tenant_id, "get_relationships") as part:
            if source_id is not None:
                query = q.GET_RELATIONSHIPS_FROM
            elif target_id is not None:
                query = q.GET_RELATIONSHIPS_TO
            else:
                query = q.GET_RELATIONSHIPS_ALL
            if rel_type is not None:
                query = q.typed(query, rel_type)
            records = await self._run(query, part, write=False, source=source_id, target=target_id)
            return self._edges(part, records)

    async def get_relationships_for(
        self, tenant_id: TenantId, entity_ids: Iterable[EntityId]
    ) -> list[Relationship]:
        with _scoped(tenant_id, "get_relationships_for") as part:
            ids = sorted(set(entity_ids))
            if not ids:
                return []
            records = await self._run(q.GET_RELATIONSHIPS_FOR, part, write=False, ids=ids)
            return self._edges(part, records)

    async def neighbors(self, tenant_id: TenantId, entity_id: EntityId) -> list[Entity]:
        with _scoped(tenant_id, "neighbors") as part:
            records = await self._run(q.NEIGHBORS, part, write=False, id=entity_id)
            for record in records:
                for found in record["edge_tenants"]:
                    part.check(found)
            return sorted(self._entities(part, records), key=_by_id)

    # TenantPurge

    async def delete_by_tenant(self, tenant_id: TenantId) -> ErasureSweep:
        with _scoped(tenant_id, "delete_by_tenant") as part:
            blame = Blame(part.where, part.tenant)
            params = {"tenant": part.tenant}
            # Edges first, so each entity batch is plain deletes.
            await self._delete_tenant_relationships(part.tenant, blame)
            for query in (q.DELETE_TENANT_ENTITIES, q.DELETE_TENANT_ALIASES):
                await self._delete_in_batches(query, params, blame)
            counted = (await self._run(q.COUNT_TENANT, part, write=False))[0]
            remaining = {
                "entities": int(counted["entities"]),
                "relationships": int(counted["relationships"]),
                "aliases": int(counted["aliases"]),
            }
            return erasure_sweep(part.tenant, remaining)

    async def _delete_tenant_relationships(self, tenant: TenantId, blame: Blame) -> int:
        """The tenant's edges, walking its entities from a cursor
        (cypher.DELETE_TENANT_RELATIONSHIPS): each entity is read about once,
        whatever the number of batches."""
        total, after = 0, ""  # every id sorts after the empty string
        while True:
            batch = ledger.DELETE_BATCH
            params = {"tenant": tenant, "after": after, "batch": batch}
            [step] = await self._statement(
                q.DELETE_TENANT_RELATIONSHIPS, params, write=True, blame=blame
            )
            total += int(step["deleted"])
            if int(step["deleted"]) >= batch:
                continue  # these entities may have edges left: the same cursor again
            if int(step["scanned"]) < batch:
                return total
            after = step["last"]
