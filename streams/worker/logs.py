"""JSON logs: one object per line (python-json-logger, docs/adr/0018-json-logs.md),
with tenant, partition and offset when a record carries them (pass them in
``extra=``), and ``trace_id``/``span_id`` inside a span (when tracing is on;
docs/operations.md, "Logs" and "Traces").

Extras keep their JSON types: a mapping is an object, ``None`` is null, a
number is a number, so that Loki or ELK can query ``offsets.0`` or
``delay > 1``. The library's encoder writes a datetime in ISO 8601, a
dataclass as an object, and anything else JSON has no type for as its ``str``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter as _LibraryFormatter

#: The record attributes every line starts with, under the names the lines
#: have always used (dashboards and tests query them).
_RENAMED = {"levelname": "level", "name": "logger", "message": "msg", "exc_info": "exc"}


def _keys_as_text(value: Any) -> Any:
    """JSON object keys must be strings: a mapping keyed by a partition number
    keeps it as ``"0"``; one keyed by a tuple (a Kafka topic-partition) gets
    its ``str`` rather than failing the line."""
    if isinstance(value, Mapping):
        return {
            key if isinstance(key, str | int | float | bool) or key is None else str(key): (
                _keys_as_text(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_keys_as_text(item) for item in value]
    return value


class JsonFormatter(_LibraryFormatter):
    def __init__(self) -> None:
        super().__init__(
            ["levelname", "name", "message"],
            rename_fields=_RENAMED,
            timestamp="ts",
            json_ensure_ascii=False,
        )

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        ts = log_data.pop("ts")
        line: dict[str, Any] = {
            "ts": ts.isoformat(),
            "level": str(log_data.pop("level")).lower(),
            "logger": log_data.pop("logger"),
            "msg": log_data.pop("msg"),
        }
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            line["trace_id"] = format(context.trace_id, "032x")
            line["span_id"] = format(context.span_id, "016x")
        for key, value in log_data.items():
            line[key] = _keys_as_text(value)
        return line


def configure(level: str) -> dict[str, object]:
    """A logging config (dictConfig form) that writes JSON lines to stderr."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {"aiokafka": {"level": "WARNING"}, "faust": {"level": "WARNING"}},
    }
