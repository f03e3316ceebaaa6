"""Many-tenant workloads: what a whole events topic receives, record by record.

A workload is the Kafka traffic of many tenants (many per partition), each with
a short history drawn like ``tests/scenarios/generators.py`` draws one:
extractions, merges, merges into an alias (chains of three and more), merges
closing a cycle (refused and dead-lettered), unmerges (of chain links too),
signed replay requests in the middle of a history, erasures, values that fail
validation (bad JSON, unknown event type, a bad property, an unsigned or badly
signed control event) and producer retries re-sending an earlier event's exact
bytes later. The tenants' records are interleaved in a drawn order (each
tenant's own order kept), then duplicated by a drawn mode:

- ``"none"``: every record once;
- ``"twice"``: every record twice in a row (a producer retrying everything);
- ``"random"``: some records get a copy right after, or a few records later
  (never past a later record of the same tenant).

Every record has the Kafka key (the tenant id as UTF-8), the value bytes, the
partition the Java-compatible partitioner gives the key, and its offset there
on a fresh topic written by one in-order producer. Grouped by partition, the
records are what ``tests.scenarios.oracle`` consumes; the oracle decides what
the stores must hold and which records are dead-lettered.

The building code is written once against :class:`Chooser`. Two choosers
drive it: :func:`workloads` (a hypothesis strategy; choices shrink toward fewer
tenants, shorter histories, extractions only, no duplication) and
:func:`workload_from_seed` (``random.Random``, for end-to-end runs).

Tenant ids are ``<namespace>t<index>``: give each run that shares a real store
a namespace of its own (the e2e tests use their deployment's tenant prefix).
The namespace also names the events, so their ids are unique per namespace.
The partition of a tenant depends on its id, hence on the namespace.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

from contracts import signing
from contracts.events import (
    DOCUMENT_EXTRACTED,
    SCHEMA_VERSION,
    TENANT_ERASED,
    TENANT_REPLAY_REQUESTED,
    Event,
    event_to_dict,
    event_to_json,
    parse_event_dict,
)
from streams.kafka.partitioning import partition_for
from tests.scenarios import generators
from tests.scenarios.harness import oracle_refused_offsets
from tests.scenarios.histories import CONTROL_KEY, TOPIC_ID, LogBuilder, Record, Rel, Scenario
from tests.scenarios.oracle import Oracle, resolve

T = TypeVar("T")

DUPLICATIONS = ("none", "twice", "random")
POISONS = ("bad_json", "unknown_type", "bad_property", "unsigned_control", "bad_signature")
#: A well-formed envelope of a newer schema_version: it pauses its partition
#: until an operator skips it (``redstring skip``), so only workloads whose
#: runner plays that operator draw it (``newer_versions``).
NEWER_VERSION = "newer_version"
POOL = generators.POOL
#: Steps of one tenant's history, weighted by repetition. The first is what
#: hypothesis shrinks toward.
OPS = (
    ["extract"] * 8
    + ["merge"] * 4
    + ["merge_into_alias"] * 4
    + ["cycle_merge"] * 2
    + ["unmerge"]
    + ["unmerge_chained"] * 2
    + ["replay"] * 2
    + ["erase"]
    + ["poison"] * 2
    + ["retry"] * 2
)
#: Steps that cost a real worker a seek (a refused merge is dead-lettered and
#: the rest of its batch read again) or a rescan of the partition (a replay).
RARE = ("replay", "cycle_merge")
_COMMON_OPS = [op for op in OPS if op not in RARE]


class Chooser(Protocol):
    """The only source of choices of the building code."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]`` (both included)."""
        ...

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options`` (not empty)."""
        ...


class RandomChooser:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]


_INTEGERS: dict[tuple[int, int], st.SearchStrategy[int]] = {}


class DrawChooser:
    """Choices drawn from hypothesis: each shrinks toward ``lo`` (the first option)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        strategy = _INTEGERS.get((lo, hi))
        if strategy is None:
            # Built once per range: building strategies inside a draw is slow.
            strategy = _INTEGERS[(lo, hi)] = st.integers(lo, hi)
        return int(self.draw(strategy))

    def choice(self, options: Sequence[T]) -> T:
        return options[self.integer(0, len(options) - 1)]


