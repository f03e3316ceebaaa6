"""Starting detached server processes and stopping exactly those, by recorded pid.

A record holds the pid and the process's start time (field 22 of
``/proc/PID/stat``), so a pid that the kernel has since reused for another
program is never signalled. Nothing here looks processes up by name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessRecord:
    service: str
    pid: int
    start_time: int  # clock ticks since boot, from /proc/PID/stat
    argv0: str
    log: str

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> ProcessRecord | None:
        try:
            data = json.loads(path.read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None


def proc_start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has exited
        return None
    return int(fields[19])


def is_alive(record: ProcessRecord) -> bool:
    return proc_start_time(record.pid) == record.start_time


def spawn(
    service: str,
    argv: Sequence[str],
    log: Path,
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    user: int | None = None,
    group: int | None = None,
) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
    """Start ``argv`` in its own session with stdout+stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {service}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            user=user,
            group=group,
            extra_groups=[] if user is not None else None,
        )
    start = None
    for _ in range(100):
        start = proc_start_time(proc.pid)
        if start is not None or proc.poll() is not None:
            break
        time.sleep(0.01)
    record = ProcessRecord(
        service=service, pid=proc.pid, start_time=start or -1, argv0=argv[0], log=str(log)
    )
    return proc, record


def stop(record: ProcessRecord, sig: signal.Signals, timeout: float) -> str:
    """Signal the recorded process, wait for it, SIGKILL its group after ``timeout``."""
    if not is_alive(record):
        return "not running"
    try:
        os.kill(record.pid, sig)
    except ProcessLookupError:
        return "not running"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(record.pid)
        if not is_alive(record):
            _reap(record.pid)  # a zombie child of this process (the test plugin's case)
            return "stopped"
        time.sleep(0.1)
    if is_alive(record):
        try:
            # The process leads its own session/group (start_new_session), so this
            # reaches its children (Postgres backends) and nothing else.
            os.killpg(record.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for _ in range(50):
            _reap(record.pid)
            if not is_alive(record):
                break
            time.sleep(0.1)
        return f"killed after {timeout:.0f}s"
    return "stopped"


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
