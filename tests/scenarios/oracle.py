"""An independent model of docs/semantics.md: the state a projected store must
hold after consuming a partition, computed one record at a time in log order.

Written from the semantics page alone, never from the folds: it imports only
``contracts`` and keeps its state in plain dicts. It is meant to be obviously
correct, not fast.

The oracle sees every record exactly once and in order, so the delivery
machinery (checkpoints, rebuild markers, seeking back) does not appear here.
A replay is modelled as what it means rather than how the stores do it: at the
request, the tenant's state is thrown away and its own records in
``[log_start, R)`` are applied again from scratch, in order, skipping control
events and anything the erasure tombstone covers.

Decisions where the page leaves room (documented so the folds can be held to
them, and reported to the lead):

- A refused merge changes nothing, so its event id is not recorded as applied
  (a later redelivery of it is judged afresh).
- Control events act once (docs/design.md 6.4): a replay request or erasure whose event
  id was already acted on for the tenant is a duplicate and changes nothing.
  Those ids are kept apart from the applied ids and never forgotten, not by a
  replay, an erasure or expiry. A control event the tombstone covers is not
  acted on, so its id is not kept (a later copy past the tombstone acts).
- An erasure tombstone belongs to the partition it was written on (an
  Oracle is one partition; :meth:`Oracle.feed` takes ``partition`` so that a
  test can interleave the records of several partitions into one store, as a
  worker does): a record of the tenant on another partition is not judged by
  it. Offsets must increase within each partition.
- Collapses and dangles counted per event cover DocumentExtracted step 3/4 and
  the carried ``edges_to_add``/``edges_to_restore``; re-pointing in step 4 of a
  merge is not counted (the page only says "only deleted").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from contracts.events import (
    DocumentExtractedEvent,
    EntitiesMergedEvent,
    EntitiesUnmergedEvent,
    Event,
    TenantErasedEvent,
    TenantReplayRequestedEvent,
)

EdgeKey = tuple[str, str, str]
Record = tuple[int, str | None, Event | None]


@dataclass
class TenantState:
    # Graph store.
    entities: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: dict[EdgeKey, dict[str, Any]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    # Vector store: metadata per extracted id, and its own alias facts.
    vectors: dict[str, dict[str, Any]] = field(default_factory=dict)
    vector_aliases: dict[str, str] = field(default_factory=dict)
    # Ledger: applied event ids.
    applied_ids: set[str] = field(default_factory=set)


@dataclass
class Outcome:
    """What the log-order model did with one record (live, not during a replay)."""

    offset: int
    tenant: str | None
    kind: str  # stepped | tombstoned | duplicate | applied | refused | replay | erasure
    event_type: str | None = None
    collapsed: int = 0
    dangling: int = 0


def resolve(aliases: dict[str, str], entity_id: str) -> str:
    seen = {entity_id}
    current = entity_id
    while current in aliases:
        current = aliases[current]
        if current in seen:
            raise AssertionError(f"oracle: alias cycle through {entity_id!r}")
        seen.add(current)
    return current


def has_cycle(aliases: dict[str, str]) -> bool:
    for start in aliases:
        seen = {start}
        current = start
        while current in aliases:
            current = aliases[current]
            if current in seen:
                return True
            seen.add(current)
    return False


class Oracle:
    def __init__(self, log_start: int = 0) -> None:
        self.log_start = log_start
        self.tenants: dict[str, TenantState] = {}
        #: (partition, tenant) -> the erasure's offset on that partition.
        self.tombstones: dict[tuple[int, str], int] = {}
        self._partition = 0
        self._last: dict[int, int] = {}
        #: Control-event ids acted on, per tenant; never forgotten.
        self.acted_control: dict[str, set[str]] = {}
        #: Every record fed, per partition, in log order.
        self.histories: dict[int, list[Record]] = {}
        self.outcomes: list[Outcome] = []

    # -- consuming the log -------------------------------------------------

    def feed(
        self, offset: int, tenant: str | None, event: Event | None, partition: int = 0
    ) -> Outcome:
        assert offset > self._last.get(partition, -1), "offsets must increase"
        self._last[partition] = offset
        self._partition = partition
        self.histories.setdefault(partition, []).append((offset, tenant, event))
        if event is None:
            if tenant is not None:
                self.tenants.setdefault(tenant, TenantState())
            outcome = Outcome(offset, tenant, "stepped")
        else:
            outcome = self._live(offset, event)
        self.outcomes.append(outcome)
        return outcome

    def feed_all(self, records: Iterable[Record]) -> Oracle:
        for offset, tenant, event in records:
            self.feed(offset, tenant, event)
        return self

    def _covered_by_tombstone(self, tenant: str, offset: int) -> bool:
        stone = self.tombstones.get((self._partition, tenant))
        return stone is not None and offset <= stone

    def _live(self, offset: int, event: Event) -> Outcome:
        tenant = str(event.tenant_id)
        self.tenants.setdefault(tenant, TenantState())
        kind = event.event_type
        if self._covered_by_tombstone(tenant, offset):
            return Outcome(offset, tenant, "tombstoned", kind)
        if isinstance(event, TenantReplayRequestedEvent | TenantErasedEvent):
            acted = self.acted_control.setdefault(tenant, set())
            if str(event.event_id) in acted:
                return Outcome(offset, tenant, "duplicate", kind)
            acted.add(str(event.event_id))
        if isinstance(event, TenantReplayRequestedEvent):
            self._replay(tenant, offset)
            return Outcome(offset, tenant, "replay", kind)
        if isinstance(event, TenantErasedEvent):
            self.tenants[tenant] = TenantState()
            self.tombstones = {k: v for k, v in self.tombstones.items() if k[1] != tenant}
            self.tombstones[(self._partition, tenant)] = offset
            return Outcome(offset, tenant, "erasure", kind)
        return self._apply(tenant, offset, event)

    def _replay(self, tenant: str, request_offset: int) -> None:
        self.tenants[tenant] = TenantState()
        for offset, _key, event in self.histories[self._partition]:
            if event is None or str(event.tenant_id) != tenant:
                continue
            if not (self.log_start <= offset < request_offset):
                continue
            if isinstance(event, TenantReplayRequestedEvent | TenantErasedEvent):
                continue
            if self._covered_by_tombstone(tenant, offset):
                continue
            self._apply(tenant, offset, event)

    def _apply(self, tenant: str, offset: int, event: Event) -> Outcome:
        state = self.tenants[tenant]
        kind = event.event_type
        event_id = str(event.event_id)
        if event_id in state.applied_ids:
            return Outcome(offset, tenant, "duplicate", kind)
        out = Outcome(offset, tenant, "applied", kind)
        if isinstance(event, DocumentExtractedEvent):
            self._extracted(state, event, out)
        elif isinstance(event, EntitiesMergedEvent):
            if not self._merged(state, event, out):
                return Outcome(offset, tenant, "refused", kind)
        elif isinstance(event, EntitiesUnmergedEvent):
            self._unmerged(state, event, out)
        else:  # pragma: no cover - control events never reach here
            raise AssertionError(f"unexpected event {kind}")
        state.applied_ids.add(event_id)
        return out

    # -- the three folds -----------------------------------------------------

    @staticmethod
    def _put_edge(
        state: TenantState,
        source: str,
        target: str,
        rel_type: str,
        confidence: float,
        properties: dict[str, Any],
        out: Outcome,
    ) -> None:
        s, t = resolve(state.aliases, source), resolve(state.aliases, target)
        if s == t:
            state.edges.pop((source, target, rel_type), None)
            out.collapsed += 1
            return
        if s not in state.entities or t not in state.entities:
            out.dangling += 1
            return
        key = (s, t, rel_type)
        old = state.edges.get(key)
        merged_props = {**(old["properties"] if old else {}), **properties}
        state.edges[key] = {"confidence": confidence, "properties": merged_props}

    @staticmethod
    def _delete_edge(state: TenantState, source: str, target: str, rel_type: str) -> None:
        key = (resolve(state.aliases, source), resolve(state.aliases, target), rel_type)
        state.edges.pop(key, None)

    def _extracted(self, state: TenantState, event: DocumentExtractedEvent, out: Outcome) -> None:
        payload = event.payload
        for ent in payload.entities:
            old = state.entities.get(ent.id)
            props = {**(old["properties"] if old else {}), **dict(ent.properties)}
            state.entities[ent.id] = {"name": ent.name, "type": ent.type, "properties": props}
            state.vectors[ent.id] = {
                "entity_type": ent.type,
                "name": ent.name,
                "document_id": payload.document_id,
            }
        for rel in payload.relationships:
            self._put_edge(
                state, rel.source, rel.target, rel.type, rel.confidence, dict(rel.properties), out
            )

    def _merged(self, state: TenantState, event: EntitiesMergedEvent, out: Outcome) -> bool:
        payload = event.payload
        canonical = payload.canonical_id
        proposed = dict(state.aliases)
        for absorbed in payload.absorbed_ids:
            proposed[absorbed] = canonical
        if has_cycle(proposed):
            return False
        # The vector store decides from its own alias facts; they must agree.
        vproposed = dict(state.vector_aliases)
        for absorbed in payload.absorbed_ids:
            vproposed[absorbed] = canonical
        assert not has_cycle(vproposed), "oracle: graph and vector alias facts diverged"

        # Removals name edges as the write model saw them before this decision.
        for ref in payload.edges_to_remove:
            self._delete_edge(state, ref.source, ref.target, ref.type)
        state.aliases = proposed
        state.vector_aliases = vproposed
        for rel in payload.edges_to_add:
            self._put_edge(
                state, rel.source, rel.target, rel.type, rel.confidence, dict(rel.properties), out
            )
        absorbed_ids = set(payload.absorbed_ids)
        touching = sorted(k for k in state.edges if k[0] in absorbed_ids or k[1] in absorbed_ids)
        for key in touching:
            value = state.edges.pop(key)
            s, t = resolve(state.aliases, key[0]), resolve(state.aliases, key[1])
            if s == t or s not in state.entities or t not in state.entities:
                continue
            new_key = (s, t, key[2])
            old = state.edges.get(new_key)
            merged_props = {**(old["properties"] if old else {}), **value["properties"]}
            state.edges[new_key] = {"confidence": value["confidence"], "properties": merged_props}
        return True

    def _unmerged(self, state: TenantState, event: EntitiesUnmergedEvent, out: Outcome) -> None:
        payload = event.payload
        for ref in payload.edges_to_remove:
            self._delete_edge(state, ref.source, ref.target, ref.type)
        for restored in payload.restored_ids:
            state.aliases.pop(restored, None)
            state.vector_aliases.pop(restored, None)
        for rel in payload.edges_to_restore:
            self._put_edge(
                state, rel.source, rel.target, rel.type, rel.confidence, dict(rel.properties), out
            )

    # -- reading the result --------------------------------------------------

    def state(self, tenant: str) -> dict[str, Any]:
        """One tenant's state in the shape of ``projections.snapshot.snapshot``."""
        st = self.tenants.get(tenant, TenantState())
        return {
            "entities": [
                {"id": i, "name": e["name"], "type": e["type"], "properties": e["properties"]}
                for i, e in sorted(st.entities.items())
            ],
            "relationships": [
                {
                    "source": k[0],
                    "target": k[1],
                    "type": k[2],
                    "confidence": v["confidence"],
                    "properties": v["properties"],
                }
                for k, v in sorted(st.edges.items())
            ],
            "aliases": [{"alias": a, "canonical": c} for a, c in sorted(st.aliases.items())],
            "visible_vectors": sorted(i for i in st.vectors if i not in st.vector_aliases),
            "hidden_vectors": sorted(i for i in st.vectors if i in st.vector_aliases),
        }

    def states(self) -> dict[str, dict[str, Any]]:
        return {tenant: self.state(tenant) for tenant in sorted(self.tenants)}


def expected_states(records: Iterable[Record], log_start: int = 0) -> dict[str, dict[str, Any]]:
    return Oracle(log_start).feed_all(records).states()
