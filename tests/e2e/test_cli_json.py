"""``-o json`` of ``redstring topics describe`` and ``redstring status`` against
the real stack (issue 18, item 6): stdout is one JSON document that agrees with
what the broker and the stores hold, whatever the command says on stderr."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

import pytest

from contracts.events import event_to_json
from streams.kafka.partitioning import partition_for
from tests.e2e.conftest import Deployment
from tests.e2e.test_skip import publish_raw
from tests.unit.streams.test_projector import doc

pytestmark = pytest.mark.services


async def json_of(deployment: Deployment, *args: str) -> Any:
    """Run ``redstring ARGS -o json``: its stdout, which must parse as one document."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "streams",
        *args,
        "-o",
        "json",
        env={**os.environ, **deployment.command_env()},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, err.decode(errors="replace")
    return json.loads(out)


async def test_topics_describe_and_status_as_json(deployment: Deployment) -> None:
    tenant = deployment.tenant("json")
    event = doc(tenant, "x")
    await publish_raw(deployment, [(tenant.encode(), event_to_json(event))] * 2)
    home = partition_for(tenant, deployment.partitions)
    settings = deployment.settings

    described = await json_of(deployment, "topics", "describe")
    events, dlq = described["topics"]
    assert (events["name"], dlq["name"]) == (settings.topic, settings.dlq_topic)
    assert events["topic_id"] == deployment.topic_id
    assert events["partition_count"] == deployment.partitions
    assert events["retention_ms"] == -1
    assert [p["high"] for p in events["partitions"]] == [
        2 if p == home else 0 for p in range(deployment.partitions)
    ]

    status = await json_of(deployment, "status")
    assert (status["topic"], status["topic_id"]) == (settings.topic, deployment.topic_id)
    assert status["group_id"] == settings.group_id
    # No worker has run: nothing committed, nothing applied, all of it lag.
    assert [
        (p["partition"], p["committed"], p["graph"], p["lag"]) for p in status["partitions"]
    ] == [(p, None, -1, 2 if p == home else 0) for p in range(deployment.partitions)]


def _ctrl_c_as_in_a_terminal() -> None:
    """A child inherits an ignored SIGINT, and a runner started in the
    background by a non-interactive shell (``cmd &``, nohup) ignores it: Python
    then never installs its Ctrl-C handler and the signal this test sends is
    dropped, as it should be. A terminal's foreground job has it at its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def test_status_watch_reports_rates_and_stops_cleanly_on_ctrl_c(
    deployment: Deployment,
) -> None:
    tenant = deployment.tenant("watch")
    home = partition_for(tenant, deployment.partitions)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "streams",
        *("status", "--watch", "--interval", "0.5", "-o", "json"),
        env={**os.environ, **deployment.command_env()},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    assert proc.stdout is not None
    try:
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        event = event_to_json(doc(tenant, "x"))
        await publish_raw(deployment, [(tenant.encode(), event)] * 5)
        later = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        while later["partitions"][home]["log_end"] < 5:
            later = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert first["partitions"][home]["throughput"] is None
    assert later["partitions"][home]["throughput"]["appended_per_s"] > 0
    assert later["partitions"][home]["throughput"]["applied_per_s"] == 0
    # Ctrl-C is the way out of --watch: exit 0 and no traceback.
    assert proc.returncode == 0, err.decode(errors="replace")
    assert b"Traceback" not in err
