"""The local stack's own logic, without starting any server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from devstack import java, procs, stack, versions
from devstack.cli import dev
from devstack.errors import DevstackError
from devstack.services import Kafka, Layout, port, port_is_free

ROOT = Path(__file__).resolve().parents[2]


def test_cli_imports_without_the_service_clients() -> None:
    code = (
        "import sys\n"
        "for name in ('confluent_kafka', 'neo4j', 'asyncpg', 'aiokafka'):\n"
        "    sys.modules[name] = None  # makes `import name` fail\n"
        "from devstack.cli import dev\n"
        "assert dev.name == 'dev'\n"
        "assert sorted(dev.commands) == ['down', 'env', 'logs', 'status', 'up']\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_redstring_cli_mounts_the_dev_group() -> None:
    assert dev.name == "dev"
    result = CliRunner().invoke(dev, ["--help"])
    assert result.exit_code == 0
    for command in ("up", "down", "status", "logs"):
        assert command in result.output


def test_export_lines_round_trip_through_the_env_file(tmp_path: Path) -> None:
    env = {
        "REDSTRING_KAFKA_BOOTSTRAP": "127.0.0.1:19092",
        "REDSTRING_NEO4J_PASSWORD": "a b'c$d",
        "REDSTRING_PG_DSN": "postgresql://postgres@127.0.0.1:15432/redstring",
    }
    stack.write_env_file(Layout(tmp_path), env)
    assert stack.read_env(tmp_path) == env
    assert (tmp_path / ".devstack" / "env").stat().st_mode & 0o077 == 0
    shell = subprocess.run(
        ["bash", "-c", f'source {tmp_path}/.devstack/env; printf %s "$REDSTRING_NEO4J_PASSWORD"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shell.stdout == "a b'c$d"


def test_kafka_config_is_loopback_kraft_without_auto_topic_creation(tmp_path: Path) -> None:
    import string

    template = (ROOT / "devstack" / "kafka-server.properties").read_text()
    text = string.Template(template).substitute(
        port=19092, controller_port=19093, log_dirs=tmp_path
    )
    config = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    assert config["process.roles"] == "broker,controller"
    assert config["auto.create.topics.enable"] == "false"
    assert config["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert config["group.initial.rebalance.delay.ms"] == "0"
    assert config["offsets.topic.replication.factor"] == "1"
    assert config["transaction.state.log.min.isr"] == "1"


def test_ports_can_be_overridden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(versions.PORT_ENV["kafka"], "29092")
    assert port("kafka") == 29092
    assert Kafka(Layout(Path("/nonexistent"))).env() == {
        "REDSTRING_KAFKA_BOOTSTRAP": "127.0.0.1:29092"
    }
    monkeypatch.setenv(versions.PORT_ENV["kafka"], "nope")
    with pytest.raises(DevstackError, match="not a port number"):
        port("kafka")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        number: int = probe.getsockname()[1]
        return number


def test_a_taken_port_is_reported_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = listener.getsockname()[1]
        assert not port_is_free(taken)
        # Other ports: free ones (the real stack may be running on the default ports).
        for name in ("kafka", "kafka_controller", "neo4j_bolt"):
            monkeypatch.setenv(versions.PORT_ENV[name], str(free_port()))
        monkeypatch.setenv(versions.PORT_ENV["postgres"], str(taken))
        result = CliRunner().invoke(dev, ["up", "--root", str(tmp_path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("redstring dev: error: port ")
    assert f"port {taken} on 127.0.0.1 (postgres) is already in use" in lines[-1]
    assert "Traceback" not in result.output


def test_no_java_17_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(java, "JVM_DIR", tmp_path / "no-jvms")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("REDSTRING_JAVA_HOME", raising=False)
    with pytest.raises(DevstackError, match=r"^no Java 17 or 21 JDK found"):
        java.find_jdk()


def test_java_25_alone_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "jdk-25"
    (home / "bin").mkdir(parents=True)
    (home / "release").write_text('JAVA_VERSION="25.0.1"\n')
    monkeypatch.setattr(java, "JVM_DIR", tmp_path / "no-jvms")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(DevstackError, match=r"found only Java 25"):
        java.find_jdk()


def test_maven_missing_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from devstack import maven

    monkeypatch.setenv("REDSTRING_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DevstackError, match=r"^Maven \(mvn\) is not on PATH"):
        maven.resolve_classpath("x-1", "kafka-pom.xml", {}, tmp_path)


def test_unresolvable_artifacts_are_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from devstack import maven

    fake = tmp_path / "bin" / "mvn"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\necho '[ERROR] Failed to execute goal on project kafka-runtime: "
        "Could not resolve dependencies'\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("REDSTRING_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(fake.parent))
    with pytest.raises(DevstackError) as raised:
        maven.resolve_classpath("kafka-9.9.9", "kafka-pom.xml", {}, tmp_path)
    message = str(raised.value)
    assert message.startswith("Maven could not resolve kafka-9.9.9: Failed to execute goal")
    assert "\n" not in message


def test_stop_signals_only_the_recorded_process(tmp_path: Path) -> None:
    proc, record = procs.spawn(
        "sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "s.log",
        cwd=tmp_path,
    )  # fmt: skip
    assert procs.is_alive(record)
    record.save(tmp_path / "s.json")
    assert procs.ProcessRecord.load(tmp_path / "s.json") == record
    # A record whose start time does not match (a reused pid) is never signalled.
    impostor = procs.ProcessRecord(
        service="sleeper", pid=proc.pid, start_time=record.start_time + 1, argv0="x", log=""
    )
    assert not procs.is_alive(impostor)
    assert procs.stop(impostor, signal.SIGTERM, timeout=1) == "not running"
    assert proc.poll() is None
    assert procs.stop(record, signal.SIGTERM, timeout=10) == "stopped"
    assert proc.wait(timeout=5) is not None
    assert not procs.is_alive(record)


def test_down_without_a_stack_is_a_no_op(tmp_path: Path) -> None:
    messages: list[str] = []
    stack.down(tmp_path, report=messages.append)
    assert messages == ["nothing to stop: no .devstack/ here"]
    assert not (tmp_path / ".devstack").exists()
    assert stack.running_services(tmp_path) == []
    assert os.listdir(tmp_path) == []
