"""From a Kafka record to what a fold consumes, or to a dead letter.

Shared by the agent and by ``redstring fold``, so that a dry run judges a value
exactly as the workers will.

:func:`decode` is total: whatever the key and the value, it returns a
:class:`Decoded` (an event, or a dead letter with its reason), or raises
``SchemaVersionTooNewError`` for a well-formed envelope of a newer schema
version whose key matches its tenant (the agent pauses the partition). The
event contract refuses everything else with ``InvalidEventError``, the one
error caught here (tests/unit/test_decode_totality.py proves it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from contracts import signing
from contracts.errors import InvalidEventError, SchemaVersionTooNewError
from contracts.events import Event, parse_event
from contracts.ids import TenantId, tenant_id
from contracts.limits import DEFAULT_LIMITS, EventLimits, check_event_limits
from projections.records import LogRecord
from streams.kafka.partitioning import partition_for

#: How much of a Kafka key a dead-letter reason quotes.
_KEY_QUOTE = 80


@dataclass(frozen=True, slots=True)
class Decoded:
    record: LogRecord
    #: Why the value is dead-lettered, when it is.
    dead_letter_reason: str | None = None


def _key_tenant(key: bytes | None) -> TenantId | None:
    if key is None:
        return None
    try:
        return tenant_id(key.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def _quote_key(key: bytes | None) -> str:
    text = repr(key)
    return text if len(text) <= _KEY_QUOTE else f"{text[: _KEY_QUOTE - 5]}...{text[-2:]}"


def _wrong_partition(key: bytes | None, partition: int, partitions: int) -> str | None:
    """Why a record is on the wrong partition for its key, if it is."""
    if key is None:
        return None  # judged below: a record needs its tenant as its key
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    right = partition_for(text, partitions)
    if right == partition:
        return None
    return (
        f"the record is on partition {partition}, but its Kafka key {_quote_key(key)} "
        f"belongs on partition {right} of {partitions} (a producer with another partitioner?)"
    )


def decode(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    control_keys: signing.ControlKeys | bytes | None,
    *,
    topic_id: str = "",
    partition: int | None = None,
    partitions: int | None = None,
    logged_at: datetime | None = None,
    max_age: timedelta | None = None,
    trust_unsigned: bool = False,
    keyless: bool = False,
    limits: EventLimits = DEFAULT_LIMITS,
) -> Decoded:
    """Validate one record (``keyless``: a file has no Kafka keys, so the
    envelope's tenant stands for the key). Raises ``SchemaVersionTooNewError``
    (pause, do not dead-letter) only for a well-formed envelope whose key
    matches its tenant and its partition; every other problem becomes a dead
    letter with its reason.

    Control events verify against ``control_keys`` for the topic whose Kafka
    topic id is ``topic_id``, and are refused when their ``occurred_at`` is
    more than ``max_age`` before ``logged_at`` (the record's Kafka timestamp).
    ``partition`` of ``partitions``: where the record was read; a record whose
    key belongs on another partition is refused."""
    key_tenant = _key_tenant(key)
    try:
        if partition is not None and partitions is not None and not keyless:
            misplaced = _wrong_partition(key, partition, partitions)
            if misplaced is not None:
                raise InvalidEventError(misplaced)
        if value is None:
            raise InvalidEventError("value is empty (a tombstone record?)")
        try:
            event: Event = parse_event(value)
        except SchemaVersionTooNewError as exc:
            if keyless or (key_tenant is not None and key_tenant == exc.tenant_id):
                raise
            # A record the key does not route to its tenant cannot stop the
            # partition: it is not that tenant's history.
            raise InvalidEventError(
                f"schema_version {exc.version} is newer than this build's {exc.supported}, "
                f"but the Kafka key {_quote_key(key)} does not match tenant_id "
                f"{exc.tenant_id!r}, so this is no reason to pause"
            ) from None
        if not keyless and key_tenant != event.tenant:
            raise InvalidEventError(
                f"the Kafka key {_quote_key(key)} does not match tenant_id {event.tenant_id!r}"
            )
        check_event_limits(event, limits)
        if not (trust_unsigned and event.signature is None):
            signing.verify(event, control_keys, topic_id=topic_id)
            signing.check_age(event, logged_at, max_age)
    except InvalidEventError as exc:
        return Decoded(LogRecord(offset, key_tenant, None), exc.reason)
    return Decoded(LogRecord(offset, event.tenant, event))
