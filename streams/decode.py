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

from contracts import signing
from contracts.errors import InvalidEventError, SchemaVersionTooNewError
from contracts.events import Event, parse_event
from contracts.ids import TenantId, tenant_id
from projections.records import LogRecord

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
    envelope's tenant stands for the key). Raises ``SchemaVersionTooNewError``
    (pause, do not dead-letter) only for a well-formed envelope whose key
    matches its tenant; every other problem becomes a dead letter with its
    reason."""
    key_tenant = _key_tenant(key)
    try:
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
        if not (trust_unsigned and event.signature is None):
            signing.verify(event, control_key)
    except InvalidEventError as exc:
        return Decoded(LogRecord(offset, key_tenant, None), exc.reason)
    return Decoded(LogRecord(offset, event.tenant, event))
