"""Projector workers as real processes, for the end-to-end tests.

``WorkerProcess`` runs ``python -m streams worker`` with its own topic, group,
free HTTP port, short session timeout and a static membership id, and writes
its logs to a file under the test's tmp_path. ``stop()`` is SIGTERM and wait,
``kill9()`` is SIGKILL, ``restart()`` starts it again with the same identity
(static membership: the broker hands its partitions straight back).

Nothing here sleeps to let something happen: ``wait_ready`` polls /readyz and
``caught_up`` polls both stores' next needed offsets of every partition against
the topic's high watermarks, both in bounded loops.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from contracts.domain import StreamPartition
from projections.admission import next_needed_offset
from streams.kafka.config import librdkafka_config
from streams.settings import Settings
from streams.wiring import Stores

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class WorkerProcess:
    """One worker of a consumer group, as a subprocess."""

    env: dict[str, str]
    log_dir: Path
    worker_id: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    incarnation: int = 0

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"worker-{self.worker_id}.log"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            **self.env,
            "REDSTRING_HTTP_PORT": str(self.port),
            "REDSTRING_HTTP_HOST": "127.0.0.1",
            "REDSTRING_WORKER_ID": self.worker_id,
            "PYTHONUNBUFFERED": "1",
        }

    def start(self) -> WorkerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.incarnation += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- incarnation {self.incarnation} ---\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streams", "worker"],
                env=self._env(),
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: the worker finishes its batch and exits."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(
                f"worker {self.worker_id} ignored SIGTERM for {timeout}s; see {self.log_path}"
            ) from None

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def restart(self) -> WorkerProcess:
        if self.running:
            self.stop()
        return self.start()

    def close(self) -> None:
        """Teardown: whatever state the test left the process in."""
        if self.running:
            try:
                self.stop(timeout=30)
            except AssertionError:
                pass

    # -- HTTP --------------------------------------------------------------

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read()

    def wait_ready(self, within: float = 90.0) -> None:
        """Poll /readyz until it answers 200 (the stores are open, nothing paused)."""
        deadline = time.monotonic() + within
        last = "no answer"
        while time.monotonic() < deadline:
            self.assert_alive()
            try:
                status, body = self.get("/readyz")
            except OSError as exc:
                last = repr(exc)
            else:
                if status == 200:
                    return
                last = f"{status} {body.decode(errors='replace')}"
            time.sleep(0.2)
        raise AssertionError(
            f"worker {self.worker_id} not ready within {within}s ({last}); see {self.log_path}"
        )

    def assert_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(
                f"worker {self.worker_id} exited with {self.proc.returncode}:\n{self.tail()}"
            )

    async def logged(self, text: str, *, after: int, within: float) -> None:
        """Wait until the log says ``text`` past its first ``after`` bytes
        (``log_path.stat().st_size`` taken before what should make it say so)."""
        deadline = time.monotonic() + within
        while text.encode() not in self.log_path.read_bytes()[after:]:
            self.assert_alive()
            assert time.monotonic() < deadline, f"{self.worker_id} never logged {text!r}"
            await asyncio.sleep(0.1)

    def metrics(self, timeout: float = 2.0) -> dict[str, float]:
        """The Prometheus text, as {"name{labels}": value}."""
        status, body = self.get("/metrics", timeout=timeout)
        assert status == 200, f"/metrics answered {status}"
        return parse_metrics(body.decode())

    def readyz(self) -> str:
        """The /readyz answer, shortened, or why there was none."""
        try:
            status, body = self.get("/readyz", timeout=5.0)
        except OSError as exc:
            return f"no answer ({exc!r})"
        return f"{status} {body.decode(errors='replace')[:300]}"

    def report(self, lines: int = 25) -> str:
        """What a failed wait says about this worker: its /readyz answer and
        the end of its log (CI keeps neither once the run is over)."""
        return (
            f"{self.worker_id}: /readyz {self.readyz()}; worker log {self.log_path}:\n"
            f"{self.tail(lines)}"
        )

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def parse_metrics(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            found[name] = float(value)
        except ValueError:
            continue
    return found


# -- where the log ends and where the stores are ------------------------------------


def high_watermarks(settings: Settings, partitions: int) -> dict[int, int]:
    consumer = Consumer({**librdkafka_config(settings), "group.id": "redstring-e2e-watch"})
    try:
        return {
            p: int(consumer.get_watermark_offsets(TopicPartition(settings.topic, p), timeout=10)[1])
            for p in range(partitions)
        }
    finally:
        consumer.close()


async def store_positions(
    stores: Stores, topic: str, topic_id: str, partitions: int
) -> dict[str, dict[int, int]]:
    """Each store's next needed offset per partition (open rebuild windows count)."""
    out: dict[str, dict[int, int]] = {"graph": {}, "vector": {}}
    for p in range(partitions):
        part = StreamPartition(topic, p, topic_id)
        out["graph"][p] = await next_needed_offset(stores.graph, part)
        out["vector"][p] = await next_needed_offset(stores.vector, part)
    return out


async def caught_up(
    settings: Settings,
    stores: Stores,
    topic_id: str,
    partitions: int,
    *,
    workers: Mapping[str, WorkerProcess] | None = None,
    within: float = 120.0,
    highs: dict[int, int] | None = None,
) -> dict[str, dict[int, int]]:
    """Wait until both stores need nothing below the log's end on every partition
    (so every record is applied, skipped or dead-lettered, and no rebuild window
    is open). ``highs``: the offsets to reach (default: the current log ends)."""
    wanted = highs if highs is not None else high_watermarks(settings, partitions)
    deadline = time.monotonic() + within
    delay = 0.05
    while True:
        positions = await store_positions(stores, settings.topic, topic_id, partitions)
        if all(positions[s][p] >= wanted[p] for s in positions for p in wanted):
            return positions
        for worker in (workers or {}).values():
            worker.assert_alive()
        if time.monotonic() > deadline:
            logs = "\n".join(f"{w.worker_id}:\n{w.tail()}" for w in (workers or {}).values())
            raise AssertionError(
                f"not caught up within {within}s: log ends {wanted}, stores {positions}\n{logs}"
            )
        await asyncio.sleep(delay)
        delay = min(0.5, delay * 1.5)


def run(coro: Any) -> Any:
    """Run a coroutine from a synchronous test or fixture."""
    return asyncio.run(coro)
