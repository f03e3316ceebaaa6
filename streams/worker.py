"""The projector worker: a faust-streaming app with one agent on the events
topic (DESIGN 7).

Correctness rests on the stores' checkpoints and the next-needed-offset rule,
not on Faust's commits. Faust's recovery seeks every assigned partition to its
*committed* offset after ``app.on_rebalance_complete`` fires, so that is where
the stores' positions are committed; a seek on demand (a replay request, a
batch past the stores' position) follows ``Consumer.wait_for_stopped_flow``'s
recipe. See docs/adr/0006-faust-seeks.md.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import faust
from faust.types import TP
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from projections.graph import GraphProjection
from projections.vector import VectorProjection
from streams.deadletters import KafkaDeadLetterSink
from streams.metrics import Metrics
from streams.projector import Decision, Projector, RawRecord
from streams.settings import Settings
from streams.stores import Stores, open_stores
from streams.topics import check_topics

log = logging.getLogger("redstring.worker")


class Runtime:
    """What the agent, the rebalance hook and the web pages share."""

    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.metrics = Metrics()
        self.topic_id = ""
        self.stores: Stores | None = None
        self.projector: Projector | None = None
        self.sink: KafkaDeadLetterSink | None = None
        self._opening = asyncio.Lock()

    async def ready_projector(self) -> Projector:
        async with self._opening:
            if self.projector is None:
                info = await asyncio.to_thread(check_topics, self.settings)
                self.topic_id = info.topic_id
                self.stores = await open_stores(self.settings)
                self.sink = KafkaDeadLetterSink(self.settings)
                dimension = self.stores.vector.dimension
                self.projector = Projector(
                    [
                        GraphProjection(self.stores.graph, embedding_dimension=dimension),
                        VectorProjection(self.stores.vector, self.stores.embedder),
                    ],
                    self.sink,
                    topic=self.settings.topic,
                    topic_id=self.topic_id,
                    control_key=self.settings.control_key_bytes(),
                    metrics=self.metrics,
                    log_start=self._log_start,
                )
                log.info("stores open", extra={"topic_id": self.topic_id})
            return self.projector

    async def _log_start(self, partition: int) -> int:
        tp = TP(self.settings.topic, partition)
        earliest = await self.app.consumer.earliest_offsets(tp)
        return int(earliest.get(tp) or 0)

    def _tp(self, partition: int) -> TP:
        return TP(self.settings.topic, partition)

    @property
    def consumer(self) -> Any:
        # The aiokafka driver's consumer: ``_commit`` commits exact offsets, which
        # the public ``commit`` (acked offsets only) cannot. Pinned faust version.
        return self.app.consumer

    async def commit_positions(self) -> None:
        """Called when a rebalance completes, before recovery seeks to the
        committed offsets: commit what the stores need, so the seek lands there."""
        projector = await self.ready_projector()
        ours = [tp for tp in self.consumer.assignment() if tp.topic == self.settings.topic]
        offsets = {tp: await projector.next_needed(tp.partition) for tp in ours}
        if offsets:
            await self._commit(offsets)
            # Recovery's seek to the committed offsets skips a committed 0
            # (aiokafka's seek_to_committed seeks only when the offset is > 0),
            # so a partition the stores need from its start (fresh stores, a
            # full rebuild) stayed where an older commit had put it, idle past
            # the end of the log. Seek here too; recovery's own seek, where it
            # happens, lands on the same offsets.
            for tp, offset in offsets.items():
                await self.consumer.seek(tp, offset)
            log.info("committed the stores' positions", extra={"offsets": _show(offsets)})

    async def process(self, events: Sequence[Any]) -> None:
        projector = await self.ready_projector()
        by_partition: dict[int, list[RawRecord]] = {}
        for event in events:
            message = event.message
            by_partition.setdefault(message.partition, []).append(
                RawRecord(message.offset, message.key, message.value)
            )
        # Partitions are independent (each has its own checkpoints and locks in
        # both stores) and a batch's time is mostly store round trips, so their
        # units of work run concurrently; the consumer actions (commits, seeks,
        # pauses) then follow one partition at a time, in partition order.
        # One partition's records are still handled by one call, in order.
        ordered = sorted(by_partition.items())
        decisions = await asyncio.gather(
            *(projector.handle(partition, records) for partition, records in ordered)
        )
        for (partition, _), decision in zip(ordered, decisions, strict=True):
            await self._act(partition, decision)

    async def _act(self, partition: int, decision: Decision) -> None:
        consumer = self.consumer
        tp = self._tp(partition)
        if decision.pause is not None:
            consumer.pause_partitions([tp])
        elif decision.seek is not None:
            consumer.stop_flow()
            try:
                await consumer.wait_for_stopped_flow()
                await self._commit({tp: decision.seek})
                await consumer.seek(tp, decision.seek)
            finally:
                consumer.resume_flow()
            log.info("sought back", extra={"partition": partition, "offset": decision.seek})
        elif decision.commit is not None:
            await self._commit({tp: decision.commit})

    async def _commit(self, offsets: dict[TP, int]) -> None:
        """Commit what is still assigned. A rebalance can revoke a partition
        while its batch is in hand; faust's ``_commit`` drops partitions no
        longer assigned, and when none is left it hands aiokafka an empty
        dict, which raises ValueError and crashes the consumer thread (found
        by the two-worker benchmark). The new owner reads from the stores'
        positions anyway, so the commit is simply not needed."""
        assigned = self.consumer.assignment()
        mine = {tp: offset for tp, offset in offsets.items() if tp in assigned}
        if mine:
            await self.consumer._commit(mine)

    async def update_lag(self) -> None:
        if self.projector is None:
            return
        ours = [tp for tp in self.app.consumer.assignment() if tp.topic == self.settings.topic]
        if not ours:
            return
        highs = await self.app.consumer.highwaters(*ours)
        for tp in ours:
            needed = await self.projector.position(tp.partition)
            self.metrics.lag.labels(partition=str(tp.partition)).set(
                max(0, int(highs.get(tp) or 0) - needed)
            )

    async def expire_applied(self) -> None:
        if self.stores is None:
            return
        cutoff = datetime.now(UTC) - timedelta(days=self.settings.applied_event_retention_days)
        for store in (self.stores.graph, self.stores.vector):
            await store.expire_applied_events(cutoff)

    def readiness(self) -> tuple[bool, list[str]]:
        if self.projector is None:
            return False, ["stores not open yet"]
        return self.projector.health.ready, self.projector.health.reasons()

    async def close(self) -> None:
        if self.sink is not None:
            await asyncio.to_thread(self.sink.close)
        if self.stores is not None:
            await self.stores.aclose()


def _show(offsets: dict[TP, int]) -> dict[str, int]:
    return {f"{tp.topic}[{tp.partition}]": off for tp, off in offsets.items()}


def build_app(settings: Settings, *, instance_id: str | None = None) -> tuple[faust.App, Runtime]:
    app = faust.App(
        settings.group_id,
        broker=[f"kafka://{host}" for host in settings.kafka_bootstrap.split(",")],
        store="memory://",
        datadir=str(Path(tempfile.gettempdir()) / f"redstring-faust-{settings.group_id}"),
        topic_allow_declare=False,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        web_enabled=True,
        web_host=settings.http_host,
        web_port=settings.http_port,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.session_timeout_s / 5),
        broker_rebalance_timeout=max(settings.session_timeout_s, 10.0),
        consumer_group_instance_id=instance_id,
        stream_buffer_maxsize=max(4096, settings.batch_size * 2),
        # Faust's wait_empty (on every rebalance and at shutdown) waits for
        # every message handed to the agent's queue to be acked, but the same
        # rebalance first clears those queues (flow_control.clear), so messages
        # dropped there are never acked: a SIGTERM or a rebalance waited until
        # the process was killed. Correctness does not rest on Faust's acks:
        # the batch in hand is finished by the agent (shielded below), and a
        # batch that runs after its partition moved is fenced by the stores.
        stream_wait_empty=False,
        broker_credentials=_credentials(settings),
    )
    topic = app.topic(
        settings.topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )
    runtime = Runtime(app, settings)

    @app.agent(topic, concurrency=1)
    async def project(stream: Any) -> AsyncIterator[None]:
        async for events in stream.take_events(
            settings.batch_size, within=settings.batch_wait_ms / 1000
        ):
            # SIGTERM cancels the agent: finish the batch in hand first, so
            # both stores' units of work end committed, then stop.
            task = asyncio.ensure_future(runtime.process(events))
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                await task
                raise
            yield None

    async def on_rebalance_complete(sender: Any, **kwargs: Any) -> None:
        await runtime.commit_positions()

    app.on_rebalance_complete.connect(on_rebalance_complete)  # type: ignore[arg-type]

    async def lag() -> None:
        await runtime.update_lag()

    async def expire() -> None:
        await runtime.expire_applied()

    app.timer(interval=5.0)(lag)
    app.timer(interval=3600.0)(expire)

    @app.page("/livez")
    async def livez(web: Any, request: Any) -> Any:
        return web.json({"live": True})

    @app.page("/readyz")
    async def readyz(web: Any, request: Any) -> Any:
        ready, reasons = runtime.readiness()
        return web.json({"ready": ready, "reasons": reasons}, status=200 if ready else 503)

    @app.page("/metrics")
    async def metrics(web: Any, request: Any) -> Any:
        body = generate_latest(runtime.metrics.registry)
        # aiohttp refuses a content_type argument with a charset in it, and
        # Prometheus' content type has one: pass it as the header instead.
        return web.bytes(body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return app, runtime


def _credentials(settings: Settings) -> Any:
    if not settings.kafka_sasl_mechanism:
        return None
    password = (
        settings.kafka_sasl_password.get_secret_value() if settings.kafka_sasl_password else ""
    )
    return faust.SASLCredentials(
        username=settings.kafka_sasl_username or "",
        password=password,
        mechanism=settings.kafka_sasl_mechanism,
    )
