"""Which records a store applies (docs/semantics.md, "Which records a store
applies"): the checkpoint fence, rebuild windows, erasure tombstones.

Pure bookkeeping over values read from the store's ledger at the start of a
unit of work; the fold writes the result back in the same unit of work.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum

from contracts.domain import ErasureTombstone, RebuildMarker, StreamPartition
from contracts.ids import TenantId
from contracts.ports.ledger import ProjectionLedger


class Verdict(Enum):
    APPLY = "apply"
    SKIP = "skip"


@dataclass
class Admission:
    partition: StreamPartition
    checkpoint: int
    markers: dict[TenantId, RebuildMarker]
    tombstones: dict[TenantId, ErasureTombstone | None]
    markers_changed: bool = False
    last_scanned: int | None = None

    @classmethod
    async def load(cls, ledger: ProjectionLedger, partition: StreamPartition) -> Admission:
        markers = {m.tenant_id: m for m in await ledger.rebuild_markers(partition)}
        return cls(partition, await ledger.checkpoint(partition), markers, {})

    def next_needed(self) -> int:
        windows = [m.applied_through + 1 for m in self.markers.values() if m.state == "rebuilding"]
        return min(windows) if windows else self.checkpoint + 1

    async def tombstone(
        self, ledger: ProjectionLedger, tenant: TenantId
    ) -> ErasureTombstone | None:
        if tenant not in self.tombstones:
            self.tombstones[tenant] = await ledger.erasure_tombstone(tenant)
        return self.tombstones[tenant]

    def _close_covered(self, offset: int) -> None:
        """A record at or past a window's end means the window is covered."""
        for tenant, marker in list(self.markers.items()):
            if marker.state == "rebuilding" and offset >= marker.end_offset:
                del self.markers[tenant]
                self.markers_changed = True

    async def decide(
        self,
        ledger: ProjectionLedger,
        offset: int,
        tenant: TenantId | None,
        *,
        is_control: bool,
    ) -> Verdict:
        """The verdict for one record, before event-id deduplication. Call
        :meth:`scanned` afterwards, whatever the verdict."""
        self._close_covered(offset)
        if tenant is None:
            return Verdict.SKIP
        stone = await self.tombstone(ledger, tenant)
        # An offset means something on its own partition only: a tombstone
        # does not judge the tenant's records on another (docs/semantics.md).
        if stone is not None and stone.partition == self.partition and offset <= stone.offset:
            return Verdict.SKIP
        marker = self.markers.get(tenant)
        if marker is not None and marker.state == "rebuilding":
            in_window = marker.applied_through < offset < marker.end_offset
            # An older control event inside the window changes nothing when the
            # tenant's history is re-applied in order (docs/semantics.md).
            return Verdict.APPLY if in_window and not is_control else Verdict.SKIP
        return Verdict.APPLY if offset > self.checkpoint else Verdict.SKIP

    def scanned(self, offset: int) -> None:
        self.last_scanned = offset if self.last_scanned is None else max(self.last_scanned, offset)
        for tenant, marker in list(self.markers.items()):
            if marker.state != "rebuilding" or offset >= marker.end_offset:
                continue
            if offset > marker.applied_through:
                moved = replace(marker, applied_through=offset)
                self.markers_changed = True
                if moved.complete:
                    del self.markers[tenant]
                else:
                    self.markers[tenant] = moved

    async def persist(
        self, ledger: ProjectionLedger, original: dict[TenantId, RebuildMarker]
    ) -> None:
        """Write marker moves and the checkpoint into the unit of work."""
        if self.markers_changed:
            for tenant in original:
                if tenant not in self.markers:
                    await ledger.close_rebuild_marker(tenant, self.partition)
            for tenant, marker in self.markers.items():
                if original.get(tenant) != marker:
                    await ledger.put_rebuild_marker(marker)
        if self.last_scanned is not None and self.last_scanned > self.checkpoint:
            await ledger.advance_checkpoint(self.partition, self.last_scanned)
            self.checkpoint = self.last_scanned


async def next_needed_offset(
    ledger: ProjectionLedger,
    partition: StreamPartition,
    markers: Iterable[RebuildMarker] | None = None,
) -> int:
    """docs/design.md 5.2: the lowest offset this store still needs, from the store
    alone. ``markers``: the partition's open rebuild markers, when the caller has
    just read them from this store (a read fewer)."""
    if markers is None:
        markers = await ledger.rebuild_markers(partition)
    windows = [m.applied_through + 1 for m in markers if m.state == "rebuilding"]
    return min(windows) if windows else await ledger.checkpoint(partition) + 1
