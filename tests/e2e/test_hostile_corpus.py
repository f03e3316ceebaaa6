"""The hostile corpus (tests/data/hostile) through one real worker (issue 15,
item 8): every case's raw key and value, published with a plain producer to
a fresh topic, reaches its expected outcome, and nothing crashes the worker
or stalls a partition.

- Dead-letter cases are in ``<topic>.dlq`` at their source position, with the
  expected reason.
- Applied cases leave their tenant holding exactly the expected entities in
  both stores (read as ``redstring export`` reads them).
- Pause cases are published last, one at a time, each followed by a valid
  event of its tenant: the partition pauses at the case (/readyz names the
  version), ``redstring skip --yes`` moves it on, the running worker resumes,
  and the follower is applied.

The corpus says "each case starts from empty stores", and its cases share
tenants (and often an event id), so each case gets tenants of its own: the
corpus tenants (``acme``, ``other``, ``victim``) become ``<prefix>c<n>-acme``
and so on, in the key and in the value, and in the expected reason and
tenant. The stack is shared, so a case whose value would still name a
tenant not this test's is refused before anything is published. Otherwise
the cases go as the corpus gives them:

- a control case whose signature holds for the corpus is signed again, with
  the same key id, for this topic's id (the signature covers the tenant and
  the topic); one signed badly on purpose is left as it is. The worker gets
  the corpus's keys and age window;
- each record carries the corpus's Kafka timestamp (the topic is switched to
  CreateTime for it), since the control-event window is judged against it;
- a case the corpus reads from a given partition (of its 12) is published to
  the partition of this topic that is right, or wrong, for its key alike.

The per-class table it prints is the note's evidence (``-s`` shows it).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from contracts import signing
from contracts.domain import StreamPartition
from contracts.errors import RedstringError
from contracts.events import event_to_json, make_event, parse_event
from contracts.ids import TENANT_ID_PATTERN, TenantId
from streams.kafka.config import librdkafka_config
from streams.kafka.dead_letters import StoredLetter, read_letters
from streams.kafka.partitioning import partition_for
from streams.kafka.topics import admin_client
from streams.ops.export import export_tenant
from streams.settings import Settings
from streams.wiring import Stores
from tests.data import hostile
from tests.data.hostile import HostileCase, load_cases
from tests.e2e.conftest import Deployment
from tests.e2e.test_skip import wait_paused
from tests.e2e.workers import store_positions

pytestmark = pytest.mark.services

CASES = load_cases()
#: The tenants the corpus names; each case gets its own copies.
CORPUS_TENANTS = ("acme", "other", "victim")
_IN_KEY = re.compile(rb"^(" + b"|".join(t.encode() for t in CORPUS_TENANTS) + rb")")
_IN_VALUE = re.compile(rb'"(' + b"|".join(t.encode() for t in CORPUS_TENANTS) + rb")")
_PLACED = re.compile(r"partition \d+ of \d+")
_IN_TEXT = re.compile(r"(?<![a-z0-9_-])(" + "|".join(CORPUS_TENANTS) + r")(?![a-z0-9_-])")


def _original_signer(case: HostileCase) -> str | None:
    """The key id of a control case whose signature holds for the corpus
    (its topic id, its keys): None for any other case."""
    if case.value is None or b'"signature"' not in case.value:
        return None
    try:
        event = parse_event(case.value)
        signing.verify(event, hostile.CONTROL_KEYS, topic_id=hostile.TOPIC_ID)
    except (RedstringError, ValueError, RecursionError):
        return None
    return str(getattr(event, "key_id", None) or signing.DEFAULT_KEY_ID)


def localize(case: HostileCase, prefix: str, topic_id: str) -> HostileCase:
    """``case`` with tenants of its own (``prefix`` + the corpus tenant)."""

    def key(raw: bytes | None) -> bytes | None:
        return None if raw is None else _IN_KEY.sub(prefix.encode() + rb"\1", raw)

    def value(raw: bytes | None) -> bytes | None:
        return None if raw is None else _IN_VALUE.sub(b'"' + prefix.encode() + rb"\1", raw)

    def text(raw: str | None) -> str | None:
        return None if raw is None else _IN_TEXT.sub(prefix + r"\1", raw)

    local = replace(
        case,
        key=key(case.key),
        value=value(case.value),
        reason=text(case.reason),
        tenant=text(case.tenant),
    )
    signer = _original_signer(case)
    if signer is not None and local.value is not None:
        # Renamed, and on another topic, its signature no longer holds: sign
        # it again with the same key, for this topic. A case signed badly on
        # purpose stays as it is.
        event = parse_event(local.value)
        event = event.model_copy(update={"signature": None})
        event = signing.sign(event, hostile.CONTROL_KEYS, topic_id=topic_id, key_id=signer)
        local = replace(local, value=event_to_json(event))
    return local


def placement(case: HostileCase, local: HostileCase, partitions: int) -> int | None:
    """Where to publish ``local`` on a topic of ``partitions``: as the corpus
    places ``case`` on its 12 (right or wrong for its key), or None for the
    producer's own partitioner (the corpus does not judge its placement)."""
    if case.partition is None:
        return None
    try:
        original = partition_for((case.key or b"").decode("utf-8"), hostile.PARTITIONS)
        renamed = partition_for((local.key or b"").decode("utf-8"), partitions)
    except UnicodeDecodeError:
        return case.partition % partitions
    if case.key is None:
        return case.partition % partitions
    if case.partition == original:
        return renamed
    return (renamed + 1) % partitions


