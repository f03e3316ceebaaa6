"""The hostile corpus: Kafka records a producer that is not trusted could
write, each with the outcome the workers must reach (issue 15).

``cases.jsonl`` holds one case a line, written by ``build.py`` (run
``python -m tests.data.hostile.build`` after changing it; the file is checked
in, so that a change of outcome shows in review). A line:

``name``, ``class``
    a unique name, and the class of hostility it belongs to.
``key`` / ``key_b64``, ``value`` / ``value_b64`` / ``value_parts``
    the raw Kafka key and value: a JSON string (its UTF-8 bytes) when the
    bytes are UTF-8, base64 otherwise, ``null`` for none; ``value_parts`` is
    ``[[text, count], ...]``, concatenated, for values too large to check in
    as they are.
``expect``
    ``dead_letter``: dead-lettered with a reason containing ``reason``, by
    ``stage`` (``decode``: ``streams.worker.decode.decode``; ``fold``: decoded, then
    refused by the stores' folds); ``applied``: applied, after which the
    tenant ``tenant`` holds exactly the graph entities ``entities`` (each
    case starts from empty stores); ``pause``: the partition pauses
    (``SchemaVersionTooNewError``).

``partition``, ``logged_at``
    optional: the partition (of :data:`PARTITIONS`) the record is read from
    (default: none given, so its placement is not judged), and its Kafka
    timestamp, RFC 3339 (default :data:`LOGGED_AT`).

Control events are signed with :data:`CONTROL_KEYS` (:data:`CONTROL_KEY` is
its key ``default``) for the topic id :data:`TOPIC_ID`, and judged with a
window of :data:`MAX_AGE`. A run over real workers must configure them with
those keys and re-sign the signed cases for its topic's id (the signature
covers it); a record's Kafka timestamp is then the broker's, not
``logged_at``. :func:`load_cases` is what tests/unit/test_hostile_corpus.py
uses; an e2e run can reuse it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from contracts.signing import DEFAULT_KEY_ID, ControlKeys

CORPUS = Path(__file__).resolve().parent / "cases.jsonl"
#: The control key the corpus's signed control events are signed with.
CONTROL_KEY = b"hostile-corpus-control-key"
#: A key rotated out of signing, still configured so that what it signed verifies.
RETIRED_KEY_ID, RETIRED_KEY = "retired-2026-10", b"hostile-corpus-retired-key"
#: The workers' keys: the retired one, then the signing one.
CONTROL_KEYS = ControlKeys({RETIRED_KEY_ID: RETIRED_KEY, DEFAULT_KEY_ID: CONTROL_KEY})
#: The Kafka topic id the signed cases are signed for.
TOPIC_ID = "hostile-corpus-topic-id"
#: The events topic's partition count, for the cases that give a partition.
PARTITIONS = 12
#: The control-event age window (REDSTRING_CONTROL_MAX_AGE_S).
MAX_AGE = timedelta(hours=24)
#: A record's Kafka timestamp unless its case gives one: a minute after the
#: corpus's ``occurred_at`` (2026-11-01T09:00:00Z).
LOGGED_AT = "2026-11-01T09:01:00Z"

Outcome = Literal["dead_letter", "applied", "pause"]


@dataclass(frozen=True)
class HostileCase:
    name: str
    cls: str
    key: bytes | None
    value: bytes | None
    expect: Outcome
    #: A stable substring of the dead-letter reason.
    reason: str | None = None
    #: Where a dead letter comes from: "decode" or "fold".
    stage: str | None = None
    #: After an applied case: the tenant and its graph entity ids.
    tenant: str | None = None
    entities: tuple[str, ...] = ()
    #: The partition the record is read from (None: its placement is not judged).
    partition: int | None = None
    #: The record's Kafka timestamp (None: :data:`LOGGED_AT`).
    logged_at: str | None = None

    @property
    def logged_at_time(self) -> datetime:
        return datetime.fromisoformat(self.logged_at or LOGGED_AT)


def _bytes(row: dict[str, Any], name: str) -> bytes | None:
    if f"{name}_b64" in row:
        return base64.b64decode(row[f"{name}_b64"])
    if f"{name}_parts" in row:
        return "".join(text * count for text, count in row[f"{name}_parts"]).encode(
            "utf-8", "surrogatepass"
        )
    text = row.get(name)
    return None if text is None else str(text).encode("utf-8")


def to_row(case: HostileCase) -> dict[str, Any]:
    """The JSON line for ``case`` (build.py), the inverse of :func:`from_row`."""
    row: dict[str, Any] = {"name": case.name, "class": case.cls}
    for name, raw in (("key", case.key), ("value", case.value)):
        if raw is None:
            row[name] = None
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            row[f"{name}_b64"] = base64.b64encode(raw).decode("ascii")
            continue
        run = _long_run(text)
        if run is not None:
            row[f"{name}_parts"] = run
        else:
            row[name] = text
    if case.partition is not None:
        row["partition"] = case.partition
    if case.logged_at is not None:
        row["logged_at"] = case.logged_at
    row["expect"] = case.expect
    if case.expect == "dead_letter":
        row["reason"] = case.reason
        row["stage"] = case.stage
    if case.expect == "applied":
        row["tenant"] = case.tenant
        row["entities"] = list(case.entities)
    return row


def _long_run(text: str, at_least: int = 4096) -> list[list[Any]] | None:
    """``text`` as [[prefix, 1], [unit, n], [suffix, 1]] when one short unit
    repeats at least ``at_least`` times in a row, else None."""
    if len(text) < at_least:
        return None
    for width in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16):
        for start in range(0, min(len(text), 4096)):
            unit = text[start : start + width]
            end = start
            while text.startswith(unit, end):
                end += width
            count = (end - start) // width
            if count >= at_least // width and count * width >= at_least:
                parts = [[text[:start], 1], [unit, count], [text[start + count * width :], 1]]
                return [p for p in parts if p[0]]
    return None


def from_row(row: dict[str, Any]) -> HostileCase:
    return HostileCase(
        name=row["name"],
        cls=row["class"],
        key=_bytes(row, "key"),
        value=_bytes(row, "value"),
        expect=row["expect"],
        reason=row.get("reason"),
        stage=row.get("stage"),
        tenant=row.get("tenant"),
        entities=tuple(row.get("entities", ())),
        partition=row.get("partition"),
        logged_at=row.get("logged_at"),
    )


def iter_cases(path: Path = CORPUS) -> Iterator[HostileCase]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield from_row(json.loads(line))


def load_cases(path: Path = CORPUS) -> list[HostileCase]:
    """Every case of the corpus, in file order."""
    return list(iter_cases(path))
