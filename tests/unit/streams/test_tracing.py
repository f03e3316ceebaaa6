"""Traces (docs/operations.md, "Traces"): the publisher's span context rides in
the record's headers and the worker continues it, so that one published event
is one trace from its publish to both store writes; a batch of many producers'
events links them; no span carries a tenant, an entity or a property."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import Position
from contracts.events import Event, make_event
from streams import telemetry
from streams.sdk import publisher as publisher_module
from streams.sdk.publisher import Publisher
from streams.settings import Settings, check_environment
from streams.worker.projector import Projector, RawRecord
from tests.unit.streams.test_projector import ListSink, projector

TENANT = "tenant-acme-secret"
NAMES = ("Ada Lovelace", "Charles Babbage")


class FakeProducer:
    """The publisher's producer without a broker: each record lands at the
    next offset of partition 0, and its headers are kept."""

    def __init__(self, settings: Settings, **overrides: Any) -> None:
        self.records: list[tuple[bytes | None, bytes | None, list[tuple[str, Any]]]] = []

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Any
    ) -> asyncio.Future[Position]:
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        future.set_result(Position(topic, 0, len(self.records)))
        self.records.append((key, value, list(headers)))
        return future

    def close(self) -> None:
        pass


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def extraction(tenant: str, *entities: tuple[str, str]) -> Event:
    return make_event(
        "DocumentExtracted",
        tenant,
        {
            "document_id": "doc-1",
            "extraction_model": "m",
            "entities": [
                {"id": i, "name": n, "type": "Person", "properties": {"born": 1815}}
                for i, n in entities
            ],
        },
    )


async def published(provider: TracerProvider, events: Sequence[Event]) -> list[RawRecord]:
    """Publish through the SDK (a fake producer under it) and hand back the
    records as the worker's consumer would."""
    pub = Publisher(Settings(), topic="events", tracer_provider=provider)
    assert isinstance(pub._producer, FakeProducer)
    await pub.publish_many(events)
    return [
        RawRecord(offset, key, value, headers=headers)
        for offset, (key, value, headers) in enumerate(pub._producer.records)
    ]


def traced(provider: TracerProvider | None, sink: ListSink) -> Projector:
    """The projector of tests/unit/streams/test_projector.py over fresh
    in-memory stores, tracing to ``provider`` (None: tracing off)."""
    vector = InMemoryVectorStore(HashingEmbedder(dimension=16).identity)
    proj = projector(InMemoryGraphStore(), vector, sink)
    if provider is None:
        return proj
    return Projector(
        proj.folds,
        sink,
        topic=proj.topic,
        topic_id=proj.topic_id,
        control_key=proj.control_key,
        metrics=proj.metrics,
        tracer=provider.get_tracer("redstring.worker"),
    )


@pytest.fixture(autouse=True)
def no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publisher_module, "AsyncProducer", FakeProducer)


