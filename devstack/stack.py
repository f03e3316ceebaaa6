"""Bringing the local stack up and down: the API behind ``redstring dev`` and the test fixtures.

env = ensure_up(root)        # idempotent; waits until every server answers
down(root)                   # stops only the processes that ``up`` recorded
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devstack import procs
from devstack.errors import DevstackError
from devstack.java import Jdk, find_jdk
from devstack.services import Layout, Service, all_services, port_is_free
from devstack.versions import PORT_ENV

SERVICE_NAMES = ("kafka", "neo4j", "postgres")
ENV_NAMES = (
    "REDSTRING_KAFKA_BOOTSTRAP",
    "REDSTRING_NEO4J_URI",
    "REDSTRING_NEO4J_USER",
    "REDSTRING_NEO4J_PASSWORD",
    "REDSTRING_PG_DSN",
)

Reporter = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def default_root() -> Path:
    """The checkout: $REDSTRING_ROOT, else the nearest parent of the cwd with a pyproject.toml."""
    value = os.environ.get("REDSTRING_ROOT")
    if value:
        return Path(value).resolve()
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").is_file() and (candidate / "devstack").is_dir():
            return candidate
    return Path(__file__).resolve().parent.parent


def ready_timeout() -> float:
    return float(os.environ.get("REDSTRING_DEVSTACK_TIMEOUT", "300"))


@contextmanager
def _locked(layout: Layout) -> Iterator[None]:
    """One `up`/`down` at a time per checkout (parallel test workers, two shells)."""
    layout.base.mkdir(parents=True, exist_ok=True)
    with (layout.base / "lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _select(layout: Layout, names: Iterable[str] | None) -> list[Service]:
    services = all_services(layout)
    if names is None:
        return services
    wanted = set(names)
    unknown = wanted - set(SERVICE_NAMES)
    if unknown:
        raise DevstackError(f"unknown service {sorted(unknown)[0]!r}: one of {SERVICE_NAMES}")
    return [s for s in services if s.name in wanted]


def _record(layout: Layout, service: Service) -> procs.ProcessRecord | None:
    return procs.ProcessRecord.load(layout.pid_file(service.name))


def running_services(root: Path) -> list[str]:
    """Names of the services whose recorded process is alive."""
    layout = Layout(root)
    return [s.name for s in all_services(layout) if (r := _record(layout, s)) and procs.is_alive(r)]


def _wait_ready(service: Service, proc: subprocess.Popen[bytes] | None, deadline: float) -> str:
    last_error = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise DevstackError(
                f"{service.name} exited during start-up (exit code {proc.returncode}): "
                f"{_last_log_line(service)} (see {service.layout.log(service.name)})"
            )
        try:
            return service.check(timeout=5.0, starting=proc is not None)
        except DevstackError:
            raise
        except Exception as error:  # not answering yet: any client error means "retry"
            last_error = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        time.sleep(0.5)
    raise DevstackError(
        f"{service.name} did not answer within {ready_timeout():.0f}s ({last_error}); "
        f"see {service.layout.log(service.name)}"
    )


def _last_log_line(service: Service) -> str:
    try:
        lines = service.layout.log(service.name).read_text(errors="replace").splitlines()
    except OSError:
        return "no log"
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith(("at ", "...", "---")):
            return text[:240]
    return "empty log"


@dataclass
class _Outcome:
    started: bool = False
    description: str = ""
    seconds: float = 0.0
    error: DevstackError | None = None


def _start_one(
    service: Service, jdk: Jdk | None, deadline: float, outcome: _Outcome, report: Reporter
) -> None:
    layout = service.layout
    began = time.monotonic()
    try:
        launch = service.prepare(jdk)
        proc, record = procs.spawn(
            service.name,
            launch.argv,
            layout.log(service.name),
            cwd=launch.cwd,
            env=launch.env,
            user=launch.user,
            group=launch.group,
        )
        record.save(layout.pid_file(service.name))
        outcome.started = True
        outcome.description = _wait_ready(service, proc, deadline)
        service.after_ready()
        outcome.seconds = time.monotonic() - began
        report(f"{service.name}: ready in {outcome.seconds:.1f}s ({outcome.description})")
    except DevstackError as error:
        outcome.error = error
    except Exception as error:
        outcome.error = DevstackError(f"{service.name}: {type(error).__name__}: {error}")


def ensure_up(root: Path | None = None, *, report: Reporter = _stderr) -> dict[str, str]:
    """Start whatever part of the stack is not running; return the REDSTRING_* endpoints
    (and the DEVSTACK_KAFKA_* ones of Kafka's secured listeners, for the tests of TLS/SASL).

    Idempotent: with everything already running it only checks that each server
    answers. Raises DevstackError with a one-line message when something is missing.
    """
    layout = Layout(root or default_root())
    with _locked(layout):
        return _ensure_up(layout, report)


def _ensure_up(layout: Layout, report: Reporter) -> dict[str, str]:
    services = all_services(layout)
    deadline = time.monotonic() + ready_timeout()
    to_start: list[Service] = []
    for service in services:
        record = _record(layout, service)
        if record is not None and procs.is_alive(record):
            description = _wait_ready(service, None, deadline)
            service.after_ready()
            report(f"{service.name}: already running, pid {record.pid} ({description})")
        else:
            layout.pid_file(service.name).unlink(missing_ok=True)
            to_start.append(service)

    # Fail fast, before any download or start, on what a person must fix.
    for service in to_start:
        for name, number in service.ports().items():
            if not port_is_free(number):
                raise DevstackError(
                    f"port {number} on 127.0.0.1 ({name}) is already in use by another "
                    f"process; stop it or choose another port with {PORT_ENV[name]}"
                )
    jdk = find_jdk() if any(s.needs_java for s in to_start) else None

    if to_start:
        report(f"starting {', '.join(s.name for s in to_start)} (logs in {layout.logs})")
    outcomes = {s.name: _Outcome() for s in to_start}
    threads = [
        threading.Thread(
            target=_start_one, args=(s, jdk, deadline, outcomes[s.name], report), daemon=True
        )
        for s in to_start
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    errors: list[DevstackError] = []
    for outcome in outcomes.values():  # the same problem (no Maven, say) once
        if outcome.error is not None and str(outcome.error) not in map(str, errors):
            errors.append(outcome.error)
    if errors:
        started = [name for name, o in outcomes.items() if o.started]
        _stop(layout, _select(layout, started), report=lambda _m: None)
        for error in errors[1:]:
            report(f"also: {error}")
        extra = f" (and {len(errors) - 1} more problem(s), above)" if len(errors) > 1 else ""
        raise DevstackError(f"{errors[0]}{extra}")

    # Where the stack keeps its state: a benchmark run from another checkout
    # finds the servers' pid files (their CPU) from here.
    env: dict[str, str] = {"DEVSTACK_DIR": str(layout.base)}
    for service in services:
        env.update(service.env())
    write_env_file(layout, env)
    return env


def write_env_file(layout: Layout, env: dict[str, str]) -> None:
    layout.base.mkdir(parents=True, exist_ok=True)
    tmp = layout.env_file.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(export_lines(env) + "\n")
    tmp.replace(layout.env_file)


def export_lines(env: dict[str, str]) -> str:
    return "\n".join(f"export {key}={shlex.quote(value)}" for key, value in sorted(env.items()))


def read_env(root: Path | None = None) -> dict[str, str]:
    """The endpoints of a stack that is up (from .devstack/env)."""
    layout = Layout(root or default_root())
    env: dict[str, str] = {}
    try:
        text = layout.env_file.read_text()
    except FileNotFoundError:
        return env
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export ") :].partition("=")
            parts = shlex.split(value)
            env[key] = parts[0] if parts else ""
    return env


def _stop(layout: Layout, services: list[Service], report: Reporter) -> None:
    """Stop the recorded processes of ``services`` in parallel."""

    def stop_one(service: Service) -> None:
        record = _record(layout, service)
        if record is None:
            report(f"{service.name}: not started by redstring dev up")
            return
        result = procs.stop(record, service.stop_signal, service.stop_timeout)
        layout.pid_file(service.name).unlink(missing_ok=True)
        report(f"{service.name}: {result} (pid {record.pid})")

    threads = [threading.Thread(target=stop_one, args=(s,)) for s in services]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def down(
    root: Path | None = None,
    *,
    services: Iterable[str] | None = None,
    purge: bool = False,
    report: Reporter = _stderr,
) -> None:
    """Stop the processes ``up`` started (by recorded pid); ``purge`` also deletes .devstack/."""
    layout = Layout(root or default_root())
    if not layout.base.exists():
        report("nothing to stop: no .devstack/ here")
        return
    with _locked(layout):
        _stop(layout, _select(layout, services), report)
        if services is None:
            layout.env_file.unlink(missing_ok=True)
    if purge:
        if services is not None:
            raise DevstackError("--purge wipes the whole .devstack/: do not name services")
        shutil.rmtree(layout.base)
        report(f"removed {layout.base}")


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    pid: int | None
    ports: dict[str, int]
    answer: str
    rss_mib: float | None
    peak_rss_mib: float | None


def status(root: Path | None = None, *, check_timeout: float = 3.0) -> list[ServiceStatus]:
    layout = Layout(root or default_root())
    result = []
    for service in all_services(layout):
        record = _record(layout, service)
        alive = record is not None and procs.is_alive(record)
        answer = ""
        rss = peak = None
        if record is not None and alive:
            try:
                answer = service.check(timeout=check_timeout)
            except Exception as error:
                answer = f"NOT ANSWERING: {type(error).__name__}: {error}".splitlines()[0][:160]
            rss, peak = memory_mib(record.pid)
        result.append(
            ServiceStatus(
                name=service.name,
                running=alive,
                pid=record.pid if record is not None and alive else None,
                ports=service.ports(),
                answer=answer,
                rss_mib=rss,
                peak_rss_mib=peak,
            )
        )
    return result


def memory_mib(pid: int) -> tuple[float | None, float | None]:
    """Current and peak resident memory of ``pid`` and the processes of its session
    (Postgres forks a process per connection; shared memory is counted once per process,
    so the sum is an upper bound)."""
    pids = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != pid:
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) == pid:  # session id: the server started its own session
                pids.append(int(entry.name))
    rss = peak = 0.0
    found = False
    for each in pids:
        try:
            text = Path(f"/proc/{each}/status").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1]) / 1024
                found = True
            elif line.startswith("VmHWM:"):
                peak += int(line.split()[1]) / 1024
    return (rss, peak) if found else (None, None)


def log_files(root: Path | None, service: str | None) -> list[Path]:
    layout = Layout(root or default_root())
    return [f for s in _select(layout, [service] if service else None) for f in s.log_files()]
