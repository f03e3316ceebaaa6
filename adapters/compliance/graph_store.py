"""The GraphStore compliance suite: written once, run against every adapter.

An adapter's test class subclasses ``GraphStoreCompliance`` and provides one
async fixture, ``store``, yielding a ``ProjectedGraphStore``; nothing else in
the suite knows how an adapter is built. Every test makes fresh tenants
(``t-<8 hex>``), so the suite can share one long-lived real database.

The tiers live in their own modules; this class is their sum, and it is what
the coverage gate (tests/unit/test_graph_compliance_coverage.py) inspects for
``test_{method}_returns_copies`` and ``test_{method}_never_crosses_tenants``.
"""

from __future__ import annotations

from adapters.compliance.graph_aliases import AliasTier, PurgeTier
from adapters.compliance.graph_copies import CopyTier
from adapters.compliance.graph_entities import EntityTier
from adapters.compliance.graph_properties import PropertyTier
from adapters.compliance.graph_relationships import RelationshipTier
from adapters.compliance.graph_tenancy import TenancyTier
from adapters.compliance.graph_units_of_work import UnitOfWorkTier
from contracts.ports.graph import GraphStore, ProjectedGraphStore


class GraphStoreCompliance(
    EntityTier,
    RelationshipTier,
    AliasTier,
    PurgeTier,
    CopyTier,
    TenancyTier,
    UnitOfWorkTier,
    PropertyTier,
):
    async def test_the_store_implements_the_port(self, store: ProjectedGraphStore) -> None:
        assert isinstance(store, GraphStore)
        assert isinstance(store, ProjectedGraphStore)
