"""The JSON log lines (docs/adr/0018-json-logs.md): nested extras are JSON
objects, arrays, nulls and numbers, not Python reprs; the old field names stay;
inside a span a line carries its trace and span ids."""

from __future__ import annotations

import io
import json
import logging
import logging.config
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from streams.worker.logs import JsonFormatter, configure


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("redstring.test-logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)


def _read(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_nested_extras_are_json_values_not_reprs(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = lines
    logger.warning(
        "store call failed; retrying",
        extra={
            "partition": 3,
            "offset": 17,
            "tenant": "acmé",
            "offsets": {0: 5, 7: 12},
            "delay": None,
            "ratio": 0.5,
            "stalled": False,
            "properties": ["security.protocol", "sasl.mechanism"],
            "nested": {"topic": {"partitions": [1, 2]}, "by_tp": {("t", 1): 4}},
        },
    )
    (line,) = _read(stream)
    assert list(line)[:4] == ["ts", "level", "logger", "msg"]
    assert line["level"] == "warning" and line["logger"] == "redstring.test-logs"
    assert line["msg"] == "store call failed; retrying"
    assert line["ts"].endswith("+00:00")
    assert line["partition"] == 3 and line["offset"] == 17 and line["tenant"] == "acmé"
    assert line["offsets"] == {"0": 5, "7": 12}
    assert line["delay"] is None
    assert line["ratio"] == 0.5 and line["stalled"] is False
    assert line["properties"] == ["security.protocol", "sasl.mechanism"]
    assert line["nested"] == {"topic": {"partitions": [1, 2]}, "by_tp": {"('t', 1)": 4}}
    assert "trace_id" not in line and "span_id" not in line
    assert "acmé" in stream.getvalue()  # UTF-8, not \\u escapes


def test_a_traceback_is_under_exc(lines: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = lines
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed", extra={"partition": 1})
    (line,) = _read(stream)
    assert line["level"] == "error" and line["partition"] == 1
    assert "ValueError: boom" in line["exc"]


def test_inside_a_span_a_line_carries_the_trace_and_span_ids(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = lines
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("batch") as span:
        logger.info("sought back", extra={"partition": 2, "offset": 9})
        context = span.get_span_context()
    logger.info("after the span")
    inside, after = _read(stream)
    assert inside["trace_id"] == format(context.trace_id, "032x")
    assert inside["span_id"] == format(context.span_id, "016x")
    assert len(inside["trace_id"]) == 32 and len(inside["span_id"]) == 16
    assert "trace_id" not in after


def test_the_dict_config_writes_json_lines_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    logging.config.dictConfig(configure("info"))
    try:
        logging.getLogger("redstring.test-config").info("hello", extra={"offsets": {1: 2}})
        err = capsys.readouterr().err.splitlines()
    finally:
        root.handlers[:] = saved[1]
        root.setLevel(saved[0])
    (line,) = [json.loads(text) for text in err if "hello" in text]
    assert line["offsets"] == {"1": 2}
