"""How a fold cuts a batch (``projections.batch``): no store is involved, so
each cut of docs/design.md 5.3 is checked on its own."""

from __future__ import annotations

from contracts.events import EntitiesMergedEvent, EntitiesUnmergedEvent
from projections.batch import Admitted, Control, Segment, Step, split_batch, write_order
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


def test_a_step_keeps_the_last_known_position_and_sums_what_was_counted() -> None:
    first = Step(Tally(applied=2, skipped=1), needed=7)
    later = Step(Tally(collapsed=1), needed=None, end=Ahead())
    assert first.then(later) == Step(Tally(2, 1, 1, 0), needed=7, end=Ahead())
