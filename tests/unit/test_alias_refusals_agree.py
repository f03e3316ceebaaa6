"""The graph and the vector folds refuse the same merges and unmerges, and
resolve every id alike afterwards: each store keeps its own alias facts, so a
refusal one of them made alone would split the two (docs/adr/0011-alias-surface.md).

The histories are drawn to reach the refusals: a handful of ids, merges of one
to three of them at once under an alias depth limit of two or three hops, so
chains outgrow the limit, a merge's earlier absorbed ids make or take the room
its later ones need, and merges that would close a cycle come up."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import StreamPartition
from contracts.events import event_to_json, make_event
from contracts.ids import EntityId
from projections.driver import drive
from projections.graph import GraphProjection
from projections.records import LogRecord
from projections.vector import VectorProjection
from streams.worker.decode import decode

PART = StreamPartition("events", 0, "refusals-topic")
IDS = [f"n{i}" for i in range(6)]


@st.composite
def decisions(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    steps = []
    for _ in range(draw(st.integers(1, 10))):
        canonical = draw(st.sampled_from(IDS))
        others = draw(
            st.lists(
                st.sampled_from([i for i in IDS if i != canonical]),
                min_size=1,
                max_size=3,
                unique=True,
            )
        )
        if draw(st.integers(0, 4)) == 0:
            steps.append(("EntitiesUnmerged", {"canonical_id": canonical, "restored_ids": others}))
        else:
            steps.append(("EntitiesMerged", {"canonical_id": canonical, "absorbed_ids": others}))
    return steps


def _log(steps: list[tuple[str, dict[str, Any]]]) -> list[LogRecord]:
    log = []
    for offset, (kind, payload) in enumerate(steps):
        value = event_to_json(make_event(kind, "acme", payload))
        log.append(decode(offset, b"acme", value, None).record)
    return log


@settings(max_examples=300, deadline=None)
@given(steps=decisions(), limit=st.integers(2, 3))
async def test_both_folds_refuse_the_same_decisions_and_resolve_alike(
    steps: list[tuple[str, dict[str, Any]]], limit: int
) -> None:
    embedder = HashingEmbedder(dimension=8)
    graph = InMemoryGraphStore(max_alias_depth=limit)
    vector = InMemoryVectorStore(embedder.identity, max_alias_depth=limit)
    log = _log(steps)
    graph_run = await drive([GraphProjection(graph, embedding_dimension=8)], PART, log)
    vector_run = await drive([VectorProjection(vector, embedder)], PART, log)
    assert sorted(graph_run.failed) == sorted(vector_run.failed)
    for failure in graph_run.failed.values():
        event("too deep" if "REDSTRING_MAX_ALIAS_DEPTH" in failure.reason else "cycle or other")
    tenant = log[0].tenant_id
    assert tenant is not None
    asked = [EntityId(i) for i in IDS]
    assert await graph.resolve_entity_ids(tenant, asked) == await vector.resolve_entity_ids(
        tenant, asked
    )
