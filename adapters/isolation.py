"""Tenant isolation the calling code cannot forget (docs/adr/0013-tenant-isolation.md,
docs/design.md 8).

Adapters bind the tenant named in a call with :func:`tenant_scope`, derive a
:class:`Partition` from the bound context (there is no constructor that takes a
tenant), filter inside each statement with it, and check every record that
comes back with :meth:`Partition.only`: a foreign record raises
``TenantIsolationError`` and nothing is returned. Bulk writes are refused or
split by tenant, never run as one statement over the union.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from contracts.domain import ErasureSweep
from contracts.errors import MissingTenantContextError, TenantIsolationError
from contracts.ids import TenantId, tenant_id

T = TypeVar("T")

_CURRENT: ContextVar[TenantId | None] = ContextVar("redstring_tenant", default=None)

__all__ = [
    "ErasureSweep",
    "Partition",
    "current_tenant",
    "tenant_scope",
]


def current_tenant() -> TenantId:
    tenant = _CURRENT.get()
    if tenant is None:
        raise MissingTenantContextError("no tenant is bound; wrap the call in tenant_scope(tenant)")
    return tenant


@contextmanager
def tenant_scope(tenant: str) -> Iterator[TenantId]:
    """Bind ``tenant`` (validated) for the duration of the block."""
    token = _CURRENT.set(tenant_id(tenant))
    try:
        yield current_tenant()
    finally:
        _CURRENT.reset(token)


class Partition:
    """The slice of a store that belongs to the bound tenant."""

    __slots__ = ("tenant", "where")

    def __init__(self, *, _tenant: TenantId, _where: str) -> None:
        self.tenant = _tenant
        self.where = _where

    @classmethod
    def current(cls, *, where: str) -> Partition:
        return cls(_tenant=current_tenant(), _where=where)

    def check(self, found: object) -> None:
        if found != self.tenant:
            raise TenantIsolationError(
                self.tenant, None if found is None else str(found), self.where
            )

    def only(self, items: Iterable[T], tenant_of: Callable[[T], object]) -> list[T]:
        """All of ``items`` if every one is this tenant's; otherwise
        ``TenantIsolationError`` and nothing."""
        checked = list(items)
        for item in checked:
            self.check(tenant_of(item))
        return checked

    def one(self, item: T | None, tenant_of: Callable[[T], object]) -> T | None:
        if item is not None:
            self.check(tenant_of(item))
        return item


def erasure_sweep(tenant: str, remaining: Mapping[str, int]) -> ErasureSweep:
    return ErasureSweep(tenant_id=tenant, remaining=remaining)
