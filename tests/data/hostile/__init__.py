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
    ``stage`` (``decode``: ``streams.decode.decode``; ``fold``: decoded, then
    refused by the stores' folds); ``applied``: applied, after which the
    tenant ``tenant`` holds exactly the graph entities ``entities`` (each
    case starts from empty stores); ``pause``: the partition pauses
    (``SchemaVersionTooNewError``).

Control events are signed with :data:`CONTROL_KEY`: a run over real workers
must configure them with it (``REDSTRING_CONTROL_KEY``). :func:`load_cases`
is what tests/unit/test_hostile_corpus.py uses; an e2e run can reuse it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

CORPUS = Path(__file__).resolve().parent / "cases.jsonl"
#: The control key the corpus's signed control events are signed with.
CONTROL_KEY = b"hostile-corpus-control-key"

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
    )


def iter_cases(path: Path = CORPUS) -> Iterator[HostileCase]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield from_row(json.loads(line))


def load_cases(path: Path = CORPUS) -> list[HostileCase]:
    """Every case of the corpus, in file order."""
    return list(iter_cases(path))