def _by_name(finished: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    names = [span.name for span in finished]
    assert len(names) == len(set(names)), names
    return {span.name: span for span in finished}


async def test_one_published_event_is_one_trace_from_publish_to_both_store_writes(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    records = await published(provider, [extraction(TENANT, ("ada", NAMES[0]))])
    assert {name for name, _ in records[0].headers or ()} >= {"traceparent"}

    decision = await traced(provider, ListSink()).handle(0, records)

    assert decision.commit == 1 and decision.applied == 1
    span = _by_name(exporter.get_finished_spans())
    assert set(span) == {"send events", "process events", "decode", "apply graph", "apply vector"}
    send, batch = span["send events"], span["process events"]
    assert {s.context.trace_id for s in span.values()} == {send.context.trace_id}
    assert send.parent is None and send.kind is trace.SpanKind.PRODUCER
    assert batch.parent is not None and batch.parent.span_id == send.context.span_id
    assert batch.kind is trace.SpanKind.CONSUMER and not batch.links
    for child in ("decode", "apply graph", "apply vector"):
        assert span[child].parent is not None
        assert span[child].parent.span_id == batch.context.span_id, child
    assert dict(batch.attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.operation.type": "process",
        "messaging.destination.name": "events",
        "messaging.destination.partition.id": "0",
        "messaging.batch.message_count": 1,
        "redstring.offset.first": 0,
        "redstring.offset.last": 0,
        "redstring.records.new": 1,
        "redstring.decision": "commit",
        "redstring.decision.offset": 1,
        "redstring.applied": 1,
        "redstring.dead_lettered": 0,
    }
    graph = span["apply graph"].attributes or {}
    assert graph["redstring.store"] == "graph" and graph["redstring.applied"] == 1
    assert graph["redstring.outcome"] == "Applied"
    assert (span["apply vector"].attributes or {})["redstring.applied"] == 1
    assert send.attributes is not None and send.attributes["messaging.kafka.offset"] == 0


async def test_a_batch_of_many_producers_links_them_and_carries_no_tenant_payload(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    events = [
        extraction(TENANT, ("ada", NAMES[0])),
        extraction("tenant-globex", ("cb", NAMES[1])),
    ]
    records = await published(provider, events)
    # A record that is not JSON: a dead letter, sent in its own span.
    records.append(RawRecord(2, TENANT.encode(), b"{not json"))
    records.append(RawRecord(3, b"tenant-globex", records[1].value, headers=[("other", b"x")]))
    sink = ListSink()

    decision = await traced(provider, sink).handle(0, records)

    assert decision.commit == 4 and len(sink.letters) == 1
    finished = exporter.get_finished_spans()
    sends = [s for s in finished if s.name == "send events"]
    (batch,) = [s for s in finished if s.name == "process events"]
    assert len(sends) == 2 and batch.parent is not None
    assert batch.parent.span_id == sends[0].context.span_id
    assert [link.context.span_id for link in batch.links] == [sends[1].context.span_id]
    assert (batch.attributes or {})["redstring.dead_lettered"] == 1
    (letters,) = [s for s in finished if s.name == "send dead letters"]
    assert letters.parent is not None and letters.parent.span_id == batch.context.span_id
    assert (letters.attributes or {})["redstring.dead_letters"] == 1

    forbidden = (TENANT, "tenant-globex", "ada", "cb", *NAMES, "Person", "1815", "doc-1")
    for span in finished:
        values = [str(v) for v in (span.attributes or {}).values()]
        values += [str(v) for e in span.events for v in (e.attributes or {}).values()]
        values += [str(v) for link in span.links for v in (link.attributes or {}).values()]
        for value in values:
            assert not any(word in value for word in forbidden), (span.name, value)


async def test_tracing_off_reads_no_headers_and_makes_no_span(
    spans: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = spans
    records = await published(provider, [extraction(TENANT, ("ada", NAMES[0]))])
    exporter.clear()

    def refuse(headers: Any) -> None:
        raise AssertionError("tracing is off: no record's headers are read")

    monkeypatch.setattr(telemetry, "extract", refuse)
    assert (await traced(None, ListSink()).handle(0, records)).commit == 1
    assert exporter.get_finished_spans() == ()


def test_tracing_is_off_unless_the_otel_variables_ask_for_an_exporter() -> None:
    assert telemetry.wanted_exporters({}) == []
    assert telemetry.wanted_exporters({"OTEL_SERVICE_NAME": "w"}) == []
    assert telemetry.wanted_exporters({"OTEL_TRACES_EXPORTER": "none"}) == []
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert telemetry.wanted_exporters(endpoint) == ["otlp"]
    assert telemetry.wanted_exporters({"OTEL_TRACES_EXPORTER": "console,otlp"}) == [
        "console",
        "otlp",
    ]
    assert telemetry.wanted_exporters({**endpoint, "OTEL_SDK_DISABLED": "true"}) == []
    # The settings' check of unknown variables is for REDSTRING_* only.
    check_environment({**endpoint, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "w"})


def test_the_header_carrier_round_trips_a_span_context(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, _ = spans
    with provider.get_tracer("t").start_as_current_span("s") as span:
        headers: list[tuple[str, str | bytes | None]] = [("event_type", b"X")]
        telemetry.inject(headers)
    names = [name for name, _ in headers]
    assert names[:2] == ["event_type", "traceparent"]
    for carrier in (headers, dict(headers)):
        context = telemetry.extract(carrier)
        assert context is not None and context.span_id == span.get_span_context().span_id
        assert context.is_remote
    assert telemetry.extract([("traceparent", b"garbage")]) is None
    assert telemetry.extract(None) is None and telemetry.extract([]) is None


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER=jaeger"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
        ),
    ],
)
def test_the_worker_refuses_tracing_it_cannot_do_in_one_line(
    env: dict[str, str], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before it connects to anything: a usage error naming the variable."""
    from click.testing import CliRunner

    from streams.cli import main

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(main, ["worker"])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


async def test_a_batch_that_fails_partway_ends_the_spans_of_what_it_sent(
    spans: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """publish_many queues every event before awaiting any: when the third
    cannot be queued, the first two are still delivered, and their send spans
    end (a span never ended is never exported: the trace would lose them)."""
    provider, exporter = spans
    original = FakeProducer.send

    def full_on_third(self: FakeProducer, *args: Any) -> asyncio.Future[Position]:
        if len(self.records) == 2:
            raise BufferError("queue full")
        return original(self, *args)

    monkeypatch.setattr(FakeProducer, "send", full_on_third)
    pub = Publisher(Settings(), topic="events", tracer_provider=provider)
    events = [extraction(TENANT, (f"e{i}", NAMES[0])) for i in range(4)]
    with pytest.raises(BufferError):
        await pub.publish_many(events)
    sends = [s for s in exporter.get_finished_spans() if s.name == "send events"]
    assert len(sends) == 3  # two delivered, and the one refused
    delivered = sorted(
        s.attributes["messaging.kafka.offset"]
        for s in sends
        if s.attributes and "messaging.kafka.offset" in s.attributes
    )
    assert delivered == [0, 1]
