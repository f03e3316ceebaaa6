"""Finds a Java 17 (or 21) JDK: Kafka 4 needs 17+, Neo4j 5.26 runs on 17 and 21 only."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from devstack.errors import DevstackError
from devstack.versions import JAVA_MAJOR_VERSIONS

JVM_DIR = Path("/usr/lib/jvm")  # where Debian's (and Temurin's) packages install JDKs


@dataclass(frozen=True)
class Jdk:
    home: Path
    major: int

    @property
    def java(self) -> str:
        return str(self.home / "bin" / "java")

    @property
    def javac(self) -> str:
        return str(self.home / "bin" / "javac")


def _major_of(home: Path) -> int | None:
    release = home / "release"
    text = ""
    if release.is_file():
        text = release.read_text(errors="replace")
        m = re.search(r'^JAVA_VERSION="(\d+)', text, re.MULTILINE)
        if m:
            return int(m.group(1))
    java = home / "bin" / "java"
    if not java.is_file():
        return None
    try:
        out = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def _candidates() -> list[Path]:
    homes: list[Path] = []
    for var in ("REDSTRING_JAVA_HOME", "JAVA_HOME"):
        value = os.environ.get(var)
        if value:
            homes.append(Path(value))
    on_path = shutil.which("java")
    if on_path:
        homes.append(Path(os.path.realpath(on_path)).parent.parent)
    if JVM_DIR.is_dir():
        homes.extend(sorted(p for p in JVM_DIR.iterdir() if p.is_dir() and not p.is_symlink()))
    seen: set[Path] = set()
    unique = []
    for home in homes:
        resolved = home.resolve()
        if resolved not in seen:
            seen.add(resolved)
            unique.append(resolved)
    return unique


def find_jdk() -> Jdk:
    """The first Java 17/21 JDK with javac, looking at $REDSTRING_JAVA_HOME, $JAVA_HOME,
    the PATH, then /usr/lib/jvm."""
    found_other: list[str] = []
    for home in _candidates():
        major = _major_of(home)
        if major is None:
            continue
        if major not in JAVA_MAJOR_VERSIONS:
            found_other.append(f"{major} ({home})")
            continue
        jdk = Jdk(home=home, major=major)
        if not Path(jdk.javac).is_file():
            found_other.append(f"{major} without javac ({home})")
            continue
        return jdk
    wanted = " or ".join(str(v) for v in JAVA_MAJOR_VERSIONS)
    seen = f"; found only Java {', '.join(found_other)}" if found_other else ""
    raise DevstackError(
        f"no Java {wanted} JDK found (install openjdk-17-jdk-headless, or set "
        f"REDSTRING_JAVA_HOME){seen}"
    )
