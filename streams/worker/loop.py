"""The worker loop: what a worker does with the consumer around the projector's
decisions (docs/design.md 5.2 and 5.9), kept apart from Faust so that a simulated
consumer can drive it (tests/simulation) exactly as Faust does.

The loop trusts the consumer for nothing but handing over records it has
fetched. The projector applies only records that continue the stores' position
without a hole (a batch is sorted and cut at the first missing offset), so a
record the consumer failed to deliver (dropped after a seek, or skipped by a
seek of its own) is asked for again instead of being stepped over. The group's
committed offset is only ever the stores' position. A partition whose stores
are behind the log end and that has been handed nothing for a while is sought
to the stores' position again, and readiness says so until records flow.

A partition paused on a newer schema version waits for an upgrade, or for an
operator to skip the record (``redstring skip``, streams.cli.skip): the
watchdog notices the stores moved past the record and resumes the partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

from streams.worker.bounds import (
    UNBOUNDED,
    BatchBounds,
    batch_values_size,
    handle_bounded,
    sub_batches,
)
from streams.worker.metrics import PartitionView
from streams.worker.projector import Decision, Projector, RawRecord, rebuild_progress

log = logging.getLogger("redstring.worker")

#: How a pause on a newer schema version reads (contracts.errors.SchemaVersionTooNewError).
SCHEMA_PAUSE = "Upgrade the workers to resume this partition"
#: How the projector's other pauses read: a corrupt store, and a store call
#: that kept failing with an error that is not transient.
CORRUPT_PAUSE = "the store is corrupt"
GAVE_UP_PAUSE = "which is not transient: paused for an operator"


def is_schema_pause(reason: str) -> bool:
    """Whether a pause came from a newer schema version (not a corrupt store)."""
    return SCHEMA_PAUSE in reason


def pause_reason(reason: str) -> str:
    """The pause's kind for redstring_partition_paused (one of
    streams.worker.metrics.PAUSE_REASONS), from the projector's text."""
    if is_schema_pause(reason):
        return "schema_version"
    if reason.startswith(CORRUPT_PAUSE):
        return "store_corrupt"
    if GAVE_UP_PAUSE in reason:
        return "store_failed"
    return "other"


class Consumer(Protocol):
    """The consumer operations the loop uses, by partition of the events topic."""

    def assigned(self) -> set[int]:
        """The partitions of the events topic this worker holds now."""
        ...

    async def commit(self, offsets: Mapping[int, int]) -> None:
        """Commit these next offsets to read (for partitions still assigned)."""
        ...

    async def seek(self, partition: int, offset: int) -> None:
        """Ask the consumer to read the partition from ``offset`` next."""
        ...

    def pause(self, partition: int) -> None:
        """Stop fetching the partition (until ``resume``)."""
        ...

    def resume(self, partition: int) -> None:
        """Fetch the partition again after a ``pause``."""
        ...

    async def log_end(self, partitions: Collection[int]) -> Mapping[int, int]:
        """The high watermark of each partition (the offset the next record gets)."""
        ...


