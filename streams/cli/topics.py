"""``redstring topics``: create and describe the events topic and its dead-letter topic."""

from __future__ import annotations

import click

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
    from streams.kafka.topics import TopicError, create_topics

    settings = Settings()
    try:
        for name, outcome in create_topics(settings, partitions).items():
            click.echo(f"{name}: {outcome}")
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None


@topics.command("describe")
def topics_describe() -> None:
    """Show the topics' ids, partitions, offsets and retention."""
    from streams.kafka.topics import TopicError, describe_topic

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
