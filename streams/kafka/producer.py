"""An asyncio face on confluent-kafka's producer: ``send`` resolves to the
record's position once the broker has it, or raises ``ProduceError``.

Delivery reports arrive on librdkafka's thread; a poller thread hands them to
the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from contracts.domain import Position
from streams.kafka.config import KafkaConnectError, explain, explain_unreachable, librdkafka_config
from streams.kafka.partitioning import PARTITIONER
from streams.settings import Settings

Headers = list[tuple[str, str | bytes | None]]


class ProduceError(RuntimeError):
    pass


class AsyncProducer:
    def __init__(self, settings: Settings, **overrides: Any) -> None:
        config = {
            **librdkafka_config(settings),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
            # Java-compatible: every producer must send a tenant to one partition.
            "partitioner": PARTITIONER,
            # A configuration the brokers refuse fails the sends at once,
            # rather than after message.timeout.ms of silent retries.
            "error_cb": self._on_error,
            **overrides,
        }
        self._settings = settings
        self._diagnosed = False
        self._refused: str | None = None
        self._pending: set[asyncio.Future[Position]] = set()
        self._producer = Producer(config)
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="redstring-producer", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)

    def _on_error(self, error: KafkaError) -> None:
        why = explain(error.name(), error.str())
        if why is None and error.code() == KafkaError._ALL_BROKERS_DOWN and not self._diagnosed:
            self._diagnosed = True  # once: a broker that is down is waited for, not probed
            why = explain_unreachable(self._settings)
        if why is None:
            return
        self._refused = why
        for future in list(self._pending):
            future.get_loop().call_soon_threadsafe(_fail, future, why)

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers
    ) -> asyncio.Future[Position]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Position] = loop.create_future()
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

        def delivered(error: KafkaError | None, message: Message) -> None:
            def settle() -> None:
                if future.done():
                    return
                if error is not None:
                    future.set_exception(ProduceError(error.str()))
                else:
                    self._refused = None  # the brokers take this client again
                    future.set_result(
                        Position(
                            message.topic() or "", message.partition() or 0, message.offset() or 0
                        )
                    )

            loop.call_soon_threadsafe(settle)

        while True:
            try:
                self._producer.produce(
                    topic, key=key, value=value, headers=headers, on_delivery=delivered
                )
                return future
            except BufferError:
                # The local queue is full: let deliveries drain, then try again.
                self._producer.poll(0.05)

    def flush(self, timeout: float = 30.0) -> int:
        if self._refused is not None:
            return len(self._producer)  # refused: waiting could only time out
        return int(self._producer.flush(timeout))

    def close(self) -> None:
        self.flush()
        self._stop.set()
        self._poller.join(timeout=5)


def _fail(future: asyncio.Future[Position], why: str) -> None:
    if not future.done():
        future.set_exception(KafkaConnectError(why))