def expected_reason(local: HostileCase, partitions: int) -> str | None:
    """The corpus's reason, for this topic: a misplaced record's reason names
    the partition its key belongs on, of this topic's count."""
    if local.reason is None or local.partition is None or local.key is None:
        return local.reason
    try:
        right = partition_for(local.key.decode("utf-8"), partitions)
    except UnicodeDecodeError:
        return local.reason
    return _PLACED.sub(f"partition {right} of {partitions}", local.reason)


def _publish(
    settings: Settings, records: list[tuple[bytes | None, bytes | None, int | None, int]]
) -> list[tuple[int, int]]:
    """With a plain producer: each record's exact key and value, at the given
    partition (None: murmur2 of the key, as every redstring producer) and
    Kafka timestamp (ms). Their (partition, offset), in order."""
    producer = Producer(
        {
            **librdkafka_config(settings),
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "compression.type": "lz4",
            # Values up to the corpus's largest (one byte over the 1 MB limit).
            "message.max.bytes": 4 << 20,
        }
    )
    found: list[tuple[int, int] | None] = [None] * len(records)
    errors: list[str] = []

    def report(index: int) -> Any:
        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                errors.append(f"record {index}: {error}")
            else:
                found[index] = (int(message.partition()), int(message.offset()))

        return delivered

    for index, (key, value, partition, stamp) in enumerate(records):
        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        producer.produce(
            settings.topic, value, key, timestamp=stamp, on_delivery=report(index), **extra
        )
        producer.poll(0)
    assert producer.flush(60) == 0, "not all records were delivered"
    assert not errors, errors
    return [where for where in found if where is not None]


def _timestamp_ms(case: HostileCase) -> int:
    return int(case.logged_at_time.timestamp() * 1000)