# -- the records --------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadRecord:
    """One Kafka record of a workload."""

    tenant: str
    key: bytes
    value: bytes
    #: What a worker decodes from ``value``; None: it must dead-letter the value.
    event: Event | None
    #: The step that wrote it: extract, merge, merge_into_alias, cycle_merge,
    #: unmerge, unmerge_chained, replay, erase, retry or poison:<kind>.
    kind: str
    partition: int
    #: Its offset on a fresh topic that received the workload in order.
    offset: int
    #: True for the second copy the duplication mode added.
    copy: bool = False

    @property
    def oracle_record(self) -> Record:
        return (self.offset, self.tenant, self.event)


@dataclass(frozen=True)
class Workload:
    records: tuple[WorkloadRecord, ...]  # in publish order
    tenants: tuple[str, ...]
    partitions: int
    duplication: str
    control_key: bytes
    #: The topic id its control events are signed for.
    topic_id: str = TOPIC_ID

    def partition_logs(self) -> dict[int, list[Record]]:
        """Each partition's records as the oracle takes them, in log order."""
        logs: dict[int, list[Record]] = {p: [] for p in range(self.partitions)}
        for record in self.records:
            logs[record.partition].append(record.oracle_record)
        return logs

    def positions(self) -> list[tuple[int, int]]:
        """``(partition, offset)`` of every record, in publish order."""
        return [(r.partition, r.offset) for r in self.records]

    def log_ends(self) -> dict[int, int]:
        """The high watermark of each partition once everything is published."""
        ends = dict.fromkeys(range(self.partitions), 0)
        for record in self.records:
            ends[record.partition] = max(ends[record.partition], record.offset + 1)
        return ends

    def expected_states(self) -> dict[str, dict[str, Any]]:
        """Every tenant's state as the oracle computes it from its partition."""
        states: dict[str, dict[str, Any]] = {}
        for records in self.partition_logs().values():
            states.update(Oracle().feed_all(records).states())
        missing = set(self.tenants) - set(states)
        assert not missing, f"tenants the oracle never saw: {sorted(missing)[:5]}"
        return states

    def dead_letters(self) -> dict[tuple[int, int], str]:
        """``(partition, offset) -> why`` for every record the workers must
        dead-letter at least once: the values that fail validation and the
        merges the semantics refuse (live or while a replay re-applies them)."""
        out: dict[tuple[int, int], str] = {}
        for record in self.records:
            if record.event is None:
                out[(record.partition, record.offset)] = record.kind
        for partition, records in self.partition_logs().items():
            for offset in oracle_refused_offsets(records):
                out[(partition, offset)] = "refused merge"
        return out

    def tenants_of(self, partition: int) -> list[str]:
        return sorted({r.tenant for r in self.records if r.partition == partition})

    def features(self) -> Counter[str]:
        """What the workload exercises, judged by the oracle over each partition
        (``tests.scenarios.generators.features``) plus the many-tenant shapes."""
        seen: Counter[str] = Counter()
        for partition, records in self.partition_logs().items():
            seen.update(generators.features(Scenario(f"partition-{partition}", records)))
            if len(self.tenants_of(partition)) >= 2:
                seen["tenants_sharing_a_partition"] += 1
        later: set[str] = set()
        for record in reversed(self.records):
            if record.kind == "replay" and record.tenant in later:
                seen["replay_mid_history"] += 1
            later.add(record.tenant)
        for record in self.records:
            if record.copy:
                seen["duplicated_record"] += 1
            if record.kind in ("retry", "cycle_merge") or record.kind.startswith("poison:"):
                seen[record.kind] += 1
        return seen

    def summary(self) -> str:
        per_partition = Counter(r.partition for r in self.records)
        return (
            f"{len(self.tenants)} tenants, {len(self.records)} records "
            f"({dict(sorted(per_partition.items()))} per partition), duplication "
            f"{self.duplication}, {len(self.dead_letters())} records to dead-letter"
        )


# -- one tenant's history ---------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    kind: str
    event: Event | None
    value: bytes


def restamped(event: Event, when: datetime) -> Event:
    """``event`` with ``occurred_at`` set to ``when`` (and unsigned)."""
    data = event_to_dict(event)
    data.pop("signature", None)
    data.pop("key_id", None)
    data["occurred_at"] = when.isoformat()
    return parse_event_dict(data)


