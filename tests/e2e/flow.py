"""Traffic for the end-to-end tests: a paced background publisher, progress
through the stores, and metrics sampled from a worker across its restarts."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from contracts.domain import Position
from streams.settings import Settings
from streams.wiring import Stores
from tests.e2e.histories import publish
from tests.e2e.workers import WorkerProcess, high_watermarks, store_positions
from tests.scenarios.histories import Record


@dataclass
class Flow:
    """Publishes ``records`` in chunks, ``pause`` seconds apart (pacing, so that
    events keep arriving while the test kills and restarts things)."""

    settings: Settings
    records: Sequence[Record]
    chunk: int = 100
    pause: float = 0.1
    positions: list[Position] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def start(self) -> Flow:
        self.task = asyncio.ensure_future(self._run())
        return self

    async def _run(self) -> None:
        for start in range(0, len(self.records), self.chunk):
            chunk = self.records[start : start + self.chunk]
            self.positions.extend(await publish(self.settings, chunk))
            await asyncio.sleep(self.pause)

    @property
    def published(self) -> int:
        return len(self.positions)

    async def done(self) -> list[Position]:
        assert self.task is not None
        await self.task
        return self.positions


async def progress(stores: Stores, settings: Settings, topic_id: str, partitions: int) -> int:
    """Records both stores are past, summed over the partitions."""
    positions = await store_positions(stores, settings.topic, topic_id, partitions)
    return sum(min(positions["graph"][p], positions["vector"][p]) for p in range(partitions))


async def wait_for_progress(
    stores: Stores,
    settings: Settings,
    topic_id: str,
    partitions: int,
    at_least: int,
    *,
    workers: Sequence[WorkerProcess] = (),
    flow: Flow | None = None,
    within: float = 120.0,
) -> int:
    """Wait until both stores are past ``at_least`` records; ``workers`` must
    stay alive meanwhile, and a timeout reports their readiness and logs, and
    how far ``flow`` got publishing."""
    deadline = time.monotonic() + within
    while True:
        done = await progress(stores, settings, topic_id, partitions)
        if done >= at_least:
            return done
        for worker in workers:
            worker.assert_alive()
        if time.monotonic() > deadline:
            positions = await store_positions(stores, settings.topic, topic_id, partitions)
            # Log ends equal to the stores' positions: the workers are caught
            # up, and what stopped is the publishing.
            ends = await asyncio.to_thread(high_watermarks, settings, partitions)
            sent = "" if flow is None else f"{flow.published} of {len(flow.records)} published; "
            raise AssertionError(
                "\n".join(
                    [
                        f"stores past {done} records, not {at_least}, after {within}s; "
                        f"{sent}log ends {ends}; next needed offsets "
                        f"graph {positions['graph']} vector {positions['vector']}",
                        *(w.report() for w in workers),
                    ]
                )
            )
        await asyncio.sleep(0.05)


@dataclass
class Counters:
    """A worker's counters summed over its incarnations: the last sample of each
    incarnation (taken right before it was killed or stopped) counts."""

    samples: dict[int, dict[str, float]] = field(default_factory=dict)

    def sample(self, worker: WorkerProcess) -> None:
        """A busy worker may answer slowly: a few tries, then keep what we had."""
        for _ in range(3):
            with contextlib.suppress(OSError, AssertionError):
                self.samples[worker.incarnation] = worker.metrics(timeout=5.0)
                return

    def total(self, name: str) -> float:
        return sum(s.get(name, 0.0) for s in self.samples.values())

    def applied(self, store: str) -> float:
        return self.total(f'redstring_events_applied_total{{store="{store}"}}')

    def skipped(self, store: str) -> float:
        return self.total(f'redstring_events_skipped_total{{store="{store}"}}')
