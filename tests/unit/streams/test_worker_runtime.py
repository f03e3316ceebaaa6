"""The worker's runtime around the intake (streams.worker.app.Runtime): an
applier that dies says so in readiness at once, and a restarted agent's new
applier clears it. No broker: the runtime's loop is a stand-in that records
batches (the loop itself is proven by tests/simulation)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from streams.settings import Settings
from streams.worker import app
from streams.worker.app import Runtime
from streams.worker.bounds import ReadAhead
from streams.worker.projector import PartitionHealth, RawRecord


class StandInLoop:
    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.projector = type("P", (), {"health": PartitionHealth(), "stop": lambda self: None})()

    async def on_batch(self, batch: Mapping[int, Sequence[RawRecord]]) -> None:
        if self.fail:
            raise RuntimeError("a bug in the loop")


def runtime(loop: StandInLoop) -> Runtime:
    class App:
        conf: Any = None

    made = Runtime(App(), Settings())  # type: ignore[arg-type]
    made.loop = loop  # type: ignore[assignment]
    return made


async def test_an_applier_that_dies_makes_the_worker_unready_until_a_new_one_runs() -> None:
    loop = StandInLoop(fail=True)
    worker = runtime(loop)
    assert worker.readiness()[0]
    intake = await worker.open_intake(ReadAhead(1000))
    await intake.put({0: [RawRecord(0, b"t", b"{}")]})
    for _ in range(5):
        await asyncio.sleep(0)
    ready, reasons = worker.readiness()
    assert not ready and reasons == ["the worker's applier stopped: RuntimeError"]
    await worker.close_intake()
    loop.fail = False
    await worker.open_intake(ReadAhead(1000))  # Faust restarted the agent
    assert worker.readiness()[0]
    await worker.close_intake()


async def test_the_heap_is_trimmed_as_the_applier_takes_a_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[int] = []
    monkeypatch.setattr(app, "malloc_trim", lambda: lambda: trims.append(1))
    worker = runtime(StandInLoop(fail=False))
    intake = await worker.open_intake(ReadAhead(1000))
    await intake.put({0: [RawRecord(0, b"t", b"{}")]})
    await intake.join()
    assert trims == [1]  # the first batch; the next within a second would not
    await worker.close_intake()
