"""Public errors.

Every error a port may raise lives here, so adapters and callers agree on what
can happen without importing each other.
"""

from __future__ import annotations

from collections.abc import Iterable

from contracts.ids import EntityId, TenantId


class RedstringError(Exception):
    """Base of every error redstring raises on purpose."""


class MissingEntityError(RedstringError, LookupError):
    """A write referenced an entity the store does not hold for that tenant."""

    def __init__(self, tenant_id: TenantId, entity_ids: Iterable[EntityId]) -> None:
        self.tenant_id = tenant_id
        self.entity_ids = tuple(sorted(set(entity_ids)))
        super().__init__(
            f"tenant {tenant_id!r}: no entity with id {', '.join(map(repr, self.entity_ids))}"
        )


class AliasCycleError(RedstringError):
    """Alias resolution met a cycle: the store is corrupt and needs an operator."""

    def __init__(self, tenant_id: TenantId, entity_id: EntityId) -> None:
        self.tenant_id = tenant_id
        self.entity_id = entity_id
        super().__init__(
            f"tenant {tenant_id!r}: aliases of entity {entity_id!r} form a cycle; "
            "the store is corrupt (no merge may close a cycle)"
        )


class TenantIsolationError(RedstringError):
    """A record of another tenant reached a tenant-scoped read or write."""

    def __init__(self, expected: str | None, found: str | None, where: str) -> None:
        self.expected = expected
        self.found = found
        self.where = where
        super().__init__(
            f"{where}: record of tenant {found!r} in a call scoped to tenant {expected!r}"
        )


class MissingTenantContextError(RedstringError):
    """A tenant-scoped operation ran with no tenant bound."""


class DimensionMismatchError(RedstringError, ValueError):
    """A vector's length differs from the store's dimension."""

    def __init__(self, expected: int, got: int, where: str = "") -> None:
        self.expected = expected
        self.got = got
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}vector has dimension {got}, the store expects {expected}")


class EmbeddingIdentityMismatchError(RedstringError):
    """A populated vector store was opened with another embedding identity."""

    def __init__(self, field: str, stored: object, requested: object) -> None:
        self.field = field
        self.stored = stored
        self.requested = requested
        super().__init__(
            f"this vector store was populated with {field}={stored!r} but was opened with "
            f"{field}={requested!r}. Vectors from different embedding setups are not "
            "comparable: build a new store beside this one and rebuild it from the log "
            "(see docs/operations.md, 'changing the embedding model')."
        )


class TopicRecreatedError(RedstringError):
    """A checkpoint belongs to an earlier incarnation of a topic with the same name."""

    def __init__(self, topic: str, stored_topic_id: str, topic_id: str) -> None:
        self.topic = topic
        super().__init__(
            f"topic {topic!r} now has topic id {topic_id} but this store's checkpoints "
            f"belong to topic id {stored_topic_id}: the topic was deleted and recreated. "
            "Its offsets mean something else now; rebuild into fresh stores."
        )


class CheckpointRegressionError(RedstringError):
    """Something asked a checkpoint to move backwards; checkpoints never do."""


class SchemaVersionTooNewError(RedstringError):
    """An event carries a schema_version newer than this build understands."""

    def __init__(
        self,
        version: int,
        supported: int,
        *,
        tenant_id: str | None = None,
        event_id: str | None = None,
    ) -> None:
        self.version = version
        self.supported = supported
        #: The envelope's tenant, so that the caller can check it against the
        #: Kafka key before pausing (``streams.worker.decode``).
        self.tenant_id = tenant_id
        #: The envelope's event id, so that ``redstring skip`` can tell a store
        #: that skipped the record from one a newer build applied it to.
        self.event_id = event_id
        super().__init__(
            f"event has schema_version {version}; this build understands up to "
            f"{supported}. Upgrade the workers to resume this partition."
        )


class InvalidEventError(RedstringError, ValueError):
    """A Kafka value is not a valid event; it belongs in the dead-letter topic."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class SignatureError(InvalidEventError):
    """A control event is unsigned or its signature does not verify."""


class TransientStoreError(RedstringError):
    """A store is briefly unavailable; retry with backoff."""


class TransactionEndedError(TransientStoreError):
    """The store's server ended a transaction: it outlived its timeout
    (``REDSTRING_TRANSACTION_TIMEOUT_S``), or an administrator terminated it.
    Nothing of it was committed. Retried like any transient error, with a
    unit of work that holds fewer records (docs/adr/0021-transaction-bounds.md)."""


#: What a store or the broker raises for "try again": the adapters' own
#: ``TransientStoreError`` (unavailable, timeouts, deadlocks, serialization
#: failures), and connection, timeout and OS errors that reach a caller
#: untranslated. Anything else is not transient: retrying the same work gives
#: the same answer (docs/semantics.md, "Failures").
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (TransientStoreError, OSError, TimeoutError)


def is_transient(error: BaseException) -> bool:
    """Whether retrying the same work later may succeed."""
    return isinstance(error, TRANSIENT_ERRORS)


class PermanentStoreError(RedstringError):
    """A store rejected a value; retrying will not help."""


class AliasChainTooDeepError(PermanentStoreError):
    """An alias chain is (or a write would make it) longer than the store's
    ``max_alias_depth``: the event that needs it is refused and dead-lettered,
    in both stores alike (they hold the same alias facts)."""

    def __init__(self, tenant_id: TenantId, entity_id: EntityId, limit: int) -> None:
        self.tenant_id = tenant_id
        self.entity_id = entity_id
        self.limit = limit
        super().__init__(
            f"tenant {tenant_id!r}: the alias chain through {entity_id!r} would be longer "
            f"than {limit} hops (REDSTRING_MAX_ALIAS_DEPTH)"
        )


class ReadOnlyStoreError(RedstringError):
    """A write, or a unit of work, was asked of a store opened read-only
    (docs/adr/0016-read-only-open.md); nothing reached the database."""

    def __init__(self, store: str, call: str) -> None:
        self.store = store
        self.call = call
        super().__init__(
            f"{store} was opened read-only and refuses {call}; the workers write, "
            "readers open with open_readers(settings) or read_only=True"
        )


class StoreSchemaError(RedstringError):
    """A store opened read-only found a schema it cannot read: none at all,
    an older one with migrations pending, or a newer one than this code
    knows (docs/adr/0016-read-only-open.md). ``problem`` says what is
    wrong, ``remedy`` what to run."""

    def __init__(self, store: str, problem: str, remedy: str) -> None:
        self.store = store
        self.problem = problem
        self.remedy = remedy
        super().__init__(f"{store}: {problem}; {remedy}")
