"""The bench's reading of each worker's last assignment from its JSON log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bench.e2e import READY_LINE, _settled_assignment


def _line(partitions: list[int]) -> str:
    offsets = {str(p): 0 for p in partitions}
    return json.dumps({"ts": "2026-12-07T06:00:00+00:00", "msg": READY_LINE, "offsets": offsets})


async def test_the_assignment_is_read_once_the_group_has_settled(tmp_path: Path) -> None:
    # CI's failure (stop 52): the workload was projected while the group still
    # rebalanced; one worker had logged its half, the other nothing yet.
    first, second = tmp_path / "w0.log", tmp_path / "w1.log"
    first.write_text(_line(list(range(12))) + "\n" + _line(list(range(6, 12))) + "\n")
    second.write_text("not json\n")

    async def second_logs_later() -> None:
        await asyncio.sleep(1.0)
        with second.open("a") as out:
            out.write(_line(list(range(6))) + "\n")

    writer = asyncio.create_task(second_logs_later())
    assignment = await _settled_assignment([first, second], set(range(12)))
    await writer
    assert assignment == [list(range(6, 12)), list(range(6))]
