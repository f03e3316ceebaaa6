"""Freezing a worker process (SIGSTOP: a long GC pause, a stopped VM) at the
moment it holds store locks, for the tests of docs/adr/0021-transaction-
bounds.md: stopped, looked at from the servers' side, and woken again at
once until one of its connections has a transaction open that holds locks.
"""

from __future__ import annotations

import asyncio
import random
import signal
from urllib.parse import urlsplit

import asyncpg
import psutil
from neo4j import AsyncGraphDatabase

from streams.settings import Settings
from tests.e2e.workers import WorkerProcess


async def holds_store_locks(worker: WorkerProcess, settings: Settings) -> bool:
    """Whether one of the worker's connections has a transaction open that
    holds locks: in Neo4j by its lock count, in Postgres by a transaction id
    (a row it wrote or took ``FOR UPDATE``). Matched by the worker's local
    ports, so the query's own connection never counts."""
    assert worker.proc is not None
    neo4j_port = urlsplit(settings.neo4j_uri).port
    dsn = settings.pg_dsn.get_secret_value()
    pg_port = urlsplit(dsn).port
    ports = {
        c.laddr.port
        for c in psutil.Process(worker.proc.pid).net_connections(kind="tcp")
        if c.raddr and c.raddr.port in (neo4j_port, pg_port)
    }
    auth = (settings.neo4j_user, settings.neo4j_password.get_secret_value())
    async with AsyncGraphDatabase.driver(settings.neo4j_uri, auth=auth) as driver:
        records, _, _ = await driver.execute_query(
            "SHOW TRANSACTIONS YIELD clientAddress, activeLockCount "
            "WHERE activeLockCount > 0 RETURN clientAddress",
            database_=settings.neo4j_database,
        )
    if any(int(r["clientAddress"].rsplit(":", 1)[1]) in ports for r in records):
        return True
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT client_port FROM pg_stat_activity WHERE backend_xid IS NOT NULL"
        )
    finally:
        await conn.close()
    return any(r["client_port"] in ports for r in rows)


async def freeze_inside_a_transaction(worker: WorkerProcess, settings: Settings) -> None:
    """SIGSTOP the worker at a moment it holds a store transaction with locks:
    stopped, looked at, and woken again at once until it does."""
    assert worker.proc is not None
    rng = random.Random(5)
    for _ in range(300):
        worker.proc.send_signal(signal.SIGSTOP)
        if await holds_store_locks(worker, settings):
            return
        worker.proc.send_signal(signal.SIGCONT)
        await asyncio.sleep(rng.uniform(0.0, 0.1))
    raise AssertionError(f"{worker.worker_id} was never seen inside a transaction")
