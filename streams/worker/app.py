"""The projector worker: a faust-streaming app with one agent on the events
topic (docs/design.md 7).

Faust is only the transport here: the loop around the projector
(streams.worker.loop) decides every commit, seek and pause, and checks that what Faust
hands over continues the stores' position. Faust's recovery seeks every
assigned partition to its *committed* offset after ``app.on_rebalance_complete``
fires, so that is where the stores' positions are committed; Faust commits
nothing itself (acks are off for the events topic). See
docs/adr/0006-faust-seeks.md.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import faust
from aiokafka.errors import CommitFailedError, IllegalStateError
from aiokafka.structs import OffsetAndMetadata
from aiokafka.structs import TopicPartition as AIOKafkaTP
from faust.exceptions import ConsumerNotStarted
from faust.types import TP
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from streams.kafka import lenient_records
from streams.kafka.config import client_configs, faust_credentials
from streams.kafka.probe import RecordProbe
from streams.kafka.topics import check_topics
from streams.settings import Settings
from streams.telemetry import configure_tracing
from streams.wiring import Stores, build_folds, open_stores
from streams.worker.bounds import ReadAhead, batch_bounds, batch_values_size
from streams.worker.collector import collector_state, settle_for_batches
from streams.worker.heap import HeapTrim, malloc_trim
from streams.worker.intake import Intake
from streams.worker.loop import WorkerLoop
from streams.worker.metrics import Metrics
from streams.worker.projector import Projector, RawRecord
from streams.worker.sink import KafkaDeadLetterSink

log = logging.getLogger("redstring.worker")

#: How long a seek waits for the consumer thread to run it; longer means that
#: thread's event loop is stuck or gone, and the worker is failing.
SEEK_TIMEOUT_S = 30.0


def _logged_at(message: Any) -> datetime | None:
    """A Faust message's Kafka timestamp (seconds since the epoch), if any.

    A producer sets it on a topic with ``CreateTime`` (docs/events.md), up to
    what the broker's ``message.timestamp.after.max.ms`` allows: past the
    year 9999 it is read as the latest time there is, so a control event in
    that record is refused by its age check instead of crashing the agent
    (``fromtimestamp`` raises) or going unjudged."""
    stamp = getattr(message, "timestamp", None)
    if not stamp or stamp <= 0:
        return None
    try:
        return datetime.fromtimestamp(stamp, UTC)
    except (ValueError, OverflowError, OSError):
        return datetime.max.replace(tzinfo=UTC)


class FaustConsumer:
    """streams.worker.loop.Consumer over Faust's consumer, for the events topic."""

    def __init__(self, app: faust.App, topic: str) -> None:
        self.app = app
        self.topic = topic

    def _tp(self, partition: int) -> TP:
        return TP(self.topic, partition)

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self.app.consumer.assignment() if tp.topic == self.topic}

    async def commit(self, offsets: Mapping[int, int]) -> None:
        """Commit exact offsets, on Faust's consumer thread, for the partitions
        that thread still holds (pinned faust version: ``_thread``). The
        public ``commit`` commits acked offsets only, and the driver's
        ``_commit`` crashes the consumer when a rebalance revoked the
        partitions between the caller's look and the thread's (it hands
        aiokafka an empty dict, a ValueError; found by the two-worker
        benchmark). So the thread looks itself, and a commit refused for a
        rebalance is dropped: the next owner commits the stores' position on
        assignment."""
        thread = self.app.consumer._thread  # type: ignore[attr-defined]
        wanted = {self._tp(p): offset for p, offset in offsets.items()}

        async def commit_held() -> None:
            consumer = thread._ensure_consumer()
            held = consumer.assignment()
            mine = {tp: offset for tp, offset in wanted.items() if AIOKafkaTP(*tp) in held}
            if not mine:
                return
            try:
                await consumer.commit(
                    {AIOKafkaTP(*tp): OffsetAndMetadata(offset, "") for tp, offset in mine.items()}
                )
            except (CommitFailedError, IllegalStateError) as exc:
                log.info("commit dropped by a rebalance", extra={"error": repr(exc)})
                return
            # Faust's watch on partitions that fetch but never commit
            # (tp_commit_timeout_secs) reads these.
            now = time.monotonic()
            thread.tp_last_committed_at.update({tp: now for tp in mine})

        await thread.call_thread(commit_held)

    async def set_fetch_wait(self, wait_ms: int) -> None:
        """Cap how long the consumer's fetches wait at the end of the log.

        Faust builds its aiokafka consumer with ``fetch_max_wait_ms=1500`` and
        no setting for it, and aiokafka keeps one fetch in flight per broker:
        a seek on a caught-up partition (a replay, a refused batch) waited up
        to 1.5 s for that long poll to return before the records it asked for
        were fetched (about 0.9 s of a replay, timed in the worker). The
        fetcher reads the value whenever it builds a request (pinned aiokafka
        version: ``Fetcher._fetch_max_wait_ms``); records that arrive still
        end a fetch at once, so this costs only more empty polls of an idle
        log."""
        thread = self.app.consumer._thread  # type: ignore[attr-defined]

        async def on_thread() -> None:
            try:
                consumer = thread._ensure_consumer()
            except ConsumerNotStarted as exc:  # not yet, or no longer: nothing to shorten
                log.info("fetch wait not set", extra={"error": repr(exc)})
                return
            fetcher = getattr(consumer, "_fetcher", None)
            if fetcher is None or not hasattr(fetcher, "_fetch_max_wait_ms"):
                log.warning(
                    "this aiokafka's fetcher has no _fetch_max_wait_ms: fetches keep Faust's "
                    "1500 ms, and seeks may wait that long"
                )
                return
            fetcher._fetch_max_wait_ms = wait_ms

        await thread.call_thread(on_thread)

    async def seek(self, partition: int, offset: int) -> None:
        """Seek on the consumer's own thread, then set Faust's read offset.

        A plain seek: no stop_flow, whose getmany then seeks every partition
        to its committed offset. What Faust still gets wrong (records fetched
        before the seek delivered after it, re-fetched ones dropped) the loop
        notices and asks again (streams.worker.loop).

        Not Faust's ``Consumer.seek``: it calls aiokafka's seek from this
        thread, and aiokafka's ``Fetcher.seek_to`` deletes the partition's
        fetched records while the consumer thread's ``fetched_records`` walks
        them, a KeyError that crashed the fetcher and stopped the worker
        (ADR 0006). Nor ``call_thread``: its two method-queue workers are the
        ones that getmany and commits hold, so a seek would wait behind them.
        A callback on the thread's event loop runs between two of its steps,
        never inside one."""
        thread = self.app.consumer._thread  # type: ignore[attr-defined]
        tp = self._tp(partition)
        here = asyncio.get_running_loop()
        landed: asyncio.Future[None] = here.create_future()

        def settle(error: BaseException | None) -> None:
            if landed.done():  # the wait below gave up
                return
            if error is None:
                landed.set_result(None)
            else:
                landed.set_exception(error)

        def on_thread() -> None:
            error: BaseException | None = None
            try:
                thread._ensure_consumer().seek(tp, offset)
            except Exception as exc:  # handed back to the caller's loop
                error = exc
            here.call_soon_threadsafe(settle, error)

        try:
            thread.thread_loop.call_soon_threadsafe(on_thread)
            await asyncio.wait_for(landed, SEEK_TIMEOUT_S)
        except (IllegalStateError, ConsumerNotStarted):
            # Revoked between the loop's check and the consumer thread's seek:
            # the new owner seeks to the stores' position itself.
            log.info("seek of a partition no longer held", extra={"partition": partition})
            return
        except (RuntimeError, TimeoutError) as exc:  # a closed or stuck loop
            raise RuntimeError(
                f"the consumer thread did not seek partition {partition} to {offset} "
                f"within {SEEK_TIMEOUT_S:.0f} s: {exc!r}"
            ) from exc
        # What Faust's Consumer.seek does after its seek: the fetch loop hands
        # over only records at or above the read offset (None for 0).
        self.app.consumer._read_offset[tp] = offset if offset else None  # type: ignore[attr-defined]

    def pause(self, partition: int) -> None:
        self.app.consumer.pause_partitions([self._tp(partition)])

    def resume(self, partition: int) -> None:
        self.app.consumer.resume_partitions([self._tp(partition)])

    async def log_end(self, partitions: Collection[int]) -> Mapping[int, int]:
        highs = await self.app.consumer.highwaters(*(self._tp(p) for p in partitions))
        return {tp.partition: int(offset or 0) for tp, offset in highs.items()}


