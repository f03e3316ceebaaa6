"""The help a new user reads first: every command's line in a group's list
reads whole at 80 columns (click cuts a long first sentence with "..."), and
the tenant commands name their option, --tenant."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from streams.cli import main


def groups(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """``group`` and every group under it, as the words that invoke them."""
    ctx = click.Context(group)
    found = [path]
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found += groups(command, (*path, name))
    return found


@pytest.mark.parametrize("path", groups(main), ids=lambda path: " ".join(path) or "redstring")
def test_no_command_line_is_cut_short(path: tuple[str, ...]) -> None:
    shown = CliRunner().invoke(main, [*path, "--help"], terminal_width=80)
    assert shown.exit_code == 0, shown.output
    listed = shown.stdout.split("Commands:\n", 1)[1].splitlines()
    assert listed and not [line for line in listed if line.rstrip().endswith("...")]


@pytest.mark.parametrize("command", ["replay", "erase"])
def test_the_tenant_commands_name_their_option(command: str) -> None:
    shown = CliRunner().invoke(main, [command, "--help"], terminal_width=80).stdout
    assert "TENANT" not in shown
    assert "the tenant given by --tenant" in shown


def test_completion_as_the_readme_sets_it_up() -> None:
    """click's completion through _REDSTRING_COMPLETE (README, "Shell
    completion"): the script, and the words it offers."""
    runner = CliRunner()
    script = runner.invoke(
        main, [], env={"_REDSTRING_COMPLETE": "bash_source"}, prog_name="redstring"
    )
    assert "_redstring_completion()" in script.stdout

    def offered(words: str) -> list[str]:
        env = {
            "_REDSTRING_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split(" ")) - 1),
        }
        answer = runner.invoke(main, [], env=env, prog_name="redstring").stdout
        return [line.split(",", 1)[1] for line in answer.splitlines()]

    assert offered("redstring st") == ["status"]
    assert offered("redstring status -o ") == ["table", "json"]
