"""pytest plugin: real Kafka, Neo4j and Postgres+pgvector for tests that ask for them.

Where the services come from, in order:

1. explicit endpoints: ``REDSTRING_KAFKA_BOOTSTRAP``, ``REDSTRING_NEO4J_URI`` and
   ``REDSTRING_PG_DSN`` all set (``REDSTRING_NEO4J_USER``/``REDSTRING_NEO4J_PASSWORD``
   default to ``neo4j``/empty);
2. testcontainers, when a Docker engine answers ``docker info``: docker-compose.yml
   is brought up through ``testcontainers.compose``;
3. otherwise the local stack (devstack), started once per session and only if a
   selected test uses a service fixture (so ``pytest -m "not services"`` starts
   nothing): in the background as soon as collection is done, while the tests
   that need no services run. It is stopped at the end of the session (pass or
   fail) unless ``REDSTRING_KEEP_STACK=1`` or it was already running before.

``REDSTRING_TEST_STACK=env|docker|local`` forces one of the three.

Fixtures: ``stack_env`` (dict of the REDSTRING_* endpoints), ``kafka_bootstrap``,
``neo4j_config``, ``pg_dsn`` (session scope); ``stack_environ`` (``stack_env``, also
set as environment variables for one test); ``unique_name`` (a function making
``<prefix>-<8 hex>`` names), ``tenant_id`` and ``topic_name`` (fresh per test).
A test that uses a service fixture is marked ``services`` automatically.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVICE_FIXTURES = frozenset(
    {"stack_env", "stack_environ", "kafka_bootstrap", "neo4j_config", "pg_dsn"}
)
REQUIRED_ENV = ("REDSTRING_KAFKA_BOOTSTRAP", "REDSTRING_NEO4J_URI", "REDSTRING_PG_DSN")
ALL_ENV = (*REQUIRED_ENV, "REDSTRING_NEO4J_USER", "REDSTRING_NEO4J_PASSWORD")
# The store services of docker-compose.yml; its workers are not started for tests.
COMPOSE_STORE_SERVICES = ("kafka", "neo4j", "postgres")
# The endpoints docker-compose.yml publishes (kept in step by tests/unit/test_docker_compose.py).
COMPOSE_ENV = {
    "REDSTRING_KAFKA_BOOTSTRAP": "127.0.0.1:19092",
    "REDSTRING_NEO4J_URI": "bolt://127.0.0.1:17687",
    "REDSTRING_NEO4J_USER": "neo4j",
    "REDSTRING_NEO4J_PASSWORD": "redstring-dev-password",
    "REDSTRING_PG_DSN": "postgresql://postgres:postgres@127.0.0.1:15432/redstring",
}


@dataclass(frozen=True)
class Neo4jConfig:
    uri: str
    user: str
    password: str

    @property
    def auth(self) -> tuple[str, str]:
        return (self.user, self.password)


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _docker_reachable() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        done = subprocess.run([docker, "info"], capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


class _Provider:
    """Provides the endpoints once per session and cleans up what it started.

    ``start_in_background`` begins the work in a thread as soon as collection
    shows that a selected test needs services, so that the servers start while
    the tests that need none run; ``get`` waits for it.
    """

    def __init__(self) -> None:
        self.env: dict[str, str] | None = None
        self.source = ""
        self._teardown: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start_in_background(self) -> None:
        if self._thread is None and self.env is None:
            self._thread = threading.Thread(
                target=self._get_capturing, name="redstring-stack", daemon=True
            )
            self._thread.start()

    def _get_capturing(self) -> None:
        try:
            self.get()
        except BaseException as error:  # pytest.exit/UsageError: re-raised by get()
            self._error = error

    def get(self) -> dict[str, str]:
        with self._lock:
            if self._error is not None:
                raise self._error
            if self.env is None:
                self.env = self._provide()
            return self.env

    def _provide(self) -> dict[str, str]:
        forced = os.environ.get("REDSTRING_TEST_STACK", "").strip().lower()
        if forced not in {"", "env", "docker", "local"}:
            raise pytest.UsageError("REDSTRING_TEST_STACK must be env, docker or local")
        explicit = {k: os.environ[k] for k in ALL_ENV if os.environ.get(k)}
        if forced == "env" or (not forced and all(k in explicit for k in REQUIRED_ENV)):
            missing = [k for k in REQUIRED_ENV if k not in explicit]
            if missing:
                raise pytest.UsageError(f"REDSTRING_TEST_STACK=env but {missing} not set")
            explicit.setdefault("REDSTRING_NEO4J_USER", "neo4j")
            explicit.setdefault("REDSTRING_NEO4J_PASSWORD", "")
            self.source = "env"
            return explicit
        if forced == "docker" or (not forced and _docker_reachable()):
            return self._docker()
        return self._local()

    def _docker(self) -> dict[str, str]:
        try:
            from testcontainers.compose import DockerCompose  # type: ignore[import-not-found]
        except ImportError:
            raise pytest.UsageError(
                "a Docker engine is reachable but the testcontainers package is missing: "
                "pip install 'testcontainers>=4', or run the local stack with "
                "REDSTRING_TEST_STACK=local"
            ) from None
        compose = DockerCompose(
            str(ROOT),
            compose_file_name="docker-compose.yml",
            wait=True,
            services=list(COMPOSE_STORE_SERVICES),
        )
        compose.start()
        if not _truthy("REDSTRING_KEEP_STACK"):
            self._teardown.append(compose.stop)
        self.source = "docker"
        return dict(COMPOSE_ENV)

    def _local(self) -> dict[str, str]:
        from devstack import stack
        from devstack.errors import DevstackError

        before = set(stack.running_services(ROOT))
        try:
            env = stack.ensure_up(ROOT)
        except DevstackError as error:
            pytest.exit(f"the local stack did not start: {error}", returncode=3)
        started = [name for name in stack.SERVICE_NAMES if name not in before]
        if started and not _truthy("REDSTRING_KEEP_STACK"):
            self._teardown.append(lambda: stack.down(ROOT, services=started))
        self.source = "local"
        return env

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join()
        while self._teardown:
            self._teardown.pop()()


_provider = _Provider()


def stack_source() -> str:
    """Where the running services came from: ``env`` (endpoints given in
    REDSTRING_*), ``docker`` (docker-compose.yml) or ``local`` (devstack)."""
    return _provider.source


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses a service fixture as `services`, so that
    ``-m "not services"`` deselects it even if the author forgot the marker."""
    for item in items:
        if SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)