class Runtime:
    """What the agent, the rebalance hook, the timers and the web pages share."""

    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.metrics = Metrics()
        self.topic_id = ""
        self.stores: Stores | None = None
        self.loop: WorkerLoop | None = None
        self.intake: Intake | None = None
        #: Why the worker cannot apply anything any more, if it cannot.
        self.failed: str | None = None
        self.sink: KafkaDeadLetterSink | None = None
        self.consumer = FaustConsumer(app, settings.topic)
        self.probe = RecordProbe(settings)
        # Off unless the OTEL_* variables ask for an exporter (docs/operations.md, "Traces").
        provider = configure_tracing("redstring-worker")
        self.tracer = provider.get_tracer("redstring.worker") if provider else None
        self._opening = asyncio.Lock()

    async def ready_loop(self) -> WorkerLoop:
        async with self._opening:
            if self.loop is None:
                info = await asyncio.to_thread(check_topics, self.settings)
                self.topic_id = info.topic_id
                self.stores = await open_stores(self.settings)
                self.sink = KafkaDeadLetterSink(self.settings)
                projector = Projector(
                    build_folds(
                        self.stores.graph,
                        self.stores.vector,
                        self.stores.embedder,
                        chunk=self.settings.write_chunk_entities,
                    ),
                    self.sink,
                    topic=self.settings.topic,
                    topic_id=self.topic_id,
                    control_key=self.settings.control_keyring(),
                    metrics=self.metrics,
                    partitions=info.partition_count,
                    control_max_age=self.settings.control_max_age,
                    log_start=self.probe.log_start,
                    probe=self.probe.first_record_at,
                    limits=self.settings.event_limits(),
                    tracer=self.tracer,
                )
                self.loop = WorkerLoop(
                    projector,
                    self.consumer,
                    stall_after=self.settings.stall_after_s,
                    bounds=batch_bounds(self.settings),
                    share_up_to=self.settings.share_units_up_to,
                )
                # Everything the worker keeps for its life exists now.
                settle_for_batches(self.settings.gc_young_threshold)
                log.info("stores open", extra={"topic_id": self.topic_id, **collector_state()})
            return self.loop

    @property
    def projector(self) -> Projector | None:
        return self.loop.projector if self.loop is not None else None

    async def commit_positions(self) -> None:
        """Called when a rebalance completes, before Faust's recovery seeks to
        the committed offsets: shorten the fetch wait (so the seeks that follow
        do not wait out a long poll), then commit (and seek to) what the stores
        need."""
        loop = await self.ready_loop()
        await self.consumer.set_fetch_wait(self.settings.fetch_max_wait_ms)
        if self.intake is not None:
            self.intake.retain(self.consumer.assigned())
        await loop.on_assigned()

    @staticmethod
    def records_of(events: Sequence[Any]) -> dict[int, list[RawRecord]]:
        """The records of a batch Faust handed over, by partition."""
        batch: dict[int, list[RawRecord]] = {}
        for event in events:
            message = event.message
            batch.setdefault(message.partition, []).append(
                RawRecord(
                    message.offset,
                    message.key,
                    message.value,
                    _logged_at(message),
                    message.headers,
                )
            )
        return batch

    async def open_intake(self, read_ahead: ReadAhead) -> Intake:
        """The intake the agent puts batches into, its applier started: the
        next batch is gathered while the one before it is written
        (streams.worker.intake). Each batch the applier takes, or a
        rebalance drops, gives its bytes back to the read-ahead budget."""
        loop = await self.ready_loop()

        heap = HeapTrim(self.settings.heap_trim_interval_s, malloc_trim())

        def taken(batch: Mapping[int, Sequence[RawRecord]]) -> None:
            # The batch before is written and freed; this one is not decoded yet.
            heap.maybe()
            read_ahead.give_back(batch)
            self.metrics.intake_bytes.observe(batch_values_size(batch))

        intake = Intake(
            loop,
            max_records=self.settings.batch_size,
            on_taken=taken,
            # Values a rebalance drops from the intake were admitted and will
            # never be taken: without this, a budget they filled would keep
            # the consumer from admitting anything once the intake is empty.
            on_dropped=read_ahead.give_back,
        )
        intake.start().add_done_callback(self._applier_ended)
        self.intake = intake
        self.failed = None  # a restarted agent has a working applier again
        return intake

    def _applier_ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            # Nothing put from now on would be applied: say so where an
            # operator looks (the agent stops at its next batch too).
            self.failed = f"the worker's applier stopped: {type(error).__name__}"
            log.error("the worker's applier stopped", exc_info=error)

    async def close_intake(self) -> None:
        """Finish the batch in flight (both stores' units of work end
        committed), drop what waits, stop the applier."""
        if self.intake is None:
            return
        if self.projector is not None:
            self.projector.stop()
        intake, self.intake = self.intake, None
        await intake.close()

    async def update_lag(self) -> None:
        if self.loop is not None:
            await self.loop.update_lag()

    async def check_stalls(self) -> None:
        if self.loop is not None:
            await self.loop.check_stalls()

    async def expire_applied(self) -> None:
        if self.stores is None:
            return
        cutoff = datetime.now(UTC) - timedelta(days=self.settings.applied_event_retention_days)
        for store in (self.stores.graph, self.stores.vector):
            await store.expire_applied_events(cutoff)

    def readiness(self) -> tuple[bool, list[str]]:
        if self.loop is None:
            return False, ["stores not open yet"]
        if self.failed is not None:
            return False, [self.failed]
        health = self.loop.projector.health
        return health.ready, health.reasons()

    async def close(self) -> None:
        await asyncio.to_thread(self.probe.close)
        if self.sink is not None:
            await asyncio.to_thread(self.sink.close)
        if self.stores is not None:
            await self.stores.aclose()


