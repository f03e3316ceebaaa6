"""A command that cannot reach Kafka ends in one line saying so, not a traceback."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from streams.cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_reading_dead_letters_without_a_broker_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bootstrap = f"127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("REDSTRING_KAFKA_BOOTSTRAP", bootstrap)
    result = CliRunner().invoke(main, ["dlq", "list"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: could not read redstring.events.dlq on {bootstrap}")
    assert result.exception is None or isinstance(result.exception, SystemExit)
