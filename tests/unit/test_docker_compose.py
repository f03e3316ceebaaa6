"""docker-compose.yml cannot run here (no Docker engine): check its shape instead, and
that it serves the same endpoints and versions as the local stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack import versions
from tests.services import COMPOSE_ENV

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    result = compose["services"]
    assert isinstance(result, dict)
    return result


def test_the_three_services_with_the_pinned_images(compose: dict[str, Any]) -> None:
    images = {name: s["image"] for name, s in services(compose).items()}
    assert images == {
        "kafka": versions.KAFKA_IMAGE,
        "neo4j": versions.NEO4J_IMAGE,
        "postgres": versions.PGVECTOR_IMAGE,
    }
    assert versions.NEO4J_IMAGE.startswith("neo4j:5.26")
    assert versions.KAFKA_IMAGE.startswith("apache/kafka:4.")


@pytest.mark.parametrize("name", ["kafka", "neo4j", "postgres"])
def test_every_service_has_a_healthcheck(compose: dict[str, Any], name: str) -> None:
    check = services(compose)[name]["healthcheck"]
    assert check["test"][0] in {"CMD", "CMD-SHELL"} and len(check["test"]) >= 2
    for key in ("interval", "timeout", "retries"):
        assert key in check


@pytest.mark.parametrize(
    ("name", "port_key", "container_port"),
    [("kafka", "kafka", 19092), ("neo4j", "neo4j_bolt", 7687), ("postgres", "postgres", 5432)],
)
def test_ports_are_published_on_loopback_only_at_the_local_stack_ports(
    compose: dict[str, Any], name: str, port_key: str, container_port: int
) -> None:
    assert services(compose)[name]["ports"] == [
        f"127.0.0.1:{versions.PORTS[port_key]}:{container_port}"
    ]


def test_kafka_is_kraft_without_auto_topic_creation(compose: dict[str, Any]) -> None:
    env = services(compose)["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"] == 0
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == 1
    assert env["KAFKA_ADVERTISED_LISTENERS"] == (
        f"PLAINTEXT://{COMPOSE_ENV['REDSTRING_KAFKA_BOOTSTRAP']}"
    )


def test_credentials_match_the_endpoints_the_fixtures_use(compose: dict[str, Any]) -> None:
    neo4j = services(compose)["neo4j"]["environment"]
    user, password = neo4j["NEO4J_AUTH"].split("/", 1)
    assert (user, password) == (
        COMPOSE_ENV["REDSTRING_NEO4J_USER"],
        COMPOSE_ENV["REDSTRING_NEO4J_PASSWORD"],
    )
    assert COMPOSE_ENV["REDSTRING_NEO4J_URI"].endswith(f":{versions.PORTS['neo4j_bolt']}")
    pg = services(compose)["postgres"]["environment"]
    assert COMPOSE_ENV["REDSTRING_PG_DSN"] == (
        f"postgresql://{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}"
        f"@127.0.0.1:{versions.PORTS['postgres']}/{pg['POSTGRES_DB']}"
    )
    assert pg["POSTGRES_DB"] == versions.POSTGRES_DATABASE


def test_postgres_init_script_creates_the_vector_extension(compose: dict[str, Any]) -> None:
    (mount,) = services(compose)["postgres"]["volumes"]
    source, target, _mode = mount.split(":")
    assert target.startswith("/docker-entrypoint-initdb.d/")
    assert "CREATE EXTENSION IF NOT EXISTS vector" in (ROOT / source).read_text()
