"""A stand-in for Faust's consumer thread, as far as ``FaustConsumer.seek`` goes:
an event loop of its own in a thread of its own (mode's
``ServiceThread.thread_loop``), and the aiokafka consumer it owns
(``_ensure_consumer``). Whatever the consumer is, it is only touched from
that thread unless a test hands it elsewhere."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any


class ConsumerThread:
    def __init__(self, consumer: Any, *, run: bool = True) -> None:
        self.consumer = consumer
        self.thread_loop = asyncio.new_event_loop()
        self.ident: int | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True) if run else None
        if self._thread is not None:
            started = threading.Event()
            self._thread.start()
            self.thread_loop.call_soon_threadsafe(started.set)
            started.wait(timeout=10)

    def _serve(self) -> None:
        self.ident = threading.get_ident()
        asyncio.set_event_loop(self.thread_loop)
        self.thread_loop.run_forever()

    def _ensure_consumer(self) -> Any:
        return self.consumer

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> Future[Any]:
        """Run a coroutine on the thread's loop (the consumer's own work)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.thread_loop)

    def app(self) -> Any:
        """A Faust app as far as FaustConsumer reads it: ``app.consumer`` with
        this thread and Faust's read offsets."""
        app: Any = type("App", (), {})()
        app.consumer = type("Consumer", (), {"_thread": self, "_read_offset": {}})()
        return app

    def stop(self) -> None:
        if self._thread is not None and not self.thread_loop.is_closed():
            self.thread_loop.call_soon_threadsafe(self.thread_loop.stop)
            self._thread.join(timeout=10)
        self.thread_loop.close()
