"""Files of events, one JSON envelope per line, as producers' tools write them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contracts.errors import InvalidEventError, SchemaVersionTooNewError
from contracts.events import Event, parse_event


class EventFileError(ValueError):
    """A line of the file is not a valid envelope; the message names it."""


def read_events(path: Path) -> list[Event]:
    """Parse a JSONL file of envelopes, refusing the whole file on the first bad line."""
    events = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            events.append(parse_event(line))
        except (InvalidEventError, SchemaVersionTooNewError) as exc:
            raise EventFileError(f"{path}:{number}: {exc}") from None
    return events


#: Lines a pretty-printer leaves on their own: a document's brackets, or one of
#: its members (``"key": value``) rather than a whole envelope.
_FRAGMENTS = {b"{", b"}", b"[", b"]", b"},", b"],", b"{}", b"[]"}


def format_hint(lines: Sequence[bytes]) -> str | None:
    """Why a file's lines fail to parse when the file is JSON but not JSONL: one
    object spread over lines by a pretty-printer, or an array of envelopes.
    None when the lines do not look like either (their own reasons say why)."""
    stripped = [line.strip() for line in lines if line.strip()]
    if not stripped:
        return None
    if stripped[0].startswith(b"["):
        shape, fix = "a JSON array", "jq -c '.[]' FILE"
    elif any(line in _FRAGMENTS or _is_member(line) for line in stripped):
        shape, fix = "pretty-printed JSON (one document spread over lines)", "jq -c . FILE"
    else:
        return None
    return f"the file looks like {shape}, not JSONL (one envelope per line): try `{fix}`"


def _is_member(line: bytes) -> bool:
    return line.startswith(b'"') and b'":' in line and not line.startswith(b'{"')
