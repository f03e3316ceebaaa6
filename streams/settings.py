"""Configuration from ``REDSTRING_*`` environment variables (docs/design.md 7).

Kafka's security settings (TLS, SASL) map to every client through
streams.kafka.config, and any other librdkafka property passes through as
``REDSTRING_KAFKA__<property>``. Secrets are ``SecretStr`` so they never appear
in logs or reprs. ``check_environment`` refuses a ``REDSTRING_*`` variable that
names no setting (a misspelling would otherwise be ignored).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from datetime import timedelta

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from contracts.events import (
    MAX_ENTITIES_PER_DOCUMENT,
    MAX_EVENT_BYTES,
    MAX_RELATIONSHIPS_PER_DOCUMENT,
)
from contracts.limits import (
    DEFAULT_MAX_ALIAS_DEPTH,
    DEFAULT_MAX_PROPERTY_KEYS,
    MAX_ALIAS_DEPTH,
    EventLimits,
)
from contracts.signing import DEFAULT_KEY_ID, ControlKeys


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="REDSTRING_", extra="ignore", env_nested_delimiter="__"
    )

    # Kafka
    kafka_bootstrap: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers.")
    kafka_security_protocol: str = Field(
        "PLAINTEXT", description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."
    )
    kafka_sasl_mechanism: str | None = Field(
        None,
        description="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (with SASL_SSL or "
        "SASL_PLAINTEXT).",
    )
    kafka_sasl_username: str | None = Field(None, description="SASL user name.")
    kafka_sasl_password: SecretStr | None = Field(None, description="SASL password.")
    kafka_sasl_oauthbearer_client_secret: SecretStr | None = Field(
        None,
        description="OAUTHBEARER with OIDC: the client secret for the token endpoint "
        "(REDSTRING_KAFKA__SASL_OAUTHBEARER_* give the rest).",
    )
    kafka_ssl_cafile: str | None = Field(
        None, description="CA bundle (PEM) that verifies the brokers' certificates."
    )
    kafka_ssl_certfile: str | None = Field(
        None, description="Client certificate (PEM) for brokers that require mutual TLS."
    )
    kafka_ssl_keyfile: str | None = Field(
        None, description="The client certificate's private key (PEM)."
    )
    kafka_ssl_key_password: SecretStr | None = Field(
        None, description="Password of the client key, if it is encrypted."
    )
    kafka: dict[str, str] = Field(
        default_factory=dict,
        description="Any other librdkafka property, one variable each: "
        "REDSTRING_KAFKA__<property> with its dots written as underscores (e.g. "
        "REDSTRING_KAFKA__CLIENT_ID). The worker honours those with an aiokafka equivalent "
        "(docs/deploy.md).",
    )
    topic: str = Field("redstring.events", description="The events topic.")
    partitions: int = Field(12, ge=1, description="Partitions when creating the topic.")
    replication_factor: int = Field(1, ge=1, description="Replication when creating topics.")
    group_id: str = Field("redstring-projector", description="The workers' consumer group.")

    # Stores
    neo4j_uri: str = Field("bolt://127.0.0.1:7687", description="Neo4j Bolt URI.")
    neo4j_user: str = Field("neo4j", description="Neo4j user.")
    neo4j_password: SecretStr = Field(SecretStr(""), description="Neo4j password.")
    neo4j_database: str = Field("neo4j", description="Neo4j database name.")
    pg_schema: str = Field("redstring", description="Postgres schema holding the vector store.")
    pg_dsn: SecretStr = Field(
        SecretStr("postgresql://postgres@127.0.0.1:5432/redstring"),
        description="Postgres DSN (libpq form).",
    )

    # Embeddings
    embedding_model: str = Field(
        "redstring-hashing-v1",
        description="'redstring-hashing-v1' (built in, no download) or a local model directory.",
    )
    embedding_dimension: int = Field(
        384, ge=1, description="Embedding vector dimension; fixed for a vector store's life."
    )

    # Projection
    control_key: SecretStr = Field(
        SecretStr(""),
        description="One HMAC key for replay and erasure control events; its key id is "
        "'default'. Kept for single-key deployments: see REDSTRING_CONTROL_KEYS.",
    )
    control_keys: SecretStr = Field(
        SecretStr(""),
        description="Control keys by id, oldest first: 'id1:secret1,id2:secret2'. Workers "
        "verify with any of them (and REDSTRING_CONTROL_KEY as id 'default'); keep old ids "
        "configured so earlier erasures stay valid.",
    )
    control_key_id: str | None = Field(
        None,
        description="The key id that signs new control events (default: the last of "
        "REDSTRING_CONTROL_KEYS, else 'default').",
    )
    control_max_age_s: float = Field(
        86400.0,
        gt=0,
        description="A control event whose occurred_at is more than this many seconds before "
        "its record's Kafka timestamp (or over 5 minutes after it) is dead-lettered.",
    )
    batch_size: int = Field(2000, ge=1, description="Events per batch.")
    batch_wait_ms: int = Field(
        20,
        ge=1,
        description="How long the consumer gathers records before it hands them to the "
        "worker's intake (also how long records that reached REDSTRING_READ_AHEAD_BYTES "
        "wait before they are handed over). A batch is applied as soon as the one before "
        "it is written, with whatever was gathered meanwhile, up to REDSTRING_BATCH_SIZE.",
    )
    fetch_max_wait_ms: int = Field(
        200,
        ge=1,
        le=1500,
        description="How long the worker's fetches wait at the end of the log for new records "
        "(records that arrive end the wait at once). A seek (a replay, a refused batch) waits "
        "for the fetch in flight, so this bounds that wait; Faust's own value is 1500 ms.",
    )
    share_units_up_to: int = Field(
        16,
        ge=0,
        description="Records per unit of work shared by several partitions: the partitions of "
        "a batch with fewer records each (within one sub-batch) write them in units of work "
        "of up to this many records per store, several at once, instead of one per partition "
        "(docs/adr/0024-units-of-work-across-partitions.md; 16, the default, is the value "
        "measured). 0: one unit of work per partition.",
    )
    batch_max_bytes: int = Field(
        8_000_000,
        ge=MAX_EVENT_BYTES,
        description="Bytes of Kafka values per sub-batch: a batch is cut, per partition and in "
        "order, into sub-batches applied one after the other (at least the largest event).",
    )
    read_ahead_bytes: int = Field(
        16_000_000,
        ge=MAX_EVENT_BYTES,
        description="Bytes of Kafka values a worker reads ahead of the projector: a batch is "
        "handed over once it holds this many, and the consumer's queue holds at most as many "
        "maximum-size events (so at most about twice this is read but not yet applied).",
    )
    apply_max_bytes: int = Field(
        16_000_000,
        ge=MAX_EVENT_BYTES,
        description="Bytes of Kafka values being decoded and applied at once, across all of a "
        "worker's partitions (a decoded event takes about five times its value's bytes); a "
        "sub-batch waits while those in flight would pass this, unless none is in flight.",
    )
    batch_max_entities: int = Field(
        20_000,
        ge=MAX_ENTITIES_PER_DOCUMENT,
        description="Entities per sub-batch, counted from the raw value as its JSON objects "
        "(an upper bound: every entity is one); at least one maximum-size event.",
    )
    write_chunk_entities: int = Field(
        1000,
        ge=1,
        description="Entities (and edges) per embedding call and per store write inside a "
        "unit of work.",
    )
    max_entities_per_event: int = Field(
        MAX_ENTITIES_PER_DOCUMENT,
        ge=1,
        le=MAX_ENTITIES_PER_DOCUMENT,
        description="Entities per DocumentExtracted; more is dead-lettered.",
    )
    max_relationships_per_event: int = Field(
        MAX_RELATIONSHIPS_PER_DOCUMENT,
        ge=1,
        le=MAX_RELATIONSHIPS_PER_DOCUMENT,
        description="Relationships per DocumentExtracted; more is dead-lettered.",
    )
    max_property_keys: int = Field(
        DEFAULT_MAX_PROPERTY_KEYS,
        ge=1,
        description="Keys per property map (of an entity or a relationship); more is "
        "dead-lettered.",
    )
    max_alias_depth: int = Field(
        DEFAULT_MAX_ALIAS_DEPTH,
        ge=1,
        le=MAX_ALIAS_DEPTH,
        description="Alias hops from any id to its canonical; a merge that would make a longer "
        "chain is dead-lettered. Never lower it below a chain the stores hold.",
    )
    stall_after_s: float = Field(
        15.0,
        gt=0,
        description="Seconds a partition may be handed nothing while its stores are behind "
        "the log end before the worker seeks it again and reports not-ready.",
    )
    applied_event_retention_days: float = Field(
        7.0, gt=0, description="How long stores remember applied event ids."
    )
    session_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Consumer group session timeout; a dead worker's partitions wait this long.",
    )
    transaction_timeout_s: float = Field(
        60.0,
        gt=0,
        description="Longest a transaction may run in Neo4j, or sit idle inside one in Postgres, "
        "before the server ends it and releases its locks: bounds how long a frozen worker "
        "holds its partitions from their next owner. Keep it well above a batch's writes.",
    )
    gc_young_threshold: int = Field(
        20_000,
        ge=1,
        description="Net allocations of container objects between two collections of Python's "
        "youngest generation in a worker (Python's default is 700): higher spends less CPU "
        "on the collector and holds garbage cycles longer (docs/adr/0022-garbage-collector.md).",
    )
    heap_trim_interval_s: float = Field(
        1.0,
        ge=0,
        description="At most how often a worker hands the heap its batches freed back to the "
        "system (glibc's malloc_trim, a few milliseconds) as it takes a batch; 0: never. "
        "Without it the worker's RSS stays at its busiest batches' high-water mark "
        "(docs/adr/0025-heap-trim.md).",
    )
    worker_id: str | None = Field(
        None, description="Static group membership id (stable per worker, e.g. the pod name)."
    )
    http_host: str = Field("0.0.0.0", description="Health and metrics endpoint host.")
    http_port: int = Field(6066, description="Health and metrics endpoint port.")
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR.")

    # The read API (`redstring serve`, docs/readers.md)
    serve_host: str = Field("0.0.0.0", description="The read API's listening host.")
    serve_port: int = Field(8080, ge=0, le=65535, description="The read API's listening port.")
    serve_jwt_key: SecretStr = Field(
        SecretStr(""),
        description="The read API verifies bearer tokens with this key: an HS256 secret (at "
        "least 32 bytes), or a PEM public key (RSA, EC or Ed25519). Set this or "
        "REDSTRING_SERVE_JWKS_URL.",
    )
    serve_jwks_url: str | None = Field(
        None,
        description="The read API verifies bearer tokens with the keys published at this JWKS "
        "URL (the token's kid picks the key; keys are cached for 5 minutes).",
    )
    serve_jwt_algorithms: str = Field(
        "",
        description="Comma-separated JWT algorithms the read API accepts (empty: HS256 with a "
        "secret, RS/PS/ES/EdDSA with a PEM key or JWKS; 'none' is never accepted).",
    )
    serve_jwt_issuer: str | None = Field(
        None, description="When set, a token's iss claim must equal it."
    )
    serve_jwt_audience: str | None = Field(
        None,
        description="When set, a token's aud claim must contain it (unset: a token with an "
        "aud claim is refused).",
    )
    serve_tenant_claim: str = Field(
        "tenant_id", description="The token claim that names the one tenant a token may read."
    )
    serve_jwt_leeway_s: float = Field(
        30.0, ge=0, description="Clock skew allowed on a token's exp, nbf and iat, in seconds."
    )
    serve_max_wait_s: float = Field(
        30.0,
        gt=0,
        description="The longest a read-your-writes request may wait for a position.",
    )

    @property
    def dlq_topic(self) -> str:
        return f"{self.topic}.dlq"

    def queue_records(self) -> int:
        """Records the consumer may queue ahead of the batch being gathered: as
        many maximum-size events as fit in REDSTRING_READ_AHEAD_BYTES."""
        return max(2, self.read_ahead_bytes // MAX_EVENT_BYTES)

    def event_limits(self) -> EventLimits:
        """The caps decode applies on top of the contract's own."""
        return EventLimits(
            max_entities=self.max_entities_per_event,
            max_relationships=self.max_relationships_per_event,
            max_property_keys=self.max_property_keys,
        )

    def control_key_bytes(self) -> bytes | None:
        return self.control_key.get_secret_value().encode() or None

    def control_keyring(self) -> ControlKeys:
        """Every configured control key by id: REDSTRING_CONTROL_KEY as id
        'default', then REDSTRING_CONTROL_KEYS (the last of which signs, unless
        REDSTRING_CONTROL_KEY_ID names another)."""
        keys: dict[str, bytes] = {}
        single = self.control_key_bytes()
        if single is not None:
            keys[DEFAULT_KEY_ID] = single
        for key_id, secret in ControlKeys.parse(self.control_keys.get_secret_value()).items():
            if key_id in keys and keys[key_id] != secret:
                raise ValueError(
                    f"control key id {key_id!r} is given twice with different secrets "
                    "(REDSTRING_CONTROL_KEY is id 'default')"
                )
            keys.pop(key_id, None)
            keys[key_id] = secret
        return ControlKeys(keys, self.control_key_id)

    @property
    def control_max_age(self) -> timedelta:
        return timedelta(seconds=self.control_max_age_s)


