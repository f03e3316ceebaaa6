"""Skipping the one record a paused partition waits on (``redstring skip``).

A record with a newer ``schema_version`` (a well-formed envelope whose key
matches its tenant) pauses its partition until the workers are upgraded
(docs/design.md 3). When upgrading is not an option, an operator can skip that one
record: it is written to the dead-letter topic (to be re-driven after the
upgrade) and both stores move past it, with the same ledger move the folds
make after a refusal (``Fold.skip_refused``). A running worker notices the
stores moved and resumes the partition (``WorkerLoop.check_skipped``).

Refused unless both stores' next needed offset for the partition is exactly
the record's offset, and unless the record is one a worker pauses on: any
other record is the worker's to apply or dead-letter, and skipping it behind
the worker's back could split the stores.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts.domain import StreamPartition
from contracts.errors import SchemaVersionTooNewError
from contracts.ids import EventId, TenantId
from contracts.limits import DEFAULT_LIMITS, EventLimits
from contracts.signing import ControlKeys
from streams.kafka.config import librdkafka_config
from streams.settings import Settings
from streams.worker.decode import decode

if TYPE_CHECKING:
    from projections.fold import Fold
    from streams.wiring import Stores
    from streams.worker.projector import DeadLetterSink


#: The stores in the order ``open_folds`` gives their folds.
STORE_NAMES = ("graph", "vector")


class SkipRefused(Exception):
    """The record cannot be skipped; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class FetchedRecord:
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Skippable:
    """A record a worker pauses on, at the stores' position."""

    partition: StreamPartition
    record: FetchedRecord
    event_type: str
    tenant: str
    version: int
    supported: int
    event_id: str | None = None
    #: Stores already past the record: an earlier skip stopped between the stores.
    skipped_by: tuple[str, ...] = ()

    def describe(self) -> str:
        size = len(self.record.value or b"")
        text = (
            f"{self.partition.topic}[{self.partition.partition}]@{self.record.offset}: "
            f"{self.event_type} of tenant {self.tenant}, schema_version {self.version} "
            f"(this build understands up to {self.supported}), {size} bytes"
        )
        if self.skipped_by:
            stores = " and ".join(self.skipped_by)
            text += f"; the {stores} store skipped it already (an earlier skip stopped midway)"
        return text

    def reason(self, who: str) -> str:
        return (
            f"skipped by an operator (redstring skip, {who}): schema_version {self.version} "
            f"is newer than this build's {self.supported}; re-drive it once the workers "
            "are upgraded"
        )


def _event_type(value: bytes | None) -> str:
    """The envelope's event_type, for display only."""
    try:
        found = json.loads(value or b"").get("event_type")
    except (ValueError, AttributeError, RecursionError):
        return "(unknown type)"
    return str(found) if isinstance(found, str) else "(unknown type)"


async def positions(folds: Sequence[Fold[Any]], partition: StreamPartition) -> list[int]:
    """Each store's next needed offset for the partition (graph, vector)."""
    return [await fold.next_needed_offset(partition) for fold in folds]


async def check_skip(
    folds: Sequence[Fold[Any]],
    partition: StreamPartition,
    offset: int,
    record: FetchedRecord | None,
    control_keys: ControlKeys | bytes | None,
    *,
    limits: EventLimits = DEFAULT_LIMITS,
) -> Skippable:
    """The record at ``offset`` if it may be skipped; ``SkipRefused`` says why not.
    ``control_keys`` and ``limits``: as the workers judge records (streams.worker.decode)."""
    where = f"{partition.topic}[{partition.partition}]"
    needed = await positions(folds, partition)
    stated = ", ".join(
        f"{name} store needs {n}" for name, n in zip(STORE_NAMES, needed, strict=False)
    )
    # A skip interrupted between the stores (or one store's move failed)
    # leaves one past the record and one at it; nothing else moves them apart
    # while the partition is paused, so the skip may be finished.
    finishing = offset in needed and min(needed) == offset and max(needed) > offset
    if any(n != offset for n in needed) and not finishing:
        if all(n > offset for n in needed):
            advice = (
                f"both stores are past {offset} already: nothing to skip (a worker applied "
                "or dead-lettered it, or it was skipped before)"
            )
        elif len(set(needed)) == 1:
            advice = (
                f"the stores have not reached {offset}: the record a paused partition waits "
                f"on is the one at the stores' position, {needed[0]} "
                "(see `redstring status` and the worker's /readyz)"
            )
        else:
            advice = (
                "the stores are at different positions: a worker is still catching one of "
                "them up; wait for it (a paused partition has both stores at the paused record)"
            )
        raise SkipRefused(f"{where}: {stated}; refusing to skip {offset}: {advice}.")
    if record is None or record.offset != offset:
        raise SkipRefused(
            f"{where} holds no record at offset {offset} (a transaction marker, or beyond "
            "the log end): nothing to skip."
        )
    try:
        decoded = decode(
            offset,
            record.key,
            record.value,
            control_keys,
            topic_id=partition.topic_id,
            limits=limits,
        )
    except SchemaVersionTooNewError as exc:
        skippable = Skippable(
            partition,
            record,
            _event_type(record.value),
            exc.tenant_id or "(none)",
            exc.version,
            exc.supported,
            exc.event_id,
            tuple(name for name, n in zip(STORE_NAMES, needed, strict=False) if n > offset),
        )
        if finishing:
            await _check_not_applied(folds, needed, skippable, where)
        tenant = TenantId(skippable.tenant)
        if not [f for f in folds if await f.admits(partition, offset, tenant)]:
            raise SkipRefused(
                f"{where}@{offset}: no store would apply this record now (a rebuild window "
                "of another tenant is passing over it): the workers step over it without "
                "pausing, so there is nothing to skip."
            ) from None
        return skippable
    if decoded.dead_letter_reason is not None:
        what = f"a value the workers dead-letter themselves ({decoded.dead_letter_reason})"
    else:
        event = decoded.record.event
        assert event is not None
        what = f"a {event.event_type} of tenant {event.tenant_id} this build applies"
    raise SkipRefused(
        f"{where}@{offset} is {what}, not a record a worker pauses on: only a newer "
        "schema_version pauses a partition, and only such a record may be skipped. If the "
        "partition is paused on it, this command is older than the workers: run the "
        "workers' version."
    )


