"""Alias chain depth (docs/design.md 5.4), computed the same way by every adapter
that has alias facts in memory (the Neo4j and pgvector adapters compute the
same numbers in Cypher and SQL).

A chain is at most ``max_alias_depth`` alias hops long. Writing ``a -> c``
makes chains of ``below(a) + 1 + above(c)`` hops, where ``below(a)`` is the
longest chain of aliases that ends at ``a`` and ``above(c)`` the hops from
``c`` to its canonical, both measured before the write and counted up to
``limit + 1``: past that the answer is the same. A write that would exceed
the limit raises ``AliasChainTooDeepError`` and writes nothing; a write that
would close a cycle is left to the cycle check (the folds refuse it).
Resolution answers only within the limit: a longer chain (the limit was
lowered below what a store holds) raises ``AliasChainTooDeepError``; a cycle
still raises ``AliasCycleError`` first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from contracts.errors import AliasChainTooDeepError
from contracts.ids import EntityId, TenantId
from contracts.limits import DEFAULT_MAX_ALIAS_DEPTH

__all__ = ["DEFAULT_MAX_ALIAS_DEPTH", "check_alias_write", "check_resolved_depth"]


def _above(parent: Callable[[EntityId], EntityId | None], start: EntityId, limit: int) -> int:
    """Hops up from ``start``, each alias used once (as Cypher's paths and
    SQL's ``CYCLE`` walks count them: on a corrupt cycle the walk ends where
    it would reuse an alias)."""
    hops, current, left = 0, start, set()
    while hops <= limit and current not in left:
        nxt = parent(current)
        if nxt is None:
            break
        left.add(current)
        hops += 1
        current = nxt
    return hops


def _below(children: Mapping[EntityId, Iterable[EntityId]], start: EntityId, limit: int) -> int:
    """The longest chain of aliases ending at ``start``, each alias used once.
    Every id has at most one alias, so the ids aliased into ``start`` form a
    tree and breadth-first levels are chain lengths."""
    level, used, hops = [start], set(), 0
    while hops <= limit:
        following = [c for node in level for c in children.get(node, ()) if c not in used]
        if not following:
            break
        used.update(following)
        level = following
        hops += 1
    return hops


def check_alias_write(
    tenant: TenantId,
    pairs: Mapping[EntityId, EntityId],
    alias_id: EntityId,
    canonical_id: EntityId,
    limit: int,
) -> None:
    """Refuse ``alias_id -> canonical_id`` if it would make a chain longer than
    ``limit``. ``pairs``: the tenant's aliases (absorbed id -> canonical id)."""
    children: dict[EntityId, list[EntityId]] = {}
    for absorbed, canonical in pairs.items():
        children.setdefault(canonical, []).append(absorbed)
    depth = _below(children, alias_id, limit) + 1 + _above(pairs.get, canonical_id, limit)
    if depth > limit:
        raise AliasChainTooDeepError(tenant, alias_id, limit)


def check_resolved_depth(tenant: TenantId, start: EntityId, hops: int, limit: int) -> None:
    """Refuse to answer for a chain of more than ``limit`` hops."""
    if hops > limit:
        raise AliasChainTooDeepError(tenant, start, limit)