#: REDSTRING_* variables that are not settings: the local stack's, the test
#: suites' and the benchmarks' own knobs (names, then prefixes).
TOOL_VARIABLES = frozenset(
    {
        "REDSTRING_CACHE_DIR",
        "REDSTRING_HYPOTHESIS_PROFILE",
        "REDSTRING_IMAGE_TAG",
        "REDSTRING_JAVA_HOME",
        "REDSTRING_KEEP_STACK",
        "REDSTRING_LAYER",
        "REDSTRING_M2_REPO",
        "REDSTRING_PG_OS_USER",
        "REDSTRING_ROOT",
        "REDSTRING_TEST_STACK",
        "REDSTRING_TOOLS_BIN",
    }
)
TOOL_PREFIXES = (
    "REDSTRING_CHAOS_",
    "REDSTRING_DEVSTACK_",
    "REDSTRING_SIM_",
    "REDSTRING_WORKLOAD_",
)


def setting_variables() -> list[str]:
    """The environment variable of every setting."""
    return sorted(f"REDSTRING_{name.upper()}" for name in Settings.model_fields)


def check_environment(environ: Mapping[str, str]) -> None:
    """Refuse a ``REDSTRING_*`` variable that names no setting, with the
    closest names: a misspelt ``REDSTRING_KAFKA_SASL_PASWORD`` would otherwise
    be ignored and the client would connect without it."""
    known = set(setting_variables())
    unknown = []
    for name in environ:
        upper = name.upper()
        if not upper.startswith("REDSTRING_") or upper in known or upper in TOOL_VARIABLES:
            continue
        if upper.startswith(TOOL_PREFIXES) or upper.startswith("REDSTRING_KAFKA__"):
            continue
        unknown.append(name)
    if not unknown:
        return
    lines = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name.upper(), sorted(known), n=2, cutoff=0.75)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        lines.append(f"{name} is not a redstring setting{hint}")
    raise UnknownSettingError(
        "; ".join(lines) + ". docs/deploy.md lists every setting; unset the variable or fix "
        "its name."
    )


class UnknownSettingError(ValueError):
    pass
