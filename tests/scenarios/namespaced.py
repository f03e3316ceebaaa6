"""A fresh namespace inside a shared real store, for the scenario harness.

The pinned histories use fixed tenant ids and one fixed topic, and the
harness needs stores that start empty. A real database is shared with other
tests (and other engineers' runs), so wiping it is not an option. Instead
``Namespaced`` wraps a real store and renames on the way in and back on the way
out: every tenant id gets the prefix ``<ns>`` and every topic name the same
prefix. A new namespace is an empty store; the adapter underneath is the real
one, running its real statements.

Renaming is by parameter name (``tenant_id``) and by value type (entities,
relationships, aliases, partitions, markers, tombstones, sweeps), recursively
through lists, tuples, sets and dicts.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from contracts.domain import (
    Alias,
    Entity,
    ErasureSweep,
    ErasureTombstone,
    RebuildMarker,
    Relationship,
    StreamPartition,
)
from contracts.ids import TenantId

_TENANT_FIELD = (Entity, Relationship, Alias)
#: Methods whose argument and answer are keyed by tenant id.
_BY_TENANT = {"tenant_ledgers", "resolve_entity_ids_by_tenant", "upsert_by_tenant"}


class Names:
    """One namespace: the renaming in both directions."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def inward(self, name: str) -> str:
        return self.prefix + name

    def outward(self, name: str) -> str:
        if not name.startswith(self.prefix):
            raise AssertionError(f"{name!r} came back from outside the namespace {self.prefix!r}")
        return name[len(self.prefix) :]

    def value(self, value: Any, rename: Callable[[str], str]) -> Any:
        if isinstance(value, _TENANT_FIELD):
            return dataclasses.replace(value, tenant_id=TenantId(rename(value.tenant_id)))
        if isinstance(value, StreamPartition):
            return dataclasses.replace(value, topic=rename(value.topic))
        if isinstance(value, RebuildMarker | ErasureTombstone):
            return dataclasses.replace(
                value,
                tenant_id=TenantId(rename(value.tenant_id)),
                partition=self.value(value.partition, rename),
            )
        if isinstance(value, ErasureSweep):
            return ErasureSweep(rename(value.tenant_id), value.remaining)
        if isinstance(value, list | tuple | set):
            return type(value)(self.value(item, rename) for item in value)
        if isinstance(value, dict):
            return {self.value(k, rename): self.value(v, rename) for k, v in value.items()}
        return value

    def checkpoint_keys(self, listed: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        # Checkpoints are system-wide: keep only this namespace's topics.
        return {
            (self.outward(topic), part): offset
            for (topic, part), offset in listed.items()
            if topic.startswith(self.prefix)
        }


class Namespaced:
    """A store (or a unit of work) seen through one namespace."""

    def __init__(self, inner: Any, names: Names) -> None:
        self._inner = inner
        self._names = names

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(target):
            return target
        signature = inspect.signature(target)
        names = self._names

        async def renamed(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            for param, value in bound.arguments.items():
                if param == "tenant_id":
                    bound.arguments[param] = names.inward(value)
                elif name in _BY_TENANT:
                    # Keyed by tenant id (contracts.ports.ledger.TenantLedgerReads,
                    # contracts.ports.graph.TenantResolution and TenantUpserts).
                    bound.arguments[param] = {
                        names.inward(t): names.value(values, names.inward)
                        for t, values in value.items()
                    }
                else:
                    bound.arguments[param] = names.value(value, names.inward)
            result = await target(*bound.args, **bound.kwargs)
            if name == "checkpoints":
                return names.checkpoint_keys(result)
            if name in _BY_TENANT and result is not None:
                return {
                    names.outward(t): names.value(found, names.outward)
                    for t, found in result.items()
                }
            return names.value(result, names.outward)

        return renamed

    def unit_of_work(self, partition: StreamPartition) -> Any:
        return self._unit("unit_of_work", partition)

    def unit_of_work_across(self, partitions: Sequence[StreamPartition]) -> Any:
        return self._unit("unit_of_work_across", list(partitions))

    @asynccontextmanager
    async def _unit(self, opener: str, partitions: Any) -> AsyncIterator[Namespaced]:
        """The inner store's unit of work (opened by ``opener``) on the
        namespace's partitions, seen through the namespace."""
        inner = self._names.value(partitions, self._names.inward)
        async with getattr(self._inner, opener)(inner) as real:
            yield Namespaced(real, self._names)

    async def __aenter__(self) -> Namespaced:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.aclose()
