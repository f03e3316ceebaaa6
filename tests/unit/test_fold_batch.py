"""How a fold cuts a batch (``projections.batch``): no store is involved, so
each cut of docs/design.md 5.3 is checked on its own."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from contracts.events import (
    DocumentExtractedEvent,
    EntitiesMergedEvent,
    EntitiesUnmergedEvent,
    Event,
)
from projections.batch import (
    Admitted,
    Control,
    Segment,
    Step,
    Write,
    split_batch,
    write_order,
)
from projections.records import Ahead, LogRecord, Tally
from tests.scenarios.harness import to_log
from tests.scenarios.histories import LogBuilder


def _log() -> list[LogRecord]:
    log = LogBuilder("cuts", start=10)
    log.extract("acme", "d1", [("a", "A", "Person")])  # 10
    log.poison("acme")  # 11
    log.gap(2)
    log.replay("acme")  # 14
    log.extract("acme", "d2", [("b", "B", "Person")])  # 15
    log.erase("globex")  # 16
    log.erase("initech")  # 17
    log.extract("acme", "d3", [("c", "C", "Person")])  # 18
    return to_log(log.records)


def _shape(pieces: list[Segment | Control]) -> list[tuple[str, list[int], int]]:
    return [
        (
            "control" if isinstance(p, Control) else "segment",
            [r.offset for r in p.records],
            p.expected,
        )
        for p in pieces
    ]


def test_control_events_are_pieces_of_their_own_between_segments() -> None:
    assert _shape(split_batch(_log(), 9)) == [
        ("segment", [10, 11], 9),
        ("control", [14], 12),
        ("segment", [15], 15),
        ("control", [16], 16),
        ("control", [17], 17),
        ("segment", [18], 18),
    ]


def test_a_batch_is_read_from_its_first_record_by_default() -> None:
    assert [p.expected for p in split_batch(_log()[3:], None)] == [15, 16, 17, 18]
    assert split_batch([], None) == []


def test_singles_are_read_from_where_the_one_before_ended() -> None:
    segment = Segment(_log()[:2], 9)
    assert [(s.offsets, s.expected) for s in segment.singles()] == [((10,), 9), ((11,), 11)]


def test_merges_and_unmerges_end_a_run_of_extractions() -> None:
    log = LogBuilder("runs")
    log.extract("acme", "d1", [("a", "A", "Person")])
    log.extract("acme", "d2", [("b", "B", "Person")])
    log.merge("acme", "a", ["b"])
    log.extract("acme", "d3", [("c", "C", "Person")])
    log.unmerge("acme", "a", ["b"])
    log.unmerge("acme", "a", ["b"])
    admitted = [Admitted(o, e) for o, _, e in log.records if e is not None]
    shape = [
        type(w).__name__ if isinstance(w, EntitiesMergedEvent | EntitiesUnmergedEvent) else len(w)
        for w in write_order(admitted)
    ]
    assert shape == [2, "EntitiesMergedEvent", 1, "EntitiesUnmergedEvent", "EntitiesUnmergedEvent"]


def _shape_of(writes: list[Write]) -> list[object]:
    """A run as its offsets, a merge or an unmerge as its tenant and kind."""
    return [
        (w.tenant, type(w).__name__[8:-5])
        if isinstance(w, EntitiesMergedEvent | EntitiesUnmergedEvent)
        else [item.offset for item in w]
        for w in writes
    ]


def test_a_merge_ends_only_its_own_tenants_run() -> None:
    log = LogBuilder("tenants")
    log.extract("acme", "d0", [("a", "A", "Person")])  # 0
    log.extract("globex", "d1", [("g", "G", "Person")])  # 1
    log.merge("acme", "a", ["b"])  # 2
    log.extract("globex", "d3", [("h", "H", "Person")])  # 3
    log.extract("acme", "d4", [("c", "C", "Person")])  # 4
    log.unmerge("globex", "g", ["h"])  # 5
    log.extract("acme", "d6", [("d", "D", "Person")])  # 6
    log.extract("initech", "d7", [("i", "I", "Person")])  # 7
    admitted = [Admitted(o, e) for o, _, e in log.records if e is not None]
    # In log order this was three runs: [0, 1], [3, 4], [6, 7] around the
    # two. acme has two of its own, so two; the others join acme's last.
    assert _shape_of(write_order(admitted)) == [
        [0],
        ("acme", "Merged"),
        [1, 3, 4, 6, 7],
        ("globex", "Unmerged"),
    ]


_KINDS = st.sampled_from(["extract", "extract", "extract", "merge", "unmerge"])


@given(st.lists(st.tuples(st.sampled_from(["t0", "t1", "t2", "t3"]), _KINDS), max_size=40))
def test_write_order_keeps_each_tenants_order_with_the_fewest_runs(
    history: list[tuple[str, str]],
) -> None:
    log = LogBuilder("drawn")
    for n, (tenant, kind) in enumerate(history):
        if kind == "extract":
            log.extract(tenant, f"d{n}", [(f"e{n}", f"E{n}", "Person")])
        elif kind == "merge":
            log.merge(tenant, f"e{n}", [f"f{n}"])
        else:
            log.unmerge(tenant, f"e{n}", [f"f{n}"])
    admitted = [Admitted(o, e) for o, _, e in log.records if e is not None]
    writes = write_order(admitted)
    flat: list[Event] = []
    for w in writes:
        if isinstance(w, EntitiesMergedEvent | EntitiesUnmergedEvent):
            flat.append(w)
        else:
            assert w, "an empty run"
            assert all(isinstance(item.event, DocumentExtractedEvent) for item in w)
            flat.extend(item.event for item in w)
    # Every event once, and each tenant's in its log order.
    assert sorted(e.event_id for e in flat) == sorted(item.event.event_id for item in admitted)
    for tenant in {t for t, _ in history}:
        assert [e for e in flat if e.tenant == tenant] == [
            item.event for item in admitted if item.event.tenant == tenant
        ]
    # Two runs never follow each other, and there are as many as the tenant
    # with the most runs of its own has.
    kinds = ["run" if isinstance(w, list) else "mend" for w in writes]
    assert all(a != b or a == "mend" for a, b in pairwise(kinds))
    runs_per_tenant: dict[str, int] = {}
    for tenant in {t for t, _ in history}:
        kinds_of = [kind for t, kind in history if t == tenant]
        runs_per_tenant[tenant] = sum(
            1
            for i, kind in enumerate(kinds_of)
            if kind == "extract" and (i == 0 or kinds_of[i - 1] != "extract")
        )
    assert kinds.count("run") == max(runs_per_tenant.values(), default=0)


def test_a_step_keeps_the_last_known_position_and_sums_what_was_counted() -> None:
    first = Step(Tally(applied=2, skipped=1), needed=7)
    later = Step(Tally(collapsed=1), needed=None, end=Ahead())
    assert first.then(later) == Step(Tally(2, 1, 1, 0), needed=7, end=Ahead())