def build_app(settings: Settings, *, instance_id: str | None = None) -> tuple[faust.App, Runtime]:
    """The worker: a Faust app whose one agent hands batches to the runtime,
    with the timers and the HTTP pages around it."""
    # A header name that is not UTF-8 crashed aiokafka's fetcher (any
    # producer can send one): read it leniently instead.
    lenient_records.install()
    app = _faust_app(settings, instance_id)
    topic = _events_topic(app, settings)
    runtime = Runtime(app, settings)
    _add_agent(app, topic, runtime, settings)
    _add_timers(app, runtime, settings)
    _add_pages(app, runtime)
    return app, runtime


def _faust_app(settings: Settings, instance_id: str | None) -> faust.App:
    kafka = client_configs(settings)
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
        # Faust's channel queue is bounded by count: sized so that it holds
        # no more bytes of maximum-size events than REDSTRING_READ_AHEAD_BYTES
        # (docs/adr/0009-read-ahead-by-bytes.md).
        stream_buffer_maxsize=settings.queue_records(),
        # Faust's wait_empty (on every rebalance and at shutdown) waits for
        # every message handed to the agent's queue to be acked, but the same
        # rebalance first clears those queues (flow_control.clear), so messages
        # dropped there are never acked: a SIGTERM or a rebalance waited until
        # the process was killed. Correctness does not rest on Faust's acks:
        # the batch in hand is finished by the agent (shielded below), and a
        # batch that runs after its partition moved is fenced by the stores.
        stream_wait_empty=False,
        # TLS and SASL exactly as the CLI's clients get them (docs/design.md
        # 7.3): Faust reads the protocol off the credentials' type and SSL context.
        broker_credentials=faust_credentials(kafka.aiokafka),
        **kafka.faust,
    )
    if kafka.cli_only:
        log.info(
            "Kafka properties the worker's client has no equivalent for (they apply to the "
            "CLI's clients only)",
            extra={"properties": list(kafka.cli_only)},
        )
    _keep_the_consumer_open_through_a_stopping_rebalance(app)
    return app