class WorkerLoop:
    def __init__(
        self,
        projector: Projector,
        consumer: Consumer,
        *,
        stall_after: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
        bounds: BatchBounds = UNBOUNDED,
        share_up_to: int = 0,
    ) -> None:
        self.projector = projector
        self.consumer = consumer
        self.stall_after = stall_after
        # Partitions of a batch with fewer records than this (each within one
        # sub-batch) write their first passes in units of work shared by
        # several of them, of at most this many records each
        # (Projector.handle_together, ADR 0024); 0: never.
        self.share_up_to = share_up_to if projector.shares_units else 0
        # Each partition's records are handed to the projector in sub-batches
        # within these bounds, one after the other (streams.worker.bounds).
        self.bounds = bounds
        self._clock = clock
        # When each partition was last handed a record (or sought): the
        # watchdog's measure of "nothing delivered for a while".
        self._heard: dict[int, float] = {}
        # Partitions with a batch in hand: the watchdog leaves them alone.
        self._in_hand: set[int] = set()
        # Partitions paused on a newer schema version, with the stores'
        # position when they paused: the offset of the record that paused
        # them. Once the stores no longer wait on it (an operator skipped it,
        # or they need earlier records), the watchdog resumes the partition.
        self.paused_at: dict[int, int] = {}
        # The target of each partition's last seek, until a batch from it is
        # handled: records fetched before the seek landed still arrive after
        # it (a consumer's queue is not cleared by a seek), and those past the
        # target are remnants, not a new gap. Seeking again for each of them
        # refills the queue behind them faster than it drains (a stall found
        # by the simulation; tests/unit/streams/test_loop.py).
        self._sought: dict[int, int] = {}
        # The offset this worker last committed for each partition since the
        # group's last rebalance (a commit the group refused comes with one,
        # and on_assigned starts again). The watchdog found every idle,
        # caught-up partition and committed its position again on each pass:
        # a round trip through the consumer's thread, behind its fetches, for
        # nothing, and in the simulation a commit always in flight.
        self._committed: dict[int, int] = {}

    async def on_assigned(self) -> None:
        """After a rebalance: commit and seek every assigned partition to the
        stores' position (asked, not remembered), so that whatever the
        consumer would resume from, it reads what the stores need."""
        assigned = self.consumer.assigned()
        health = self.projector.health
        known = {*health.paused, *health.stalled, *health.failing, *self.paused_at}
        self._forget(known - assigned)
        offsets = {p: await self.projector.next_needed(p) for p in sorted(assigned)}
        now = self._clock()
        for partition in offsets:
            self._heard[partition] = now
        self._committed.clear()
        if offsets:
            await self._commit(offsets)
            for partition, offset in offsets.items():
                if partition in self.consumer.assigned():  # not revoked meanwhile
                    await self.consumer.seek(partition, offset)
                    self._sought[partition] = offset
            log.info("committed the stores' positions", extra={"offsets": offsets})

    async def on_batch(self, batch: Mapping[int, Sequence[RawRecord]]) -> None:
        """Handle one batch: its partitions concurrently (each has its own
        checkpoints and locks in both stores), then the consumer actions one
        partition at a time, in partition order, and the commits of all
        partitions in one call."""
        ordered = sorted((p, records) for p, records in batch.items() if records)
        now = self._clock()
        began = time.monotonic()
        heard = {p: self._heard.get(p) for p, _ in ordered}
        for partition, _ in ordered:
            self._heard[partition] = now
            self._in_hand.add(partition)
        try:
            if self._shares(ordered):
                decisions = await self._handle_together(ordered)
            else:
                decisions = await asyncio.gather(
                    *(
                        handle_bounded(self.projector, partition, records, self.bounds)
                        for partition, records in ordered
                    )
                )
            commits: dict[int, int] = {}
            for (partition, _), decision in zip(ordered, decisions, strict=True):
                if self._remnant(partition, decision):
                    # Not a sign the partition flows: if the seek was lost,
                    # the watchdog seeks again after ``stall_after``.
                    before = heard[partition]
                    if before is not None:
                        self._heard[partition] = before
                    continue
                # Records flowed: whatever stall the watchdog reported is over
                # (if they were not the ones needed, the loop seeks, and the
                # watchdog looks again after ``stall_after``).
                self.projector.health.stalled.pop(partition, None)
                commit = await self._act(partition, decision)
                if commit is not None:
                    commits[partition] = commit
            applied = time.monotonic()
            if commits:
                # One commit for the batch: each is a round trip through the
                # consumer's thread, which waits behind its fetches.
                await self._commit(commits)
            if log.isEnabledFor(logging.DEBUG):
                # Where a batch's time goes, for a latency tail (bench.e2e).
                log.debug(
                    "batch",
                    extra={
                        "partitions": len(ordered),
                        "records": sum(len(records) for _, records in ordered),
                        "apply_s": round(applied - began, 4),
                        "commit_s": round(time.monotonic() - applied, 4),
                    },
                )
        finally:
            for partition, _ in ordered:
                self._in_hand.discard(partition)
            # Revoked while in hand: whatever its batch reported (a pause, a
            # store failing) is the new owner's to find again, not this
            # worker's readiness until the next rebalance.
            self._forget({p for p, _ in ordered} - self.consumer.assigned())

    def _shares(self, ordered: Sequence[tuple[int, Sequence[RawRecord]]]) -> bool:
        """Whether the batch's partitions may share units of work: each within
        one sub-batch, and two of them at least with fewer records than a
        shared unit takes (a backlog's batch shares nothing, and keeps its
        partitions writing while the next ones decode), and all of it within
        the in-flight budget: a shared batch is decoded at once, so a larger
        one would hold more decoded than REDSTRING_APPLY_MAX_BYTES allows
        (docs/adr/0009-read-ahead-by-bytes.md)."""
        small = sum(len(records) < self.share_up_to for _, records in ordered)
        if small < 2:
            return False
        in_flight = self.bounds.in_flight
        if in_flight is not None and batch_values_size(dict(ordered)) > in_flight.max_bytes:
            return False
        return all(len(sub_batches(records, self.bounds)) == 1 for _, records in ordered)

    async def _handle_together(
        self, ordered: Sequence[tuple[int, Sequence[RawRecord]]]
    ) -> list[Decision]:
        """The batch in ``Projector.handle_together``, holding the in-flight
        budget for all of it at once: a partition waiting for room that
        another holds while it waits for the rest would never move."""
        in_flight = self.bounds.in_flight
        if in_flight is None:
            return await self.projector.handle_together(ordered, self.share_up_to)
        size = batch_values_size(dict(ordered))
        await in_flight.acquire(size)
        try:
            return await self.projector.handle_together(ordered, self.share_up_to)
        finally:
            in_flight.release(size)

    def _forget(self, partitions: Collection[int]) -> None:
        """Drop the health and pauses of partitions this worker no longer holds."""
        health = self.projector.health
        for table in (health.paused, health.stalled, health.failing, self.paused_at):
            for partition in partitions:
                table.pop(partition, None)

    def _remnant(self, partition: int, decision: Decision) -> bool:
        """Whether the batch only asked for the seek already made: records
        from before that seek landed, past its target, to be dropped. Any
        other decision means the records from the target on have arrived (or
        the stores moved): the next gap is a new one."""
        sought = self._sought.get(partition)
        if decision.seek is not None and decision.seek == sought and decision.reason == "ahead":
            return True
        if sought is not None and not (decision.commit is not None and decision.commit <= sought):
            # Anything but "already applied" up to the target: the seek is answered.
            del self._sought[partition]
        return False

    async def _act(self, partition: int, decision: Decision) -> int | None:
        """Pause or seek as the decision says; else the offset to commit (the
        caller commits a batch's partitions in one call)."""
        if decision.pause is not None:
            if partition not in self.consumer.assigned():
                # Revoked while the batch was in hand: Faust keeps a pause of
                # a partition it does not hold, and should the partition come
                # back, it would stay paused with nothing to resume it.
                return None
            self.consumer.pause(partition)
            if is_schema_pause(decision.pause):
                at = decision.paused_at
                if at is None:  # the record that paused is the first one the stores need
                    at = await self.projector.next_needed(partition)
                self.paused_at[partition] = at
        elif decision.seek is not None:
            await self._seek(partition, decision.seek)
            log.info("sought back", extra={"partition": partition, "offset": decision.seek})
        else:
            return decision.commit
        return None

    async def _seek(self, partition: int, offset: int) -> None:
        # The target is the stores' position, so committing it first keeps the
        # group's offset at or below it whatever the consumer does next.
        await self._commit({partition: offset})
        if partition not in self.consumer.assigned():
            # Revoked while the batch was in hand: the new owner reads from the
            # stores' position, and a seek of a partition not assigned raises
            # (aiokafka's IllegalStateError), which would crash the worker.
            return
        await self.consumer.seek(partition, offset)
        self._sought[partition] = offset
        self._heard[partition] = self._clock()

    async def check_stalls(self) -> None:
        """The watchdog (docs/design.md 5.9): a partition held by this worker, not
        paused, handed nothing for ``stall_after`` seconds while its stores are
        behind the log end has lost a seek or a delivery. Seek it to the
        stores' position again and say so, in the log and in readiness, until
        its records flow."""
        await self.check_skipped()
        health = self.projector.health
        now = self._clock()
        quiet = [
            p
            for p in sorted(self.consumer.assigned())
            if p not in health.paused
            and p not in self._in_hand
            and now - self._heard.setdefault(p, now) >= self.stall_after
        ]
        if not quiet:
            return
        ends = await self.consumer.log_end(quiet)
        for partition in quiet:
            if partition in self._in_hand or partition not in self.consumer.assigned():
                continue
            position = await self.projector.next_needed(partition)
            end = ends.get(partition)
            if (
                end is None
                or position >= end
                # Only transaction markers left: nothing to hand over.
                or not await self.projector.holds_records_from(partition, position)
            ):
                health.stalled.pop(partition, None)
                self._heard[partition] = now
                if end is not None:
                    # Caught up, maybe by another worker (a zombie's late batch)
                    # while this one was handed nothing: commit the stores'
                    # position, or the group's offset would lag forever.
                    await self._commit({partition: position})
                continue
            if partition not in self.consumer.assigned():
                # Revoked during the awaits above: not this worker's to report
                # (nothing here would clear it once it is someone else's).
                continue
            if partition in self._in_hand:
                # Handed a batch during the awaits above: it flows, and the
                # batch decides any seek (a seek here too was a second one,
                # found by the simulation's seek watch).
                continue
            reason = (
                f"handed no record for {self.stall_after:g}s while the stores need offsets "
                f"{position}..{end - 1}: sought to {position} again"
            )
            health.stalled[partition] = reason
            log.warning(
                "partition idle with lag; seeking to the stores' position",
                extra={"partition": partition, "offset": position, "log_end": end},
            )
            self.projector.metrics.seeks.labels(reason="stalled").inc()
            await self._seek(partition, position)

    async def _commit(self, offsets: Mapping[int, int]) -> None:
        """Commit the offsets this worker has not committed already since the
        last rebalance, and remember them."""
        wanted = {p: o for p, o in offsets.items() if self._committed.get(p) != o}
        if not wanted:
            return
        await self.consumer.commit(wanted)
        held = self.consumer.assigned()
        self._committed.update({p: o for p, o in wanted.items() if p in held})

    async def check_skipped(self) -> None:
        """Resume each partition paused on a newer schema version whose stores
        no longer wait on the record that paused it: they moved past it
        (``redstring skip`` dead-lettered it and advanced both stores), or
        they need earlier records, which they would never get while paused
        (and ``redstring skip`` refuses a record they do not wait on). Clear
        the pause, resume the partition in the consumer and seek it to the
        stores' position; a record still refused pauses it again when read.
        Run by the watchdog on every tick, whatever the quiet time."""
        health = self.projector.health
        for partition, offset in sorted(self.paused_at.items()):
            if partition not in health.paused or partition not in self.consumer.assigned():
                del self.paused_at[partition]  # resumed, or no longer this worker's
                continue
            if partition in self._in_hand:
                continue
            position = await self.projector.next_needed(partition)
            if position == offset or partition not in self.paused_at:
                continue
            if partition not in self.consumer.assigned():
                continue  # revoked during the await: the new owner starts unpaused
            del self.paused_at[partition]
            health.paused.pop(partition, None)
            self.consumer.resume(partition)
            log.warning(
                "the stores no longer wait on the record that paused the partition; resuming",
                extra={"partition": partition, "offset": offset, "position": position},
            )
            self.projector.metrics.seeks.labels(reason="resumed").inc()
            await self._seek(partition, position)

    async def update_lag(self) -> None:
        """The lag timer: each held partition's lag per store, open rebuild
        windows and pause, from the stores themselves (not in any batch's path)."""
        assigned = sorted(self.consumer.assigned())
        ends = await self.consumer.log_end(assigned) if assigned else {}
        views = []
        for partition in assigned:
            try:
                stores = await self.projector.stores_view(partition)
            except Exception as exc:  # the batch path retries and reports it
                log.warning(
                    "lag not read this tick",
                    extra={"partition": partition, "error": type(exc).__name__},
                )
                continue
            paused = self.projector.health.paused.get(partition)
            views.append(
                PartitionView(
                    partition,
                    int(ends.get(partition) or 0),
                    {store: position for store, (position, _) in stores.items()},
                    {
                        store: [(m.tenant_id, m.start_offset, m.end_offset) for m in markers]
                        for store, (_, markers) in stores.items()
                    },
                    rebuild_progress(m for _, markers in stores.values() for m in markers),
                    None if paused is None else pause_reason(paused),
                )
            )
        self.projector.metrics.show_partitions(views)
