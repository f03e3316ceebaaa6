"""Files of events, one JSON envelope per line, as producers' tools write them."""

from __future__ import annotations

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
