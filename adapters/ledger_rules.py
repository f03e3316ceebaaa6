"""The checkpoint rules every ledger keeps, whatever it stores them in.

A checkpoint is keyed by a topic's name, and the name outlives the topic: the
Kafka topic id it was recorded under tells one incarnation from the next, and
offsets of another incarnation mean nothing here (docs/design.md 4.3). A
checkpoint only moves forward, because it says which effects the store already
holds (docs/design.md 5.1).

Pure functions of what a ledger read: each backend reads the stored offset and
topic id its own way, and asks these what may happen. An empty topic id is
"unknown" (a record made before topic ids were known, or a caller that has
none) and matches any.
"""

from __future__ import annotations

from contracts.domain import StreamPartition
from contracts.errors import CheckpointRegressionError, TopicRecreatedError
from contracts.ports.ledger import NO_CHECKPOINT

__all__ = [
    "check_advance",
    "check_storable",
    "check_topic_id",
    "recorded_topic_id",
    "regression",
]


def check_topic_id(partition: StreamPartition, stored_id: str) -> None:
    """Refuse a checkpoint recorded under another incarnation of the topic."""
    if stored_id and partition.topic_id and stored_id != partition.topic_id:
        raise TopicRecreatedError(partition.topic, stored_id, partition.topic_id)


def recorded_topic_id(stored_id: str, partition: StreamPartition) -> str:
    """The topic id a checkpoint keeps once moved: the first one known."""
    return stored_id or partition.topic_id


def regression(partition: StreamPartition, before: int, offset: int) -> CheckpointRegressionError:
    """The error for moving the checkpoint ``before`` back to ``offset``."""
    return CheckpointRegressionError(
        f"checkpoint of {partition.topic}[{partition.partition}] is {before}; "
        f"refusing to move it back to {offset}"
    )


def check_advance(partition: StreamPartition, before: int, stored_id: str, offset: int) -> None:
    """Refuse moving the checkpoint ``before`` (recorded under ``stored_id``)
    to ``offset``: another incarnation's, or backwards. Equal is allowed (a
    no-op), so a redone batch advances to where it already is."""
    check_topic_id(partition, stored_id)
    if offset < before:
        raise regression(partition, before, offset)


def check_storable(partition: StreamPartition, offset: int) -> None:
    """Refuse an offset below ``NO_CHECKPOINT`` before any I/O: every
    checkpoint, even a missing one, is at least that, so the move is backwards
    whatever is stored."""
    if offset < NO_CHECKPOINT:
        raise CheckpointRegressionError(
            f"checkpoint of {partition.topic}[{partition.partition}] cannot move to {offset}"
        )
