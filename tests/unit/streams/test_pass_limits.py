"""The sizes of passes after a store ended a unit of work for its size
(streams/worker/pass_limits.py, docs/adr/0021-transaction-bounds.md)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.worker.pass_limits import FORGET_AFTER, PassLimits


def test_a_partition_takes_whole_batches_until_a_unit_of_work_is_ended() -> None:
    limits = PassLimits()
    assert limits.take(0, 500) == 500
    limits.committed(0)
    assert limits.take(0, 500) == 500


def test_an_ended_pass_halves_and_a_committed_one_doubles_below_the_ended_size() -> None:
    limits = PassLimits()
    limits.ended(0, 400)
    assert limits.take(0, 500) == 200
    assert limits.take(1, 500) == 500  # other partitions are not touched
    limits.committed(0)
    assert limits.take(0, 500) == 399  # never the size that was ended again
    limits.committed(0)
    assert limits.take(0, 500) == 399
    assert limits.take(0, 10) == 10


def test_the_ended_size_is_forgotten_after_passes_in_a_row_commit() -> None:
    limits = PassLimits()
    limits.ended(0, 8)
    for _ in range(FORGET_AFTER - 1):
        limits.committed(0)
        assert limits.take(0, 100) == 7
    limits.committed(0)
    assert limits.take(0, 100) == 100


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=20))
def test_a_store_that_ends_every_unit_past_a_size_is_soon_given_units_that_fit(
    caps: list[int],
) -> None:
    """Whatever size a store ends units of work past (it may change between
    spells), passes fit within about log2 of the batch ends, and never shrink
    below one record."""
    limits = PassLimits()
    batch = 5000
    for cap in caps:
        ends = 0
        while (taken := limits.take(0, batch)) > cap:
            limits.ended(0, taken)
            ends += 1
            assert ends <= 13
        assert taken >= 1
        limits.committed(0)
