"""Operator commands that talk to Kafka: topics and publishing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from contracts.errors import InvalidEventError, SchemaVersionTooNewError
from contracts.events import Event, parse_event
from streams.settings import Settings


@click.group()
def topics() -> None:
    """Create and describe the events topic and its dead-letter topic."""


@topics.command("create")
@click.option("--partitions", type=int, help="Partition count (default REDSTRING_PARTITIONS=12).")
def topics_create(partitions: int | None) -> None:
    """Create the events topic and <topic>.dlq with unlimited retention.

    The partition count is fixed for the topic's life: choose it with headroom,
    since workers scale up to it and changing it means a new topic and a full
    rebuild.
    """
    from streams.topics import TopicError, create_topics

    settings = Settings()
    try:
        for name, outcome in create_topics(settings, partitions).items():
            click.echo(f"{name}: {outcome}")
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None


@topics.command("describe")
def topics_describe() -> None:
    """Show the topics' ids, partitions, offsets and retention."""
    from streams.topics import TopicError, describe_topic

    settings = Settings()
    try:
        for name in (settings.topic, settings.dlq_topic):
            info = describe_topic(settings, name)
            click.echo(
                f"{info.name}  id={info.topic_id}  partitions={info.partition_count}  "
                f"retention.ms={info.retention_ms}"
            )
            for p in info.partitions:
                click.echo(f"  [{p.partition}] offsets {p.low}..{p.high}")
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None


def read_events(path: Path) -> list[Event]:
    """Parse a JSONL file of envelopes, refusing the whole file on the first bad line."""
    events = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            events.append(parse_event(line))
        except (InvalidEventError, SchemaVersionTooNewError) as exc:
            raise click.ClickException(f"{path}:{number}: {exc}") from None
    return events


@click.command("publish")
@click.argument("events", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def publish_command(events: Path) -> None:
    """Publish EVENTS (one JSON envelope per line) to the events topic, keyed by
    tenant, and print each event's position. Every line is validated first;
    nothing is sent if any line is invalid."""
    from streams.producer import Publisher

    parsed = read_events(events)
    settings = Settings()

    async def run() -> None:
        async with Publisher(settings) as publisher:
            with click.progressbar(
                length=len(parsed), label="publishing", file=click.get_text_stream("stderr")
            ) as bar:
                for start in range(0, len(parsed), 500):
                    chunk = parsed[start : start + 500]
                    positions = await publisher.publish_many(chunk)
                    for event, pos in zip(chunk, positions, strict=True):
                        where = f"{pos.topic}[{pos.partition}]@{pos.offset}"
                        click.echo(f"{event.event_id} {event.tenant_id} -> {where}")
                    bar.update(len(chunk))

    asyncio.run(run())
