"""Settings -> every Kafka client's configuration (issue 16, item 1): for every
combination of protocol, SASL mechanism, CA and client certificate, librdkafka
and the worker's aiokafka (through Faust's own translation of its
credentials) connect with the same protocol, mechanism, user and TLS context.
Before issue 16 the worker's SASL_SSL became SASL_PLAINTEXT and SSL became
PLAINTEXT there."""

from __future__ import annotations

import itertools
import ssl
from pathlib import Path
from typing import Any

import pytest
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from devstack.tls import TlsFiles, ensure
from streams.kafka.config import (
    MECHANISMS,
    PROTOCOLS,
    KafkaConfigError,
    client_configs,
    faust_credentials,
    property_name,
)
from streams.kafka.oauth import OidcTokenProvider
from streams.settings import Settings, UnknownSettingError, check_environment


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """The local stack's throwaway CA and client certificate, made afresh."""
    return ensure(Path(tmp_path_factory.mktemp("certs")))


def settings(**values: Any) -> Settings:
    return Settings(kafka_bootstrap="broker:9093", **values)


def combinations(certs: TlsFiles) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for protocol in PROTOCOLS:
        mechanisms: list[str | None] = list(MECHANISMS) if protocol.startswith("SASL") else [None]
        tls = protocol.endswith("SSL")
        for mechanism, ca, client_cert in itertools.product(
            mechanisms, [False, True] if tls else [False], [False, True] if tls else [False]
        ):
            values: dict[str, Any] = {"kafka_security_protocol": protocol}
            if mechanism == "OAUTHBEARER":
                values.update(
                    kafka_sasl_mechanism=mechanism,
                    kafka_sasl_oauthbearer_client_secret="s3cret",
                    kafka={
                        "sasl_oauthbearer_method": "oidc",
                        "sasl_oauthbearer_client_id": "alice",
                        "sasl_oauthbearer_token_endpoint_url": "https://idp.example/token",
                    },
                )
            elif mechanism:
                values.update(
                    kafka_sasl_mechanism=mechanism,
                    kafka_sasl_username="alice",
                    kafka_sasl_password="s3cret",
                )
            if ca:
                values["kafka_ssl_cafile"] = str(certs.ca_cert)
            if client_cert:
                values.update(
                    kafka_ssl_certfile=str(certs.client_cert),
                    kafka_ssl_keyfile=str(certs.client_key),
                )
            out.append(values)
    return out


def test_every_combination_reaches_both_libraries_alike(certs: TlsFiles) -> None:
    cases = combinations(certs)
    assert len(cases) == 1 + 4 + 4 + 4 * 4  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    for values in cases:
        configs = client_configs(settings(**values))
        rd, aio = configs.librdkafka, configs.aiokafka
        protocol = values["kafka_security_protocol"]
        assert rd["bootstrap.servers"] == "broker:9093"
        assert rd["security.protocol"] == aio["security_protocol"] == protocol, values
        # What Faust hands aiokafka for the credentials the worker builds.
        faust_auth = credentials_to_aiokafka_auth(faust_credentials(aio))
        assert faust_auth["security_protocol"] == protocol, (values, faust_auth)
        if protocol.endswith("SSL"):
            context = aio["ssl_context"]
            assert isinstance(context, ssl.SSLContext)
            assert faust_auth["ssl_context"] is context
            assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
            assert rd.get("ssl.ca.location") == values.get("kafka_ssl_cafile")
            assert rd.get("ssl.certificate.location") == values.get("kafka_ssl_certfile")
            assert rd.get("ssl.key.location") == values.get("kafka_ssl_keyfile")
        else:
            assert "ssl_context" not in aio and faust_auth.get("ssl_context") is None
            assert not any(key.startswith("ssl.") for key in rd)
        mechanism = values.get("kafka_sasl_mechanism")
        if mechanism == "OAUTHBEARER":
            assert rd["sasl.mechanism"] == faust_auth["sasl_mechanism"] == mechanism
            assert rd["sasl.oauthbearer.method"] == "oidc"
            assert rd["sasl.oauthbearer.client.id"] == "alice"
            assert rd["sasl.oauthbearer.client.secret"] == "s3cret"
            provider = faust_auth["sasl_oauth_token_provider"]
            assert isinstance(provider, OidcTokenProvider)
            assert (provider.endpoint, provider.client_id) == ("https://idp.example/token", "alice")
        elif mechanism:
            assert rd["sasl.mechanism"] == faust_auth["sasl_mechanism"] == mechanism
            assert rd["sasl.username"] == faust_auth["sasl_plain_username"] == "alice"
            assert rd["sasl.password"] == faust_auth["sasl_plain_password"] == "s3cret"
        else:
            assert "sasl.mechanism" not in rd and "sasl_mechanism" not in faust_auth


