"""How many of a batch's records a pass over a partition takes, once a store
has ended one of its units of work for outliving the transaction timeout
(``TransactionEndedError``; docs/adr/0021-transaction-bounds.md).

Retrying the same unit of work would be ended again, for ever: the
partition would be stuck. So a partition whose unit of work was ended takes
half as many records per pass, and grows again by doubling after each pass
that commits, up to just below the smallest size that was ended. That size
is forgotten after ``FORGET_AFTER`` passes in a row commit, so that a slow
spell (a store under load, a lock waited on) does not cost throughput for
good. Partitions that never had a unit of work ended take whole batches.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Passes in a row that commit before a partition takes whole batches again.
FORGET_AFTER = 32


@dataclass(slots=True)
class _Limit:
    size: int
    #: The smallest pass size a store ended a unit of work of.
    ended_at: int
    streak: int = 0


class PassLimits:
    def __init__(self) -> None:
        self._limits: dict[int, _Limit] = {}

    def take(self, partition: int, pending: int) -> int:
        """How many of ``pending`` records the partition's next pass takes."""
        limit = self._limits.get(partition)
        return pending if limit is None else min(pending, limit.size)

    def ended(self, partition: int, taken: int) -> None:
        """A store ended a unit of work of a pass that took ``taken`` records."""
        limit = self._limits.get(partition)
        ended_at = taken if limit is None else min(limit.ended_at, taken)
        self._limits[partition] = _Limit(max(1, taken // 2), ended_at)

    def committed(self, partition: int) -> None:
        """A pass over the partition committed."""
        limit = self._limits.get(partition)
        if limit is None:
            return
        limit.streak += 1
        if limit.streak >= FORGET_AFTER:
            del self._limits[partition]
            return
        limit.size = max(1, min(limit.size * 2, limit.ended_at - 1))