def _use_record_timestamps(settings: Settings) -> None:
    """The corpus gives each record's Kafka timestamp (the control-event age
    window is judged against it): let the topic keep the producer's, however
    far from now."""
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        settings.topic,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in (
                ("message.timestamp.type", "CreateTime"),
                # Kafka 4 refuses timestamps over an hour ahead by default;
                # the corpus has records logged years after their events.
                ("message.timestamp.after.max.ms", str(2**63 - 1)),
                ("message.timestamp.before.max.ms", str(2**63 - 1)),
            )
        ],
    )
    admin = admin_client(settings)  # kept alive until the futures resolve
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def _stray_tenant(case: HostileCase, prefix: str) -> str | None:
    """A valid tenant id the localized case still writes to that is not this
    test's (so on the shared stack, someone else's): None when there is none."""
    tenants: list[str] = []
    if case.key is not None:
        tenants.append(case.key.decode("utf-8", "replace"))
    try:
        # As UTF-8 only: json.loads would also read UTF-16 and UTF-32, which
        # no worker reads (a UTF-16 envelope of tenant acme is a dead letter).
        envelope = json.loads((case.value or b"").decode("utf-8"))
    except (ValueError, RecursionError):
        envelope = None
    if isinstance(envelope, dict) and isinstance(envelope.get("tenant_id"), str):
        tenants.append(envelope["tenant_id"])
    for tenant in tenants:
        if TENANT_ID_PATTERN.fullmatch(tenant) and not tenant.startswith(prefix):
            return tenant
    return None


def _state(export: dict[str, Any]) -> tuple[list[str], list[str]]:
    ids = sorted(str(e["id"]) for e in export["entities"])
    return ids, sorted(str(v) for v in export["visible_vectors"])


