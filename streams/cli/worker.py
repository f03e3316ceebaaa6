"""``redstring worker``: run a projector worker."""

from __future__ import annotations

import asyncio

import click

from streams.settings import Settings


@click.command("worker", short_help="Project the events topic into Neo4j and Postgres.")
@click.option(
    "--worker-id",
    envvar="REDSTRING_WORKER_ID",
    help="Static group membership id (e.g. the pod name): a restarted worker gets "
    "its partitions back without a rebalance.",
)
def worker_command(worker_id: str | None) -> None:
    """Consume the events topic and project it into Neo4j and Postgres/pgvector.

    Any number of workers share the topic's partitions through the consumer
    group. Health: GET /livez and /readyz; metrics: GET /metrics (port
    REDSTRING_HTTP_PORT, default 6066). SIGTERM finishes the current batch and
    exits. Logs are JSON lines on stderr.
    """
    import logging.config

    from faust.worker import Worker

    from adapters.neo4j.schema import GraphSchemaVersionError
    from streams.kafka.config import client_configs
    from streams.kafka.topics import TopicError, check_topics
    from streams.ops.migrate import check_graph
    from streams.telemetry import TracingConfigError, check_tracing
    from streams.worker.app import build_app
    from streams.worker.logs import configure

    settings = Settings()
    client_configs(settings)  # settings that cannot work are named before anything connects
    try:
        check_tracing()
    except TracingConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        check_topics(settings)
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # the broker is down or unreachable
        raise click.ClickException(
            f"cannot reach Kafka at {settings.kafka_bootstrap}: {exc}"
        ) from None
    try:
        asyncio.run(check_graph(settings))
    except GraphSchemaVersionError as exc:  # the workers would write the wrong model
        raise click.ClickException(str(exc)) from None
    config = configure(settings.log_level)
    logging.config.dictConfig(config)
    app, _runtime = build_app(settings, instance_id=worker_id or settings.worker_id)
    Worker(
        app,
        loglevel=settings.log_level,
        quiet=True,
        redirect_stdouts=False,
        logging_config=config,
    ).execute_from_commandline()
