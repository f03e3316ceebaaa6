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


def kafka_config(tmp_path: Path) -> dict[str, str]:
    """The rendered server.properties of a Kafka under ``tmp_path``, as a dict."""
    kafka = Kafka(Layout(tmp_path))
    kafka.home.mkdir(parents=True)
    kafka.sasl_password_file.write_text("s3cret-Pw_1\n")
    text = kafka.render_config(tmp_path / "data")
    return dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )


def test_kafka_config_is_loopback_kraft_without_auto_topic_creation(tmp_path: Path) -> None:
    config = kafka_config(tmp_path)
    assert config["process.roles"] == "broker,controller"
    assert config["auto.create.topics.enable"] == "false"
    # PLAINTEXT stays the first listener, what everything uses, and the brokers' own.
    assert config["listeners"].startswith(
        "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093,"
    )
    assert config["advertised.listeners"].startswith("PLAINTEXT://127.0.0.1:19092,")
    assert config["inter.broker.listener.name"] == "PLAINTEXT"
    assert config["controller.listener.names"] == "CONTROLLER"
    assert config["log.dirs"] == str(tmp_path / "data")
    assert config["group.initial.rebalance.delay.ms"] == "0"
    assert config["offsets.topic.replication.factor"] == "1"
    assert config["transaction.state.log.min.isr"] == "1"


