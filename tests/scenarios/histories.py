"""The pinned histories of docs/design.md 10, as data.

Each function returns a :class:`Scenario`: one partition's records in log
order, ``(offset, tenant, event or None)``. Event ids are derived from the
scenario name, so every run builds byte-identical histories. Control events
are signed with :data:`CONTROL_KEY`, as the agent would require.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from contracts.events import (
    DOCUMENT_EXTRACTED,
    ENTITIES_MERGED,
    ENTITIES_UNMERGED,
    TENANT_ERASED,
    TENANT_REPLAY_REQUESTED,
    Event,
    make_event,
)
from contracts.signing import sign

CONTROL_KEY = b"scenario-test-control-key"
#: The topic id control events are signed for (the simulation's topic).
TOPIC_ID = "sim-topic-id"
_NAMESPACE = uuid.UUID("6c1d3f4e-2b7a-4c8e-9f10-0a1b2c3d4e5f")
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)

Record = tuple[int, str | None, Event | None]
Ent = tuple[str, str, str] | tuple[str, str, str, dict[str, Any]]
Rel = (
    tuple[str, str, str] | tuple[str, str, str, float] | tuple[str, str, str, float, dict[str, Any]]
)


def _entity(spec: Ent) -> dict[str, Any]:
    props = spec[3] if len(spec) == 4 else {}  # type: ignore[misc]
    return {"id": spec[0], "name": spec[1], "type": spec[2], "properties": props}


def _rel(spec: Rel) -> dict[str, Any]:
    out: dict[str, Any] = {"source": spec[0], "target": spec[1], "type": spec[2]}
    if len(spec) >= 4:
        out["confidence"] = spec[3]  # type: ignore[misc]
    if len(spec) >= 5:
        out["properties"] = spec[4]  # type: ignore[misc]
    return out


def _ref(spec: tuple[str, str, str]) -> dict[str, Any]:
    return {"source": spec[0], "target": spec[1], "type": spec[2]}


@dataclass
class Scenario:
    name: str
    records: list[Record]
    log_start: int = 0
    #: offset -> what the pinned semantics say about the report of that record
    #: ("collapsed", "refused", "control_duplicate"), for the report-count
    #: assertions.
    marks: dict[int, str] = field(default_factory=dict)

    def tenants(self) -> list[str]:
        out = {t for _, t, _ in self.records if t is not None}
        out |= {str(e.tenant_id) for _, _, e in self.records if e is not None}
        return sorted(out)

    def event_types(self) -> set[str]:
        return {e.event_type for _, _, e in self.records if e is not None}


class LogBuilder:
    """Appends events to one partition at increasing offsets."""

    def __init__(self, name: str, start: int = 0) -> None:
        self.name = name
        self.records: list[Record] = []
        self.next_offset = start
        self.log_start = start
        self.marks: dict[int, str] = {}
        self._count = 0

    def _ids(self) -> tuple[uuid.UUID, datetime]:
        self._count += 1
        return (
            uuid.uuid5(_NAMESPACE, f"{self.name}/{self._count}"),
            _EPOCH + timedelta(seconds=self._count),
        )

    def _append(self, tenant: str | None, event: Event | None, mark: str | None = None) -> int:
        offset = self.next_offset
        self.records.append((offset, tenant, event))
        self.next_offset += 1
        if mark:
            self.marks[offset] = mark
        return offset

    def gap(self, n: int = 1) -> None:
        """Offsets need not be contiguous (compaction, transaction markers)."""
        self.next_offset += n

    def event(self, event_type: str, tenant: str, payload: dict[str, Any]) -> Event:
        event_id, at = self._ids()
        return make_event(event_type, tenant, payload, event_id=event_id, occurred_at=at)

    def extract(
        self,
        tenant: str,
        doc: str,
        entities: Sequence[Ent],
        rels: Sequence[Rel] = (),
        *,
        model: str = "extractor-v1",
        mark: str | None = None,
    ) -> Event:
        ev = self.event(
            DOCUMENT_EXTRACTED,
            tenant,
            {
                "document_id": doc,
                "extraction_model": model,
                "entities": [_entity(e) for e in entities],
                "relationships": [_rel(r) for r in rels],
            },
        )
        self._append(tenant, ev, mark)
        return ev

    def merge(
        self,
        tenant: str,
        canonical: str,
        absorbed: Iterable[str],
        *,
        remove: Sequence[tuple[str, str, str]] = (),
        add: Sequence[Rel] = (),
        mark: str | None = None,
    ) -> Event:
        ev = self.event(
            ENTITIES_MERGED,
            tenant,
            {
                "canonical_id": canonical,
                "absorbed_ids": list(absorbed),
                "reason": "same person",
                "edges_to_remove": [_ref(r) for r in remove],
                "edges_to_add": [_rel(r) for r in add],
            },
        )
        self._append(tenant, ev, mark)
        return ev

    def unmerge(
        self,
        tenant: str,
        canonical: str,
        restored: Iterable[str],
        *,
        restore: Sequence[Rel] = (),
        remove: Sequence[tuple[str, str, str]] = (),
    ) -> Event:
        ev = self.event(
            ENTITIES_UNMERGED,
            tenant,
            {
                "canonical_id": canonical,
                "restored_ids": list(restored),
                "edges_to_restore": [_rel(r) for r in restore],
                "edges_to_remove": [_ref(r) for r in remove],
            },
        )
        self._append(tenant, ev)
        return ev

    def replay(self, tenant: str) -> Event:
        ev = sign(
            self.event(TENANT_REPLAY_REQUESTED, tenant, {"requested_by": "ops"}),
            CONTROL_KEY,
            topic_id=TOPIC_ID,
        )
        self._append(tenant, ev)
        return ev

    def erase(self, tenant: str) -> Event:
        ev = sign(
            self.event(TENANT_ERASED, tenant, {"requested_by": "dpo"}),
            CONTROL_KEY,
            topic_id=TOPIC_ID,
        )
        self._append(tenant, ev)
        return ev

    def poison(self, tenant: str | None) -> None:
        """A record the fold only steps over (invalid value or bad signature)."""
        self._append(tenant, None)

    def redeliver(self, event: Event, *, mark: str | None = None) -> None:
        """The producer retried: the same envelope (same event_id) at a later offset."""
        self._append(str(event.tenant_id), event, mark)

    def build(self) -> Scenario:
        return Scenario(self.name, list(self.records), self.log_start, dict(self.marks))


T1, T2, T3 = "acme", "globex", "initech"


def _people(log: LogBuilder, tenant: str = T1, doc: str = "doc-1") -> None:
    log.extract(
        tenant,
        doc,
        [
            ("alice", "Alice Smith", "Person", {"title": "CEO"}),
            ("alicia", "Alicia Smith", "Person", {"email": "a@acme.test"}),
            ("acme", "Acme Corp", "Org"),
            ("bob", "Bob Jones", "Person"),
        ],
        [
            ("alice", "acme", "WORKS_AT", 0.9, {"since": 2019}),
            ("alicia", "acme", "WORKS_AT", 0.6, {"role": "exec"}),
            ("bob", "alicia", "KNOWS", 0.7),
            ("alice", "bob", "MANAGES", 0.8),
        ],
    )


def merge() -> Scenario:
    log = LogBuilder("merge")
    _people(log)
    log.merge(
        T1,
        "alice",
        ["alicia"],
        remove=[("alicia", "acme", "WORKS_AT")],
        add=[("alice", "acme", "WORKS_AT", 0.95, {"merged": True})],
    )
    # A later document still names the absorbed id: it resolves to alice.
    log.extract(
        T1,
        "doc-2",
        [("alicia", "Alicia S.", "Person", {"phone": "555"}), ("bob", "Bob Jones", "Person")],
        [("alicia", "bob", "KNOWS", 0.5)],
    )
    return log.build()


def dropping_merge() -> Scenario:
    log = LogBuilder("dropping-merge")
    _people(log)
    log.extract(
        T1,
        "doc-2",
        [("alicia", "Alicia Smith", "Person"), ("zed", "Zed", "Person")],
        [("alicia", "zed", "LIKES", 0.4)],
    )
    # The write model dropped alice's MANAGES edge and the duplicate WORKS_AT.
    log.merge(
        T1,
        "alice",
        ["alicia"],
        remove=[("alice", "bob", "MANAGES"), ("alicia", "acme", "WORKS_AT")],
    )
    return log.build()


def undo() -> Scenario:
    log = LogBuilder("undo")
    _people(log)
    log.merge(T1, "alice", ["alicia"], remove=[("alicia", "acme", "WORKS_AT")])
    log.unmerge(
        T1,
        "alice",
        ["alicia"],
        restore=[("alicia", "acme", "WORKS_AT", 0.6), ("bob", "alicia", "KNOWS", 0.7)],
        remove=[("bob", "alice", "KNOWS")],
    )
    log.extract(T1, "doc-3", [("alicia", "Alicia Smith", "Person", {"dept": "sales"})])
    # Unmerging again (redelivered decision, new id) is harmless.
    log.unmerge(T1, "alice", ["alicia"])
    return log.build()


def undo_of_dropping_merge() -> Scenario:
    log = LogBuilder("undo-dropping-merge")
    _people(log)
    log.merge(
        T1,
        "alice",
        ["alicia"],
        remove=[("alice", "bob", "MANAGES"), ("alicia", "acme", "WORKS_AT")],
    )
    log.unmerge(
        T1,
        "alice",
        ["alicia"],
        restore=[
            ("alice", "bob", "MANAGES", 0.8),
            ("alicia", "acme", "WORKS_AT", 0.6, {"role": "exec"}),
            ("bob", "alicia", "KNOWS", 0.7),
        ],
        remove=[("bob", "alice", "KNOWS")],
    )
    return log.build()


def two_tenants() -> Scenario:
    log = LogBuilder("two-tenants")
    _people(log, T1)
    _people(log, T2)
    log.gap(3)
    log.merge(T1, "alice", ["alicia"])
    log.extract(T2, "doc-2", [("bob", "Robert Jones", "Person", {"nick": "bob"})])
    log.merge(T2, "bob", ["alicia"])
    log.extract(
        T1,
        "doc-2",
        [("alicia", "Alicia", "Person"), ("bob", "Bob", "Person")],
        [("bob", "alicia", "KNOWS", 0.3)],
    )
    log.unmerge(T2, "bob", ["alicia"], restore=[("bob", "alicia", "KNOWS", 0.7)])
    return log.build()


def three_deep_chain() -> Scenario:
    log = LogBuilder("three-deep-chain")
    log.extract(
        T1,
        "doc-1",
        [
            ("a", "A", "Person"),
            ("b", "B", "Person"),
            ("c", "C", "Person"),
            ("d", "D", "Person"),
            ("x", "X", "Org"),
        ],
        [
            ("d", "x", "WORKS_AT", 0.4),
            ("c", "x", "WORKS_AT", 0.5),
            ("b", "x", "WORKS_AT", 0.6),
            ("x", "d", "EMPLOYS", 0.4),
        ],
    )
    log.merge(T1, "a", ["b"])
    log.merge(T1, "b", ["c"])  # into an alias: c -> b -> a
    log.merge(T1, "c", ["d"])  # into an alias again: d -> c -> b -> a
    log.extract(
        T1, "doc-2", [("d", "D.", "Person"), ("x", "X", "Org")], [("d", "x", "FOUNDED", 0.9)]
    )
    # Undo the middle of the chain: c stands alone, d still follows c.
    log.unmerge(T1, "b", ["c"], restore=[("c", "x", "WORKS_AT", 0.5)])
    log.extract(T1, "doc-3", [("d", "D", "Person"), ("x", "X", "Org")], [("x", "d", "PAYS", 0.2)])
    return log.build()


def self_loop_collapse() -> Scenario:
    log = LogBuilder("self-loop-collapse")
    doc = [("alice", "Alice", "Person"), ("alicia", "Alicia", "Person"), ("bob", "Bob", "Person")]
    rels: list[Rel] = [("alice", "alicia", "KNOWS", 0.9), ("alicia", "bob", "KNOWS", 0.5)]
    log.extract(T1, "doc-1", doc, rels)
    log.merge(T1, "alice", ["alicia"])  # the KNOWS edge collapses onto alice
    log.extract(T1, "doc-1", doc, rels, model="extractor-v2", mark="collapsed")
    return log.build()


def edge_to_a_canonical_extracted_later_in_the_run() -> Scenario:
    """An edge names an absorbed id whose canonical exists in the store but is
    extracted again only by a later event of the same run: the edge is written
    (the canonical already exists), not counted as dangling."""
    log = LogBuilder("edge-to-a-canonical-extracted-later")
    _people(log)
    log.merge(T1, "alice", ["alicia"])
    log.extract(
        T1,
        "doc-2",
        [("alicia", "Alicia S.", "Person"), ("dave", "Dave", "Person")],
        [("dave", "alicia", "KNOWS", 0.4)],
    )
    log.extract(T1, "doc-3", [("alice", "Alice Smith", "Person", {"title": "Chair"})])
    return log.build()


def re_extraction_keeps_merge() -> Scenario:
    """ADR 0002: a later extraction writing the pre-merge endpoints again must
    not revert the merge."""
    log = LogBuilder("re-extraction-keeps-merge")
    ents = [
        ("e0", "Ada Lovelace", "Person"),
        ("e1", "A. Lovelace", "Person"),
        ("e2", "Analytical Engine", "Thing"),
    ]
    log.extract(T1, "doc-1", ents, [("e1", "e2", "DESIGNED", 0.7)], model="m1")
    log.merge(T1, "e0", ["e1"])
    log.extract(
        T1,
        "doc-1",
        [*ents[:1], ("e1", "A. Lovelace", "Person", {"born": 1815}), ents[2]],
        [("e1", "e2", "DESIGNED", 0.8), ("e2", "e1", "DESIGNED_BY", 0.8)],
        model="m2",
    )
    return log.build()


def replay_during_live_traffic() -> Scenario:
    log = LogBuilder("replay-live")
    _people(log, T1)
    log.extract(
        T2,
        "doc-9",
        [("g1", "Gus", "Person"), ("g2", "Gail", "Person")],
        [("g1", "g2", "KNOWS", 0.5)],
    )
    log.merge(T1, "alice", ["alicia"])
    log.gap(2)
    log.extract(T1, "doc-2", [("bob", "Bob", "Person", {"age": 40})])
    log.replay(T1)
    log.extract(T2, "doc-10", [("g1", "Gus", "Person", {"x": 1})])
    log.extract(
        T1,
        "doc-3",
        [("carol", "Carol", "Person"), ("alicia", "Alicia", "Person")],
        [("carol", "alicia", "KNOWS", 0.6)],
    )
    log.merge(T2, "g1", ["g2"])
    log.unmerge(T1, "alice", ["alicia"])
    log.replay(T1)  # a second replay re-applies the first one's window and more
    log.extract(T2, "doc-11", [("g2", "Gail", "Person")])
    return log.build()


def erasure_then_later_events() -> Scenario:
    log = LogBuilder("erasure")
    _people(log, T1)
    _people(log, T2)
    log.merge(T1, "alice", ["alicia"])
    log.erase(T1)
    log.extract(
        T1,
        "doc-5",
        [("alice", "Alice New", "Person"), ("dan", "Dan", "Person")],
        [("alice", "dan", "KNOWS", 0.5)],
    )
    log.replay(T1)  # must not bring back anything from before the erasure
    log.extract(T1, "doc-6", [("alicia", "Alicia", "Person")])
    log.merge(T1, "alice", ["alicia"])
    return log.build()


def cycle_merge_refused() -> Scenario:
    log = LogBuilder("cycle-refused")
    _people(log)
    log.merge(T1, "alice", ["alicia"])
    log.merge(T1, "alicia", ["alice"], mark="refused")  # two-cycle
    log.merge(T1, "bob", ["alice"])  # chain alicia -> alice -> bob
    log.merge(T1, "alicia", ["bob"], mark="refused")  # three-cycle
    log.merge(T1, "acme", ["bob"])  # fine: alicia -> alice -> bob -> acme
    log.extract(
        T1,
        "doc-2",
        [("alicia", "Alicia", "Person"), ("zoe", "Zoe", "Person")],
        [("zoe", "alicia", "KNOWS")],
    )
    return log.build()


def poison_record() -> Scenario:
    log = LogBuilder("poison")
    _people(log)
    log.poison(T1)
    log.merge(T1, "alice", ["alicia"])
    log.poison(None)
    log.extract(T1, "doc-2", [("bob", "Bob", "Person", {"k": "v"})])
    log.poison(T2)
    return log.build()


def redelivered_event_id() -> Scenario:
    log = LogBuilder("redelivered")
    first = log.extract(
        T1,
        "doc-1",
        [("alice", "Alice", "Person", {"status": "old"}), ("bob", "Bob", "Person")],
        [("alice", "bob", "KNOWS", 0.2)],
    )
    log.extract(
        T1,
        "doc-2",
        [("alice", "Alice", "Person", {"status": "new"}), ("bob", "Bob", "Person")],
        [("alice", "bob", "KNOWS", 0.9)],
    )
    merge_ev = log.merge(T1, "alice", ["bob"])
    log.redeliver(first)  # producer retry: would set status back to "old"
    log.unmerge(T1, "alice", ["bob"])
    log.redeliver(merge_ev)  # would merge bob away again
    return log.build()


def replay_requested_twice() -> Scenario:
    """A producer retry publishes the signed replay request twice in a row:
    the second copy (same event id) must not delete and rebuild the tenant
    again (docs/design.md 6.4, "Control events act once")."""
    log = LogBuilder("replay-twice")
    _people(log, T1)
    log.extract(T2, "doc-9", [("g1", "Gus", "Person")])
    log.merge(T1, "alice", ["alicia"])
    request = log.replay(T1)
    log.redeliver(request, mark="control_duplicate")
    log.extract(T1, "doc-2", [("bob", "Bob", "Person", {"age": 41})])
    log.extract(T2, "doc-10", [("g1", "Gus", "Person", {"x": 1})])
    return log.build()


def replay_re_sent_later() -> Scenario:
    """The same replay request arrives again long after it was acted on, with
    other tenants' traffic and the tenant's own events in between."""
    log = LogBuilder("replay-re-sent-later")
    _people(log, T1)
    request = log.replay(T1)
    log.extract(T2, "doc-9", [("g1", "Gus", "Person"), ("g2", "Gail", "Person")])
    log.merge(T1, "alice", ["alicia"])
    log.gap(4)
    log.extract(
        T1,
        "doc-2",
        [("carol", "Carol", "Person"), ("bob", "Bob", "Person")],
        [("carol", "bob", "KNOWS", 0.3)],
    )
    log.merge(T2, "g1", ["g2"])
    log.unmerge(T1, "alice", ["alicia"])
    log.redeliver(request, mark="control_duplicate")
    log.extract(T1, "doc-3", [("dave", "Dave", "Person")])
    return log.build()


def erasure_re_sent_later() -> Scenario:
    """A signed erasure published again later with the same event id: acting
    on it again would erase everything the tenant wrote in between."""
    log = LogBuilder("erasure-re-sent-later")
    _people(log, T1)
    _people(log, T2)
    erasure = log.erase(T1)
    log.extract(
        T1,
        "doc-5",
        [("alice", "Alice New", "Person"), ("dan", "Dan", "Person")],
        [("alice", "dan", "KNOWS", 0.5)],
    )
    log.merge(T2, "alice", ["alicia"])
    log.extract(
        T1,
        "doc-6",
        [("erin", "Erin", "Person"), ("dan", "Dan", "Person")],
        [("erin", "dan", "KNOWS", 0.4)],
    )
    log.redeliver(erasure, mark="control_duplicate")  # must not erase doc-5 and doc-6
    log.merge(T1, "dan", ["erin"])
    log.replay(T1)  # the rebuild keeps them too: the tombstone stays where it was
    log.extract(T1, "doc-7", [("fay", "Fay", "Person")])
    return log.build()


PINNED: dict[str, Callable[[], Scenario]] = {
    "merge": merge,
    "dropping_merge": dropping_merge,
    "undo": undo,
    "undo_of_dropping_merge": undo_of_dropping_merge,
    "two_tenants": two_tenants,
    "three_deep_chain": three_deep_chain,
    "self_loop_collapse": self_loop_collapse,
    "re_extraction_keeps_merge": re_extraction_keeps_merge,
    "replay_during_live_traffic": replay_during_live_traffic,
    "erasure_then_later_events": erasure_then_later_events,
    "cycle_merge_refused": cycle_merge_refused,
    "poison_record": poison_record,
    "redelivered_event_id": redelivered_event_id,
    "replay_requested_twice": replay_requested_twice,
    "replay_re_sent_later": replay_re_sent_later,
    "erasure_re_sent_later": erasure_re_sent_later,
}