def _keep_the_consumer_open_through_a_stopping_rebalance(app: faust.App) -> None:
    """A rebalance that ends while the worker stops must not close the consumer.

    Faust answers it (``App._on_rebalance_when_stopped``) with
    ``consumer.close()``, which marks aiokafka's consumer closed and runs its
    client's and coordinator's ``close`` on the worker's event loop, not the
    consumer thread's: the coordinator's tasks on that thread went on
    heartbeating a closed client, the thread's own ``consumer.stop()`` then
    did nothing since the consumer was already marked closed, and the worker
    never exited on SIGTERM (ADR 0006). Doing nothing leaves the consumer to
    its thread, which stops it when Faust stops the thread, as at any other
    shutdown; the records of that rebalance are never applied (the agent is
    stopping), so nothing is lost."""

    def on_rebalance_when_stopped() -> None:
        log.info("a rebalance ended while stopping: the consumer's thread stops the consumer")

    app._on_rebalance_when_stopped = on_rebalance_when_stopped  # type: ignore[method-assign]


def _events_topic(app: faust.App, settings: Settings) -> Any:
    return app.topic(
        settings.topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        # Faust commits acked offsets on its own, and take_events acks every
        # record it hands over, applied or not (past a replay request, a
        # refusal, records delivered twice after a seek): its commits would run
        # ahead of the stores, and its own seeks to them skip records. The loop
        # commits the stores' positions itself (docs/adr/0006-faust-seeks.md).
        acks=False,
    )