async def _check_not_applied(
    folds: Sequence[Fold[Any]], needed: Sequence[int], skippable: Skippable, where: str
) -> None:
    """Refuse to finish a skip if a store past the record applied its event
    (a worker of a newer build did, within the applied-event retention):
    skipping it in the other store would split them."""
    offset = skippable.record.offset
    for name, fold, position in zip(STORE_NAMES, folds, needed, strict=False):
        if position <= offset or skippable.event_id is None:
            continue
        tenant, event = TenantId(skippable.tenant), EventId(skippable.event_id)
        if await fold.store.applied_event_ids(tenant, [event]):
            raise SkipRefused(
                f"{where}@{offset}: the {name} store applied this event (a worker of a newer "
                "build did), and the other store still needs it: upgrade the workers instead; "
                "skipping it now would leave the stores different."
            )


async def skip(
    folds: Sequence[Fold[Any]], sink: DeadLetterSink, skippable: Skippable, who: str
) -> list[int]:
    """Dead-letter the record, then advance both stores past it (in that order:
    a crash between the two leaves the record where it was, never lost).
    Returns the stores' next needed offsets afterwards."""
    from streams.worker.projector import DeadLetter

    record = skippable.record
    letter = DeadLetter(
        skippable.partition.partition,
        record.offset,
        record.key,
        record.value,
        skippable.reason(who),
        event_type=skippable.event_type,
    )
    await sink.send([letter])
    for fold in folds:
        await fold.skip_refused(skippable.partition, record.offset)
    return await positions(folds, skippable.partition)


# -- the Kafka and store side, apart so that tests can stand in for it ---------------


def topic_partition(settings: Settings, partition: int) -> StreamPartition:
    from streams.kafka.topics import TopicError, describe_topic

    try:
        info = describe_topic(settings)
    except TopicError as exc:
        raise SkipRefused(str(exc)) from None
    if not 0 <= partition < info.partition_count:
        raise SkipRefused(
            f"{info.name} has partitions 0..{info.partition_count - 1}, not {partition}"
        )
    return StreamPartition(info.name, partition, info.topic_id)


def fetch_record(settings: Settings, partition: int, offset: int) -> FetchedRecord | None:
    """The record at ``offset`` (or the first after it; None at the log end)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            **librdkafka_config(settings),
            "group.id": f"{settings.group_id}.skip",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(settings.topic, partition, offset)])
        message = consumer.poll(10.0)
        if message is None:
            return None
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                return None
            raise SkipRefused(f"reading {settings.topic}[{partition}]@{offset}: {error}")
        return FetchedRecord(int(message.offset() or 0), message.key(), message.value())
    finally:
        consumer.close()


async def open_folds(settings: Settings) -> tuple[Stores, list[Fold[Any]]]:
    from streams.wiring import build_folds, open_stores

    stores = await open_stores(settings)
    return stores, build_folds(stores.graph, stores.vector, stores.embedder)


def dead_letter_sink(settings: Settings) -> Any:
    from streams.worker.sink import KafkaDeadLetterSink

    return KafkaDeadLetterSink(settings)
