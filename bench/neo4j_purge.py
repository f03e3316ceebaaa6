"""What a tenant purge costs Neo4j, by the store's statements and by the two
single-statement alternatives, on one synthetic tenant rebuilt before each:
``python -m bench.neo4j_purge``.

    python -m bench.neo4j_purge [--entities 40000] [--relationships 60000] [--rounds 2]

Needs the local stack (``python -m devstack up``; the REDSTRING_NEO4J_*
variables of ``.devstack/env``). The sides, in rotated order each round:

- ``store``: ``Neo4jGraphStore.delete_by_tenant`` (edges first from an entity
  cursor, then entities and aliases in batches, then the count that proves
  the sweep; adapters/neo4j/view.py);
- ``detach``: one ``DETACH DELETE`` of the tenant's entities ``IN
  TRANSACTIONS`` of 5,000 rows (no proof of the sweep);
- ``edges first``: the edges ``IN TRANSACTIONS``, then the entities.

The tenant is ``--entities`` entities with a few properties each and
``--relationships`` edges between them (each with its tenant id, as the fold
writes them). Seconds per side and each side's ratio to ``store``: whether the
purge's time is its statements or Neo4j's own delete rate (docs/performance.md,
"Tenant purge").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import LiteralString

from neo4j import AsyncDriver, AsyncGraphDatabase

from contracts.ids import TenantId
from streams.settings import Settings
from streams.wiring import open_stores

TENANT = TenantId("bench-purge")

LOAD_ENTITIES: LiteralString = """
UNWIND range(0, $n - 1) AS i
CALL (i) {
  CREATE (:Entity {tenant_id: $tenant, id: 'e' + toString(i), order_key: i,
                   name: 'entity ' + toString(i), type: 'Person', note: 'a property', rank: i * 3})
} IN TRANSACTIONS OF 10000 ROWS
"""

LOAD_RELATIONSHIPS: LiteralString = """
UNWIND range(0, $n - 1) AS i
CALL (i) {
  MATCH (a:Entity {tenant_id: $tenant, id: 'e' + toString(i % $entities)})
  MATCH (b:Entity {tenant_id: $tenant, id: 'e' + toString((i * 7919 + 13) % $entities)})
  CREATE (a)-[:MENTIONS {tenant_id: $tenant, weight: 1.0}]->(b)
} IN TRANSACTIONS OF 10000 ROWS
"""

DETACH: LiteralString = """
MATCH (e:Entity {tenant_id: $tenant})
CALL (e) { DETACH DELETE e } IN TRANSACTIONS OF 5000 ROWS
"""

EDGES: LiteralString = """
MATCH (:Entity {tenant_id: $tenant})-[r]->()
CALL (r) { DELETE r } IN TRANSACTIONS OF 5000 ROWS
"""

ENTITIES: LiteralString = """
MATCH (e:Entity {tenant_id: $tenant})
CALL (e) { DELETE e } IN TRANSACTIONS OF 5000 ROWS
"""

COUNT: LiteralString = "MATCH (e:Entity {tenant_id: $tenant}) RETURN count(e) AS n"


async def _auto(driver: AsyncDriver, query: LiteralString, **params: int) -> None:
    # CALL ... IN TRANSACTIONS runs only in an auto-commit transaction.
    async with driver.session() as session:
        result = await session.run(query, {"tenant": TENANT, **params})
        await result.consume()


async def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.neo4j_purge", description=__doc__)
    parser.add_argument("--entities", type=int, default=40_000)
    parser.add_argument("--relationships", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    settings = Settings()
    stores = await open_stores(settings)
    driver = AsyncGraphDatabase.driver(
        settings.neo4j_uri,
        auth=(settings.neo4j_user, settings.neo4j_password.get_secret_value()),
    )

    async def store() -> None:
        sweep = await stores.graph.delete_by_tenant(TENANT)
        assert sweep.complete, sweep

    async def detach() -> None:
        await _auto(driver, DETACH)

    async def edges_first() -> None:
        await _auto(driver, EDGES)
        await _auto(driver, ENTITIES)

    sides: dict[str, Callable[[], Awaitable[None]]] = {
        "store": store,
        "detach": detach,
        "edges first": edges_first,
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    try:
        await store()  # whatever an earlier, interrupted run left
        names = list(sides)
        for rnd in range(args.rounds):
            for name in names[rnd % len(names) :] + names[: rnd % len(names)]:
                await _auto(driver, LOAD_ENTITIES, n=args.entities)
                await _auto(
                    driver, LOAD_RELATIONSHIPS, n=args.relationships, entities=args.entities
                )
                began = time.monotonic()
                await sides[name]()
                times[name].append(time.monotonic() - began)
                async with driver.session() as session:
                    left = await (await session.run(COUNT, tenant=TENANT)).single()
                assert left is not None and left["n"] == 0, f"{name} left {left}"
                print(f"  round {rnd + 1}, {name}: {times[name][-1]:.2f} s", flush=True)
    finally:
        await store()
        await driver.close()
        await stores.aclose()
    base = statistics.median(times["store"])
    items = args.entities + args.relationships
    print(f"\n{args.entities:,} entities and {args.relationships:,} edges, {args.rounds} rounds")
    print("| side | median s | items/s | / store |\n| --- | ---: | ---: | ---: |")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} | {items / median:,.0f} | {median / base:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