class _TenantHistory:
    """Draws one tenant's history; an oracle beside it only aims the choices."""

    def __init__(
        self,
        chooser: Chooser,
        tenant: str,
        control_key: bytes,
        topic_id: str,
        signed_at: datetime | None,
        newer_versions: bool = False,
    ) -> None:
        self.c = chooser
        self.tenant = tenant
        self.control_key = control_key
        self.topic_id = topic_id
        self.signed_at = signed_at
        self.poisons = (*POISONS, NEWER_VERSION) if newer_versions else POISONS
        self.log = LogBuilder(tenant)
        self.oracle = Oracle()
        self.steps: list[_Step] = []
        self._fed = 0

    def some(self, items: Sequence[str], low: int, high: int) -> list[str]:
        pool = list(items)
        count = min(len(pool), self.c.integer(low, high))
        return [pool.pop(self.c.integer(0, len(pool) - 1)) for _ in range(count)]

    def pair(self, ids: Sequence[str]) -> tuple[str, str]:
        source = self.c.choice(ids)
        return source, self.c.choice([i for i in ids if i != source])

    def rels(self, ids: Sequence[str], most: int) -> list[Rel]:
        if len(ids) < 2:
            return []
        return [
            (
                *self.pair(ids),
                self.c.choice(generators.REL_TYPES),
                self.c.choice([0.1, 0.5, 0.9]),
                {"w": self.c.integer(0, 3)} if self.c.integer(0, 2) == 0 else {},
            )
            for _ in range(self.c.integer(0, most))
        ]

    def refs(self) -> list[tuple[str, str, str]]:
        return [
            (*self.pair(POOL), self.c.choice(generators.REL_TYPES))
            for _ in range(self.c.integer(0, 1))
        ]

    def aliases(self) -> dict[str, str]:
        state = self.oracle.tenants.get(self.tenant)
        return dict(state.aliases) if state else {}

    def emit(self, kind: str, event: Event | None, value: bytes | None = None) -> None:
        if event is not None and event.is_control:
            if self.signed_at is not None:
                event = restamped(event, self.signed_at)
            event = signing.sign(event, self.control_key, topic_id=self.topic_id)
        raw = value if value is not None else event_to_json(event)  # type: ignore[arg-type]
        self.steps.append(_Step(kind, event, raw))
        self._feed()

    def _feed(self) -> None:
        for offset, key, logged in self.log.records[self._fed :]:
            self.oracle.feed(offset, key, logged)
        self._fed = len(self.log.records)

    # -- the steps ----------------------------------------------------------------

    def step(self, op: str) -> None:
        aliases = self.aliases()
        if op in ("merge_into_alias", "cycle_merge") and not aliases:
            op = "merge"
        if op in ("unmerge", "unmerge_chained") and not aliases:
            op = "extract"
        getattr(self, f"_{op}")(aliases)

    def _extract(self, _aliases: dict[str, str]) -> None:
        ids = self.some(POOL, 1, 4)
        ents = [
            (
                i,
                self.c.choice(["", "Dr ", "Mx "]) + i.upper(),
                self.c.choice(["Person", "Org"]),
                {self.c.choice(["p", "q"]): self.c.integer(0, 3)} if self.c.integer(0, 1) else {},
            )
            for i in ids
        ]
        doc = f"doc-{self.c.integer(0, 3)}"
        self.emit("extract", self.log.extract(self.tenant, doc, ents, self.rels(ids, 3)))

    def _merge_of(self, kind: str, canonical: str, absorbed: list[str]) -> None:
        event = self.log.merge(
            self.tenant, canonical, absorbed, remove=self.refs(), add=self.rels(POOL, 1)
        )
        self.emit(kind, event)

    def _merge(self, aliases: dict[str, str]) -> None:
        canonical = self.c.choice(POOL)
        # Never an id of the canonical's tree: only cycle_merge closes a cycle.
        root = resolve(aliases, canonical)
        others = [i for i in POOL if resolve(aliases, i) != root]
        if not others:
            return self._extract(aliases)
        self._merge_of("merge", canonical, self.some(others, 1, 2))

    def _merge_into_alias(self, aliases: dict[str, str]) -> None:
        # Half the time, lengthen the longest chain; absorb other trees' roots.
        ordered = sorted(aliases)
        deepest = max(ordered, key=lambda a: generators.chain_depth({**aliases, "?": a}))
        canonical = deepest if self.c.integer(0, 1) else self.c.choice(ordered)
        root = resolve(aliases, canonical)
        free = [i for i in POOL if resolve(aliases, i) == i != root]
        others = free or [i for i in POOL if resolve(aliases, i) != root]
        if not others:
            return self._extract(aliases)
        self._merge_of("merge_into_alias", canonical, self.some(others, 1, 2))

    def _cycle_merge(self, aliases: dict[str, str]) -> None:
        alias = self.c.choice(sorted(aliases))
        self._merge_of("cycle_merge", alias, [resolve(aliases, alias)])

    def _unmerge(self, aliases: dict[str, str], kind: str = "unmerge") -> None:
        chained = sorted(a for a, c in aliases.items() if c in aliases or a in aliases.values())
        if kind == "unmerge_chained" and chained:
            restored = [self.c.choice(chained)]
        else:
            restored = [self.c.choice(sorted(aliases))]
        event = self.log.unmerge(
            self.tenant,
            aliases[restored[0]],
            restored,
            restore=self.rels(POOL, 1),
            remove=self.refs(),
        )
        self.emit(kind, event)

    def _unmerge_chained(self, aliases: dict[str, str]) -> None:
        self._unmerge(aliases, "unmerge_chained")

    def _replay(self, _aliases: dict[str, str]) -> None:
        self.emit("replay", self.log.replay(self.tenant))

    def _erase(self, _aliases: dict[str, str]) -> None:
        self.emit("erase", self.log.erase(self.tenant))

    def _retry(self, _aliases: dict[str, str]) -> None:
        # A producer retry re-sends an earlier event's exact bytes (a replay
        # request or an erasure too: control events act once).
        earlier = [s for s in self.steps if s.event is not None]
        again = self.c.choice(earlier)
        assert again.event is not None
        self.log.redeliver(again.event)
        self.steps.append(_Step("retry", again.event, again.value))
        self._feed()

    def _poison(self, _aliases: dict[str, str]) -> None:
        kind = self.c.choice(self.poisons)
        self.log.poison(self.tenant)
        self.emit(f"poison:{kind}", None, self._poison_value(kind))

    def _poison_value(self, kind: str) -> bytes:
        if kind == "bad_json":
            return b'{"event_type": "DocumentExtracted", "oops": '
        if kind == "unsigned_control":
            return event_to_json(self.log.event(TENANT_ERASED, self.tenant, {"requested_by": "x"}))
        if kind == "bad_signature":
            forged = self.log.event(TENANT_REPLAY_REQUESTED, self.tenant, {"requested_by": "x"})
            return event_to_json(
                signing.sign(forged, b"not-the-control-key", topic_id=self.topic_id)
            )
        data = event_to_dict(
            self.log.event(
                DOCUMENT_EXTRACTED,
                self.tenant,
                {"document_id": "doc-p", "extraction_model": "m", "entities": []},
            )
        )
        if kind == "unknown_type":
            data["event_type"] = "DocumentDeleted"
        elif kind == NEWER_VERSION:
            data["schema_version"] = SCHEMA_VERSION + 1
        else:  # bad_property: nested maps are not property values
            data["payload"]["entities"] = [
                {"id": "a", "name": "A", "type": "Person", "properties": {"nested": {"k": 1}}}
            ]
        return json.dumps(data).encode()


