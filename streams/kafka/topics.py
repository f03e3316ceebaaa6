"""The events topic and its dead-letter topic: creation, description, checks.

Topics are created with unlimited retention (a replay re-reads a tenant's whole
history) and a partition count fixed at creation: changing it later moves
tenants between partitions and breaks their order and checkpoints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
)

from streams.kafka.config import explain, explain_unreachable, librdkafka_config
from streams.settings import Settings

UNLIMITED = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}


class TopicError(RuntimeError):
    """A topic is missing or not what the workers need; the message says what to do."""


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    low: int
    high: int


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str
    partitions: list[PartitionInfo]
    retention_ms: str

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


class CheckedAdmin(AdminClient):
    """An admin client whose calls fail at once, with the settings to fix, when
    the brokers refuse its configuration (a wrong password, an untrusted CA, TLS
    against a plaintext port): librdkafka would retry those until the request
    timed out, and say only that it had."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.problems: list[str] = []
        self._diagnosed = False
        config: dict[str, Any] = {**librdkafka_config(settings), "error_cb": self._on_error}
        super().__init__(config)

    def _on_error(self, error: KafkaError) -> None:
        why = explain(error.name(), error.str())
        if why is None and error.code() == KafkaError._ALL_BROKERS_DOWN and not self._diagnosed:
            self._diagnosed = True  # once: a broker that is down is waited for, not probed
            why = explain_unreachable(self.settings)
        if why is not None:
            self.problems.append(why)

    def result(self, future: Any) -> Any:
        """``future.result()``, or ``TopicError`` naming the settings as soon as
        the brokers refuse this client. Every request carries its own
        ``request_timeout``, so the future always ends."""
        while not future.done():
            self.poll(0.1)
            if self.problems:
                raise TopicError(self.problems[0])
        return future.result()


def admin_client(settings: Settings) -> CheckedAdmin:
    return CheckedAdmin(settings)


def create_topics(settings: Settings, partitions: int | None = None) -> dict[str, str]:
    """Create the events topic and its DLQ if missing. Returns name -> outcome."""
    count = partitions or settings.partitions
    admin = admin_client(settings)
    wanted = [
        # The broker stamps each record as it appends it, so a control event's
        # age is judged against a time no producer sets (docs/adr/0008).
        NewTopic(
            settings.topic,
            count,
            settings.replication_factor,
            config={**UNLIMITED, "message.timestamp.type": "LogAppendTime"},
        ),
        NewTopic(settings.dlq_topic, 1, settings.replication_factor, config=UNLIMITED),
    ]
    outcome: dict[str, str] = {}
    for name, future in admin.create_topics(wanted, request_timeout=30).items():
        try:
            admin.result(future)
            outcome[name] = "created"
        except KafkaException as exc:
            error = exc.args[0]
            if error.name() == "TOPIC_ALREADY_EXISTS":
                outcome[name] = "exists"
            else:
                raise TopicError(f"could not create topic {name!r}: {error.str()}") from None
    _wait_until_described(admin, [name for name, done in outcome.items() if done == "created"])
    return outcome


def _wait_until_described(admin: Any, names: list[str], within: float = 15.0) -> None:
    """A created topic can be unknown to a broker's metadata for a moment after
    the controller accepted it (seen in the e2e suite under load: the describe
    right after the create said UNKNOWN_TOPIC_OR_PART). Return once each topic
    can be described, so that the next command finds it."""
    deadline = time.monotonic() + within
    pending = list(names)
    while pending:
        futures = admin.describe_topics(TopicCollection(pending), request_timeout=10)
        still: list[str] = []
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException:
                still.append(name)
        pending = still
        if pending and time.monotonic() > deadline:
            raise TopicError(f"created {pending} but the broker still does not describe them")
        if pending:
            time.sleep(0.2)


class TopicClients:
    """An admin client and a consumer kept for repeated readings of a topic
    (``redstring status --watch``), instead of a new pair, with its broker
    connections, on every reading. The consumer carries the group's id, for
    its committed offsets; it never subscribes, so it never joins the group."""

    def __init__(self, settings: Settings) -> None:
        self.admin = admin_client(settings)
        self.consumer = Consumer({**librdkafka_config(settings), "group.id": settings.group_id})

    def close(self) -> None:
        self.consumer.close()


def describe_topic(
    settings: Settings, name: str | None = None, *, clients: TopicClients | None = None
) -> TopicInfo:
    """The topic's id, partitions with their log start and end, and retention;
    ``clients``: reuse these instead of opening (and closing) a pair."""
    topic = name or settings.topic
    admin = clients.admin if clients is not None else admin_client(settings)
    future = admin.describe_topics(TopicCollection([topic]), request_timeout=30)[topic]
    try:
        description: Any = admin.result(future)
    except KafkaException as exc:
        error = exc.args[0]
        if error.name() in ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID"):
            raise TopicError(
                f"topic {topic!r} does not exist on {settings.kafka_bootstrap}; "
                "create it with `redstring topics create` (topics are never auto-created)"
            ) from None
        raise TopicError(f"could not describe topic {topic!r}: {error.str()}") from None
    consumer = (
        clients.consumer
        if clients is not None
        else Consumer({**librdkafka_config(settings), "group.id": "redstring-describe"})
    )
    try:
        parts = []
        for p in sorted(description.partitions, key=lambda p: p.id):
            low, high = _watermarks(consumer, TopicPartition(topic, p.id))
            parts.append(PartitionInfo(p.id, low, high))
    finally:
        if clients is None:
            consumer.close()
    configs = admin.describe_configs([_resource(topic)])
    retention = "unknown"
    for res_future in configs.values():
        entries = res_future.result()
        if "retention.ms" in entries:
            retention = entries["retention.ms"].value
    return TopicInfo(topic, str(description.topic_id), parts, retention)


def _watermarks(consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    """A just-created topic has no leader for a moment: wait for one."""
    deadline = time.monotonic() + 15
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            return int(low), int(high)
        except KafkaException as exc:
            if not exc.args[0].retriable() and exc.args[0].name() not in _LEADERLESS:
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


_LEADERLESS = {"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART"}


def _resource(topic: str) -> Any:
    return ConfigResource("TOPIC", topic)


def check_topics(settings: Settings) -> TopicInfo:
    """What a worker checks at start: both topics exist. Never creates them."""
    info = describe_topic(settings)
    describe_topic(settings, settings.dlq_topic)
    return info
