"""Read-your-writes: wait until every store holds a published event."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from contracts.domain import Position, StreamPartition
from contracts.ports.ledger import ProjectionLedger


class NotProjectedError(TimeoutError):
    """A position was not projected by every store within the wait; usually
    the workers are down or behind (``redstring status``)."""


async def wait_until_projected(
    position: Position,
    ledgers: Sequence[ProjectionLedger],
    *,
    topic_id: str = "",
    within: float = 60.0,
) -> None:
    """Return once every store's checkpoint on the position's partition has
    reached its offset (read-your-writes after ``Publisher.publish``).

    A store's checkpoint is the last offset whose effects it holds, so when
    this returns, every store in ``ledgers`` has processed the event at
    ``position`` and everything before it on that partition: applied it, or
    skipped or dead-lettered it (a bad event does not block the wait; check
    ``redstring dlq list`` if the data is missing). Reads issued after it
    returns see the event. It polls each store's checkpoint, every 20 ms at
    first and backing off to once a second; it writes nothing. See
    docs/readers.md (Consistency) and docs/producers.md.

    Args:
        position: Where the event landed, as returned by
            ``Publisher.publish`` or ``Publisher.publish_many``.
        ledgers: The stores to wait for, usually ``[graph, vectors]``: any
            ``ProjectionLedger`` (both ``Neo4jGraphStore`` and
            ``PgVectorStore`` are). Empty: returns at once.
        topic_id: The Kafka topic id (UUID) of ``position.topic``; when given,
            a store whose checkpoint belongs to an earlier topic of the same
            name raises ``TopicRecreatedError`` instead of being compared.
            Default ``""``: not checked.
        within: Seconds to wait at most (default 60.0), measured on the
            monotonic clock.

    Returns:
        None, once every store has reached ``position.offset``.

    Raises:
        NotProjectedError: A store had not reached the offset after
            ``within`` seconds (a ``TimeoutError``; nothing was changed).
        TopicRecreatedError: A stored checkpoint belongs to another topic id
            than ``topic_id``.
        TransientStoreError: A store could not be read; the stores'
            errors propagate unchanged and the wait ends.

    Example:
        ```python
        async with Publisher(settings) as publisher:
            position = await publisher.publish(event)
        await wait_until_projected(position, [graph, vectors], within=10.0)
        entity = await graph.get_entity(event.tenant_id, "ada")
        ```
    """
    partition = StreamPartition(position.topic, position.partition, topic_id)
    deadline = time.monotonic() + within
    delay = 0.02
    while True:
        reached = [await ledger.checkpoint(partition) >= position.offset for ledger in ledgers]
        if all(reached):
            return
        if time.monotonic() >= deadline:
            raise NotProjectedError(
                f"{position.topic}[{position.partition}]@{position.offset} not projected "
                f"within {within}s; are the workers running? (redstring status)"
            )
        await asyncio.sleep(delay)
        delay = min(1.0, delay * 2)
