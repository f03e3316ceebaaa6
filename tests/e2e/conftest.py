"""Fixtures of the end-to-end layer: real Kafka, worker processes, both stores.

The stack is shared (other tests, other engineers' runs), so nothing here
wipes a store: each session works in its own Postgres schema (dropped at the
end), every test gets its own topic and consumer group (deleted at the end)
and tenant ids no one else uses; the session's Neo4j nodes are deleted by
tenant and topic prefix at the end.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from streams.kafka.topics import admin_client, create_topics, describe_topic
from streams.settings import Settings
from streams.wiring import Stores, open_stores
from tests.e2e.workers import WorkerProcess, caught_up

SESSION = uuid.uuid4().hex[:6]
#: Every tenant id of this session starts with this; every topic with TOPIC_PREFIX.
TENANT_PREFIX = f"e{SESSION}-"
TOPIC_PREFIX = f"e2e-{SESSION}-"
PG_SCHEMA = f"e2e_{SESSION}"
CONTROL_KEY = "e2e-control-key"
PARTITIONS = 3

_NEO4J_CLEANUP = [
    "MATCH (n:Entity) WHERE n.tenant_id STARTS WITH $tenants "
    "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS",
    "MATCH (n:AliasId) WHERE n.tenant_id STARTS WITH $tenants "
    "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS",
    "MATCH (n:AppliedEvent) WHERE n.tenant_id STARTS WITH $tenants "
    "CALL (n) { DELETE n } IN TRANSACTIONS OF 5000 ROWS",
    "MATCH (n:RebuildMarker) WHERE n.tenant_id STARTS WITH $tenants DELETE n",
    "MATCH (n:ErasureTombstone) WHERE n.tenant_id STARTS WITH $tenants DELETE n",
    "MATCH (n:ControlEvent) WHERE n.tenant_id STARTS WITH $tenants DELETE n",
    "MATCH (n:Checkpoint) WHERE n.topic STARTS WITH $topics DELETE n",
]

#: Every setting's variable (the endpoints, and the Kafka security settings of
#: a deployment on a secured listener).
_FIELDS = {f"REDSTRING_{name.upper()}": name for name in Settings.model_fields}


@pytest.fixture(scope="session")
def e2e_env(stack_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """The stack's endpoints plus what every e2e worker shares."""
    env = {
        **stack_env,
        "REDSTRING_PG_SCHEMA": PG_SCHEMA,
        "REDSTRING_CONTROL_KEY": CONTROL_KEY,
        "REDSTRING_SESSION_TIMEOUT_S": "6",
        "REDSTRING_LOG_LEVEL": "INFO",
    }
    yield env
    asyncio.run(_cleanup(env))


async def _cleanup(env: dict[str, str]) -> None:
    import asyncpg

    conn = await asyncpg.connect(env["REDSTRING_PG_DSN"])
    try:
        schemas = await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1", f"{PG_SCHEMA}%"
        )
        for row in schemas:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{row["nspname"]}" CASCADE')
    finally:
        await conn.close()
    await wipe_neo4j(env, TENANT_PREFIX, TOPIC_PREFIX)


async def wipe_neo4j(env: dict[str, str], tenants: str, topics: str) -> None:
    """Delete every node of the tenants and topics with these prefixes: tenant
    data, applied ids, acted-on control events, markers, tombstones and checkpoints."""
    from neo4j import AsyncGraphDatabase

    auth = (env.get("REDSTRING_NEO4J_USER", "neo4j"), env.get("REDSTRING_NEO4J_PASSWORD", ""))
    async with AsyncGraphDatabase.driver(env["REDSTRING_NEO4J_URI"], auth=auth) as driver:
        for statement in _NEO4J_CLEANUP:
            async with driver.session() as session:
                result = await session.run(statement, tenants=tenants, topics=topics)
                await result.consume()


def settings_for(env: dict[str, str], **overrides: Any) -> Settings:
    """Settings from an env dict (never from this process's environment)."""
    values: dict[str, Any] = {field: env[key] for key, field in _FIELDS.items() if key in env}
    prefix = "REDSTRING_KAFKA__"
    values["kafka"] = {k[len(prefix) :].lower(): v for k, v in env.items() if k.startswith(prefix)}
    values.update(
        pg_schema=env["REDSTRING_PG_SCHEMA"],
        control_key=env["REDSTRING_CONTROL_KEY"],
        topic=env.get("REDSTRING_TOPIC", "unset"),
        group_id=env.get("REDSTRING_GROUP_ID", "unset"),
    )
    values.update(overrides)
    return Settings(**values)


@dataclass
class Deployment:
    """One test's topic, group, workers and store handles."""

    env: dict[str, str]
    settings: Settings
    topic_id: str
    log_dir: Path
    tenant_prefix: str
    partitions: int = PARTITIONS
    workers: dict[str, WorkerProcess] = field(default_factory=dict)

    def tenant(self, name: str) -> str:
        return f"{self.tenant_prefix}{name}"

    def worker(self, worker_id: str = "w1", **env: str) -> WorkerProcess:
        """A worker of this deployment's group (not started)."""
        process = WorkerProcess({**self.env, **env}, self.log_dir, worker_id)
        self.workers[worker_id] = process
        return process

    async def caught_up(self, stores: Stores, **kw: Any) -> dict[str, dict[int, int]]:
        """``tests.e2e.workers.caught_up`` on this deployment's topic (its
        workers' logs are shown on failure unless ``workers=`` says otherwise)."""
        kw.setdefault("workers", self.workers)
        return await caught_up(self.settings, stores, self.topic_id, self.partitions, **kw)

    def command_env(self, **env: str) -> dict[str, str]:
        """The environment a `redstring` command of this deployment runs with."""
        return {**self.env, **env}

    def cli(self, *args: str, **env: str) -> asyncio.Task[tuple[int, str]]:
        """Run ``redstring ARGS`` as a subprocess of this deployment; the task
        resolves to (exit status, stdout and stderr)."""
        return asyncio.ensure_future(run_cli(self.command_env(**env), *args))


async def run_cli(env: dict[str, str], *args: str) -> tuple[int, str]:
    """Run ``redstring ARGS`` as a subprocess with ``env`` over this process's
    environment: (exit status, stdout and stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "streams",
        *args,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=600)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


@contextmanager
def deployed(e2e_env: dict[str, str], log_dir: Path) -> Iterator[Deployment]:
    """A fresh topic (3 partitions) and group; its workers are stopped and the
    topic deleted on the way out."""
    name = uuid.uuid4().hex[:8]
    topic = f"{TOPIC_PREFIX}{name}"
    env = {**e2e_env, "REDSTRING_TOPIC": topic, "REDSTRING_GROUP_ID": f"{topic}-group"}
    settings = settings_for(env, partitions=PARTITIONS)
    create_topics(settings)
    info = describe_topic(settings)
    deployment = Deployment(env, settings, info.topic_id, log_dir, f"{TENANT_PREFIX}{name}-")
    try:
        yield deployment
    finally:
        for worker in deployment.workers.values():
            worker.close()
        admin_client(settings).delete_topics([settings.topic, settings.dlq_topic])


@pytest.fixture
def deployment(e2e_env: dict[str, str], tmp_path: Path) -> Iterator[Deployment]:
    with deployed(e2e_env, tmp_path) as deployment:
        yield deployment


@pytest.fixture
async def stores(deployment: Deployment) -> AsyncIterator[Stores]:
    """Both real stores, opened as the workers open them (for reading)."""
    opened = await open_stores(deployment.settings)
    try:
        yield opened
    finally:
        await opened.aclose()
