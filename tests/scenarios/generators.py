"""Hypothesis strategies for whole histories of one partition.

The pools are tiny on purpose (five entity ids, two relationship types, up to
three tenants): merges then chain, close cycles, absorb both ends of edges and
get undone while chained. The generator keeps an oracle beside the history it
builds, only to aim its choices (a merge into an id that is already an alias,
a merge that would close a cycle, an unmerge of a link in a chain); what the
folds must produce is decided by the oracle in the test, not here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import strategies as st

from contracts.events import (
    TENANT_ERASED,
    TENANT_REPLAY_REQUESTED,
    DocumentExtractedEvent,
    Event,
)
from tests.scenarios.histories import LogBuilder, Rel, Scenario
from tests.scenarios.oracle import Oracle, resolve

POOL = ["a", "b", "c", "d", "e"]
TENANTS = ["t1", "t2", "t3"]
REL_TYPES = ["KNOWS", "OWNS"]
_PAIRS = [(s, t) for s in POOL for t in POOL if s != t]
OPS = (
    ["extract"] * 10
    + ["merge"] * 5
    + ["merge_into_alias"] * 6
    + ["cycle_merge"] * 2
    + ["unmerge"] * 2
    + ["unmerge_chained"] * 3
    + ["replay"] * 2
    + ["erase", "poison", "retry", "retry", "gap"]
    + ["retry_control"] * 2
)


# Strategies are built once: constructing them inside the composite on every
# draw costs more than everything the draw does.
_N = st.integers(0, 63)
_REL_TYPE = st.sampled_from(REL_TYPES)
_CONFIDENCE = st.sampled_from([0.1, 0.5, 0.9])
_REL_PROPS = st.dictionaries(st.sampled_from(["w", "src"]), st.integers(0, 3), max_size=1)
_ENT_PROPS = st.dictionaries(st.sampled_from(["p", "q"]), st.integers(0, 3), max_size=2)
_NAME_PREFIX = st.sampled_from(["", "Dr ", "Mx "])
_ENT_TYPE = st.sampled_from(["Person", "Org"])
_SIZE = {n: st.integers(0, n) for n in range(5)}


def _pick(draw: Any, items: list[str]) -> str:
    return items[draw(_N) % len(items)]


def _some(draw: Any, items: list[str], low: int, high: int) -> list[str]:
    """``low..high`` distinct items, in a drawn order."""
    pool = list(items)
    out = []
    for _ in range(min(len(pool), low + draw(_SIZE[high - low]))):
        out.append(pool.pop(draw(_N) % len(pool)))
    return out


def _pair(draw: Any, ids: list[str]) -> tuple[str, str]:
    source = _pick(draw, ids)
    return source, _pick(draw, [i for i in ids if i != source])


def _rels(draw: Any, ids: list[str], max_size: int = 3) -> list[Rel]:
    if len(ids) < 2:
        return []
    out: list[Rel] = []
    for _ in range(draw(_SIZE[max_size])):
        source, target = _pair(draw, ids)
        out.append((source, target, draw(_REL_TYPE), draw(_CONFIDENCE), draw(_REL_PROPS)))
    return out


def _refs(draw: Any, max_size: int = 2) -> list[tuple[str, str, str]]:
    return [(*_pair(draw, POOL), draw(_REL_TYPE)) for _ in range(draw(_SIZE[max_size]))]


def _aliases(oracle: Oracle, tenant: str) -> dict[str, str]:
    state = oracle.tenants.get(tenant)
    return dict(state.aliases) if state else {}


def _merge(draw: Any, log: LogBuilder, tenant: str, canonical: str, absorbed: list[str]) -> None:
    log.merge(
        tenant,
        canonical,
        absorbed,
        remove=_refs(draw),
        add=_rels(draw, POOL, max_size=2),
    )


_START = st.sampled_from([0, 5])
_STEPS = {(lo, hi): st.integers(lo, hi) for lo in range(0, 8) for hi in range(lo, 41)}


@st.composite
def histories(draw: Any, min_steps: int = 2, max_steps: int = 22) -> Scenario:
    tenants = TENANTS[: 1 + draw(_N) % 3]
    log = LogBuilder(f"prop-{draw(_N)}-{draw(_N)}", start=draw(_START))
    oracle = Oracle(log.log_start)
    extractions: list[Event] = []
    # Replay requests and erasures sent so far: a retry may re-send one.
    controls: list[Event] = []
    fed = 0
    for _ in range(draw(_STEPS[(min_steps, max_steps)])):
        tenant = _pick(draw, tenants)
        op = _pick(draw, OPS)
        aliases = _aliases(oracle, tenant)
        if op == "extract":
            ids = _some(draw, POOL, 1, 4)
            ents = [
                (i, draw(_NAME_PREFIX) + i.upper(), draw(_ENT_TYPE), draw(_ENT_PROPS)) for i in ids
            ]
            doc = f"doc-{draw(_N) % 4}"
            extractions.append(log.extract(tenant, doc, ents, _rels(draw, ids)))
        elif op == "merge" or (op in ("merge_into_alias", "cycle_merge") and not aliases):
            canonical = _pick(draw, POOL)
            absorbed = _some(draw, [i for i in POOL if i != canonical], 1, 2)
            _merge(draw, log, tenant, canonical, absorbed)
        elif op == "merge_into_alias":
            # Half the time, lengthen the longest chain.
            deepest = max(sorted(aliases), key=lambda a: chain_depth({**aliases, "?": a}))
            canonical = deepest if draw(_N) % 2 else _pick(draw, sorted(aliases))
            free = [i for i in POOL if i != canonical and resolve(aliases, i) == i]
            absorbed = _some(draw, free or [i for i in POOL if i != canonical], 1, 2)
            _merge(draw, log, tenant, canonical, absorbed)
        elif op == "cycle_merge":
            alias = _pick(draw, sorted(aliases))
            _merge(draw, log, tenant, alias, [resolve(aliases, alias)])
        elif op in ("unmerge", "unmerge_chained"):
            chained = sorted(a for a, c in aliases.items() if c in aliases or a in aliases.values())
            if op == "unmerge_chained" and aliases:
                restored = [_pick(draw, chained or sorted(aliases))]
            else:
                restored = _some(draw, POOL, 1, 2)
            canonical = aliases.get(restored[0], "")
            if not canonical or canonical in restored:
                canonical = _pick(draw, [i for i in POOL if i not in restored])
            log.unmerge(
                tenant,
                canonical,
                restored,
                restore=_rels(draw, POOL, max_size=2),
                remove=_refs(draw),
            )
        elif op == "replay" or (op == "retry_control" and not controls):
            controls.append(log.replay(tenant))
        elif op == "erase":
            controls.append(log.erase(tenant))
        elif op == "poison":
            log.poison(tenant if draw(_N) % 2 else None)
        elif op == "retry" and extractions:
            sent = extractions + controls
            log.redeliver(sent[draw(_N) % len(sent)])
        elif op == "retry_control":
            # A producer retry of a replay request or erasure, at once or later.
            log.redeliver(controls[draw(_N) % len(controls)])
        elif op == "gap":
            log.gap(1 + draw(_N) % 3)
        for offset, key, event in log.records[fed:]:
            oracle.feed(offset, key, event)
        fed = len(log.records)
    if not log.records:
        log.poison(None)
    return log.build()


def chain_depth(aliases: dict[str, str]) -> int:
    """The longest alias path, in hops."""
    best = 0
    for start in aliases:
        hops, current = 0, start
        while current in aliases:
            current = aliases[current]
            hops += 1
        best = max(best, hops)
    return best


def features(scenario: Scenario) -> Counter[str]:
    """What a history exercises, judged by the oracle as it consumes it."""
    seen: Counter[str] = Counter()
    oracle = Oracle(scenario.log_start)
    for offset, key, event in scenario.records:
        if event is not None and event.event_type == "EntitiesUnmerged":
            aliases = _aliases(oracle, str(event.tenant_id))
            for restored in event.payload.restored_ids:  # type: ignore[union-attr]
                if restored in aliases and (
                    aliases[restored] in aliases or restored in aliases.values()
                ):
                    seen["unmerge_of_chained_merge"] += 1
        outcome = oracle.feed(offset, key, event)
        if outcome.collapsed:
            seen["collapsing_edge"] += 1
        if outcome.kind == "refused":
            seen["refused_cycle_merge"] += 1
        if outcome.kind == "replay":
            seen["replay"] += 1
        if outcome.kind == "erasure":
            seen["erasure"] += 1
        if outcome.kind == "duplicate":
            control = outcome.event_type in (TENANT_REPLAY_REQUESTED, TENANT_ERASED)
            seen["duplicate_control_event" if control else "duplicate_event_id"] += 1
        if isinstance(event, DocumentExtractedEvent) and outcome.dangling:
            seen["dangling_edge"] += 1
        for state in oracle.tenants.values():
            if chain_depth(state.aliases) >= 3:
                seen["chain_of_3_merges"] += 1
    if len(scenario.tenants()) >= 2:
        seen["several_tenants"] += 1
    return seen