def _add_agent(app: faust.App, topic: Any, runtime: Runtime, settings: Settings) -> None:
    @app.agent(topic, concurrency=1)
    async def project(stream: Any) -> AsyncIterator[None]:
        read_ahead = ReadAhead(settings.read_ahead_bytes)

        async def admit(value: bytes | None) -> bytes | None:
            # Runs before take_events' own processor adds the value to the
            # batch it gathers; waiting here ends that batch by its timeout.
            await read_ahead.admit(len(value) if value else 0)
            return value

        stream.add_processor(admit)
        # The applier writes each batch while the next is gathered here; the
        # batch in flight is never cancelled with the agent (SIGTERM): closing
        # the intake lets it end committed, then stops.
        intake = await runtime.open_intake(read_ahead)
        try:
            async for events in stream.take_events(
                settings.batch_size, within=settings.batch_wait_ms / 1000
            ):
                await intake.put(runtime.records_of(events))
                yield None
        finally:
            await runtime.close_intake()

    async def on_rebalance_complete(sender: Any, **kwargs: Any) -> None:
        await runtime.commit_positions()

    app.on_rebalance_complete.connect(on_rebalance_complete)  # type: ignore[arg-type]


def _add_timers(app: faust.App, runtime: Runtime, settings: Settings) -> None:
    async def lag() -> None:
        await runtime.update_lag()

    async def expire() -> None:
        await runtime.expire_applied()

    async def stalls() -> None:
        await runtime.check_stalls()

    app.timer(interval=5.0)(lag)
    app.timer(interval=min(5.0, max(0.5, settings.stall_after_s / 3)))(stalls)
    app.timer(interval=3600.0)(expire)


def _add_pages(app: faust.App, runtime: Runtime) -> None:
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
