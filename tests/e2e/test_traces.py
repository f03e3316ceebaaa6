"""Traces end to end (issue 18, item 1; docs/operations.md, "Traces"): an event
published through the SDK with a tracer of its own is one trace through a real
broker and a real worker process, from the publisher's ``send`` span to the
worker's batch span and its decode and both stores' writes. The worker exports
with ``OTEL_TRACES_EXPORTER=console`` (one JSON span a line on its stdout,
which the test reads from the worker's log file)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contracts.events import make_event
from streams.sdk.publisher import Publisher
from streams.sdk.read_your_writes import wait_until_projected
from streams.wiring import Stores
from tests.e2e.conftest import Deployment

pytestmark = pytest.mark.services

WORKER_SPANS = {"decode", "apply graph", "apply vector"}


def _worker_spans(text: str, trace_id: str) -> dict[str, dict[str, Any]]:
    spans: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if not line.startswith('{"name"'):
            continue  # the worker's own log lines
        span = json.loads(line)
        if span["context"]["trace_id"] == f"0x{trace_id}":
            spans[span["name"]] = span
    return spans


async def test_one_published_event_is_one_trace_through_the_broker_and_a_worker(
    deployment: Deployment, stores: Stores
) -> None:
    worker = deployment.worker(
        "traced", OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="redstring-worker-e2e"
    ).start()
    await asyncio.to_thread(worker.wait_ready)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    event = make_event(
        "DocumentExtracted",
        deployment.tenant("traced"),
        {
            "document_id": "doc-1",
            "extraction_model": "m",
            "entities": [{"id": "ada", "name": "Ada Lovelace", "type": "Person"}],
        },
    )
    async with Publisher(deployment.settings, tracer_provider=provider) as publisher:
        position = await publisher.publish(event)
    await wait_until_projected(
        position, [stores.graph, stores.vector], topic_id=deployment.topic_id, within=60
    )
    (send,) = exporter.get_finished_spans()
    trace_id = format(send.context.trace_id, "032x")
    deadline = time.monotonic() + 30
    batch = f"process {deployment.settings.topic}"
    while True:
        spans = _worker_spans(worker.log_path.read_text(errors="replace"), trace_id)
        if {batch, *WORKER_SPANS} <= set(spans) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert {batch, *WORKER_SPANS} <= set(spans), (sorted(spans), worker.tail())
    process = spans[batch]
    assert process["parent_id"] == f"0x{send.context.span_id:016x}"
    assert process["kind"] == "SpanKind.CONSUMER"
    assert process["resource"]["attributes"]["service.name"] == "redstring-worker-e2e"
    attributes = process["attributes"]
    assert attributes["messaging.destination.partition.id"] == str(position.partition)
    assert attributes["redstring.offset.first"] <= position.offset
    assert attributes["redstring.offset.last"] >= position.offset
    assert attributes["redstring.decision"] == "commit"
    for name in WORKER_SPANS:
        assert spans[name]["parent_id"] == process["context"]["span_id"], name
    assert spans["apply graph"]["attributes"]["redstring.applied"] >= 1
    assert spans["apply vector"]["attributes"]["redstring.applied"] >= 1
    # No tenant payload in any of them.
    text = json.dumps([*spans.values()])
    assert event.tenant_id not in text and "Ada Lovelace" not in text
    assert worker.stop() == 0
