"""The checkpoint rules all three ledgers call (adapters.ledger_rules): the
compliance suite proves them through each store; these pin the rules alone,
including the messages the stores surface."""

from __future__ import annotations

import pytest

from adapters.ledger_rules import (
    check_advance,
    check_storable,
    check_topic_id,
    recorded_topic_id,
    regression,
)
from contracts.domain import StreamPartition
from contracts.errors import CheckpointRegressionError, TopicRecreatedError
from contracts.ports.ledger import NO_CHECKPOINT

P = StreamPartition("events", 3, "id-1")
UNKNOWN = StreamPartition("events", 3, "")


@pytest.mark.parametrize(
    ("partition", "stored"), [(P, "id-1"), (P, ""), (UNKNOWN, "id-1"), (UNKNOWN, "")]
)
def test_an_equal_or_unknown_topic_id_matches(partition: StreamPartition, stored: str) -> None:
    check_topic_id(partition, stored)


def test_another_incarnations_checkpoint_is_refused() -> None:
    with pytest.raises(TopicRecreatedError, match="now has topic id id-1") as raised:
        check_topic_id(P, "id-0")
    assert raised.value.topic == "events"


def test_the_first_known_topic_id_is_the_one_recorded() -> None:
    assert recorded_topic_id("", P) == "id-1"
    assert recorded_topic_id("id-0", P) == "id-0"
    assert recorded_topic_id("", UNKNOWN) == ""


@pytest.mark.parametrize(("before", "offset"), [(NO_CHECKPOINT, 0), (4, 4), (4, 5)])
def test_a_checkpoint_moves_forward_or_stays(before: int, offset: int) -> None:
    check_advance(P, before, "id-1", offset)


def test_a_checkpoint_never_moves_back() -> None:
    with pytest.raises(CheckpointRegressionError) as raised:
        check_advance(P, 10, "id-1", 9)
    assert str(raised.value) == "checkpoint of events[3] is 10; refusing to move it back to 9"
    assert str(regression(P, 10, 9)) == str(raised.value)


def test_the_topic_id_is_checked_before_the_offset() -> None:
    with pytest.raises(TopicRecreatedError):
        check_advance(P, 10, "id-0", 9)


def test_no_offset_below_no_checkpoint_is_storable() -> None:
    check_storable(P, NO_CHECKPOINT)
    with pytest.raises(CheckpointRegressionError, match=r"events\[3\] cannot move to -2"):
        check_storable(P, NO_CHECKPOINT - 1)
