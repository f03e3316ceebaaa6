"""docker-compose.yml cannot run here (no Docker engine): check it against the
compose-spec JSON schema and its shape instead, that its stores serve the same
endpoints and versions as the local stack, and that the full stack (topics init
container, two workers, the read API, the demo profile) is wired as
docs/deploy.md says."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from devstack import versions
from tests.services import COMPOSE_ENV, COMPOSE_STORE_SERVICES

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


STORES = ("kafka", "neo4j", "postgres")
WORKERS = ("worker-1", "worker-2")
APP_SERVICES = ("topics", *WORKERS, "read-api", "demo")


def test_the_file_is_valid_against_the_compose_spec_schema(compose: dict[str, Any]) -> None:
    # The compose-spec schema as vendored by check-jsonschema (pinned in the dev
    # extra): offline, and kept current by that package.
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema = json.loads((vendor / "compose-spec.json").read_text())
    assert schema["title"] == "Compose Specification"
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []
    # The check has teeth: a misspelt key or condition is refused.
    broken = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    broken["services"]["topics"]["depends_on"]["kafka"]["condition"] = "service_done"
    broken["services"]["worker-1"]["restart_policy"] = "always"
    assert len(list(validator.iter_errors(broken))) == 2


def test_exactly_the_stores_and_the_app_services(compose: dict[str, Any]) -> None:
    assert set(services(compose)) == {*STORES, *APP_SERVICES}
    # What tests/services.py brings up through testcontainers: the stores only.
    assert tuple(COMPOSE_STORE_SERVICES) == STORES


def test_the_three_services_with_the_pinned_images(compose: dict[str, Any]) -> None:
    images = {name: services(compose)[name]["image"] for name in STORES}
    assert images == {
        "kafka": versions.KAFKA_IMAGE,
        "neo4j": versions.NEO4J_IMAGE,
        "postgres": versions.PGVECTOR_IMAGE,
    }
    assert versions.NEO4J_IMAGE.startswith("neo4j:5.26")
    assert versions.KAFKA_IMAGE.startswith("apache/kafka:4.")


@pytest.mark.parametrize("name", [*STORES, *WORKERS, "read-api"])
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
    advertised = env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    # The host's listener (what the tests use) and the compose network's (the workers').
    assert advertised[0] == f"PLAINTEXT://{COMPOSE_ENV['REDSTRING_KAFKA_BOOTSTRAP']}"
    assert "DOCKER://kafka:29092" in advertised
    assert "DOCKER://:29092" in env["KAFKA_LISTENERS"].split(",")
    assert "DOCKER:PLAINTEXT" in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")


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


# --- the full stack ---------------------------------------------------------


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_services_run_the_worker_image_built_from_the_dockerfile(
    compose: dict[str, Any], name: str
) -> None:
    service = services(compose)[name]
    assert service["build"] == "."
    assert (ROOT / "Dockerfile").is_file()
    assert service["image"].startswith("redstring:")
    # Every container reaches the others by their compose names.
    env = service["environment"]
    assert env["REDSTRING_KAFKA_BOOTSTRAP"] == "kafka:29092"
    assert env["REDSTRING_NEO4J_URI"] == "bolt://neo4j:7687"
    assert env["REDSTRING_PG_DSN"].endswith("@postgres:5432/" + versions.POSTGRES_DATABASE)
    assert env["REDSTRING_CONTROL_KEY"]
    neo4j_user, neo4j_password = services(compose)["neo4j"]["environment"]["NEO4J_AUTH"].split(
        "/", 1
    )
    assert (env["REDSTRING_NEO4J_USER"], env["REDSTRING_NEO4J_PASSWORD"]) == (
        neo4j_user,
        neo4j_password,
    )


def test_app_settings_are_real_settings(compose: dict[str, Any]) -> None:
    from streams.settings import Settings

    known = {f"REDSTRING_{name.upper()}" for name in Settings.model_fields}
    for name in APP_SERVICES:
        unknown = set(services(compose)[name]["environment"]) - known
        assert not unknown, f"{name}: {unknown} are not redstring settings"


def test_topics_init_container_creates_the_topics_once_kafka_is_healthy(
    compose: dict[str, Any],
) -> None:
    topics = services(compose)["topics"]
    assert topics["command"] == ["topics", "create"]
    assert topics["depends_on"] == {"kafka": {"condition": "service_healthy"}}
    assert topics["restart"] == "no"
    assert "profiles" not in topics


def test_two_workers_start_after_the_topics_and_healthy_stores(compose: dict[str, Any]) -> None:
    ids, host_ports = set(), set()
    for name in WORKERS:
        worker = services(compose)[name]
        assert worker["command"] == ["worker"]
        assert "profiles" not in worker
        assert worker["depends_on"] == {
            "topics": {"condition": "service_completed_successfully"},
            "neo4j": {"condition": "service_healthy"},
            "postgres": {"condition": "service_healthy"},
        }
        ids.add(worker["environment"]["REDSTRING_WORKER_ID"])
        (port,) = worker["ports"]
        host, host_port, container_port = port.split(":")
        assert host == "127.0.0.1" and container_port == "6066"
        host_ports.add(host_port)
        assert "/readyz" in " ".join(worker["healthcheck"]["test"])
        assert worker["restart"] == "unless-stopped"
        # SIGTERM finishes the batch in hand: give it time, as the chart does.
        assert worker["stop_grace_period"] == "2m"
    assert len(ids) == len(host_ports) == len(WORKERS)  # static membership ids differ


def test_demo_profile_publishes_the_demo_history(compose: dict[str, Any]) -> None:
    demo = services(compose)["demo"]
    assert demo["profiles"] == ["demo"]
    command = demo["command"]
    assert command[0] == "publish"
    # The image keeps the source tree in /app (Dockerfile: WORKDIR /app, COPY streams).
    assert command[1] == "/app/streams/ops/demo_history.jsonl"
    assert (ROOT / "streams" / "ops" / "demo_history.jsonl").is_file()
    assert demo["depends_on"] == {"topics": {"condition": "service_completed_successfully"}}


def test_the_read_api_serves_on_loopback_once_the_stores_are_healthy(
    compose: dict[str, Any],
) -> None:
    api = services(compose)["read-api"]
    assert api["command"] == ["serve"]
    assert "profiles" not in api
    assert api["depends_on"] == {
        "neo4j": {"condition": "service_healthy"},
        "postgres": {"condition": "service_healthy"},
    }
    assert api["ports"] == ["127.0.0.1:18080:8080"]
    assert "8080/readyz" in " ".join(api["healthcheck"]["test"])
    # A laptop's HS256 key, replaceable from the environment.
    assert api["environment"]["REDSTRING_SERVE_JWT_KEY"].startswith("${REDSTRING_SERVE_JWT_KEY:-")
