"""Signed control events (docs/adr/0008-control-event-binding.md).

``TenantReplayRequested`` and ``TenantErased`` wipe a tenant's projection, so
they carry an HMAC-SHA256 with a key the operators hold. The MAC covers

- the events topic's Kafka topic id (a copy published to another topic, or to
  a topic re-created under the same name, does not verify),
- the key id, which the envelope also names (``key_id``), so that workers can
  hold several keys and a rotation keeps earlier erasures verifiable,
- the canonical envelope: everything but ``signature``, as JSON with sorted
  keys and no insignificant whitespace.

An ordinary producer cannot forge one; an unsigned, badly signed, foreign or
unknown-key control event is dead-lettered. :func:`check_age` refuses a control
event whose ``occurred_at`` is too far from the time its record reached the
log (the record's Kafka timestamp), the same verdict on every re-read.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from contracts.errors import SignatureError
from contracts.events import Event, event_to_dict, parse_event_dict

#: The id of the key given as ``REDSTRING_CONTROL_KEY`` (a single key).
DEFAULT_KEY_ID = "default"
#: What a key id may be: it travels in the envelope and in settings text.
KEY_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: How far ahead of its record's timestamp a control event may claim to have
#: occurred (clock skew between the signer and the broker).
MAX_FUTURE = timedelta(minutes=5)
#: Separates the MAC's inputs, and names this scheme: a signature made for
#: another use of the same key cannot verify here.
_DOMAIN = b"redstring.control.v2"


def check_key_id(key_id: str) -> str:
    if not KEY_ID_PATTERN.fullmatch(key_id):
        raise ValueError(
            f"control key id {key_id[:80]!r} must be 1-64 characters of A-Z a-z 0-9 . _ - "
            "(starting with a letter or digit)"
        )
    return key_id


@dataclass(frozen=True)
class ControlKeys:
    """The keys a worker verifies with, by id, and the one a signer uses
    (``signing_id``; default the last one given: the newest)."""

    keys: Mapping[str, bytes] = field(default_factory=dict)
    signing_id: str | None = None

    def __post_init__(self) -> None:
        for key_id, secret in self.keys.items():
            check_key_id(key_id)
            if not secret:
                raise ValueError(f"control key {key_id!r} is empty")
        if self.signing_id is not None and self.signing_id not in self.keys:
            raise ValueError(f"the signing key id {self.signing_id!r} is not among the keys")

    @classmethod
    def of(cls, keys: ControlKeys | bytes | None) -> ControlKeys:
        """``keys`` as a key set: one key alone has the id :data:`DEFAULT_KEY_ID`."""
        if isinstance(keys, ControlKeys):
            return keys
        return cls({DEFAULT_KEY_ID: keys} if keys else {})

    @staticmethod
    def parse(text: str) -> dict[str, bytes]:
        """``"id1:secret1,id2:secret2"`` (oldest first) as ``{id: secret}``.
        Whitespace around items is ignored; a secret may contain ``:``."""
        keys: dict[str, bytes] = {}
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            key_id, sep, secret = item.partition(":")
            if not sep or not secret:
                raise ValueError("control keys are 'id:secret' items separated by commas")
            key_id = check_key_id(key_id.strip())
            if key_id in keys:
                raise ValueError(f"control key id {key_id!r} is given twice")
            keys[key_id] = secret.encode()
        return keys

    def __bool__(self) -> bool:
        return bool(self.keys)

    def signer(self) -> tuple[str, bytes]:
        if not self.keys:
            raise ValueError(
                "no control key is configured; set REDSTRING_CONTROL_KEYS or REDSTRING_CONTROL_KEY"
            )
        key_id = self.signing_id or list(self.keys)[-1]
        return key_id, self.keys[key_id]


def canonical_bytes(event: Event) -> bytes:
    """The envelope the signature covers: without ``signature``, as JSON with
    sorted keys and no insignificant whitespace (``key_id`` included)."""
    data: dict[str, Any] = event_to_dict(event)
    data.pop("signature", None)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signed_bytes(event: Event, topic_id: str, key_id: str) -> bytes:
    """Everything the MAC covers, each part length-prefixed so that no two
    (topic id, key id, envelope) triples give the same bytes."""
    parts = [topic_id.encode(), key_id.encode(), canonical_bytes(event)]
    return _DOMAIN + b"".join(len(p).to_bytes(8, "big") + p for p in parts)


def _digest(event: Event, topic_id: str, key_id: str, key: bytes) -> str:
    return hmac.new(key, signed_bytes(event, topic_id, key_id), hashlib.sha256).hexdigest()


def sign(
    event: Event, keys: ControlKeys | bytes, *, topic_id: str, key_id: str | None = None
) -> Event:
    """``event`` with ``key_id`` and ``signature`` set, for the topic whose
    Kafka topic id is ``topic_id``. ``keys``: a key set (its signing key, or
    ``key_id``), or one key (id :data:`DEFAULT_KEY_ID`)."""
    ring = ControlKeys.of(keys)
    if key_id is None:
        key_id, secret = ring.signer()
    elif key_id in ring.keys:
        secret = ring.keys[key_id]
    else:
        raise ValueError(f"no control key has the id {key_id!r}")
    data = event_to_dict(event)
    data.pop("signature", None)
    data["key_id"] = key_id
    unsigned = parse_event_dict(data)
    data["signature"] = _digest(unsigned, topic_id, key_id, secret)
    return parse_event_dict(data)


def verify(event: Event, keys: ControlKeys | bytes | None, *, topic_id: str) -> None:
    """Raise ``SignatureError`` unless ``event`` is a control event signed for
    ``topic_id`` with the key its ``key_id`` names. Ordinary events pass."""
    if not event.is_control:
        return
    ring = ControlKeys.of(keys)
    if not ring:
        raise SignatureError(
            f"{event.event_type} cannot be verified: no control key is configured "
            "(set REDSTRING_CONTROL_KEYS or REDSTRING_CONTROL_KEY)"
        )
    if event.signature is None:
        raise SignatureError(f"{event.event_type} is unsigned; control events must be signed")
    if event.key_id is None:
        raise SignatureError(
            f"{event.event_type} names no key_id; control events are signed with a key id"
        )
    secret = ring.keys.get(event.key_id)
    if secret is None:
        raise SignatureError(
            f"{event.event_type} is signed with key id {event.key_id!r}, which no worker key has"
        )
    # Bytes, not str: compare_digest raises TypeError on a non-ASCII str.
    given = event.signature.encode("utf-8", "surrogatepass")
    expected = _digest(event, topic_id, event.key_id, secret).encode("ascii")
    if not hmac.compare_digest(given, expected):
        raise SignatureError(
            f"{event.event_type} has a bad signature (or was signed for another topic)"
        )


def check_age(event: Event, logged_at: datetime | None, max_age: timedelta | None) -> None:
    """Raise ``SignatureError`` when a control event's ``occurred_at`` is more
    than ``max_age`` before ``logged_at`` (when its record reached the log) or
    more than :data:`MAX_FUTURE` after it. Nothing to judge without both."""
    if not event.is_control or logged_at is None or max_age is None:
        return
    age = logged_at - event.occurred_at
    if age > max_age:
        raise SignatureError(
            f"{event.event_type} is too old: occurred_at {event.occurred_at.isoformat()} is "
            f"{int(age.total_seconds())} s before its record reached the log "
            f"(at most {int(max_age.total_seconds())} s; a replayed control event?)"
        )
    if -age > MAX_FUTURE:
        raise SignatureError(
            f"{event.event_type} is from the future: occurred_at {event.occurred_at.isoformat()} "
            f"is {int(-age.total_seconds())} s after its record reached the log "
            f"(at most {int(MAX_FUTURE.total_seconds())} s)"
        )
