"""A unit of work shared by several partitions (``Fold.apply_across``, ADR
0024) leaves the state that applying each partition on its own would, or
writes nothing and says so (None): a partition ahead of its store, an event
a store refuses, a merge that would close a cycle, a store without such
units. Over the memory stores, both folds at one ``Verdicts``, as the
projector drives them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import StreamPartition
from contracts.ids import EntityId, TenantId
from projections.fold import Fold, Part, shared_segment
from projections.graph import GraphProjection
from projections.records import FoldReport, LogRecord
from projections.snapshot import snapshot
from projections.vector import VectorProjection
from projections.verdicts import Verdicts
from tests.scenarios.harness import EMBED_DIMENSION, to_log, universe
from tests.scenarios.histories import TOPIC_ID, LogBuilder

POOL = ["a", "b", "c", "d"]


def _partition(number: int) -> StreamPartition:
    return StreamPartition("events", number, TOPIC_ID)


class _Stores:
    def __init__(self) -> None:
        self.embedder = HashingEmbedder(dimension=EMBED_DIMENSION)
        self.graph = InMemoryGraphStore()
        self.vector = InMemoryVectorStore(self.embedder.identity)
        self.folds: list[Fold[Any]] = [
            GraphProjection(self.graph, chunk=2),
            VectorProjection(self.vector, self.embedder, chunk=2),
        ]

    async def needed(self, partition: StreamPartition) -> int:
        return min([await fold.next_needed_offset(partition) for fold in self.folds])

    async def alone(self, partition: StreamPartition, records: Sequence[LogRecord]) -> None:
        """One partition's records on their own, pass after pass while
        refusals are skipped, as the projector applies a batch."""
        for _ in range(len(records) + 1):
            needed = await self.needed(partition)
            pending = [record for record in records if record.offset >= needed]
            if not pending:
                return
            verdicts = Verdicts(len(self.folds))
            reports = await asyncio.gather(
                *(
                    fold.apply(partition, pending, read_from=needed, seat=seat)
                    for fold, seat in zip(self.folds, verdicts.seats, strict=True)
                )
            )
            for fold, report in zip(self.folds, reports, strict=True):
                for failure in report.failed:
                    await fold.skip_refused(partition, failure.offset)
        raise AssertionError("the partition never caught up")

    async def together(self, parts: Sequence[Part]) -> list[list[FoldReport] | None]:
        verdicts = Verdicts(len(self.folds))
        return list(
            await asyncio.gather(
                *(
                    fold.apply_across(parts, seat)
                    for fold, seat in zip(self.folds, verdicts.seats, strict=True)
                )
            )
        )

    async def state(self, records: Sequence[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for tenant, ids in sorted(universe(records).items()):
            out[tenant] = await snapshot(
                self.graph, self.vector, TenantId(tenant), [EntityId(i) for i in ids]
            )
        out["checkpoints"] = (await self.graph.checkpoints(), await self.vector.checkpoints())
        return out


def _logs(plan: list[list[tuple[str, int, list[str]]]]) -> list[LogBuilder]:
    """A log per partition from (op, tenant number, ids) steps: extractions,
    and merges (the first id canonical), which may close cycles."""
    logs = []
    for number, steps in enumerate(plan):
        log = LogBuilder(f"across-{number}")
        for index, (op, tenant_number, ids) in enumerate(steps):
            tenant = f"p{number}-t{tenant_number}"
            if op == "extract" or len(ids) < 2:
                ents = [(i, i.upper(), "Person") for i in ids]
                rels = [(ids[0], other, "KNOWS") for other in ids[1:]]
                log.extract(tenant, f"doc-{index % 3}", ents, rels)
            else:
                log.merge(tenant, ids[0], ids[1:])
        logs.append(log)
    return logs


_STEP = st.tuples(
    st.sampled_from(["extract", "extract", "merge"]),
    st.integers(0, 2),
    st.lists(st.sampled_from(POOL), min_size=1, max_size=3, unique=True),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    plan=st.lists(st.lists(_STEP, min_size=1, max_size=8), min_size=2, max_size=4),
    cuts=st.lists(st.integers(1, 4), min_size=1, max_size=12),
)
def test_shared_units_leave_what_each_partition_alone_would(
    plan: list[list[tuple[str, int, list[str]]]], cuts: list[int]
) -> None:
    """Every partition's log, in batches of the drawn sizes, each round's
    batches shared by one unit of work per store where the folds accept it
    and applied partition by partition where they hand it back: the state,
    the checkpoints and the count of events applied are those of each
    partition's log applied on its own."""

    async def run() -> None:
        logs = _logs(plan)
        records = [record for log in logs for record in log.records]
        alone, shared = _Stores(), _Stores()
        for number, log in enumerate(logs):
            await alone.alone(_partition(number), to_log(log.records))
        rounds = 0
        while True:
            parts, leftovers = [], []
            for number, log in enumerate(logs):
                partition = _partition(number)
                needed = await shared.needed(partition)
                pending = [r for r in to_log(log.records) if r.offset >= needed]
                if not pending:
                    continue
                batch = pending[: cuts[rounds % len(cuts)]]
                segment = shared_segment(batch, needed)
                assert segment is not None  # no control events here
                parts.append(Part(partition, segment))
                leftovers.append((partition, batch))
            if not parts:
                break
            rounds += 1
            assert rounds < 200, "the shared units never caught up"
            results = await shared.together(parts)
            assert (results[0] is None) == (results[1] is None), results
            if results[0] is None:
                for partition, batch in leftovers:
                    await shared.alone(partition, batch)
                continue
            for reports in results:
                assert reports is not None
                assert [r.next_needed_offset for r in reports] == [
                    p.segment.records[-1].offset + 1 for p in parts
                ]
        assert await shared.state(records) == await alone.state(records)

    asyncio.run(run())


