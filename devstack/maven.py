"""Resolves a runtime classpath from Maven Central with Maven, cached outside the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from devstack.errors import DevstackError
from devstack.versions import MAVEN_DEPENDENCY_PLUGIN

PACKAGE_DIR = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """Where classpaths, the compiled Neo4j launcher and Maven logs live (not the repo)."""
    value = os.environ.get("REDSTRING_CACHE_DIR")
    if value:
        return Path(value)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "redstring"


def resolve_classpath(
    name: str, pom: str, properties: dict[str, str], java_home: Path
) -> list[str]:
    """Jar paths (in ~/.m2) of ``pom``'s dependencies, resolved once and cached.

    ``name`` keys the cache (it should contain the versions); the cached list is
    reused while every jar in it still exists.
    """
    target = cache_dir() / name
    classpath_file = target / "classpath.txt"
    if classpath_file.is_file():
        jars = classpath_file.read_text().strip().split(os.pathsep)
        if jars and all(Path(j).is_file() for j in jars):
            return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevstackError(
            "Maven (mvn) is not on PATH: install it (apt-get install maven) to fetch "
            "the Kafka and Neo4j jars"
        )
    target.mkdir(parents=True, exist_ok=True)
    log = target / "maven.log"
    tmp = target / "classpath.txt.tmp"
    command = [
        mvn,
        "-B",
        "-f",
        str(PACKAGE_DIR / pom),
        *(f"-D{key}={value}" for key, value in properties.items()),
        f"{MAVEN_DEPENDENCY_PLUGIN}:build-classpath",
        f"-Dmdep.outputFile={tmp}",
        "-Dmdep.includeScope=runtime",
    ]
    repo_local = os.environ.get("REDSTRING_M2_REPO")
    if repo_local:
        command.append(f"-Dmaven.repo.local={repo_local}")
    env = dict(os.environ, JAVA_HOME=str(java_home))
    with log.open("w") as out:
        try:
            done = subprocess.run(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, check=False, timeout=1800
            )
        except subprocess.TimeoutExpired:
            raise DevstackError(f"Maven timed out resolving {name}; see {log}") from None
    if done.returncode != 0 or not tmp.is_file():
        reason = _maven_error(log)
        raise DevstackError(f"Maven could not resolve {name}: {reason} (full log: {log})")
    tmp.replace(classpath_file)
    return classpath_file.read_text().strip().split(os.pathsep)


def _maven_error(log: Path) -> str:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("[ERROR]") and len(line) > len("[ERROR] "):
            return line[len("[ERROR] ") :].strip()[:300]
    return "mvn failed"
