"""Kafka smoke tests of the local stack's secured listeners (devstack, see
devstack/kafka-server.properties): one keyed record produced and consumed in a
group with confluent-kafka over SSL, SSL with a client certificate (mTLS),
SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, and SASL_PLAINTEXT, and
OAUTHBEARER with an unsigned JWT over both SASL listeners (Kafka's unsecured
validator, for tests only); and a client with a wrong password, without the CA,
without its certificate or with an expired or malformed token is refused at
once, with an error that says why, instead of hanging."""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

pytestmark = pytest.mark.services

SECURE_ENV = (
    "DEVSTACK_KAFKA_SSL_BOOTSTRAP",
    "DEVSTACK_KAFKA_MTLS_BOOTSTRAP",
    "DEVSTACK_KAFKA_SASL_SSL_BOOTSTRAP",
    "DEVSTACK_KAFKA_SASL_PLAINTEXT_BOOTSTRAP",
    "DEVSTACK_KAFKA_CA_FILE",
    "DEVSTACK_KAFKA_CLIENT_CERT_FILE",
    "DEVSTACK_KAFKA_CLIENT_KEY_FILE",
    "DEVSTACK_KAFKA_SASL_USERNAME",
    "DEVSTACK_KAFKA_SASL_PASSWORD",
)
# A refused client must hear why within this many seconds (it answers in well
# under one on the local stack); the round trips get more, for a loaded machine.
FAIL_WITHIN = 5.0
ROUND_TRIP_WITHIN = 30.0
# Errors that mean "refused", not "not there yet": a round trip stops at once on them
# (the broker's TLS alert to a client without a certificate arrives as a transport error).
REFUSALS = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError._TRANSPORT})

librdkafka_log = logging.getLogger("tests.smoke.kafka_secure.librdkafka")


@pytest.fixture(scope="module")
def secure(stack_env: dict[str, str]) -> dict[str, str]:
    """The DEVSTACK_KAFKA_* values: from the local stack, else from the environment."""
    env = {key: stack_env.get(key) or os.environ.get(key, "") for key in SECURE_ENV}
    missing = [key for key, value in env.items() if not value]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not set: the secured Kafka listeners come with the "
            "local stack (python -m devstack up), not with docker-compose.yml"
        )
    for key in SECURE_ENV[:4]:
        host, _, port = env[key].rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
        except OSError as error:
            pytest.fail(
                f"{key}={env[key]} does not answer ({error}): a Kafka started before the "
                "secured listeners existed? Restart it: python -m devstack down; "
                "python -m devstack up"
            )
    return env


def tls(env: dict[str, str], *, client_certificate: bool = False) -> dict[str, Any]:
    config: dict[str, Any] = {"ssl.ca.location": env["DEVSTACK_KAFKA_CA_FILE"]}
    if client_certificate:
        config["ssl.certificate.location"] = env["DEVSTACK_KAFKA_CLIENT_CERT_FILE"]
        config["ssl.key.location"] = env["DEVSTACK_KAFKA_CLIENT_KEY_FILE"]
    return config


def sasl(env: dict[str, str], mechanism: str, password: str | None = None) -> dict[str, Any]:
    if mechanism == "OAUTHBEARER":
        # librdkafka's own unsigned JWT ("alg":"none", sub/iat/exp, an hour's life), which
        # the broker's unsecured validator accepts: no password, no token endpoint.
        return {
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={env['DEVSTACK_KAFKA_SASL_USERNAME']}",
        }
    return {
        "sasl.mechanism": mechanism,
        "sasl.username": env["DEVSTACK_KAFKA_SASL_USERNAME"],
        "sasl.password": env["DEVSTACK_KAFKA_SASL_PASSWORD"] if password is None else password,
    }


def ssl_client(env: dict[str, str]) -> dict[str, Any]:
    return {
        "bootstrap.servers": env["DEVSTACK_KAFKA_SSL_BOOTSTRAP"],
        "security.protocol": "SSL",
        **tls(env),
    }


def mtls_client(env: dict[str, str]) -> dict[str, Any]:
    return {
        "bootstrap.servers": env["DEVSTACK_KAFKA_MTLS_BOOTSTRAP"],
        "security.protocol": "SSL",
        **tls(env, client_certificate=True),
    }


