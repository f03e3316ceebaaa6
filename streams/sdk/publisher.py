"""The producer SDK: publish validated events, keyed by tenant, and learn each
event's position in the log.

confluent-kafka with ``enable.idempotence=true``: no duplicates or reordering
from the producer's own retries. ``publish`` is an awaitable that resolves to
the event's ``Position`` or raises ``PublishError``. If you retry a failed
publish yourself, reuse the event (its ``event_id``): stores skip an event id
they have already applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from opentelemetry import trace

from contracts.domain import Position
from contracts.events import Event, event_headers, event_to_json
from contracts.ports.lifecycle import ClosingContext
from streams import telemetry
from streams.kafka.producer import AsyncProducer, Headers, ProduceError
from streams.settings import Settings


class PublishError(RuntimeError):
    """The broker did not take ``event`` (the librdkafka delivery error is the
    message). Safe to retry with the same event: stores skip an ``event_id``
    they have already applied."""

    def __init__(self, event: Event, reason: str) -> None:
        self.event = event
        super().__init__(f"publishing event {event.event_id} failed: {reason}")


class Publisher(ClosingContext):
    """Publishes validated events to the events topic and reports where each
    landed (docs/producers.md).

    What it guarantees:

    * **Keyed by tenant.** The Kafka key is the event's ``tenant_id`` (UTF-8),
      partitioned with the Java-compatible murmur2 partitioner, so one
      tenant's events stay in one partition, in the order they were sent.
    * **Idempotent producer.** ``enable.idempotence=true`` and ``acks=all``:
      the client's own retries never duplicate or reorder an event.
    * **Only validated events.** It sends ``contracts.events.Event`` models,
      which are validated when built (``make_event`` raises
      ``InvalidEventError``) and frozen after, so a malformed envelope never
      reaches the topic. The ``event_type`` and ``schema_version`` headers
      repeat the envelope.
    * **Positions.** ``publish`` resolves once the broker has acknowledged the
      event, to its ``Position`` (topic, partition, offset); hand that to
      ``streams.sdk.read_your_writes.wait_until_projected`` for read-your-writes.
    * **Traces.** Each event is sent in a ``send <topic>`` span (OpenTelemetry,
      a child of the current span) whose W3C trace context rides in the
      record's ``traceparent``/``tracestate`` headers, so that the worker's
      spans continue the trace (docs/operations.md, "Traces"). Without an
      OpenTelemetry SDK set up in your process the span is a no-op and an
      upstream context (if any) still propagates.

    It does not retry a failed publish for you: on ``PublishError``, publish
    the same event again (same ``event_id``) and the stores apply it once.

    Args:
        settings: Connection settings (``REDSTRING_*`` environment variables):
            the brokers and their security (``streams.kafka.config.librdkafka_config``)
            and the default topic (``Settings.topic``, default
            ``redstring.events``).
        topic: Topic to publish to instead of ``settings.topic``; ``None``
            (the default) or an empty string means ``settings.topic``.
        tracer_provider: Where the ``send`` spans go; ``None`` (the default)
            means the global one (``opentelemetry.trace.set_tracer_provider``).
        compact_embeddings: Send each entity's ``embedding`` as
            ``embedding_b64`` (base64 of little-endian float32, about a third
            of the bytes; docs/events.md) instead of a JSON list of numbers.
            Each component is rounded to the nearest float32, which is what
            pgvector stores anyway. ``False`` (the default) sends the list.
        **overrides: Extra confluent-kafka (librdkafka) configuration, applied
            last, e.g. ``**{"linger.ms": 20}``. Overriding
            ``enable.idempotence``, ``acks`` or ``partitioner`` gives up the
            guarantees above.

    Example:
        ```python
        from contracts.events import make_event
        from streams.sdk.publisher import Publisher
        from streams.settings import Settings

        event = make_event(
            "DocumentExtracted",
            "acme",
            {
                "document_id": "doc-1",
                "extraction_model": "extractor-v1",
                "entities": [{"id": "ada", "name": "Ada Lovelace", "type": "Person"}],
            },
        )
        async with Publisher(Settings()) as publisher:
            position = await publisher.publish(event)
            # Position(topic='redstring.events', partition=5, offset=42)
        ```

        Leaving the ``async with`` block flushes what is still queued (up to
        30 seconds) and stops the producer.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        topic: str | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        compact_embeddings: bool = False,
        **overrides: Any,
    ) -> None:
        self.topic = topic or settings.topic
        self._compact_embeddings = compact_embeddings
        self._producer = AsyncProducer(settings, **overrides)
        self._tracer = trace.get_tracer("redstring.publisher", tracer_provider=tracer_provider)

    def _send(self, event: Event) -> tuple[asyncio.Future[Position], trace.Span]:
        # Ended when the broker answers (``_settle``): its length is the publish.
        # The event type only: a span carries no tenant or payload.
        span = self._tracer.start_span(
            f"send {self.topic}",
            kind=trace.SpanKind.PRODUCER,
            attributes={
                "messaging.system": "kafka",
                "messaging.operation.type": "send",
                "messaging.destination.name": self.topic,
                "redstring.event_type": event.event_type,
            },
        )
        headers: Headers = list(event_headers(event))
        telemetry.inject(headers, trace.set_span_in_context(span))
        try:
            future = self._producer.send(
                self.topic,
                event.tenant_id.encode("utf-8"),
                event_to_json(event, compact_embeddings=self._compact_embeddings),
                headers,
            )
        except BaseException as exc:
            span.record_exception(exc)
            span.end()
            raise
        return future, span

    @staticmethod
    async def _settle(event: Event, future: asyncio.Future[Position], span: trace.Span) -> Position:
        try:
            position = await future
            span.set_attribute("messaging.destination.partition.id", str(position.partition))
            span.set_attribute("messaging.kafka.offset", position.offset)
            return position
        except ProduceError as exc:
            span.set_status(trace.StatusCode.ERROR, str(exc))
            raise PublishError(event, str(exc)) from None
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(trace.StatusCode.ERROR, type(exc).__name__)
            raise
        finally:
            span.end()

    async def publish(self, event: Event) -> Position:
        """Send one event; resolves once the broker has it, to its position.

        Args:
            event: A validated envelope (``make_event`` or an ``Event`` model);
                its ``tenant_id`` is the Kafka key.

        Returns:
            The event's ``Position`` in the log (topic, partition, offset).

        Raises:
            PublishError: The broker did not take the event (delivery failed
                or timed out after librdkafka's own retries).
            KafkaConnectError: The brokers refuse this client's configuration
                (``streams.kafka.config``; the message names the settings).

        Example:
            ```python
            position = await publisher.publish(event)
            await wait_until_projected(position, [graph, vectors])
            ```
        """
        return await self._settle(event, *self._send(event))

    async def publish_many(self, events: Iterable[Event]) -> list[Position]:
        """Send many events in order (one tenant's order is kept by the key).

        All events are queued before any is awaited, so this is much faster
        than awaiting ``publish`` in a loop.

        Args:
            events: Validated envelopes, sent in iteration order; events of
                one tenant land in one partition in that order.

        Returns:
            One ``Position`` per event, in the order of ``events``.

        Raises:
            PublishError: For the first failed delivery to be reported (its
                ``event`` attribute names the event). The other events were
                still sent; republish the whole batch with the same events
                (stores skip ids already applied).
            KafkaConnectError: The brokers refuse this client's configuration.

        Example:
            ```python
            async with Publisher(Settings()) as publisher:
                positions = await publisher.publish_many([first, second])
            ```
        """
        pending: list[tuple[Event, asyncio.Future[Position], trace.Span]] = []
        try:
            for event in events:
                pending.append((event, *self._send(event)))
        except BaseException:
            # The events queued before the one that could not be are still
            # delivered: wait for them, so that their spans end, then say why.
            await asyncio.gather(
                *(self._settle(e, f, s) for e, f, s in pending), return_exceptions=True
            )
            raise
        return list(await asyncio.gather(*(self._settle(e, f, s) for e, f, s in pending)))

    def flush(self, timeout: float = 30.0) -> int:
        """Block until queued events are delivered or ``timeout`` passes.

        Args:
            timeout: Seconds to wait at most (default 30.0).

        Returns:
            How many events are still queued (0 when everything was delivered).
        """
        return self._producer.flush(timeout)

    def close(self) -> None:
        """Flush (up to 30 seconds) and stop the producer; ``async with``
        calls this on exit, off the event loop."""
        self._producer.close()

    async def aclose(self) -> None:
        """``close`` off the event loop: what ``async with`` calls on exit."""
        await asyncio.to_thread(self.close)