# -- the workload ----------------------------------------------------------------------


def build_workload(
    chooser: Chooser,
    *,
    tenants: int,
    namespace: str = "wl-",
    partitions: int = 3,
    min_steps: int = 4,
    max_steps: int = 8,
    duplication: str | None = None,
    rare_one_in: int = 1,
    control_key: bytes = CONTROL_KEY,
    topic_id: str = TOPIC_ID,
    signed_at: datetime | None = None,
    newer_versions: bool = False,
) -> Workload:
    """A workload of ``tenants`` tenants with ``min_steps..max_steps`` steps each
    (a step writes one record; duplication adds copies). ``duplication``: one of
    :data:`DUPLICATIONS`, or None to draw it. Only about one tenant in
    ``rare_one_in`` may draw the :data:`RARE` steps (replay requests and merges
    closing a cycle; other merges never close one). Control events are signed
    with ``control_key`` (the workers' ``REDSTRING_CONTROL_KEY``) for the topic
    whose Kafka topic id is ``topic_id``, with ``occurred_at`` set to
    ``signed_at`` when given (workers refuse a control event older than
    REDSTRING_CONTROL_MAX_AGE_S when published: give the time of publication).
    ``newer_versions``: poisons include records of a newer schema version,
    which pause their partition until an operator skips them."""
    assert tenants >= 1 and 1 <= min_steps <= max_steps and rare_one_in >= 1
    names = [f"{namespace}t{i:03d}" for i in range(tenants)]
    queues: list[list[_Step]] = []
    for name in names:
        history = _TenantHistory(chooser, name, control_key, topic_id, signed_at, newer_versions)
        ops = OPS if chooser.integer(1, rare_one_in) == 1 else _COMMON_OPS
        history.step("extract")  # something to merge, whatever else is drawn
        for _ in range(chooser.integer(min_steps, max_steps) - 1):
            history.step(chooser.choice(ops))
        queues.append(list(reversed(history.steps)))
    # Interleave: any tenant with records left may come next.
    order: list[tuple[str, _Step]] = []
    active = list(range(tenants))
    while active:
        at = chooser.integer(0, len(active) - 1)
        index = active[at]
        order.append((names[index], queues[index].pop()))
        if not queues[index]:
            active.pop(at)
    mode = duplication if duplication is not None else chooser.choice(DUPLICATIONS)
    assert mode in DUPLICATIONS, mode
    published = _duplicated(chooser, order, mode)
    next_offset = dict.fromkeys(range(partitions), 0)
    records = []
    for tenant, step, copy in published:
        partition = partition_for(tenant, partitions)
        records.append(
            WorkloadRecord(
                tenant=tenant,
                key=tenant.encode("utf-8"),
                value=step.value,
                event=step.event,
                kind=step.kind,
                partition=partition,
                offset=next_offset[partition],
                copy=copy,
            )
        )
        next_offset[partition] += 1
    return Workload(tuple(records), tuple(names), partitions, mode, control_key, topic_id)


