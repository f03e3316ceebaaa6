"""``redstring topics``: create and describe the events topic and its dead-letter topic."""

from __future__ import annotations

from dataclasses import asdict

import click

from streams.cli.output import Format, output_option, print_json
from streams.settings import Settings


@click.group()
def topics() -> None:
    """Create and describe the events topic and its dead-letter topic."""


@topics.command("create", short_help="Create the events topic and <topic>.dlq.")
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
@output_option
def topics_describe(output: Format) -> None:
    """Show the topics' ids, partitions, offsets and retention."""
    from streams.kafka.topics import TopicError, describe_topic

    settings = Settings()
    try:
        infos = [describe_topic(settings, name) for name in (settings.topic, settings.dlq_topic)]
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None
    if output == "json":
        print_json(
            {
                "topics": [
                    {
                        "name": info.name,
                        "topic_id": info.topic_id,
                        "partition_count": info.partition_count,
                        "retention_ms": _number(info.retention_ms),
                        "partitions": [asdict(p) for p in info.partitions],
                    }
                    for info in infos
                ]
            }
        )
        return
    for info in infos:
        click.echo(
            f"{info.name}  id={info.topic_id}  partitions={info.partition_count}  "
            f"retention.ms={info.retention_ms}"
        )
        for p in info.partitions:
            click.echo(f"  [{p.partition}] offsets {p.low}..{p.high}")


def _number(value: str) -> int | None:
    """retention.ms as a number (-1: unlimited), or None when the broker did not say."""
    return int(value) if value.lstrip("-").isdigit() else None
