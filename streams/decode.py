"""From a Kafka record to what a fold consumes, or to a dead letter.

Shared by the agent and by ``redstring fold``, so that a dry run judges a value
exactly as the workers will.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import signing
from contracts.errors import InvalidEventError
from contracts.events import Event, parse_event
from contracts.ids import TenantId, tenant_id
from projections.records import LogRecord


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


def decode(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    control_key: bytes | None,
    *,
    trust_unsigned: bool = False,
    keyless: bool = False,
) -> Decoded:
    """Validate one record (``keyless``: a file has no Kafka keys, so the
    envelope's tenant stands for the key). Raises ``SchemaVersionTooNewError`` (pause, do not
    dead-letter); every other problem becomes a dead letter with its reason."""
    key_tenant = _key_tenant(key)
    try:
        if value is None:
            raise InvalidEventError("value is empty (a tombstone record?)")
        event: Event = parse_event(value)
        if not keyless and key_tenant != event.tenant:
            raise InvalidEventError(
                f"the Kafka key {key!r} does not match tenant_id {event.tenant_id!r}"
            )
        if not (trust_unsigned and event.signature is None):
            signing.verify(event, control_key)
    except InvalidEventError as exc:
        return Decoded(LogRecord(offset, key_tenant, None), exc.reason)
    return Decoded(LogRecord(offset, event.tenant, event))
