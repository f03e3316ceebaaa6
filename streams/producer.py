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
from types import TracebackType
from typing import Any, Self

from contracts.domain import Position
from contracts.events import Event, event_headers, event_to_json
from streams.kafka_producer import AsyncProducer, Headers, ProduceError
from streams.settings import Settings


class PublishError(RuntimeError):
    def __init__(self, event: Event, reason: str) -> None:
        self.event = event
        super().__init__(f"publishing event {event.event_id} failed: {reason}")


class Publisher:
    def __init__(self, settings: Settings, *, topic: str | None = None, **overrides: Any) -> None:
        self.topic = topic or settings.topic
        self._producer = AsyncProducer(settings, **overrides)

    def _send(self, event: Event) -> asyncio.Future[Position]:
        headers: Headers = list(event_headers(event))
        return self._producer.send(
            self.topic, event.tenant_id.encode("utf-8"), event_to_json(event), headers
        )

    @staticmethod
    async def _settle(event: Event, future: asyncio.Future[Position]) -> Position:
        try:
            return await future
        except ProduceError as exc:
            raise PublishError(event, str(exc)) from None

    async def publish(self, event: Event) -> Position:
        """Send one event; resolves once the broker has it, to its position."""
        return await self._settle(event, self._send(event))

    async def publish_many(self, events: Iterable[Event]) -> list[Position]:
        """Send many events in order (one tenant's order is kept by the key)."""
        pending = [(event, self._send(event)) for event in events]
        return list(await asyncio.gather(*(self._settle(e, f) for e, f in pending)))

    def flush(self, timeout: float = 30.0) -> int:
        return self._producer.flush(timeout)

    def close(self) -> None:
        self._producer.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.close)
