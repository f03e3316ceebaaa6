"""The peer of the end-to-end benchmark: the same topic projected by Quix
Streams into Neo4j and PostgreSQL with its community sinks.

Runs in its own virtual environment (``bench/e2e.py`` makes it under the
benchmark's cache: Quix Streams pins an older confluent-kafka than redstring),
so it imports nothing of redstring. Configuration comes as one JSON argument.

What it does per event, as its documentation recommends for at-least-once
batched writes (the default processing guarantee; sinks buffer records and
flush them when the application checkpoints, then the offsets are committed):

* JSON-deserialises the value (the topic's ``value_deserializer="json"``);
* Neo4j (``Neo4jSink``, one ``UNWIND $records`` transaction per checkpoint):
  extractions MERGE their entities and relationships (embeddings stripped
  first); merges write one alias node per absorbed id, unmerges delete them.
  No alias resolution: edges are written between the ids as extracted;
* PostgreSQL (``PostgreSQLSink``, ``upsert_on_primary_key``): one row per
  extracted entity with its embedding into a ``vector(384)`` column, and one
  row per alias into an alias table (an unmerge upserts an empty canonical).

Neither sink fences by checkpoint: a redelivered batch is written again
(idempotently for upserts), and nothing ties the two stores' positions.

Prints one JSON line per milestone (``assigned``, ``first``) with a wall-clock
time, for the harness.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

NEO4J_QUERY = """
CALL (event) {
  WITH event WHERE event.event_type = 'DocumentExtracted'
  UNWIND event.payload.entities AS ent
  MERGE (e:QuixEntity {tenant_id: event.tenant_id, id: ent.id})
  SET e.name = ent.name, e.type = ent.type, e += ent.properties
}
CALL (event) {
  WITH event WHERE event.event_type = 'DocumentExtracted'
  UNWIND event.payload.relationships AS rel
  MATCH (s:QuixEntity {tenant_id: event.tenant_id, id: rel.source})
  MATCH (t:QuixEntity {tenant_id: event.tenant_id, id: rel.target})
  MERGE (s)-[r:QUIX_REL {type: rel.type}]->(t)
  SET r.confidence = rel.confidence, r += rel.properties
}
CALL (event) {
  WITH event WHERE event.event_type = 'EntitiesMerged'
  UNWIND event.payload.absorbed_ids AS a
  MERGE (x:QuixAlias {tenant_id: event.tenant_id, id: a})
  SET x.canonical = event.payload.canonical_id
}
CALL (event) {
  WITH event WHERE event.event_type = 'EntitiesUnmerged'
  UNWIND event.payload.restored_ids AS a
  MATCH (x:QuixAlias {tenant_id: event.tenant_id, id: a})
  DELETE x
}
"""


def _say(what: str, **extra: Any) -> None:
    print(json.dumps({"event": what, "t": time.time(), **extra}), flush=True)


def main() -> None:
    config = json.loads(sys.argv[1])
    from quixstreams import Application
    from quixstreams.sinks.community.neo4j import Neo4jSink
    from quixstreams.sinks.community.postgresql import PostgreSQLSink

    first = [True]

    def on_first(value: Any) -> None:
        if first[0]:
            first[0] = False
            _say("first")

    app = Application(
        broker_address=config["bootstrap"],
        consumer_group=config["group"],
        auto_offset_reset="earliest",
        processing_guarantee="at-least-once",
        loglevel="WARNING",
    )
    topic = app.topic(config["topic"], value_deserializer="json")
    neo4j = Neo4jSink(
        host=config["neo4j_host"],
        port=config["neo4j_port"],
        username=config["neo4j_user"],
        password=config["neo4j_password"],
        cypher_query=NEO4J_QUERY,
    )
    pg = {
        "host": config["pg_host"],
        "port": config["pg_port"],
        "dbname": config["pg_dbname"],
        "user": config["pg_user"],
        "password": config.get("pg_password", ""),
        "schema_name": config["pg_schema"],
    }
    vectors = PostgreSQLSink(
        table_name="vectors",
        primary_key_columns=["tenant_id", "id"],
        upsert_on_primary_key=True,
        **pg,
    )
    aliases = PostgreSQLSink(
        table_name="aliases",
        primary_key_columns=["tenant_id", "alias_id"],
        upsert_on_primary_key=True,
        **pg,
    )

    def for_graph(event: dict[str, Any]) -> dict[str, Any]:
        if event.get("event_type") != "DocumentExtracted":
            return event
        payload = dict(event["payload"])
        payload["entities"] = [
            {k: v for k, v in e.items() if k != "embedding"} for e in payload["entities"]
        ]
        return {**event, "payload": payload}

    def vector_rows(event: dict[str, Any]) -> list[dict[str, Any]]:
        if event.get("event_type") != "DocumentExtracted":
            return []
        payload = event["payload"]
        return [
            {
                "tenant_id": event["tenant_id"],
                "id": e["id"],
                "embedding": e["embedding"],
                "name": e["name"],
                "type": e["type"],
                "document_id": payload["document_id"],
            }
            for e in payload["entities"]
            if e.get("embedding") is not None
        ]

    def alias_rows(event: dict[str, Any]) -> list[dict[str, Any]]:
        kind, payload = event.get("event_type"), event.get("payload", {})
        if kind == "EntitiesMerged":
            return [
                {
                    "tenant_id": event["tenant_id"],
                    "alias_id": a,
                    "canonical_id": payload["canonical_id"],
                }
                for a in payload["absorbed_ids"]
            ]
        if kind == "EntitiesUnmerged":
            return [
                {"tenant_id": event["tenant_id"], "alias_id": a, "canonical_id": ""}
                for a in payload["restored_ids"]
            ]
        return []

    sdf = app.dataframe(topic)
    sdf = sdf.update(on_first)
    sdf.apply(for_graph).sink(neo4j)
    sdf.apply(vector_rows, expand=True).sink(vectors)
    sdf.apply(alias_rows, expand=True).sink(aliases)
    _say("starting")
    app.run()


if __name__ == "__main__":
    main()