def sasl_ssl_client(
    env: dict[str, str], mechanism: str, password: str | None = None
) -> dict[str, Any]:
    return {
        "bootstrap.servers": env["DEVSTACK_KAFKA_SASL_SSL_BOOTSTRAP"],
        "security.protocol": "SASL_SSL",
        **tls(env),
        **sasl(env, mechanism, password),
    }


def sasl_plaintext_client(env: dict[str, str], mechanism: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": env["DEVSTACK_KAFKA_SASL_PLAINTEXT_BOOTSTRAP"],
        "security.protocol": "SASL_PLAINTEXT",
        **sasl(env, mechanism),
    }


ROUND_TRIPS: dict[str, Callable[[dict[str, str]], dict[str, Any]]] = {
    "SSL": ssl_client,
    "mTLS": mtls_client,
    "SASL_SSL-SCRAM-SHA-256": lambda env: sasl_ssl_client(env, "SCRAM-SHA-256"),
    "SASL_SSL-SCRAM-SHA-512": lambda env: sasl_ssl_client(env, "SCRAM-SHA-512"),
    "SASL_SSL-PLAIN": lambda env: sasl_ssl_client(env, "PLAIN"),
    "SASL_PLAINTEXT-SCRAM-SHA-256": lambda env: sasl_plaintext_client(env, "SCRAM-SHA-256"),
    "SASL_SSL-OAUTHBEARER": lambda env: sasl_ssl_client(env, "OAUTHBEARER"),
    "SASL_PLAINTEXT-OAUTHBEARER": lambda env: sasl_plaintext_client(env, "OAUTHBEARER"),
}


class Errors:
    """The client's error callback: keeps what it reports; ``check`` raises on a refusal."""

    def __init__(self) -> None:
        self.seen: list[KafkaError] = []

    def __call__(self, error: KafkaError) -> None:
        self.seen.append(error)

    def check(self) -> None:
        refused = [e for e in self.seen if e.code() in REFUSALS]
        assert not refused, f"refused: {refused[0].str()}"


def client_config(config: dict[str, Any], errors: Errors) -> dict[str, Any]:
    return {**config, "error_cb": errors, "logger": librdkafka_log}


