"""``python -m devstack.demo``: shows that the three services of the stack answer.

Reads the endpoints from the REDSTRING_* environment variables, else from the
``.devstack/env`` that ``redstring dev up`` wrote (so it also works against
docker-compose.yml with the variables exported). A placeholder: the end-to-end
demo of the projection will replace its body.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from devstack import stack
from devstack.stack import ENV_NAMES


def endpoints() -> dict[str, str]:
    env = stack.read_env()
    env.update({k: os.environ[k] for k in ENV_NAMES if os.environ.get(k)})
    missing = [k for k in ENV_NAMES if k not in env]
    if missing:
        raise SystemExit(
            f"demo: {', '.join(missing)} not set: run `redstring dev up` (or export them)"
        )
    return env


def kafka(env: dict[str, str]) -> str:
    from confluent_kafka.admin import AdminClient

    config: dict[str, Any] = {"bootstrap.servers": env["REDSTRING_KAFKA_BOOTSTRAP"]}
    admin = AdminClient(config)  # kept referenced until the future resolves
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=15)
    brokers = ", ".join(f"{n.id}@{n.host}:{n.port}" for n in cluster.nodes)
    return f"cluster id {cluster.cluster_id}, controller {cluster.controller.id}, brokers {brokers}"


def neo4j(env: dict[str, str]) -> str:
    from neo4j import GraphDatabase

    auth = (env["REDSTRING_NEO4J_USER"], env["REDSTRING_NEO4J_PASSWORD"])
    with GraphDatabase.driver(env["REDSTRING_NEO4J_URI"], auth=auth) as driver:
        records, _, _ = driver.execute_query(
            "CALL dbms.components() YIELD name, versions, edition "
            "RETURN name, versions[0] AS version, edition"
        )
    row = records[0]
    return f"{row['name']} {row['version']} {row['edition']} at {env['REDSTRING_NEO4J_URI']}"


def postgres(env: dict[str, str]) -> str:
    import asyncpg
    from pgvector.asyncpg import register_vector

    async def query() -> str:
        conn = await asyncpg.connect(env["REDSTRING_PG_DSN"])
        try:
            await register_vector(conn)
            version = await conn.fetchval("SHOW server_version")
            vector = await conn.fetchval(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            )
            distance = await conn.fetchval("SELECT $1::vector <=> $2::vector", [1, 0], [1, 1])
        finally:
            await conn.close()
        return (
            f"PostgreSQL {version}, pgvector {vector} "
            f"(cosine distance [1,0]<=>[1,1] = {distance:.4f})"
        )

    return asyncio.run(query())


def main() -> int:
    env = endpoints()
    failed = False
    for name, probe in (("Kafka", kafka), ("Neo4j", neo4j), ("Postgres", postgres)):
        try:
            print(f"{name:<9} {probe(env)}", flush=True)
        except Exception as error:
            failed = True
            print(f"{name:<9} FAILED: {type(error).__name__}: {error}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