def test_the_workers_context_loads_the_ca_and_the_client_certificate(certs: TlsFiles) -> None:
    """The context really holds the certificate: a CA-only context has no
    certificate to present, so mutual TLS would fail at the handshake."""
    with_cert = client_configs(
        settings(
            kafka_security_protocol="SSL",
            kafka_ssl_cafile=str(certs.ca_cert),
            kafka_ssl_certfile=str(certs.client_cert),
            kafka_ssl_keyfile=str(certs.client_key),
        )
    ).aiokafka["ssl_context"]
    # The context loaded the CA (and the certificate: a key that does not
    # match it would have failed the load).
    assert len(with_cert.get_ca_certs()) == 1
    for cert, key in [
        (certs.client_key, certs.client_key),  # not a certificate
        (certs.client_cert, certs.server_keystore),  # another certificate's key
    ]:
        with pytest.raises(KafkaConfigError, match="REDSTRING_KAFKA_SSL_CAFILE"):
            client_configs(
                settings(
                    kafka_security_protocol="SSL",
                    kafka_ssl_certfile=str(cert),
                    kafka_ssl_keyfile=str(key),
                )
            )


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"kafka_security_protocol": "TLS"}, "REDSTRING_KAFKA_SECURITY_PROTOCOL"),
        ({"kafka_security_protocol": "SASL_SSL"}, "REDSTRING_KAFKA_SASL_MECHANISM"),
        (
            {"kafka_security_protocol": "SASL_SSL", "kafka_sasl_mechanism": "SCRAM-SHA-1"},
            "REDSTRING_KAFKA_SASL_MECHANISM",
        ),
        (
            {"kafka_security_protocol": "SASL_SSL", "kafka_sasl_mechanism": "PLAIN"},
            "REDSTRING_KAFKA_SASL_USERNAME",
        ),
        (
            {"kafka_sasl_mechanism": "PLAIN", "kafka_sasl_username": "a"},
            "REDSTRING_KAFKA_SECURITY_PROTOCOL",
        ),
        ({"kafka_ssl_cafile": "/ca.pem"}, "REDSTRING_KAFKA_SECURITY_PROTOCOL"),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_certfile": "/c.pem"},
            "REDSTRING_KAFKA_SSL_KEYFILE",
        ),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_cafile": "/missing/ca.pem"},
            "REDSTRING_KAFKA_SSL_CAFILE",
        ),
        ({"kafka": {"SECURITY_PROTOCOL": "SSL"}}, "REDSTRING_KAFKA_SECURITY_PROTOCOL"),
        ({"kafka": {"sasl_kerberos_keytab": "/k"}}, "REDSTRING_KAFKA__SASL_KERBEROS_KEYTAB"),
        ({"kafka": {"request_timeout_ms": "soon"}}, "REDSTRING_KAFKA__REQUEST_TIMEOUT_MS"),
    ],
)
def test_a_setting_that_cannot_work_is_named(values: dict[str, Any], names: str) -> None:
    with pytest.raises(KafkaConfigError, match=names):
        client_configs(settings(**values))


