"""``redstring fold``: the producers' dry run and the embedded demo.

Applies a file of events to fresh in-memory stores with the same folds and the
same validation the workers use, and writes the resulting state as canonical
JSON.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

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
from projections.fold import Fold
from projections.graph import GraphProjection
from projections.records import LogRecord
from projections.snapshot import canonical_json, snapshot
from projections.vector import VectorProjection
from streams.decode import decode
from streams.settings import Settings

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
    records read from a partition (streams.decode.decode). ``limits`` and
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
            raise click.ClickException(f"line {offset + 1}: {exc}") from None
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
        folds: list[Fold[Any]] = [
            GraphProjection(graph, embedding_dimension=vector.dimension),
            VectorProjection(vector, embedder),
        ]
        result = await drive(folds, DRY_RUN_PARTITION, log, batch_size=batch_size)
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


@click.command("fold")
@click.argument("events", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the state here (default: stdout).",
)
@click.option(
    "--trust-unsigned",
    is_flag=True,
    help="Accept unsigned control events (a dry run without the control key).",
)
@click.option("--batch-size", default=500, show_default=True, help="Events per batch.")
@click.option(
    "--topic-id",
    default="",
    show_default=True,
    help="The Kafka topic id control events were signed for ('redstring topics describe' "
    "shows it; empty: events signed without a topic, as tests and demos sign them).",
)
def fold_command(
    events: Path, out: Path | None, trust_unsigned: bool, batch_size: int, topic_id: str
) -> None:
    """Apply EVENTS (one JSON envelope per line) to fresh in-memory stores and
    print the resulting state as canonical JSON.

    Positions are assigned in file order on one partition. Values that would be
    dead-lettered are listed on stderr with their reasons. Control events are
    verified with REDSTRING_CONTROL_KEYS and REDSTRING_CONTROL_KEY, for the
    topic id --topic-id, as the workers verify them. A file has no Kafka
    timestamps, so their age (REDSTRING_CONTROL_MAX_AGE_S) is not judged. The
    caps (REDSTRING_MAX_*) are the workers' settings.
    """
    lines = [line for line in events.read_bytes().splitlines() if line.strip()]
    settings = Settings()
    result = asyncio.run(
        fold_lines(
            lines,
            control_key=settings.control_keyring(),
            trust_unsigned=trust_unsigned,
            batch_size=batch_size,
            topic_id=topic_id,
            limits=settings.event_limits(),
            max_alias_depth=settings.max_alias_depth,
        )
    )
    for offset, reason in result.dead_letters:
        click.echo(f"dead letter: line {offset + 1}: {reason}", err=True)
    text = canonical_json(result.state)
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        tenants = result.state["tenants"]
        click.echo(
            f"folded {len(lines)} events for {len(tenants)} tenant(s) into {out}; "
            f"{len(result.dead_letters)} dead letter(s)",
            err=True,
        )
