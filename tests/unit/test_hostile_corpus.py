"""The hostile corpus (tests/data/hostile) through ``decode`` and through
``redstring fold``'s code path (the dry run over in-memory stores): every case
reaches the outcome the corpus gives it, and nothing raises but a pause."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from contracts.errors import SchemaVersionTooNewError
from streams.ops.dry_run import DryRunRefused, fold_lines
from streams.worker.decode import decode
from tests.data.hostile import (
    CONTROL_KEYS,
    MAX_AGE,
    PARTITIONS,
    TOPIC_ID,
    HostileCase,
    load_cases,
)

CASES = load_cases()


def through_decode(case: HostileCase) -> tuple[str, str | None]:
    """("pause", None), ("dead_letter", reason) or ("decoded", None)."""
    try:
        decoded = decode(
            0,
            case.key,
            case.value,
            CONTROL_KEYS,
            topic_id=TOPIC_ID,
            partition=case.partition,
            partitions=PARTITIONS,
            logged_at=case.logged_at_time,
            max_age=MAX_AGE,
        )
    except SchemaVersionTooNewError:
        return "pause", None
    if decoded.dead_letter_reason is not None:
        assert decoded.record.event is None
        return "dead_letter", decoded.dead_letter_reason
    assert decoded.record.event is not None
    return "decoded", None


def through_fold(case: HostileCase) -> tuple[str, Any]:
    """("pause", message), ("dead_letter", reason) or ("applied", tenant state)."""
    try:
        result = asyncio.run(
            fold_lines(
                [case.value],
                keys=[case.key],
                control_key=CONTROL_KEYS,
                trust_unsigned=False,
                batch_size=10,
                topic_id=TOPIC_ID,
                partition=case.partition,
                partitions=PARTITIONS,
                logged_at=[case.logged_at_time],
                max_age=MAX_AGE,
            )
        )
    except DryRunRefused as exc:
        return "pause", str(exc)
    if result.dead_letters:
        assert [offset for offset, _ in result.dead_letters] == [0]
        return "dead_letter", result.dead_letters[0][1]
    return "applied", result.state["tenants"]


def mismatches(case: HostileCase) -> list[str]:
    found: list[str] = []
    decoded, reason = through_decode(case)
    folded, detail = through_fold(case)
    if case.expect == "pause":
        if decoded != "pause":
            found.append(f"decode: {decoded} {reason!r}, expected a pause")
        if folded != "pause" or "schema_version" not in detail:
            found.append(f"fold: {folded} {detail!r}, expected a pause")
        return found
    if decoded == "pause":
        found.append("decode paused")
    if case.expect == "dead_letter":
        assert case.reason is not None
        if case.stage == "decode":
            if decoded != "dead_letter" or case.reason not in str(reason):
                found.append(f"decode: {decoded} {reason!r}, expected {case.reason!r}")
        elif decoded != "decoded":
            found.append(f"decode: {decoded} {reason!r}, expected it decoded (the fold refuses)")
        if folded != "dead_letter" or case.reason not in str(detail):
            found.append(f"fold: {folded} {str(detail)[:300]!r}, expected {case.reason!r}")
        return found
    if decoded != "decoded":
        found.append(f"decode: {decoded} {reason!r}, expected it decoded")
    if folded != "applied":
        found.append(f"fold: {folded} {detail!r}, expected it applied")
        return found
    state = detail[case.tenant]
    ids = sorted(e["id"] for e in state["entities"])
    if ids != sorted(case.entities):
        found.append(f"fold: entities {ids}, expected {sorted(case.entities)}")
    if sorted(state["visible_vectors"]) != sorted(case.entities):
        found.append(f"fold: vectors {state['visible_vectors']}, expected {sorted(case.entities)}")
    if state["checkpoints"] != {"graph": 0, "vector": 0}:
        found.append(f"fold: checkpoints {state['checkpoints']}, expected both at 0")
    return found


def test_the_corpus_is_large_and_covers_every_outcome() -> None:
    assert len(CASES) >= 150
    assert len({case.name for case in CASES}) == len(CASES)
    outcomes = Counter(case.expect for case in CASES)
    assert set(outcomes) == {"dead_letter", "applied", "pause"}
    assert {case.stage for case in CASES if case.expect == "dead_letter"} == {"decode", "fold"}


def test_every_case_reaches_its_outcome(capsys: pytest.CaptureFixture[str]) -> None:
    failures: dict[str, list[str]] = {}
    table: dict[str, Counter[str]] = {}
    for case in CASES:
        found = mismatches(case)
        if found:
            failures[f"{case.cls}: {case.name}"] = found
        row = table.setdefault(case.cls, Counter())
        row["tried"] += 1
        row["failed" if found else case.expect] += 1
    with capsys.disabled():
        print("\nhostile corpus (decode and redstring fold):")
        print(f"  {'class':<16}{'tried':>7}{'dead':>7}{'applied':>9}{'paused':>8}{'wrong':>7}")
        for cls, row in table.items():
            print(
                f"  {cls:<16}{row['tried']:>7}{row['dead_letter']:>7}{row['applied']:>9}"
                f"{row['pause']:>8}{row['failed']:>7}"
            )
    assert not failures, "\n".join(f"{name}: {'; '.join(f)}" for name, f in failures.items())
