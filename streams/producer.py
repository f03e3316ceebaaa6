"""The producer SDK: publish validated events, keyed by tenant, and learn each
event's position in the log.

confluent-kafka with ``enable.idempotence=true`` (no duplicates or reordering
from the producer's own retries). Delivery reports arrive on librdkafka's
thread; a poller thread hands them to the asyncio loop, so ``publish`` is an
awaitable that resolves to the event's ``Position`` or raises ``PublishError``.
If you retry a failed publish yourself, reuse the event (its ``event_id``):
stores skip an event id they have already applied.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Self

from confluent_kafka import KafkaError, Message, Producer

from contracts.domain import Position
from contracts.events import Event, event_headers, event_to_json
from streams.settings import Settings


class PublishError(RuntimeError):
    def __init__(self, event: Event, reason: str) -> None:
        self.event = event
        super().__init__(f"publishing event {event.event_id} failed: {reason}")


class Publisher:
    def __init__(self, settings: Settings, *, topic: str | None = None, **overrides: Any) -> None:
        self.topic = topic or settings.topic
        config = {
            **settings.kafka_client_config(),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
            **overrides,
        }
        self._producer = Producer(config)
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="redstring-publisher", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)

    def _send(self, event: Event, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Position]:
        future: asyncio.Future[Position] = loop.create_future()

        def delivered(error: KafkaError | None, message: Message) -> None:
            def settle() -> None:
                if future.done():
                    return
                if error is not None:
                    future.set_exception(PublishError(event, error.str()))
                else:
                    future.set_result(
                        Position(
                            message.topic() or "", message.partition() or 0, message.offset() or 0
                        )
                    )

            loop.call_soon_threadsafe(settle)

        headers: list[tuple[str, str | bytes | None]] = list(event_headers(event))
        while True:
            try:
                self._producer.produce(
                    self.topic,
                    key=event.tenant_id.encode("utf-8"),
                    value=event_to_json(event),
                    headers=headers,
                    on_delivery=delivered,
                )
                return future
            except BufferError:
                # The local queue is full: let deliveries drain, then try again.
                self._producer.poll(0.05)

    async def publish(self, event: Event) -> Position:
        """Send one event; resolves once the broker has it, to its position."""
        return await self._send(event, asyncio.get_running_loop())

    async def publish_many(self, events: Iterable[Event]) -> list[Position]:
        """Send many events in order (one tenant's order is kept by the key)."""
        loop = asyncio.get_running_loop()
        futures: Sequence[asyncio.Future[Position]] = [self._send(e, loop) for e in events]
        return list(await asyncio.gather(*futures))

    def flush(self, timeout: float = 30.0) -> int:
        return int(self._producer.flush(timeout))

    def close(self) -> None:
        self.flush()
        self._stop.set()
        self._poller.join(timeout=5)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.close)
