"""Every citation of the design and of an ADR resolves (issue 19, item 4).

Code, tests and docs cite the design as ``docs/design.md 5.2`` (section 5, rule
5.2) and decisions by their path in ``docs/adr/``. A citation that names a
section the design does not have, or an ADR file that does not exist, sends
the next reader nowhere; so does a citation of a document outside the
repository (the old ``DESIGN 5.2`` of the external brief, or a seed ADR number
that collides with ours). This scans the tree and fails on each.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
ADR_DIR = ROOT / "docs" / "adr"

#: Where citations live: the packages, tests, benchmarks, docs and the chart.
SCANNED = (
    "contracts",
    "projections",
    "adapters",
    "streams",
    "devstack",
    "tests",
    "bench",
    "docs",
    "helm",
    "README.md",
)
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".tpl", ".txt", ".java", ".properties"}
SKIPPED_DIRS = {"__pycache__", ".hypothesis"}

NUMBER = r"\d+(?:\.\d+)?"
#: ``docs/design.md 5.2``, and lists: ``docs/design.md 3, 5 and 7``, ``5.1 and 5.2``.
CITATION = re.compile(rf"docs/design\.md ({NUMBER}(?:(?:, | and | or ){NUMBER})*)")
ADR_PATH = re.compile(r"docs/adr/(\d{4}-[A-Za-z0-9_.-]*?\.md)")
HEADING = re.compile(rf"^#{{2,3}} ({NUMBER})\.? ", re.MULTILINE)

#: Citations of documents that are not in the repository. Built from parts so
#: that this file does not match itself.
STALE = {
    "a bare DESIGN citation (write docs/design.md N.M)": re.compile(r"\b" + "DESIGN" + r"\b"),
    "a seed ADR citation (cite the local ADR's path)": re.compile(
        "seed" + r"s?\s+ADRs?\b|\b" + "seed" + r"s?\s+0\d+\b", re.IGNORECASE
    ),
    "a path into ../shared/seeds (outside the repository)": re.compile("shared/" + "seeds"),
}


def scanned_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            files.append(path)
            continue
        for child in sorted(path.rglob("*")):
            if (
                child.is_file()
                and child.suffix in SUFFIXES
                and not SKIPPED_DIRS.intersection(child.relative_to(ROOT).parts)
                and child != Path(__file__).resolve()
            ):
                files.append(child)
    return files


def design_sections() -> set[str]:
    return set(HEADING.findall(DESIGN.read_text(encoding="utf-8")))


def citations() -> list[tuple[str, int, str]]:
    """(file, line, section) for every section a citation names."""
    found: list[tuple[str, int, str]] = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8")
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            for number in re.findall(NUMBER, match.group(1)):
                found.append((str(path.relative_to(ROOT)), line, number))
    return found


def adr_references() -> list[tuple[str, int, str]]:
    found: list[tuple[str, int, str]] = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8")
        for match in ADR_PATH.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((str(path.relative_to(ROOT)), line, match.group(1)))
    return found


def test_the_design_has_the_sections_the_code_is_organised_by() -> None:
    sections = design_sections()
    assert {str(n) for n in range(1, 11)} <= sections
    assert {f"5.{n}" for n in range(1, 11)} <= sections


def test_every_design_citation_names_a_section_that_exists() -> None:
    sections = design_sections()
    found = citations()
    assert len(found) >= 50, "guard the guard: the scan found almost no citations"
    missing = [f"{file}:{line}: docs/design.md {n}" for file, line, n in found if n not in sections]
    assert not missing, "citations of sections docs/design.md does not have:\n" + "\n".join(missing)


def test_every_adr_path_names_a_file_that_exists() -> None:
    found = adr_references()
    assert len(found) >= 20, "guard the guard: the scan found almost no ADR paths"
    missing = [
        f"{file}:{line}: docs/adr/{name}"
        for file, line, name in found
        if not (ADR_DIR / name).is_file()
    ]
    assert not missing, "ADR paths that do not exist:\n" + "\n".join(missing)


def test_no_citation_points_outside_the_repository() -> None:
    stale = []
    for path in scanned_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for what, pattern in STALE.items():
                if pattern.search(line):
                    stale.append(f"{path.relative_to(ROOT)}:{number}: {what}: {line.strip()}")
    assert not stale, "\n".join(stale)


def test_the_stale_patterns_bite() -> None:
    """Guard the guard: each pattern matches the form it exists to catch."""
    samples = {
        "a bare DESIGN citation (write docs/design.md N.M)": "(" + "DESIGN" + " 5.2)",
        "a seed ADR citation (cite the local ADR's path)": "(" + "seed" + " ADR 0002)",
        "a path into ../shared/seeds (outside the repository)": "../shared/" + "seeds/",
    }
    for what, pattern in STALE.items():
        assert pattern.search(samples[what]), what
    assert not STALE["a bare DESIGN citation (write docs/design.md N.M)"].search("DESIGNED")
    assert CITATION.search("see docs/design.md 3, 5 and 7.").group(1) == "3, 5 and 7"  # type: ignore[union-attr]
