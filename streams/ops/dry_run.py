"""The producers' dry run (``redstring fold``): applies a log of values to
fresh in-memory stores with the same decoding, validation and folds the workers
use, and returns the resulting state for canonical JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.domain import StreamPartition
from contracts.errors import SchemaVersionTooNewError
from contracts.events import (
    DocumentExtractedEvent,
    EntitiesMergedEvent,
    EntitiesUnmergedEvent,
    Event,
)
from contracts.ids import EntityId, TenantId
from contracts.limits import DEFAULT_LIMITS, DEFAULT_MAX_ALIAS_DEPTH, EventLimits
from contracts.signing import ControlKeys
from projections.driver import drive
from projections.records import LogRecord
from projections.snapshot import snapshot
from streams.wiring import build_folds
from streams.worker.decode import decode

DRY_RUN_PARTITION = StreamPartition(topic="events", partition=0, topic_id="dry-run")


def mentioned_ids(event: Event) -> set[EntityId]:
    """Every entity id an event names: the universe a snapshot reads over."""
    ids: set[str] = set()
    if isinstance(event, DocumentExtractedEvent):
        ids.update(e.id for e in event.payload.entities)
        ids.update(x for r in event.payload.relationships for x in (r.source, r.target))
    elif isinstance(event, EntitiesMergedEvent):
        p = event.payload
        ids.update([p.canonical_id, *p.absorbed_ids])
        ids.update(x for r in [*p.edges_to_add, *p.edges_to_remove] for x in (r.source, r.target))
    elif isinstance(event, EntitiesUnmergedEvent):
        q = event.payload
        ids.update([q.canonical_id, *q.restored_ids])
        ids.update(
            x for r in [*q.edges_to_restore, *q.edges_to_remove] for x in (r.source, r.target)
        )
    return {EntityId(i) for i in ids}


class DryRunRefused(ValueError):
    """A value the workers would pause on (a newer schema_version): a dry run
    cannot go past it; the message names the line."""


@dataclass
class DryRun:
    state: dict[str, Any]
    dead_letters: list[tuple[int, str]]


async def fold_lines(
    lines: Sequence[bytes | None],
    *,
    control_key: ControlKeys | bytes | None,
    trust_unsigned: bool,
    batch_size: int,
    keys: Sequence[bytes | None] | None = None,
    topic_id: str = "",
    partition: int | None = None,
    partitions: int | None = None,
    logged_at: Sequence[datetime | None] | None = None,
    max_age: timedelta | None = None,
    limits: EventLimits = DEFAULT_LIMITS,
    max_alias_depth: int = DEFAULT_MAX_ALIAS_DEPTH,
) -> DryRun:
    """Fold ``lines`` (Kafka values, in log order) into fresh in-memory stores.
    ``keys``: the records' Kafka keys, checked as the workers check them; a
    file of envelopes has none, and each envelope's tenant stands for its key.
    Control events verify for ``topic_id``; ``partition`` of ``partitions``,
    ``logged_at`` (Kafka timestamps) and ``max_age``: as the workers judge
    records read from a partition (streams.worker.decode.decode). ``limits`` and
    ``max_alias_depth``: the caps, as the workers' settings give them."""
    if keys is not None and len(keys) != len(lines):
        raise ValueError(f"{len(keys)} keys for {len(lines)} values")
    log: list[LogRecord] = []
    dead: list[tuple[int, str]] = []
    universe: dict[TenantId, set[EntityId]] = {}
    for offset, line in enumerate(lines):
        try:
            decoded = decode(
                offset,
                None if keys is None else keys[offset],
                line,
                control_key,
                topic_id=topic_id,
                partition=partition,
                partitions=partitions,
                logged_at=None if logged_at is None else logged_at[offset],
                max_age=max_age,
                trust_unsigned=trust_unsigned,
                keyless=keys is None,
                limits=limits,
            )
        except SchemaVersionTooNewError as exc:
            raise DryRunRefused(f"line {offset + 1}: {exc}") from None
        record = decoded.record
        if decoded.dead_letter_reason is not None:
            dead.append((offset, decoded.dead_letter_reason))
        elif record.event is not None:
            universe.setdefault(record.event.tenant, set()).update(mentioned_ids(record.event))
        log.append(record)
    embedder = HashingEmbedder()
    async with (
        InMemoryGraphStore(max_alias_depth=max_alias_depth) as graph,
        InMemoryVectorStore(embedder.identity, max_alias_depth=max_alias_depth) as vector,
    ):
        result = await drive(
            build_folds(graph, vector, embedder), DRY_RUN_PARTITION, log, batch_size=batch_size
        )
        dead.extend((f.offset, f.reason) for f in result.failed.values())
        checkpoints = {
            "graph": await graph.checkpoint(DRY_RUN_PARTITION),
            "vector": await vector.checkpoint(DRY_RUN_PARTITION),
        }
        tenants = {}
        for tenant in sorted(universe):
            tenants[tenant] = {
                **await snapshot(graph, vector, tenant, universe[tenant]),
                "checkpoints": checkpoints,
            }
    return DryRun({"tenants": tenants}, sorted(dead))