async def test_a_shared_unit_reports_each_partition_as_applied_alone() -> None:
    logs = _logs([[("extract", 0, ["a", "b"])], [("extract", 0, ["c"]), ("extract", 1, ["d"])]])
    stores = _Stores()
    parts = [
        Part(_partition(n), shared_segment(to_log(log.records), 0))  # type: ignore[arg-type]
        for n, log in enumerate(logs)
    ]
    graph, vector = await stores.together(parts)
    assert graph is not None and vector is not None
    assert [(r.applied, r.skipped, r.next_needed_offset) for r in graph] == [(1, 0, 1), (2, 0, 2)]
    assert [(r.applied, r.next_needed_offset) for r in vector] == [(1, 1), (2, 2)]
    # The same records again: every event is known, skipped, nothing moves.
    graph, _ = await stores.together(
        [Part(p.partition, shared_segment(p.segment.records, 0)) for p in parts]  # type: ignore[arg-type]
    )
    assert graph is not None
    assert [(r.applied, r.skipped) for r in graph] == [(0, 1), (0, 2)]


async def test_a_partition_ahead_of_its_store_makes_the_shared_unit_write_nothing() -> None:
    """Each partition is checked against its store under the locks: one read
    from past where its store needs it hands the whole unit back."""
    logs = _logs([[("extract", 0, ["a"])], [("extract", 0, ["b"]), ("extract", 0, ["c"])]])
    stores = _Stores()
    first = to_log(logs[0].records)
    second = to_log(logs[1].records)[1:]  # offset 0 is missing: the store needs it first
    parts = [
        Part(_partition(0), shared_segment(first, 0)),  # type: ignore[arg-type]
        Part(_partition(1), shared_segment(second, 1)),  # type: ignore[arg-type]
    ]
    assert await stores.together(parts) == [None, None]
    assert await stores.graph.checkpoints() == {}
    assert await stores.vector.checkpoints() == {}


async def test_an_event_a_store_refuses_makes_the_shared_unit_write_nothing() -> None:
    """A merge that would close a cycle is refused by the graph; the shared
    unit writes nothing in either store, and the partition alone then
    refuses only that merge."""
    logs = _logs(
        [
            [("extract", 0, ["a", "b"]), ("merge", 0, ["a", "b"]), ("merge", 0, ["b", "a"])],
            [("extract", 0, ["c"])],
        ]
    )
    stores = _Stores()
    # The first merge alone, so that the cycle is the second partition's batch's.
    await stores.alone(_partition(0), to_log(logs[0].records)[:2])
    parts = [
        Part(_partition(0), shared_segment(to_log(logs[0].records)[2:], 2)),  # type: ignore[arg-type]
        Part(_partition(1), shared_segment(to_log(logs[1].records), 0)),  # type: ignore[arg-type]
    ]
    assert await stores.together(parts) == [None, None]
    assert await stores.graph.checkpoint(_partition(1)) == -1
    assert await stores.vector.checkpoint(_partition(1)) == -1


async def test_a_store_without_shared_units_hands_every_unit_back() -> None:
    class _Plain:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            if name == "unit_of_work_across":
                raise AttributeError(name)
            return getattr(self._inner, name)

    stores = _Stores()
    stores.folds[1] = VectorProjection(_Plain(stores.vector), stores.embedder)  # type: ignore[arg-type]
    logs = _logs([[("extract", 0, ["a"])], [("extract", 0, ["b"])]])
    parts = [
        Part(_partition(n), shared_segment(to_log(log.records), 0))  # type: ignore[arg-type]
        for n, log in enumerate(logs)
    ]
    assert await stores.together(parts) == [None, None]
    assert await stores.graph.checkpoints() == {}
