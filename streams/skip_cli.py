"""``redstring skip``: move a paused partition past the one record it waits on.

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

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from contracts.domain import StreamPartition
from contracts.errors import SchemaVersionTooNewError
from contracts.limits import DEFAULT_LIMITS, EventLimits
from contracts.signing import ControlKeys
from streams.decode import decode
from streams.replay_cli import _confirm, _who
from streams.settings import Settings

if TYPE_CHECKING:
    from projections.fold import Fold
    from streams.projector import DeadLetterSink
    from streams.stores import Stores


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

    def describe(self) -> str:
        size = len(self.record.value or b"")
        return (
            f"{self.partition.topic}[{self.partition.partition}]@{self.record.offset}: "
            f"{self.event_type} of tenant {self.tenant}, schema_version {self.version} "
            f"(this build understands up to {self.supported}), {size} bytes"
        )

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
    ``control_keys`` and ``limits``: as the workers judge records (streams.decode)."""
    where = f"{partition.topic}[{partition.partition}]"
    needed = await positions(folds, partition)
    stated = ", ".join(
        f"{name} store needs {n}" for name, n in zip(("graph", "vector"), needed, strict=False)
    )
    if any(n != offset for n in needed):
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
        return Skippable(
            partition,
            record,
            _event_type(record.value),
            exc.tenant_id or "(none)",
            exc.version,
            exc.supported,
        )
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


async def skip(
    folds: Sequence[Fold[Any]], sink: DeadLetterSink, skippable: Skippable, who: str
) -> list[int]:
    """Dead-letter the record, then advance both stores past it (in that order:
    a crash between the two leaves the record where it was, never lost).
    Returns the stores' next needed offsets afterwards."""
    from streams.projector import DeadLetter

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
    from streams.topics import TopicError, describe_topic

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
            **settings.kafka_client_config(),
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
    from projections.graph import GraphProjection
    from projections.vector import VectorProjection
    from streams.stores import open_stores

    stores = await open_stores(settings)
    folds: list[Fold[Any]] = [
        GraphProjection(stores.graph, embedding_dimension=stores.vector.dimension),
        VectorProjection(stores.vector, stores.embedder),
    ]
    return stores, folds


def dead_letter_sink(settings: Settings) -> Any:
    from streams.deadletters import KafkaDeadLetterSink

    return KafkaDeadLetterSink(settings)


@click.command("skip")
@click.option("--partition", type=int, required=True, help="The paused partition.")
@click.option("--offset", type=int, required=True, help="The offset of the record it waits on.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def skip_command(partition: int, offset: int, yes: bool) -> None:
    """Skip the one record a partition is paused on (a newer schema_version).

    Refuses unless both stores' next needed offset for PARTITION is exactly
    OFFSET and the record there is one the workers pause on. Shows the record
    and asks for confirmation, writes it to the dead-letter topic (re-drive it
    with `redstring dlq redrive` once the workers are upgraded), then moves
    both stores past it. A running worker resumes the partition within a few
    seconds, without a restart.
    """
    settings = Settings()

    async def run() -> None:
        part = topic_partition(settings, partition)
        record = await asyncio.to_thread(fetch_record, settings, partition, offset)
        stores, folds = await open_folds(settings)
        try:
            skippable = await check_skip(
                folds,
                part,
                offset,
                record,
                settings.control_keyring(),
                limits=settings.event_limits(),
            )
            click.echo(skippable.describe())
            _confirm(
                f"Dead-letter this record and move both stores past "
                f"{part.topic}[{partition}]@{offset}?",
                yes,
            )
            sink = dead_letter_sink(settings)
            try:
                after = await skip(folds, sink, skippable, _who())
            finally:
                await asyncio.to_thread(sink.close)
        finally:
            await stores.aclose()
        click.echo(
            f"dead-lettered {part.topic}[{partition}]@{offset} to {settings.dlq_topic}; "
            f"the stores now need {min(after)}. A running worker resumes the partition "
            "within a few seconds."
        )

    try:
        asyncio.run(run())
    except SkipRefused as exc:
        raise click.ClickException(str(exc)) from None