def test_kafka_has_the_secured_listeners_next_to_plaintext(tmp_path: Path) -> None:
    config = kafka_config(tmp_path)
    expected = {
        "PLAINTEXT": ("PLAINTEXT", 19092),
        "CONTROLLER": ("PLAINTEXT", 19093),
        "SSL": ("SSL", 19094),
        "MTLS": ("SSL", 19095),
        "SASL_SSL": ("SASL_SSL", 19096),
        "SASL_PLAINTEXT": ("SASL_PLAINTEXT", 19097),
    }
    protocols = dict(
        pair.split(":") for pair in config["listener.security.protocol.map"].split(",")
    )
    listeners = dict(entry.split("://") for entry in config["listeners"].split(","))
    advertised = dict(entry.split("://") for entry in config["advertised.listeners"].split(","))
    assert protocols == {name: protocol for name, (protocol, _) in expected.items()}
    assert listeners == {name: f"127.0.0.1:{number}" for name, (_, number) in expected.items()}
    assert advertised == {k: v for k, v in listeners.items() if k != "CONTROLLER"}
    assert {name: versions.PORTS[key] for name, key in Kafka.secured_listeners.items()} == {
        name: number for name, (_, number) in expected.items() if name in Kafka.secured_listeners
    }
    assert len(set(versions.PORTS.values())) == len(versions.PORTS)

    # TLS from PEM files in .devstack/kafka/tls (no keytool); only MTLS requires a client cert.
    tls_dir = tmp_path / ".devstack" / "kafka" / "tls"
    assert config["ssl.keystore.type"] == config["ssl.truststore.type"] == "PEM"
    assert config["ssl.keystore.location"] == str(tls_dir / "server.pem")
    assert config["ssl.truststore.location"] == str(tls_dir / "ca.pem")
    assert config["listener.name.mtls.ssl.client.auth"] == "required"
    assert config["listener.name.ssl.ssl.client.auth"] == "none"
    assert config["listener.name.sasl_ssl.ssl.client.auth"] == "none"
    assert "ssl.client.auth" not in config

    # SASL: the four mechanisms on both SASL listeners, each with its JAAS login module.
    mechanisms = ",".join(versions.KAFKA_SASL_MECHANISMS)
    assert mechanisms == "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER"
    for listener in ("sasl_ssl", "sasl_plaintext"):
        prefix = f"listener.name.{listener}."
        assert config[prefix + "sasl.enabled.mechanisms"] == mechanisms
        for scram in ("scram-sha-256", "scram-sha-512"):
            assert config[f"{prefix}{scram}.sasl.jaas.config"] == (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
        assert config[prefix + "plain.sasl.jaas.config"] == (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'user_redstring="s3cret-Pw_1";'
        )
        # OAUTHBEARER (tests only): unsigned JWTs, checked by Kafka's unsecured validator;
        # the login module's unsecured token is the broker's own, never sent (no SASL
        # between brokers), but Kafka logs it in at start, so it needs a sub.
        assert config[prefix + "oauthbearer.sasl.jaas.config"] == (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="redstring";'
        )
        assert config[prefix + "oauthbearer.sasl.server.callback.handler.class"] == (
            "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
            "OAuthBearerUnsecuredValidatorCallbackHandler"
        )
    assert Kafka.scram_mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert not any(key.startswith("sasl.") for key in config)  # none outside the listeners
    assert "sasl.enabled.mechanisms" not in config  # nothing SASL for PLAINTEXT or CONTROLLER


def test_kafka_env_adds_only_devstack_variables(tmp_path: Path) -> None:
    kafka = Kafka(Layout(tmp_path))
    with pytest.raises(DevstackError, match="sasl-password is missing"):
        kafka.env()
    kafka.home.mkdir(parents=True)
    kafka.sasl_password_file.write_text("pw\n")
    tls_dir = tmp_path / ".devstack" / "kafka" / "tls"
    assert kafka.env() == {
        "REDSTRING_KAFKA_BOOTSTRAP": "127.0.0.1:19092",
        "DEVSTACK_KAFKA_SSL_BOOTSTRAP": "127.0.0.1:19094",
        "DEVSTACK_KAFKA_MTLS_BOOTSTRAP": "127.0.0.1:19095",
        "DEVSTACK_KAFKA_SASL_SSL_BOOTSTRAP": "127.0.0.1:19096",
        "DEVSTACK_KAFKA_SASL_PLAINTEXT_BOOTSTRAP": "127.0.0.1:19097",
        "DEVSTACK_KAFKA_CA_FILE": str(tls_dir / "ca.pem"),
        "DEVSTACK_KAFKA_CLIENT_CERT_FILE": str(tls_dir / "client.pem"),
        "DEVSTACK_KAFKA_CLIENT_KEY_FILE": str(tls_dir / "client.key"),
        "DEVSTACK_KAFKA_SASL_USERNAME": "redstring",
        "DEVSTACK_KAFKA_SASL_PASSWORD": "pw",
    }


def test_the_throwaway_ca_is_made_once_and_serves_tls_with_client_auth(tmp_path: Path) -> None:
    import ssl
    import threading

    from cryptography import x509

    from devstack import tls

    files = tls.ensure(tmp_path / "tls")
    first = {path: path.read_bytes() for path in files.all()}
    for secret in (files.server_keystore, files.client_key):
        assert secret.stat().st_mode & 0o077 == 0
        assert secret.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, clear
    assert sorted(p.name for p in (tmp_path / "tls").iterdir()) == sorted(
        p.name for p in files.all()
    )
    server = x509.load_pem_x509_certificates(files.server_keystore.read_bytes())[0]
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]

    # Reused as they are; a missing file makes a whole new set (the CA key is not kept).
    assert tls.ensure(tmp_path / "tls") == files
    assert {path: path.read_bytes() for path in files.all()} == first
    files.client_key.unlink()
    tls.ensure(tmp_path / "tls")
    assert all(path.read_bytes() != first[path] for path in files.all())

    # A TLS handshake with the files as Kafka and librdkafka use them: the client
    # checks the server against the CA and 127.0.0.1, the server requires the client's.
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(files.server_keystore)
    server_side.load_verify_locations(files.ca_cert)
    server_side.verify_mode = ssl.CERT_REQUIRED
    client_side = ssl.create_default_context(cafile=str(files.ca_cert))
    client_side.load_cert_chain(files.client_cert, files.client_key)
    peer: list[dict[str, object]] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def accept() -> None:
            conn, _ = listener.accept()
            with server_side.wrap_socket(conn, server_side=True) as tls_conn:
                peer.append(tls_conn.getpeercert() or {})
                tls_conn.sendall(b"ok")

        thread = threading.Thread(target=accept)
        thread.start()
        with (
            socket.create_connection(listener.getsockname(), timeout=10) as raw,
            client_side.wrap_socket(raw, server_hostname="127.0.0.1") as conn,
        ):
            assert conn.recv(2) == b"ok"
        thread.join(timeout=10)
    assert peer and (("commonName", "redstring"),) in peer[0]["subject"]  # type: ignore[operator]


def test_ports_can_be_overridden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(versions.PORT_ENV["kafka"], "29092")
    monkeypatch.setenv(versions.PORT_ENV["kafka_sasl_ssl"], "29096")
    assert port("kafka") == 29092
    assert Kafka(Layout(Path("/nonexistent"))).bootstrap == "127.0.0.1:29092"
    assert port("kafka_sasl_ssl") == 29096
    assert versions.PORT_ENV["kafka_sasl_ssl"] == "REDSTRING_DEVSTACK_KAFKA_SASL_SSL_PORT"
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
        for name in versions.PORTS.keys() - {"postgres"}:
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
