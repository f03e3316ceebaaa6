"""A minimal faust-streaming worker for test_kafka.py: joins a consumer group on
$SMOKE_TOPIC, prints the first event it receives and exits 0 (1 after 120 s)."""

from __future__ import annotations

import os
import sys
import threading

import faust

BOOTSTRAP = os.environ["SMOKE_BOOTSTRAP"]
TOPIC = os.environ["SMOKE_TOPIC"]

app = faust.App(
    f"smoke-{TOPIC}",
    broker=f"kafka://{BOOTSTRAP}",
    store="memory://",
    web_enabled=False,
    datadir=os.path.join(os.getcwd(), "faust-data"),
    consumer_auto_offset_reset="earliest",
)
topic = app.topic(
    TOPIC, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)


@app.agent(topic)
async def consume(stream):  # type: ignore[no-untyped-def]
    async for event in stream.events():
        print(f"SMOKE-RECEIVED key={event.key!r} value={event.value!r}", flush=True)
        # Received through the group's assignment: that is the proof. Leave now;
        # a graceful faust shutdown takes several seconds more.
        os._exit(0)


def _give_up() -> None:
    print("SMOKE-TIMEOUT: nothing received in 120 s", file=sys.stderr, flush=True)
    os._exit(1)


if __name__ == "__main__":
    watchdog = threading.Timer(120, _give_up)
    watchdog.daemon = True
    watchdog.start()
    app.main()
