"""Traces (OpenTelemetry; docs/operations.md, "Traces").

W3C trace context travels in Kafka record headers (``traceparent``,
``tracestate``): the publisher injects it, the worker extracts it.
``configure_tracing`` installs the SDK for a process from the standard
``OTEL_*`` variables, and only when they ask for an exporter: with none set
there is no SDK, no exporter and no connection, and the OpenTelemetry API's
no-op tracer is all the code meets.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger("redstring.telemetry")

TRACEPARENT = "traceparent"

#: Record headers as both Kafka clients hand them over: a list of
#: (name, value) pairs, or (Faust, sometimes) a mapping.
Headers = Iterable[tuple[str, Any]] | Mapping[str, Any]

_PROPAGATOR = TraceContextTextMapPropagator()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _pairs(headers: Headers) -> Iterable[tuple[str, Any]]:
    return headers.items() if isinstance(headers, Mapping) else headers


class _HeaderGetter(Getter[Headers]):
    def get(self, carrier: Headers, key: str) -> list[str] | None:
        values = [_text(value) for name, value in _pairs(carrier) if name == key and value]
        return values or None

    def keys(self, carrier: Headers) -> list[str]:
        return [name for name, _ in _pairs(carrier)]


class _HeaderSetter(Setter[list[tuple[str, str | bytes | None]]]):
    def set(self, carrier: list[tuple[str, str | bytes | None]], key: str, value: str) -> None:
        carrier.append((key, value.encode("ascii")))


_GETTER = _HeaderGetter()
_SETTER = _HeaderSetter()


def inject(headers: list[tuple[str, str | bytes | None]], context: Context | None = None) -> None:
    """Append ``traceparent`` (and ``tracestate``) for the span of ``context``
    (default: the current one); nothing when it has no valid span."""
    _PROPAGATOR.inject(headers, context=context, setter=_SETTER)


def extract(headers: Headers | None) -> trace.SpanContext | None:
    """The producer's span context a record carries, if it carries one."""
    if not headers:
        return None
    pairs = list(_pairs(headers))
    if not any(name == TRACEPARENT for name, _ in pairs):
        return None  # most records, when producers do not trace: no parsing
    context = trace.get_current_span(_PROPAGATOR.extract(pairs, getter=_GETTER)).get_span_context()
    return context if context.is_valid else None


_configured: dict[str, trace.TracerProvider] = {}


def wanted_exporters(environ: Mapping[str, str] | None = None) -> list[str]:
    """The span exporters the standard variables ask for: ``OTEL_TRACES_EXPORTER``
    (comma-separated; ``none`` for none), else ``otlp`` when an OTLP endpoint
    is set, else none. ``OTEL_SDK_DISABLED=true`` turns everything off."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = [part.strip() for part in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
    exporters = [name for name in named if name]
    if not exporters and (
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    ):
        exporters = ["otlp"]
    return [name for name in exporters if name != "none"]


class TracingConfigError(ValueError):
    """``OTEL_*`` variables that ask for tracing redstring cannot do; the
    message names the variable."""


def check_tracing(environ: Mapping[str, str] | None = None) -> list[str]:
    """The exporters ``wanted_exporters`` gives, refusing what redstring cannot
    export with: an unknown exporter, or OTLP over anything but HTTP."""
    env = os.environ if environ is None else environ
    exporters = wanted_exporters(env)
    for name in exporters:
        if name not in ("otlp", "console"):
            raise TracingConfigError(
                f"OTEL_TRACES_EXPORTER={name}: redstring knows otlp, console and none"
            )
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env.get("OTEL_EXPORTER_OTLP_PROTOCOL"))
    if "otlp" in exporters and protocol and protocol != "http/protobuf":
        raise TracingConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: redstring exports OTLP over "
            "http/protobuf only (port 4318 on a collector)"
        )
    return exporters


def configure_tracing(service_name: str) -> trace.TracerProvider | None:
    """Install the OpenTelemetry SDK for this process when the ``OTEL_*``
    variables ask for an exporter (``wanted_exporters``), and return its
    tracer provider; None (tracing off) otherwise. Idempotent.

    ``otlp`` is OTLP over HTTP/protobuf, configured by the exporter's own
    variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``..._HEADERS``, ...);
    ``console`` prints each span as JSON on stdout. ``OTEL_SERVICE_NAME`` and
    ``OTEL_RESOURCE_ATTRIBUTES`` name the process (default: ``service_name``),
    ``OTEL_TRACES_SAMPLER`` samples and ``OTEL_BSP_*`` batch, as the SDK reads
    them."""
    if "provider" in _configured:
        return _configured["provider"]
    exporters = check_tracing()
    if not exporters:
        return None
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    provider = TracerProvider(resource=resource)
    for name in exporters:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        elif name == "console":
            # Unbatched, one JSON object a line: each span is printed when it
            # ends, for debugging or a log collector.
            console = ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + "\n")
            provider.add_span_processor(SimpleSpanProcessor(console))
    trace.set_tracer_provider(provider)
    _configured["provider"] = provider
    log.info("tracing on", extra={"exporters": exporters})
    return provider
