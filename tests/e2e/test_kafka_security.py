"""Secured Kafka, end to end (issue 16): the same pipeline over the local
stack's SASL_SSL (SCRAM-SHA-512) and mutual-TLS listeners: topics created,
events published, projected by a worker, a poison value dead-lettered, and a
tenant replayed, every client speaking only the secured listener. And a wrong
password, an unknown CA or a plaintext client against a TLS port each stop a
command at once with one line naming the setting to fix.

Before issue 16 the worker's consumer connected SASL_SSL as SASL_PLAINTEXT and
SSL as PLAINTEXT, so it never read a record here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.tls import ensure
from streams.kafka.dead_letters import read_letters
from streams.kafka.oauth import unsecured_jwt
from streams.wiring import Stores, open_stores
from tests.e2e.conftest import Deployment, deployed, run_cli
from tests.e2e.histories import assert_matches_oracle, generate, publish
from tests.e2e.workers import ROOT
from tests.oidc import TokenEndpoint, serving

pytestmark = pytest.mark.services


def secured(stack_env: dict[str, str], listener: str, token_url: str = "") -> dict[str, str]:
    """The REDSTRING_* settings of a client of one secured listener."""
    if listener == "oauthbearer":
        # OIDC client credentials, as a cloud's identity provider would be
        # asked; the local broker accepts the endpoint's unsigned tokens.
        return {
            "REDSTRING_KAFKA_BOOTSTRAP": stack_env["DEVSTACK_KAFKA_SASL_SSL_BOOTSTRAP"],
            "REDSTRING_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "REDSTRING_KAFKA_SASL_MECHANISM": "OAUTHBEARER",
            "REDSTRING_KAFKA_SSL_CAFILE": stack_env["DEVSTACK_KAFKA_CA_FILE"],
            "REDSTRING_KAFKA__SASL_OAUTHBEARER_METHOD": "oidc",
            "REDSTRING_KAFKA__SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL": token_url,
            "REDSTRING_KAFKA__SASL_OAUTHBEARER_CLIENT_ID": "projector",
            "REDSTRING_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET": "s3cret",
        }
    if listener == "sasl_ssl":
        return {
            "REDSTRING_KAFKA_BOOTSTRAP": stack_env["DEVSTACK_KAFKA_SASL_SSL_BOOTSTRAP"],
            "REDSTRING_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "REDSTRING_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "REDSTRING_KAFKA_SASL_USERNAME": stack_env["DEVSTACK_KAFKA_SASL_USERNAME"],
            "REDSTRING_KAFKA_SASL_PASSWORD": stack_env["DEVSTACK_KAFKA_SASL_PASSWORD"],
            "REDSTRING_KAFKA_SSL_CAFILE": stack_env["DEVSTACK_KAFKA_CA_FILE"],
        }
    assert listener == "mtls"
    return {
        "REDSTRING_KAFKA_BOOTSTRAP": stack_env["DEVSTACK_KAFKA_MTLS_BOOTSTRAP"],
        "REDSTRING_KAFKA_SECURITY_PROTOCOL": "SSL",
        "REDSTRING_KAFKA_SSL_CAFILE": stack_env["DEVSTACK_KAFKA_CA_FILE"],
        "REDSTRING_KAFKA_SSL_CERTFILE": stack_env["DEVSTACK_KAFKA_CLIENT_CERT_FILE"],
        "REDSTRING_KAFKA_SSL_KEYFILE": stack_env["DEVSTACK_KAFKA_CLIENT_KEY_FILE"],
    }


@pytest.fixture(params=["sasl_ssl", "mtls", "oauthbearer"])
def secure_deployment(
    request: pytest.FixtureRequest, e2e_env: dict[str, str], tmp_path: Path
) -> Iterator[Deployment]:
    with serving(TokenEndpoint(issue=lambda _: unsecured_jwt("redstring"))) as tokens:
        env = {**e2e_env, **secured(e2e_env, request.param, tokens.url)}
        with deployed(env, tmp_path) as deployment:
            yield deployment


async def test_the_pipeline_runs_over_a_secured_listener(secure_deployment: Deployment) -> None:
    deployment = secure_deployment
    assert deployment.settings.kafka_security_protocol in {"SASL_SSL", "SSL"}
    tenants = [deployment.tenant(f"t{i}") for i in range(4)]
    records = generate(deployment.tenant("secure"), tenants, 150, seed=16)
    records.append((len(records), tenants[0], None))  # a value no worker can decode
    stores: Stores = await open_stores(deployment.settings)
    try:
        worker = deployment.worker("w1").start()
        await asyncio.to_thread(worker.wait_ready)
        await publish(deployment.settings, records)
        await deployment.caught_up(stores)
        await assert_matches_oracle(stores, records, "over a secured listener")
        letters = await asyncio.to_thread(read_letters, deployment.settings)
        assert [letter.key for letter in letters] == [tenants[0].encode()], letters

        status, output = await deployment.cli("replay", "--tenant", tenants[0], "--yes")
        assert status == 0, output
        assert f"rebuilt {tenants[0]}" in output, output
        await deployment.caught_up(stores)
        await assert_matches_oracle(stores, records, "replayed over a secured listener")
    finally:
        await stores.aclose()


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("wrong password", "REDSTRING_KAFKA_SASL_PASSWORD"),
        ("unknown CA", "REDSTRING_KAFKA_SSL_CAFILE"),
        ("plaintext client on the TLS port", "REDSTRING_KAFKA_SECURITY_PROTOCOL"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ("topics", "describe"),
        ("worker",),
        ("publish", str(ROOT / "streams" / "ops" / "demo_history.jsonl")),
    ],
)
async def test_a_refused_configuration_is_named_at_once(
    e2e_env: dict[str, str], tmp_path: Path, case: str, named: str, command: tuple[str, ...]
) -> None:
    env = {**e2e_env, **secured(e2e_env, "sasl_ssl"), "REDSTRING_TOPIC": "no-such-topic"}
    if case == "wrong password":
        env["REDSTRING_KAFKA_SASL_PASSWORD"] = "not-the-password"
    elif case == "unknown CA":
        # Another throwaway CA: it did not sign the broker's certificate.
        env["REDSTRING_KAFKA_SSL_CAFILE"] = str(ensure(tmp_path / "other").ca_cert)
    else:
        env = {
            **e2e_env,
            "REDSTRING_KAFKA_BOOTSTRAP": e2e_env["DEVSTACK_KAFKA_SSL_BOOTSTRAP"],
            "REDSTRING_TOPIC": "no-such-topic",
        }
    started = time.monotonic()
    status, output = await run_cli(env, *command)
    took = time.monotonic() - started
    # librdkafka's own log lines may surround it: the command's verdict is
    # one line, and it names the setting.
    errors = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert status != 0, output
    assert len(errors) == 1 and named in errors[0], output
    assert "Traceback" not in output, output
    assert took < 20, f"took {took:.1f}s: {output}"


WORKER_CLIENTS = [
    ("SSL", None, False),
    ("SSL", None, True),
    ("SASL_SSL", "PLAIN", False),
    ("SASL_SSL", "SCRAM-SHA-256", False),
    ("SASL_SSL", "SCRAM-SHA-512", False),
    ("SASL_PLAINTEXT", "PLAIN", False),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", False),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", False),
    ("SASL_PLAINTEXT", "OAUTHBEARER", False),
]


@pytest.mark.parametrize(("protocol", "mechanism", "client_cert"), WORKER_CLIENTS)
async def test_the_workers_client_connects_with_every_protocol_and_mechanism(
    e2e_env: dict[str, str], protocol: str, mechanism: str | None, client_cert: bool
) -> None:
    """The worker's own client (aiokafka, with the credentials Faust is given)
    against each secured listener: what the pipeline tests above do not run."""
    from aiokafka import AIOKafkaConsumer
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    from streams.kafka.config import client_configs, faust_credentials
    from tests.e2e.conftest import settings_for

    port = {
        ("SSL", False): "DEVSTACK_KAFKA_SSL_BOOTSTRAP",
        ("SSL", True): "DEVSTACK_KAFKA_MTLS_BOOTSTRAP",
        ("SASL_SSL", False): "DEVSTACK_KAFKA_SASL_SSL_BOOTSTRAP",
        ("SASL_PLAINTEXT", False): "DEVSTACK_KAFKA_SASL_PLAINTEXT_BOOTSTRAP",
    }[(protocol, client_cert)]
    env = {
        **e2e_env,
        "REDSTRING_KAFKA_BOOTSTRAP": e2e_env[port],
        "REDSTRING_KAFKA_SECURITY_PROTOCOL": protocol,
    }
    if protocol.endswith("SSL"):
        env["REDSTRING_KAFKA_SSL_CAFILE"] = e2e_env["DEVSTACK_KAFKA_CA_FILE"]
    if client_cert:
        env["REDSTRING_KAFKA_SSL_CERTFILE"] = e2e_env["DEVSTACK_KAFKA_CLIENT_CERT_FILE"]
        env["REDSTRING_KAFKA_SSL_KEYFILE"] = e2e_env["DEVSTACK_KAFKA_CLIENT_KEY_FILE"]
    if mechanism == "OAUTHBEARER":
        env["REDSTRING_KAFKA_SASL_MECHANISM"] = mechanism
        env["REDSTRING_KAFKA__ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT"] = "true"
        env["REDSTRING_KAFKA__SASL_OAUTHBEARER_CONFIG"] = "principal=redstring"
    elif mechanism:
        env["REDSTRING_KAFKA_SASL_MECHANISM"] = mechanism
        env["REDSTRING_KAFKA_SASL_USERNAME"] = e2e_env["DEVSTACK_KAFKA_SASL_USERNAME"]
        env["REDSTRING_KAFKA_SASL_PASSWORD"] = e2e_env["DEVSTACK_KAFKA_SASL_PASSWORD"]
    settings = settings_for(env)
    auth = credentials_to_aiokafka_auth(faust_credentials(client_configs(settings).aiokafka))
    assert auth["security_protocol"] == protocol
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap, request_timeout_ms=10_000, **auth
    )
    await asyncio.wait_for(consumer.start(), 20)
    try:
        assert isinstance(await asyncio.wait_for(consumer.topics(), 20), set)
    finally:
        await consumer.stop()