def create_topic(bootstrap: str, topic: str) -> None:
    """Over PLAINTEXT, the default listener (auto.create.topics.enable=false)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=30)


def produce_one(config: dict[str, Any], topic: str, key: bytes, value: bytes) -> None:
    errors = Errors()
    delivered: list[Message] = []
    producer = Producer(
        {
            **client_config(config, errors),
            "enable.idempotence": True,
            "message.timeout.ms": int(ROUND_TRIP_WITHIN * 1000),
        }
    )
    producer.produce(topic, key=key, value=value, on_delivery=lambda _e, m: delivered.append(m))
    deadline = time.monotonic() + ROUND_TRIP_WITHIN
    while not delivered and time.monotonic() < deadline:
        producer.poll(0.1)
        errors.check()
    assert delivered, f"not delivered within {ROUND_TRIP_WITHIN}s; errors: {errors.seen}"
    assert delivered[0].error() is None, delivered[0].error()


def consume_one(config: dict[str, Any], topic: str) -> tuple[bytes | None, bytes | None]:
    """The first record of ``topic``, read in a fresh consumer group that then commits."""
    errors = Errors()
    consumer = Consumer(
        {
            **client_config(config, errors),
            "group.id": f"group-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + ROUND_TRIP_WITHIN
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            errors.check()
            if message is None:
                continue
            assert message.error() is None, message.error()
            consumer.commit(message=message, asynchronous=False)
            return message.key(), message.value()
        raise AssertionError(f"nothing consumed within {ROUND_TRIP_WITHIN}s: {errors.seen}")
    finally:
        consumer.close()


@pytest.mark.parametrize("listener", list(ROUND_TRIPS))
def test_a_record_round_trips_over_the_secured_listener(
    listener: str, secure: dict[str, str], kafka_bootstrap: str, topic_name: str
) -> None:
    config = ROUND_TRIPS[listener](secure)
    create_topic(kafka_bootstrap, topic_name)
    key, value = b"tenant-1:entity-7", f'{{"over": "{listener}"}}'.encode()
    produce_one(config, topic_name, key, value)
    assert consume_one(config, topic_name) == (key, value)


def first_error(config: dict[str, Any]) -> tuple[KafkaError, float]:
    """The first error a client with ``config`` reports, and how many seconds it took;
    and that the client indeed gets no metadata."""
    errors = Errors()
    began = time.monotonic()
    producer = Producer(client_config(config, errors))
    while not errors.seen and time.monotonic() - began < FAIL_WITHIN:
        producer.poll(0.05)
    elapsed = time.monotonic() - began
    assert errors.seen, f"no error within {FAIL_WITHIN}s: the client hangs instead of failing"
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=1)
    return errors.seen[0], elapsed


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_is_an_authentication_error_at_once(
    mechanism: str, secure: dict[str, str]
) -> None:
    error, elapsed = first_error(sasl_ssl_client(secure, mechanism, password="not-the-password"))
    assert error.code() == KafkaError._AUTHENTICATION, error.str()
    assert "Authentication failed" in error.str()
    assert elapsed < FAIL_WITHIN


def test_ssl_without_the_ca_is_refused_at_once(secure: dict[str, str]) -> None:
    config = ssl_client(secure)
    del config["ssl.ca.location"]  # the system's CAs only: devstack's CA is not among them
    error, elapsed = first_error(config)
    # librdkafka reports a failed verification as an SSL error, or at times as
    # a transport error carrying the same reason (seen once in CI).
    assert error.code() in {KafkaError._SSL, KafkaError._TRANSPORT}, error.str()
    assert "certificate verify failed" in error.str()
    assert elapsed < FAIL_WITHIN


def test_mtls_without_a_client_certificate_is_refused_at_once(secure: dict[str, str]) -> None:
    config = {
        "bootstrap.servers": secure["DEVSTACK_KAFKA_MTLS_BOOTSTRAP"],
        "security.protocol": "SSL",
        **tls(secure),  # trusts the server, but has no certificate of its own to show
    }
    error, elapsed = first_error(config)
    # TLS 1.3: the broker's alert ("bad certificate", "certificate required") reaches the
    # client on its first read after the handshake, so it is a transport error then.
    assert error.code() in {KafkaError._SSL, KafkaError._TRANSPORT}, error.str()
    assert "certificate" in error.str()
    assert elapsed < FAIL_WITHIN


def unsigned_jwt(claims: dict[str, Any]) -> str:
    """An unsecured JWS (RFC 7515 A.5): header and claims, an empty signature."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


def bad_tokens(user: str) -> dict[str, str]:
    now = int(time.time())
    return {
        "expired": unsigned_jwt({"sub": user, "iat": now - 7200, "exp": now - 3600}),
        "not-a-jwt": "not-a-jwt",
    }


@pytest.mark.parametrize("token", ["expired", "not-a-jwt"])
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_a_token_the_broker_rejects_is_an_authentication_error_at_once(
    listener: str, token: str, secure: dict[str, str]
) -> None:
    user = secure["DEVSTACK_KAFKA_SASL_USERNAME"]
    value = bad_tokens(user)[token]

    def oauth_cb(_config: str) -> tuple[str, float, str, dict[str, str]]:
        # librdkafka refuses a token whose lifetime has passed, so it is told an hour
        # from now; the broker goes by the JWT's own exp claim.
        return value, time.time() + 3600, user, {}

    config = {
        "bootstrap.servers": secure[f"DEVSTACK_KAFKA_{listener}_BOOTSTRAP"],
        "security.protocol": listener,
        **(tls(secure) if listener == "SASL_SSL" else {}),
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": oauth_cb,
    }
    error, elapsed = first_error(config)
    assert error.code() == KafkaError._AUTHENTICATION, error.str()
    # The broker's unsecured validator turned the token down (RFC 6750 error code):
    # not "Unsupported SASL mechanism", what a broker without OAUTHBEARER answers.
    assert '{"status":"invalid_token"}' in error.str(), error.str()
    assert elapsed < FAIL_WITHIN