def test_other_properties_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDSTRING_KAFKA__CLIENT_ID", "projector-7")
    monkeypatch.setenv("REDSTRING_KAFKA__REQUEST_TIMEOUT_MS", "45000")
    monkeypatch.setenv("REDSTRING_KAFKA__FETCH_MAX_BYTES", "1048576")
    monkeypatch.setenv("REDSTRING_KAFKA__SSL_ENDPOINT_IDENTIFICATION_ALGORITHM", "none")
    monkeypatch.setenv("REDSTRING_KAFKA_SECURITY_PROTOCOL", "SSL")
    configs = client_configs(Settings())
    assert configs.librdkafka["client.id"] == "projector-7"
    assert configs.librdkafka["request.timeout.ms"] == "45000"
    assert configs.librdkafka["fetch.max.bytes"] == "1048576"
    assert configs.librdkafka["ssl.endpoint.identification.algorithm"] == "none"
    assert configs.faust == {"broker_client_id": "projector-7", "broker_request_timeout": 45.0}
    assert configs.cli_only == ("fetch.max.bytes",)
    assert configs.aiokafka["ssl_context"].check_hostname is False
    assert property_name("log_level") == "log_level"
    assert property_name("sasl.oauthbearer.client.id") == "sasl.oauthbearer.client.id"


def test_a_misspelt_variable_is_refused_with_the_setting_it_resembles() -> None:
    check_environment({"REDSTRING_TOPIC": "t", "REDSTRING_KAFKA__CLIENT_ID": "c", "PATH": "/"})
    check_environment({"REDSTRING_HYPOTHESIS_PROFILE": "x", "REDSTRING_SIM_SEEDS": "3"})
    with pytest.raises(UnknownSettingError) as info:
        check_environment({"REDSTRING_KAFKA_SASL_PASWORD": "x", "REDSTRING_TOPPIC": "t"})
    message = str(info.value)
    assert "REDSTRING_KAFKA_SASL_PASWORD is not a redstring setting" in message
    assert "did you mean REDSTRING_KAFKA_SASL_PASSWORD" in message
    assert "REDSTRING_TOPPIC is not a redstring setting (did you mean REDSTRING_TOPIC" in message


@pytest.mark.parametrize(
    ("code", "message", "named"),
    [
        (
            "_AUTHENTICATION",
            "sasl_ssl://127.0.0.1:19096/bootstrap: SASL authentication error: Authentication "
            "failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-512",
            "REDSTRING_KAFKA_SASL_PASSWORD",
        ),
        (
            "_SSL",
            "ssl://127.0.0.1:19094/bootstrap: SSL handshake failed: error:0A000086:SSL "
            "routines::certificate verify failed: broker certificate could not be verified",
            "REDSTRING_KAFKA_SSL_CAFILE",
        ),
        (
            "_SSL",
            "ssl://127.0.0.1:19092/bootstrap: SSL handshake failed: error:0A00010B:SSL "
            "routines::wrong version number",
            "REDSTRING_KAFKA_SECURITY_PROTOCOL",
        ),
        # A broker that is down or restarting is waited for, not explained.
        (
            "_TRANSPORT",
            "127.0.0.1:19092/bootstrap: Connect to ipv4#127.0.0.1:19092 failed: "
            "Connection refused (after 0ms in state CONNECT)",
            None,
        ),
        ("_ALL_BROKERS_DOWN", "1/1 brokers are down", None),
        ("_TRANSPORT", "127.0.0.1:19092/1: Disconnected (after 5012ms in state UP)", None),
    ],
)
def test_refusals_are_explained_and_outages_are_not(
    code: str, message: str, named: str | None
) -> None:
    from streams.kafka.config import explain

    why = explain(code, message)
    if named is None:
        assert why is None
    else:
        assert why is not None and named in why and message in why