def _duplicated(
    chooser: Chooser, order: list[tuple[str, _Step]], mode: str
) -> list[tuple[str, _Step, bool]]:
    if mode == "none":
        return [(tenant, step, False) for tenant, step in order]
    if mode == "twice":
        return [(t, s, copy) for t, s in order for copy in (False, True)]
    # "random": a copy right after, or up to three records later, but before
    # the tenant's next record (a retry by the producer that sent it; later
    # re-sends are the "retry" step).
    following = [len(order)] * len(order)
    seen: dict[str, int] = {}
    for index in range(len(order) - 1, -1, -1):
        following[index] = seen.get(order[index][0], len(order))
        seen[order[index][0]] = index
    after: dict[int, list[tuple[str, _Step, bool]]] = {}
    for index, (tenant, step) in enumerate(order):
        if chooser.integer(0, 3) == 0:
            at = min(index + chooser.integer(0, 3), following[index] - 1)
            after.setdefault(at, []).append((tenant, step, True))
    out: list[tuple[str, _Step, bool]] = []
    for index, (tenant, step) in enumerate(order):
        out.append((tenant, step, False))
        out.extend(after.get(index, []))
    return out


def workload_from_seed(seed: int, *, tenants: int = 400, **options: Any) -> Workload:
    """The workload ``random.Random(seed)`` draws; ``options`` are
    :func:`build_workload`'s (namespace, partitions, min_steps, max_steps,
    duplication, rare_one_in, control_key, topic_id, signed_at). Given ``duplication``, the records
    before duplication depend only on the other arguments."""
    return build_workload(RandomChooser(random.Random(seed)), tenants=tenants, **options)


@st.composite
def workloads(
    draw: st.DrawFn,
    /,
    *,
    min_tenants: int = 1,
    max_tenants: int = 12,
    min_steps: int = 1,
    **options: Any,
) -> Workload:
    """Workloads drawn by hypothesis; ``options`` are :func:`build_workload`'s
    (namespace, partitions, max_steps, duplication, rare_one_in, control_key, topic_id, signed_at).
    Shrinking goes toward ``min_tenants`` tenants of ``min_steps`` extractions,
    interleaved tenant by tenant, without duplication (unless it is fixed)."""
    chooser = DrawChooser(draw)
    tenants = chooser.integer(min_tenants, max_tenants)
    return build_workload(chooser, tenants=tenants, min_steps=min_steps, **options)
