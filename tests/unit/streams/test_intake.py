"""The intake (streams.worker.intake): the next batch is gathered while one is
in flight, never two in flight, nothing put is lost but what a rebalance
revoked or a stop dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from streams.worker.bounds import ReadAhead
from streams.worker.intake import Intake, IntakeStopped
from streams.worker.projector import RawRecord


def records(*offsets: int) -> list[RawRecord]:
    return [RawRecord(offset, b"t", b"{}") for offset in offsets]


class Handler:
    """Holds each batch until released, and records what it was handed."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.batches: list[dict[int, list[int]]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.release = asyncio.Event()
        self.fail_on = fail_on

    async def on_batch(self, batch: Mapping[int, Sequence[RawRecord]]) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.batches.append({p: [r.offset for r in rs] for p, rs in batch.items()})
        try:
            if self.fail_on is not None and len(self.batches) == self.fail_on:
                raise ValueError("a bug in the loop")
            await self.release.wait()
        finally:
            self.in_flight -= 1


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_what_arrives_while_a_batch_is_in_flight_is_the_next_batch() -> None:
    handler = Handler()
    intake = Intake(handler, max_records=100)
    intake.start()
    await intake.put({0: records(0, 1)})
    await settle()
    assert handler.batches == [{0: [0, 1]}]
    # Gathered while the first is written: one batch, not three.
    await intake.put({0: records(2)})
    await intake.put({1: records(0)})
    await intake.put({0: records(3)})
    await settle()
    assert len(handler.batches) == 1 and intake.pending == 3 and intake.applying
    handler.release.set()
    await intake.join()
    assert handler.batches == [{0: [0, 1]}, {0: [2, 3], 1: [0]}]
    assert handler.most_in_flight == 1
    assert intake.idle()
    await intake.close()


async def test_a_put_waits_while_the_intake_is_full() -> None:
    handler = Handler()
    intake = Intake(handler, max_records=3)
    intake.start()
    await intake.put({0: records(0)})
    await settle()  # in flight
    await intake.put({0: records(1, 2)})
    blocked = asyncio.ensure_future(intake.put({0: records(3, 4)}))
    await settle()
    assert not blocked.done() and intake.pending == 2
    handler.release.set()
    await settle()
    assert blocked.done()
    await intake.join()
    assert [b[0] for b in handler.batches] == [[0], [1, 2], [3, 4]]
    await intake.close()


async def test_a_batch_larger_than_the_bound_alone_is_taken_whole() -> None:
    handler = Handler()
    handler.release.set()
    intake = Intake(handler, max_records=2)
    intake.start()
    await intake.put({0: records(0, 1, 2, 3)})
    await intake.join()
    assert handler.batches == [{0: [0, 1, 2, 3]}]
    await intake.close()


async def test_a_rebalance_drops_what_waits_for_revoked_partitions() -> None:
    handler = Handler()
    intake = Intake(handler, max_records=100)
    intake.start()
    await intake.put({0: records(0)})
    await settle()
    await intake.put({0: records(1), 1: records(7), 2: records(9)})
    intake.retain({1})
    assert intake.pending == 1
    handler.release.set()
    await intake.join()
    assert handler.batches == [{0: [0]}, {1: [7]}]
    await intake.close()


async def test_each_batch_is_announced_before_it_is_applied() -> None:
    handler = Handler()
    handler.release.set()
    seen: list[tuple[int, int]] = []
    intake = Intake(
        handler,
        max_records=10,
        on_taken=lambda batch: seen.append((len(handler.batches), sum(map(len, batch.values())))),
    )
    intake.start()
    await intake.put({0: records(0, 1), 3: records(5)})
    await intake.join()
    assert seen == [(0, 3)]
    await intake.close()


async def test_close_lets_the_batch_in_flight_finish_and_drops_the_rest() -> None:
    handler = Handler()
    intake = Intake(handler, max_records=100)
    task = intake.start()
    await intake.put({0: records(0)})
    await settle()
    await intake.put({0: records(1)})
    closing = asyncio.ensure_future(intake.close())
    await settle()
    assert not closing.done() and handler.in_flight == 1  # not cancelled mid-batch
    handler.release.set()
    await closing
    assert handler.batches == [{0: [0]}] and task.done()


async def test_a_put_after_the_applier_failed_raises_with_its_error() -> None:
    handler = Handler(fail_on=1)
    intake = Intake(handler, max_records=100)
    intake.start()
    await intake.put({0: records(0)})
    await settle()
    with pytest.raises(IntakeStopped) as stopped:
        await intake.put({0: records(1)})
    assert isinstance(stopped.value.__cause__, ValueError)
    await intake.join()  # returns: nothing will be applied any more


async def test_records_dropped_by_a_rebalance_give_their_budget_back() -> None:
    """The read-ahead budget counts what was gathered until the applier takes
    it. Records a rebalance drops are never taken: if nothing let go of their
    bytes, a budget they filled would keep the consumer from admitting the
    next record while the intake, now empty, waits for one."""
    handler = Handler()
    budget = ReadAhead(max_bytes=5)  # each record's value, b"{}", is 2 bytes
    intake = Intake(
        handler,
        max_records=100,
        on_taken=budget.give_back,
        on_dropped=budget.give_back,
    )
    intake.start()
    await budget.admit(2)
    await intake.put({0: records(0)})
    await settle()  # in flight: its bytes are given back
    for offset in (1, 2):
        await budget.admit(2)
        await intake.put({1: records(offset)})
    intake.retain({0})  # partition 1 revoked while it waited
    handler.release.set()
    await intake.join()
    # Nothing is counted any more, so the next record is admitted at once
    # (with the two dropped records still counted, 4 + 2 > 5 would wait).
    assert budget.held == 0
    await intake.close()