def pytest_collection_finish(session: pytest.Session) -> None:
    """After selection (``-m``, ``-k``): start the services early if a test will need them."""
    if session.config.option.collectonly:
        return
    if any(SERVICE_FIXTURES & set(getattr(i, "fixturenames", ())) for i in session.items):
        _provider.start_in_background()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _provider.close()


@pytest.fixture(scope="session")
def stack_env() -> Iterator[dict[str, str]]:
    """The REDSTRING_* endpoints of the running services (starts them on first use)."""
    yield dict(_provider.get())


@pytest.fixture
def stack_environ(stack_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Like ``stack_env``, and also sets the REDSTRING_* variables for this one test
    (for code under test that reads its settings from the environment)."""
    for key, value in stack_env.items():
        monkeypatch.setenv(key, value)
    return stack_env


@pytest.fixture(scope="session")
def kafka_bootstrap(stack_env: dict[str, str]) -> str:
    return stack_env["REDSTRING_KAFKA_BOOTSTRAP"]


@pytest.fixture(scope="session")
def neo4j_config(stack_env: dict[str, str]) -> Neo4jConfig:
    return Neo4jConfig(
        uri=stack_env["REDSTRING_NEO4J_URI"],
        user=stack_env.get("REDSTRING_NEO4J_USER", "neo4j"),
        password=stack_env.get("REDSTRING_NEO4J_PASSWORD", ""),
    )


@pytest.fixture(scope="session")
def pg_dsn(stack_env: dict[str, str]) -> str:
    return stack_env["REDSTRING_PG_DSN"]


def make_unique_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def unique_name() -> Callable[..., str]:
    """``unique_name("topic")`` -> ``"topic-1a2b3c4d"``; default prefix ``t``."""
    return make_unique_name


@pytest.fixture
def tenant_id() -> str:
    """A tenant id no other test uses: ``t-<8 hex>``."""
    return make_unique_name("t")


@pytest.fixture
def topic_name() -> str:
    """A Kafka topic name no other test uses (create it yourself: auto-creation is off)."""
    return make_unique_name("topic")
