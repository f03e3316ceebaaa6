"""``redstring fold`` as a producer's CI runs it: the exit status when lines are
dead-lettered, the hint when the file is JSON but not JSONL, stdin, and the
batch size it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from streams.cli import main
from streams.cli.fold import DEAD_LETTERS_EXIT

QUICKSTART = Path(__file__).parents[3] / "examples" / "quickstart.jsonl"
GOOD = QUICKSTART.read_bytes().splitlines()[0]


def fold(tmp_path: Path, content: bytes, *args: str) -> Result:
    events = tmp_path / "events.jsonl"
    events.write_bytes(content)
    return CliRunner().invoke(main, ["fold", str(events), *args])


def test_a_clean_file_exits_0_with_the_state_on_stdout(tmp_path: Path) -> None:
    result = fold(tmp_path, GOOD + b"\n")
    assert result.exit_code == 0, result.output
    assert list(json.loads(result.stdout)["tenants"]) == ["acme"]


def test_a_dead_letter_fails_the_run_unless_allowed(tmp_path: Path) -> None:
    content = GOOD + b'\n{"oops"\n'
    failed = fold(tmp_path, content)
    assert failed.exit_code == DEAD_LETTERS_EXIT == 3
    assert "dead letter: line 2: value is not JSON" in failed.stderr
    assert "1 of 2 line(s) dead-lettered" in failed.stderr
    # The state is still written: the run tells what the workers would hold.
    assert list(json.loads(failed.stdout)["tenants"]) == ["acme"]
    # A line that is simply bad gets its reason, not a format hint.
    assert "hint:" not in failed.stderr

    allowed = fold(tmp_path, content, "--allow-dead-letters", "--out", str(tmp_path / "s"))
    assert allowed.exit_code == 0, allowed.output
    assert "1 dead letter(s)" in allowed.stderr


@pytest.mark.parametrize(
    ("content", "shape", "fix"),
    [
        (json.dumps(json.loads(GOOD), indent=2).encode(), "pretty-printed JSON", "jq -c . FILE"),
        (b"[" + GOOD + b"]\n", "a JSON array", "jq -c '.[]' FILE"),
        (b"[\n" + GOOD + b",\n" + GOOD + b"\n]\n", "a JSON array", "jq -c '.[]' FILE"),
    ],
)
def test_json_that_is_not_jsonl_gets_a_hint(
    tmp_path: Path, content: bytes, shape: str, fix: str
) -> None:
    result = fold(tmp_path, content)
    assert result.exit_code == DEAD_LETTERS_EXIT
    [hint] = [line for line in result.stderr.splitlines() if line.startswith("hint:")]
    assert shape in hint and "one envelope per line" in hint and fix in hint


def test_dash_reads_stdin(tmp_path: Path) -> None:
    from_file = fold(tmp_path, QUICKSTART.read_bytes())
    from_stdin = CliRunner().invoke(main, ["fold", "-"], input=QUICKSTART.read_bytes())
    assert from_stdin.exit_code == 0, from_stdin.output
    assert from_stdin.stdout == from_file.stdout


@pytest.mark.parametrize("size", ["0", "-1"])
def test_a_batch_size_below_1_is_a_usage_error(tmp_path: Path, size: str) -> None:
    result = fold(tmp_path, GOOD + b"\n", "--batch-size", size)
    assert result.exit_code == 2
    assert "'--batch-size'" in result.stderr and "x>=1" in result.stderr
