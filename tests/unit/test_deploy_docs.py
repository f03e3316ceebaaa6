"""docs/deploy.md's configuration reference lists every REDSTRING_* setting
with its default, derived from streams.settings.Settings so it cannot go stale.
On a failure, the expected table is in the assertion message: paste it in."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from streams.settings import Settings, UnknownSettingError, check_environment

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "docs" / "deploy.md"
BEGIN = "<!-- settings-table: begin (generated from streams.settings.Settings) -->"
END = "<!-- settings-table: end -->"


def default_text(value: Any) -> str:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value is None:
        return "*(unset)*"
    if value == "":
        return "*(empty)*"
    return f"`{value}`"


def expected_table() -> str:
    rows = [
        "| Variable | Default | Secret | Description |",
        "| --- | --- | --- | --- |",
    ]
    for name, field in Settings.model_fields.items():
        secret = "yes" if "SecretStr" in repr(field.annotation) else ""
        description = (field.description or "").replace("|", "\\|")
        variable, default = f"REDSTRING_{name.upper()}", default_text(field.default)
        if field.default_factory is dict:  # a family of variables, one per key
            variable, default = f"{variable}__<property>", "*(none)*"
        rows.append(f"| `{variable}` | {default} | {secret} | {description} |")
    return "\n".join(rows)


def documented_table() -> str:
    text = DEPLOY.read_text()
    assert BEGIN in text and END in text, f"{DEPLOY} lacks the settings table markers"
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def test_the_reference_lists_every_setting_with_its_default() -> None:
    expected = expected_table()
    assert documented_table() == expected, f"regenerate the table in {DEPLOY}:\n\n{expected}"


def test_every_setting_has_a_description() -> None:
    undescribed = [n for n, field in Settings.model_fields.items() if not field.description]
    assert not undescribed, f"describe these in streams/settings.py: {undescribed}"


def test_every_setting_is_documented_once() -> None:
    names = re.findall(
        r"^\| `(REDSTRING_[A-Z0-9_]+?)(?:__<property>)?` \|", documented_table(), re.MULTILINE
    )
    assert sorted(names) == sorted(f"REDSTRING_{n.upper()}" for n in Settings.model_fields)
    assert len(names) == len(set(names))


def test_the_env_prefix_is_what_the_docs_say() -> None:
    assert Settings.model_config["env_prefix"] == "REDSTRING_"


def test_every_variable_named_in_the_deploy_docs_exists() -> None:
    # As a worker would judge them at start (the local stack's and the tests'
    # own variables and REDSTRING_KAFKA__<property> pass).
    for name in set(re.findall(r"REDSTRING_[A-Z0-9_]*[A-Z0-9]", DEPLOY.read_text())):
        try:
            check_environment({name: ""})
        except UnknownSettingError as exc:
            raise AssertionError(f"docs/deploy.md names {name}: {exc}") from None
