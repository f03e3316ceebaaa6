"""One place that turns ``Settings`` into every Kafka client's configuration
(docs/design.md 7.3): librdkafka's for the CLI tools, the publisher, the admin, the
dead-letter sink, the DLQ reader and the replay tools (confluent-kafka), and
aiokafka's for the worker (through Faust).

The security settings (``REDSTRING_KAFKA_SECURITY_PROTOCOL``, ``_SASL_*``,
``_SSL_*``) are first-class and map to both libraries. Any other librdkafka
property passes through as ``REDSTRING_KAFKA__<property>`` (dots written as
underscores, or as dots where the environment allows them); the worker's
client honours the ones with an aiokafka equivalent (``WORKER_EQUIVALENTS``)
and refuses to start on a security property it cannot honour, rather than
connect with less than was asked for.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streams.settings import Settings

#: Where librdkafka's own lines go, as every confluent-kafka client is given it
#: as ``logger``: through the application's logging (JSON in the worker; the
#: CLI shows them with -v only, streams.cli.main) rather than written raw to
#: stderr as ``%4|...|`` lines. The client hands them over when it is polled.
CLIENT_LOG = logging.getLogger("librdkafka")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

#: librdkafka properties that have a first-class setting: passing them through
#: as well would make two sources of truth.
FIRST_CLASS = {
    "bootstrap.servers": "REDSTRING_KAFKA_BOOTSTRAP",
    "security.protocol": "REDSTRING_KAFKA_SECURITY_PROTOCOL",
    "sasl.mechanism": "REDSTRING_KAFKA_SASL_MECHANISM",
    "sasl.mechanisms": "REDSTRING_KAFKA_SASL_MECHANISM",
    "sasl.username": "REDSTRING_KAFKA_SASL_USERNAME",
    "sasl.password": "REDSTRING_KAFKA_SASL_PASSWORD",
    "ssl.ca.location": "REDSTRING_KAFKA_SSL_CAFILE",
    "ssl.certificate.location": "REDSTRING_KAFKA_SSL_CERTFILE",
    "ssl.key.location": "REDSTRING_KAFKA_SSL_KEYFILE",
    "ssl.key.password": "REDSTRING_KAFKA_SSL_KEY_PASSWORD",
    "sasl.oauthbearer.client.secret": "REDSTRING_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET",
    "group.id": "REDSTRING_GROUP_ID",
    "session.timeout.ms": "REDSTRING_SESSION_TIMEOUT_S",
}

#: Passed-through librdkafka properties the worker's client honours: the Faust
#: setting each becomes, and how its value converts.
WORKER_EQUIVALENTS: dict[str, tuple[str, Any]] = {
    "client.id": ("broker_client_id", str),
    "request.timeout.ms": ("broker_request_timeout", lambda v: int(v) / 1000),
    "max.partition.fetch.bytes": ("consumer_max_fetch_size", int),
    "max.poll.interval.ms": ("broker_max_poll_interval", lambda v: int(v) / 1000),
    "metadata.max.age.ms": ("consumer_metadata_max_age_ms", int),
    "connections.max.idle.ms": ("consumer_connections_max_idle_ms", int),
    "check.crcs": ("broker_check_crcs", lambda v: v.strip().lower() in {"true", "1"}),
}
#: Security properties the worker honours through its SSL context and its
#: OAUTHBEARER token provider (streams.kafka.oauth).
_WORKER_SSL = {"ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification"}
_WORKER_OAUTH = {
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt",
}
#: Prefixes of properties that change how a client authenticates or encrypts:
#: one the worker cannot honour stops it (it would connect with less).
_SECURITY_PREFIXES = ("ssl.", "sasl.", "enable.ssl.", "enable.sasl.")


class KafkaConfigError(ValueError):
    """A Kafka setting that cannot work; the message names the setting."""


def property_name(env_key: str) -> str:
    """The librdkafka property a ``REDSTRING_KAFKA__<key>`` variable names:
    lower case, underscores read as dots (``log_level`` is librdkafka's one
    property with an underscore in it)."""
    key = env_key.lower()
    return key if key == "log_level" or "." in key else key.replace("_", ".")


@dataclass(frozen=True)
class ClientConfigs:
    """What each client library gets."""

    librdkafka: dict[str, Any]
    #: aiokafka's connection arguments (security_protocol, ssl_context,
    #: sasl_*), as the worker's consumer and producer receive them.
    aiokafka: dict[str, Any]
    #: Faust settings for the passed-through properties it has an equivalent
    #: for (WORKER_EQUIVALENTS).
    faust: dict[str, Any] = field(default_factory=dict)
    #: Passed-through properties only librdkafka clients use.
    cli_only: tuple[str, ...] = ()


def passthrough(settings: Settings) -> dict[str, str]:
    """``REDSTRING_KAFKA__*`` as librdkafka properties."""
    props: dict[str, str] = {}
    for key, value in settings.kafka.items():
        name = property_name(key)
        if name in FIRST_CLASS:
            raise KafkaConfigError(
                f"REDSTRING_KAFKA__{key.upper()} sets {name!r}, which has its own setting: "
                f"use {FIRST_CLASS[name]}"
            )
        props[name] = value
    return props


def _check_security(settings: Settings) -> tuple[str, str | None]:
    protocol = settings.kafka_security_protocol.upper()
    if protocol not in PROTOCOLS:
        raise KafkaConfigError(
            f"REDSTRING_KAFKA_SECURITY_PROTOCOL={settings.kafka_security_protocol!r}: "
            f"use one of {', '.join(PROTOCOLS)}"
        )
    mechanism = settings.kafka_sasl_mechanism.upper() if settings.kafka_sasl_mechanism else None
    if protocol.startswith("SASL_"):
        if mechanism is None:
            raise KafkaConfigError(
                f"REDSTRING_KAFKA_SECURITY_PROTOCOL={protocol} needs "
                f"REDSTRING_KAFKA_SASL_MECHANISM ({', '.join(MECHANISMS)})"
            )
        if mechanism not in MECHANISMS:
            raise KafkaConfigError(
                f"REDSTRING_KAFKA_SASL_MECHANISM={settings.kafka_sasl_mechanism!r}: "
                f"use one of {', '.join(MECHANISMS)}"
            )
        if mechanism == "OAUTHBEARER":
            pass  # a token provider instead: _token_provider
        elif not settings.kafka_sasl_username or settings.kafka_sasl_password is None:
            raise KafkaConfigError(
                f"SASL {mechanism} needs REDSTRING_KAFKA_SASL_USERNAME and "
                "REDSTRING_KAFKA_SASL_PASSWORD"
            )
    elif mechanism is not None:
        raise KafkaConfigError(
            f"REDSTRING_KAFKA_SASL_MECHANISM={mechanism} is set but "
            f"REDSTRING_KAFKA_SECURITY_PROTOCOL={protocol} does not use SASL: "
            "use SASL_SSL (or SASL_PLAINTEXT)"
        )
    if bool(settings.kafka_ssl_certfile) != bool(settings.kafka_ssl_keyfile):
        raise KafkaConfigError(
            "a client certificate needs both REDSTRING_KAFKA_SSL_CERTFILE and "
            "REDSTRING_KAFKA_SSL_KEYFILE"
        )
    tls_files = settings.kafka_ssl_cafile or settings.kafka_ssl_certfile
    if tls_files and not protocol.endswith("SSL"):
        raise KafkaConfigError(
            f"REDSTRING_KAFKA_SSL_* files are set but REDSTRING_KAFKA_SECURITY_PROTOCOL="
            f"{protocol} does not use TLS: use SSL (or SASL_SSL)"
        )
    return protocol, mechanism


def _token_provider(settings: Settings, props: Mapping[str, str]) -> Any:
    """The worker's OAUTHBEARER token provider, from the properties librdkafka
    reads for its own (streams.kafka.oauth)."""
    from streams.kafka.oauth import OidcTokenProvider, UnsecuredTokenProvider, principal_of

    if props.get("sasl.oauthbearer.method", "").lower() == "oidc":
        endpoint = props.get("sasl.oauthbearer.token.endpoint.url")
        client_id = props.get("sasl.oauthbearer.client.id")
        secret = settings.kafka_sasl_oauthbearer_client_secret
        if not endpoint or not client_id or secret is None:
            raise KafkaConfigError(
                "OAUTHBEARER with OIDC needs REDSTRING_KAFKA__SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL, "
                "REDSTRING_KAFKA__SASL_OAUTHBEARER_CLIENT_ID and "
                "REDSTRING_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET"
            )
        return OidcTokenProvider(
            endpoint,
            client_id,
            secret.get_secret_value(),
            props.get("sasl.oauthbearer.scope"),
            props.get("sasl.oauthbearer.extensions"),
        )
    if not _off(props.get("enable.sasl.oauthbearer.unsecure.jwt", "false")):
        principal = principal_of(props.get("sasl.oauthbearer.config", ""))
        if principal is None:
            raise KafkaConfigError(
                "unsecured OAUTHBEARER tokens need REDSTRING_KAFKA__SASL_OAUTHBEARER_CONFIG="
                "principal=<name>"
            )
        return UnsecuredTokenProvider(principal)
    raise KafkaConfigError(
        "REDSTRING_KAFKA_SASL_MECHANISM=OAUTHBEARER needs a token source: "
        "REDSTRING_KAFKA__SASL_OAUTHBEARER_METHOD=oidc with its endpoint, client id and "
        "REDSTRING_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET (docs/deploy.md, 'OAUTHBEARER'), or "
        "REDSTRING_KAFKA__ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT=true for a test broker"
    )


def _off(value: str | None) -> bool:
    return value is not None and value.strip().lower() in {"false", "0", "no", "none", ""}


def ssl_context(settings: Settings, props: Mapping[str, str]) -> ssl.SSLContext:
    """The worker's TLS context: the same trust, client certificate and checks
    librdkafka gets from the same settings."""
    from aiokafka.helpers import create_ssl_context

    password = settings.kafka_ssl_key_password
    try:
        context: ssl.SSLContext = create_ssl_context(
            cafile=settings.kafka_ssl_cafile or None,
            cadata=props.get("ssl.ca.pem") or None,
            certfile=settings.kafka_ssl_certfile or None,
            keyfile=settings.kafka_ssl_keyfile or None,
            password=password.get_secret_value() if password is not None else None,
        )
    except (OSError, ssl.SSLError) as exc:
        raise KafkaConfigError(
            f"cannot load the TLS files (REDSTRING_KAFKA_SSL_CAFILE, _CERTFILE, _KEYFILE, "
            f"_KEY_PASSWORD): {exc}"
        ) from None
    if _off(props.get("ssl.endpoint.identification.algorithm", "https")):
        context.check_hostname = False
    if _off(props.get("enable.ssl.certificate.verification", "true")):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def librdkafka_config(settings: Settings) -> dict[str, Any]:
    """librdkafka (confluent-kafka) settings shared by every client."""
    return client_configs(settings).librdkafka


def client_configs(settings: Settings) -> ClientConfigs:
    """Every client's configuration from ``settings``; ``KafkaConfigError``
    names the setting to fix when they cannot work."""
    protocol, mechanism = _check_security(settings)
    props = passthrough(settings)

    librdkafka: dict[str, Any] = {
        "bootstrap.servers": settings.kafka_bootstrap,
        "security.protocol": protocol,
        # librdkafka filters by syslog level before Python sees a line: its
        # debug lines only when they would be shown, else warnings and worse
        # (its informational ones are noise).
        "log_level": 7 if CLIENT_LOG.isEnabledFor(logging.DEBUG) else 4,
        "logger": CLIENT_LOG,
    }
    aiokafka: dict[str, Any] = {"security_protocol": protocol}
    if mechanism == "OAUTHBEARER":
        librdkafka["sasl.mechanism"] = mechanism
        secret = settings.kafka_sasl_oauthbearer_client_secret
        if secret is not None:
            librdkafka["sasl.oauthbearer.client.secret"] = secret.get_secret_value()
        aiokafka.update(
            sasl_mechanism=mechanism, sasl_oauth_token_provider=_token_provider(settings, props)
        )
    elif mechanism is not None:
        password = settings.kafka_sasl_password
        assert password is not None  # _check_security
        librdkafka.update(
            {
                "sasl.mechanism": mechanism,
                "sasl.username": settings.kafka_sasl_username,
                "sasl.password": password.get_secret_value(),
            }
        )
        aiokafka.update(
            sasl_mechanism=mechanism,
            sasl_plain_username=settings.kafka_sasl_username,
            sasl_plain_password=password.get_secret_value(),
        )
    if settings.kafka_ssl_cafile:
        librdkafka["ssl.ca.location"] = settings.kafka_ssl_cafile
    if settings.kafka_ssl_certfile:
        librdkafka["ssl.certificate.location"] = settings.kafka_ssl_certfile
        librdkafka["ssl.key.location"] = settings.kafka_ssl_keyfile
    if settings.kafka_ssl_key_password is not None:
        librdkafka["ssl.key.password"] = settings.kafka_ssl_key_password.get_secret_value()
    librdkafka.update(props)

    faust: dict[str, Any] = {}
    cli_only: list[str] = []
    unsupported: list[str] = []
    for name, value in props.items():
        if name in WORKER_EQUIVALENTS:
            setting, convert = WORKER_EQUIVALENTS[name]
            try:
                faust[setting] = convert(value)
            except ValueError:
                raise KafkaConfigError(
                    f"REDSTRING_KAFKA__{name.replace('.', '_').upper()}={value!r}: not a number"
                ) from None
        elif name in _WORKER_SSL or name in _WORKER_OAUTH or name == "ssl.ca.pem":
            pass  # in the SSL context
        elif name.startswith(_SECURITY_PREFIXES):
            unsupported.append(name)
        else:
            cli_only.append(name)
    if unsupported:
        raise KafkaConfigError(
            "the worker's Kafka client (aiokafka) cannot honour "
            + ", ".join(f"REDSTRING_KAFKA__{n.replace('.', '_').upper()}" for n in unsupported)
            + ": use the REDSTRING_KAFKA_SSL_* and REDSTRING_KAFKA_SASL_* settings "
            "(docs/deploy.md, 'Kafka security')"
        )
    if protocol.endswith("SSL"):
        aiokafka["ssl_context"] = ssl_context(settings, props)
    return ClientConfigs(librdkafka, aiokafka, faust, tuple(sorted(cli_only)))


def faust_credentials(aiokafka: Mapping[str, Any]) -> Any:
    """Faust's ``broker_credentials`` that make its aiokafka clients connect as
    ``aiokafka`` says: Faust derives the protocol from the credentials' type and
    whether they carry an SSL context, so SASL without a context would be
    SASL_PLAINTEXT and TLS without credentials would be PLAINTEXT."""
    import faust

    protocol = aiokafka["security_protocol"]
    context = aiokafka.get("ssl_context")
    if protocol == "PLAINTEXT":
        return None
    if protocol == "SSL":
        return faust.SSLCredentials(context)
    if aiokafka["sasl_mechanism"] == "OAUTHBEARER":
        return faust.OAuthCredentials(
            oauth_cb=aiokafka["sasl_oauth_token_provider"], ssl_context=context
        )
    return faust.SASLCredentials(
        username=aiokafka["sasl_plain_username"],
        password=aiokafka["sasl_plain_password"],
        mechanism=aiokafka["sasl_mechanism"],
        ssl_context=context,
    )


class KafkaConnectError(ConnectionError):
    """The brokers refuse this client's configuration; the message is one line
    naming the settings to fix. A ``ConnectionError``, so the worker retries
    it (and says so in /readyz) like any broker outage: a rotated credential
    or certificate can be fixed without a restart."""


def explain(code: str, message: str) -> str | None:
    """One line naming the settings to fix when a librdkafka error (its code's
    name and text) says the configuration cannot connect, else None (a broker
    that is down or restarting is retried, not explained)."""
    text = message.lower()
    sasl_refusal = "sasl" in text and ("auth" in text or "mechanism" in text)
    if code == "_AUTHENTICATION" or "authentication failed" in text or sasl_refusal:
        return (
            "Kafka refused the SASL credentials: check REDSTRING_KAFKA_SASL_USERNAME, "
            "REDSTRING_KAFKA_SASL_PASSWORD and REDSTRING_KAFKA_SASL_MECHANISM "
            f"(broker said: {message})"
        )
    if "certificate verify failed" in text or "could not be verified" in text:
        return (
            "the broker's TLS certificate is not trusted: set REDSTRING_KAFKA_SSL_CAFILE to "
            f"the CA that signed it (broker said: {message})"
        )
    if "wrong version number" in text or "connecting to a plaintext" in text:
        return (
            "TLS to a listener that does not speak it: check REDSTRING_KAFKA_SECURITY_PROTOCOL "
            f"and REDSTRING_KAFKA_BOOTSTRAP (broker said: {message})"
        )
    if "incorrect security.protocol" in text or "connecting to a ssl listener" in text:
        return (
            "the listener expects TLS or SASL: check REDSTRING_KAFKA_SECURITY_PROTOCOL and "
            f"REDSTRING_KAFKA_BOOTSTRAP (broker said: {message})"
        )
    if code == "_SSL" or "ssl handshake failed" in text:
        return (
            "the TLS handshake failed: check REDSTRING_KAFKA_SSL_CAFILE, and "
            "REDSTRING_KAFKA_SSL_CERTFILE and REDSTRING_KAFKA_SSL_KEYFILE if the brokers "
            f"require a client certificate (broker said: {message})"
        )
    return None


def tls_listener(bootstrap: str, timeout: float = 3.0) -> str | None:
    """The first bootstrap server that completes a TLS handshake, if any. A
    plaintext client against a TLS listener sees only "all brokers are down"
    (the broker closes the connection at the first request), as it would for a
    broker that is down; this tells the two apart."""
    import socket

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with (
                socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as raw,
                context.wrap_socket(raw, server_hostname=host.strip("[]")),
            ):
                return server.strip()
        except (OSError, ValueError):
            continue
    return None


def explain_unreachable(settings: Settings) -> str | None:
    """Why no broker answers, when the configuration is the reason."""
    if settings.kafka_security_protocol.upper().endswith("SSL"):
        return None
    server = tls_listener(settings.kafka_bootstrap)
    if server is None:
        return None
    return (
        f"{server} speaks TLS but REDSTRING_KAFKA_SECURITY_PROTOCOL is "
        f"{settings.kafka_security_protocol}: set it to SSL or SASL_SSL (or point "
        "REDSTRING_KAFKA_BOOTSTRAP at a plaintext listener)"
    )
