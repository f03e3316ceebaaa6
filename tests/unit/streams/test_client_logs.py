"""librdkafka's own log lines go through Python logging (the ``librdkafka``
logger), never raw onto stderr as ``%3|...|FAIL|...``; the CLI keeps them quiet
unless -v."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from streams.cli import main
from streams.kafka.config import CLIENT_LOG, librdkafka_config
from streams.settings import Settings

#: Nothing listens here: the client logs a connection failure at once.
NOWHERE = "127.0.0.1:1"


@pytest.fixture(autouse=True)
def restored_logging() -> Iterator[None]:
    """The CLI sets levels and handlers for its process (any earlier test that
    ran a command left the client quiet): start from none, put them back."""
    root = logging.getLogger()
    level, handlers, client_level = root.level, list(root.handlers), CLIENT_LOG.level
    CLIENT_LOG.setLevel(logging.NOTSET)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers
    CLIENT_LOG.setLevel(client_level)


def test_a_client_logs_through_python_logging_not_onto_stderr(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=CLIENT_LOG.name)
    producer = Producer(librdkafka_config(Settings(kafka_bootstrap=NOWHERE)))
    deadline = time.monotonic() + 10
    while not caplog.records and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.flush(0)
    failures = [r for r in caplog.records if r.name == "librdkafka"]
    assert failures and failures[0].levelno == logging.ERROR
    assert "FAIL" in failures[0].getMessage() and NOWHERE in failures[0].getMessage()
    # librdkafka writes its default lines to fd 2 itself, past sys.stderr.
    assert "|FAIL|" not in capfd.readouterr().err


def test_the_client_log_level_follows_the_logger() -> None:
    settings = Settings(kafka_bootstrap=NOWHERE)
    CLIENT_LOG.setLevel(logging.WARNING)
    assert librdkafka_config(settings)["log_level"] == 4
    CLIENT_LOG.setLevel(logging.DEBUG)
    assert librdkafka_config(settings)["log_level"] == 7


@pytest.mark.parametrize(
    ("flags", "client_shows"),
    [((), logging.CRITICAL), (("-v",), logging.INFO), (("-vv",), logging.DEBUG)],
)
def test_the_cli_is_quiet_unless_verbose(
    tmp_path: Path, flags: tuple[str, ...], client_shows: int
) -> None:
    CLIENT_LOG.setLevel(logging.NOTSET)
    logging.getLogger().handlers.clear()
    events = tmp_path / "events.jsonl"
    events.write_text("")
    result = CliRunner().invoke(main, [*flags, "fold", str(events)])
    assert result.exit_code == 0, result.output
    assert CLIENT_LOG.getEffectiveLevel() == client_shows


def test_the_services_keep_their_own_logging() -> None:
    """`worker` and `serve` configure JSON logs themselves (streams.worker.logs):
    the CLI's quiet must not silence the client's lines in them."""
    from streams.cli.main import SERVICES

    assert {"worker", "serve"} <= SERVICES
    CLIENT_LOG.setLevel(logging.NOTSET)
    CliRunner().invoke(main, ["worker", "--help"])
    assert CLIENT_LOG.level == logging.NOTSET


def test_in_the_worker_the_client_lines_are_json(capfd: pytest.CaptureFixture[str]) -> None:
    import json
    import logging.config

    from streams.worker.logs import configure

    logging.config.dictConfig(configure("WARNING"))
    producer = Producer(librdkafka_config(Settings(kafka_bootstrap=NOWHERE)))
    deadline = time.monotonic() + 10
    lines: list[dict[str, object]] = []
    while not lines and time.monotonic() < deadline:
        producer.poll(0.1)
        lines += [json.loads(x) for x in capfd.readouterr().err.splitlines() if x.strip()]
    producer.flush(0)
    assert lines and {line["logger"] for line in lines} == {"librdkafka"}
    assert str(lines[0]["level"]).lower() == "error" and "FAIL" in str(lines[0]["msg"])
