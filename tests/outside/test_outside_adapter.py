"""The shipped compliance suites prove an adapter written outside redstring
(docs/adapters.md; docs/adr/0012-compliance-suites-and-coverage-gates.md).

Each test copies an adapter's test module (``tests/outside/*_tests.py``) into an
empty directory holding only the configuration docs/adapters.md asks for, and
runs pytest there in a fresh interpreter that can import redstring's
``contracts`` and ``adapters`` but not its ``tests``: what passes here passes
for a third party that installed the wheel. The memory bindings in
tests/compliance/ already run every example; here each property draws few,
because what is proved is the wiring, not the memory adapters again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import adapters
import contracts
from adapters.compliance import GraphStoreCompliance, LedgerCompliance, VectorStoreCompliance

HERE = Path(__file__).parent

PYTEST_INI = """\
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""
CONFTEST = """\
from hypothesis import settings

settings.register_profile("outside", deadline=None, max_examples=5)
settings.load_profile("outside")
"""


def run_outside(tmp_path: Path, module: str, *args: str) -> tuple[int, list[ET.Element], str]:
    """pytest's exit status, its test cases and its output, for ``module`` run
    as a third party's test module."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text(PYTEST_INI)
    (project / "conftest.py").write_text(CONFTEST)
    (project / f"test_{module}").write_text((HERE / module).read_text())
    # The two packages the suites and the adapters need, from wherever this run
    # imports them (the checkout or an installed wheel), and nothing else of ours.
    importable = tmp_path / "importable"
    importable.mkdir()
    for package in (contracts, adapters):
        (importable / package.__name__).symlink_to(Path(package.__file__ or "").parent)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTEST", "HYPOTHESIS", "REDSTRING", "PYTHON"))
    }
    env["PYTHONPATH"] = str(importable)
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            # The suites ask pytest to rewrite their assertions; a warning that it
            # could not is a failure here.
            "-W",
            "error::pytest.PytestAssertRewriteWarning",
            f"--junitxml={report}",
            *args,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    cases = list(ET.parse(report).getroot().iter("testcase")) if report.exists() else []
    return done.returncode, cases, done.stdout + done.stderr


def suite_tests(suite: type) -> int:
    return sum(1 for name in dir(suite) if name.startswith("test_"))


def test_the_shipped_suites_pass_an_outside_adapter(tmp_path: Path) -> None:
    status, cases, output = run_outside(tmp_path, "adapter_tests.py")
    assert status == 0, output
    assert not [c for c in cases if len(c)], "a test failed, errored or was skipped:\n" + output
    ran = Counter(case.get("classname", "").rpartition(".")[2] for case in cases)
    # Every test of each suite ran (parametrized ones more than once).
    assert ran["TestOutsideGraphStore"] >= suite_tests(GraphStoreCompliance)
    assert ran["TestOutsideGraphLedger"] >= suite_tests(LedgerCompliance)
    assert ran["TestOutsideVectorStore"] >= suite_tests(VectorStoreCompliance)
    assert set(ran) == {"TestOutsideGraphStore", "TestOutsideGraphLedger", "TestOutsideVectorStore"}


def test_the_shipped_suites_fail_a_broken_outside_adapter(tmp_path: Path) -> None:
    status, cases, output = run_outside(
        tmp_path, "leaky_adapter_tests.py", "-k", "test_get_entity_returns_copies"
    )
    assert status == 1, output
    (case,) = cases
    (failure,) = case.iter("failure")
    # Rewritten by pytest, so the third party sees both sides of the comparison.
    assert failure.get("message", "").startswith("AssertionError: assert Entity("), output
