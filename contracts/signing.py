"""Signed control events.

``TenantReplayRequested`` and ``TenantErased`` wipe a tenant's projection, so
they carry an HMAC-SHA256 over the canonical envelope with a key the
operators hold (``REDSTRING_CONTROL_KEY``). An ordinary producer cannot forge
one; an unsigned or badly signed control event is dead-lettered.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from contracts.errors import SignatureError
from contracts.events import Event, event_to_dict, parse_event_dict


def canonical_bytes(event: Event) -> bytes:
    """The bytes the signature covers: the envelope without ``signature``, as JSON
    with sorted keys and no insignificant whitespace."""
    data: dict[str, Any] = event_to_dict(event)
    data.pop("signature", None)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _digest(event: Event, key: bytes) -> str:
    return hmac.new(key, canonical_bytes(event), hashlib.sha256).hexdigest()


def sign(event: Event, key: bytes) -> Event:
    if not key:
        raise ValueError("the control-event key is empty; set REDSTRING_CONTROL_KEY")
    data = event_to_dict(event)
    data["signature"] = _digest(event, key)
    return parse_event_dict(data)


def verify(event: Event, key: bytes | None) -> None:
    """Raise ``SignatureError`` unless ``event`` is a control event signed with ``key``.
    Ordinary events need no signature and pass."""
    if not event.is_control:
        return
    if not key:
        raise SignatureError(
            f"{event.event_type} cannot be verified: no control key is configured "
            "(set REDSTRING_CONTROL_KEY)"
        )
    if event.signature is None:
        raise SignatureError(f"{event.event_type} is unsigned; control events must be signed")
    # Bytes, not str: compare_digest raises TypeError on a non-ASCII str (the
    # contract only admits 64 hex digits, but a bad signature is refused here,
    # whatever it holds, never raised past the caller).
    given = event.signature.encode("utf-8", "surrogatepass")
    if not hmac.compare_digest(given, _digest(event, key).encode("ascii")):
        raise SignatureError(f"{event.event_type} has a bad signature")