async def test_the_hostile_corpus_through_a_real_worker(
    deployment: Deployment, stores: Stores
) -> None:
    started = time.monotonic()
    prefix = deployment.tenant("")
    local = [localize(c, f"{prefix}c{i}-", deployment.topic_id) for i, c in enumerate(CASES)]
    strays = {c.name: t for c in local if (t := _stray_tenant(c, prefix)) is not None}
    assert not strays, f"cases that would write to tenants not this test's: {strays}"
    first = [c for c in local if c.expect != "pause"]
    pauses = [c for c in local if c.expect == "pause"]

    _use_record_timestamps(deployment.settings)
    keys = ",".join(f"{k}:{v.decode()}" for k, v in hostile.CONTROL_KEYS.keys.items())
    worker = deployment.worker(
        "w1",
        REDSTRING_CONTROL_KEY="",
        REDSTRING_CONTROL_KEYS=keys,
        REDSTRING_CONTROL_KEY_ID=signing.DEFAULT_KEY_ID,
        REDSTRING_CONTROL_MAX_AGE_S=str(hostile.MAX_AGE.total_seconds()),
        REDSTRING_STALL_AFTER_S="3",
    ).start()
    originals = {c.name: c for c in CASES}
    records = [
        (
            c.key,
            c.value,
            placement(originals[c.name], c, deployment.partitions),
            _timestamp_ms(c),
        )
        for c in first
    ]
    positions = await asyncio.to_thread(_publish, deployment.settings, records)
    assert len(positions) == len(first)
    await deployment.caught_up(stores, workers={"w1": worker}, within=90)
    await asyncio.to_thread(worker.wait_ready, 30)

    letters: dict[tuple[int | None, int | None], StoredLetter] = {
        (letter.source_partition, letter.source_offset): letter
        for letter in read_letters(deployment.settings)
    }
    observed: dict[str, str] = {}
    wrong: dict[str, str] = {}
    for case, (partition, offset) in zip(first, positions, strict=True):
        letter = letters.get((partition, offset))
        if letter is not None:
            observed[case.name] = "dead_letter"
            if case.expect != "dead_letter":
                wrong[case.name] = f"dead-lettered: {letter.reason[:200]}"
                continue
            reason = expected_reason(case, deployment.partitions)
            if reason is not None and reason not in letter.reason:
                wrong[case.name] = f"reason {letter.reason[:200]!r}, expected {reason!r}"
            continue
        observed[case.name] = "applied"
        if case.expect != "applied":
            wrong[case.name] = f"not dead-lettered, expected {case.reason!r}"
            continue
        assert case.tenant is not None
        tenant = TenantId(case.tenant)
        part = StreamPartition(
            deployment.settings.topic,
            partition_for(tenant, deployment.partitions),
            deployment.topic_id,
        )
        entities, vectors = _state(await export_tenant(stores.graph, stores.vector, tenant, part))
        expected = sorted(case.entities)
        if entities != expected or vectors != expected:
            wrong[case.name] = f"graph {entities}, vectors {vectors}, expected {expected}"

    # The pause cases, one at a time: each pauses its partition until skipped.
    for case in pauses:
        tenant = _pause_tenant(case)
        follower = make_event(
            "DocumentExtracted",
            tenant,
            {
                "document_id": "after-the-pause",
                "extraction_model": "m",
                "entities": [{"id": "follower", "name": "Follower", "type": "Thing"}],
            },
        )
        stamp = _timestamp_ms(case)
        [(partition, offset), (_, after)] = await asyncio.to_thread(
            _publish,
            deployment.settings,
            [
                (
                    case.key,
                    case.value,
                    placement(originals[case.name], case, deployment.partitions),
                    stamp,
                ),
                (tenant.encode(), event_to_json(follower), None, stamp),
            ],
        )
        reason = await wait_paused(worker, partition, within=30)
        where = await store_positions(
            stores, deployment.settings.topic, deployment.topic_id, deployment.partitions
        )
        if where["graph"][partition] != offset or where["vector"][partition] != offset:
            wrong[case.name] = f"paused ({reason}) at stores' positions {where}, not {offset}"
        code, out = await deployment.cli(
            "skip", "--partition", str(partition), "--offset", str(offset), "--yes"
        )
        assert code == 0, f"{case.name}: redstring skip failed:\n{out}"
        await deployment.caught_up(
            stores,
            workers={"w1": worker},
            within=30,
            highs={p: (after + 1 if p == partition else 0) for p in range(deployment.partitions)},
        )
        await asyncio.to_thread(worker.wait_ready, 30)
        part = StreamPartition(deployment.settings.topic, partition, deployment.topic_id)
        entities, vectors = _state(
            await export_tenant(stores.graph, stores.vector, TenantId(tenant), part)
        )
        if entities != ["follower"] or vectors != ["follower"]:
            wrong[case.name] = f"after the skip: graph {entities}, vectors {vectors}"
        skipped = [
            letter
            for letter in read_letters(deployment.settings)
            if (letter.source_partition, letter.source_offset) == (partition, offset)
        ]
        if [letter.value for letter in skipped] != [case.value] or not all(
            "skipped by an operator" in letter.reason for letter in skipped
        ):
            wrong[case.name] = f"dead letters after the skip: {[s.reason for s in skipped]}"
        observed[case.name] = "pause"

    # Nothing crashed and nothing stalls: the worker lives, and is ready.
    worker.assert_alive()
    await asyncio.to_thread(worker.wait_ready, 30)
    elapsed = time.monotonic() - started

    table: dict[str, Counter[str]] = {}
    for case in local:
        row = table.setdefault(case.cls, Counter())
        row["tried"] += 1
        row[observed.get(case.name, "missing")] += 1
        row["wrong"] += case.name in wrong
    print(f"\nhostile corpus through a real worker ({len(local)} cases, {elapsed:.1f}s):")
    print(f"  {'class':<16}{'tried':>7}{'dead':>7}{'applied':>9}{'paused':>8}{'wrong':>7}")
    for cls, row in sorted(table.items()):
        print(
            f"  {cls:<16}{row['tried']:>7}{row['dead_letter']:>7}{row['applied']:>9}"
            f"{row['pause']:>8}{row['wrong']:>7}"
        )
    totals = sum(table.values(), Counter())
    print(
        f"  {'total':<16}{totals['tried']:>7}{totals['dead_letter']:>7}{totals['applied']:>9}"
        f"{totals['pause']:>8}{totals['wrong']:>7}   crashed 0, hung 0"
    )
    assert not wrong, "\n".join(f"{name}: {why}" for name, why in wrong.items())


def _pause_tenant(case: HostileCase) -> str:
    """The tenant a pause case is keyed by (its key matches its envelope)."""
    assert case.key is not None
    return case.key.decode("utf-8")
