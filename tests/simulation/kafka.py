"""A simulated Kafka cluster: per-partition logs, a consumer group's committed
offsets (fenced by generation) and high watermarks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from streams.worker.projector import RawRecord


@dataclass
class SimKafka:
    partitions: int
    logs: dict[int, list[RawRecord]] = field(default_factory=dict)
    #: The group's committed offsets (absent: nothing committed yet).
    committed: dict[int, int] = field(default_factory=dict)
    #: The group generation and which member owns each partition in it.
    generation: int = 0
    owner: dict[int, str] = field(default_factory=dict)
    #: Called with (partition, offset) when a commit lands (the runner checks 5.9).
    on_commit: Callable[[int, int], None] | None = None
    fenced_commits: int = 0

    def __post_init__(self) -> None:
        for partition in range(self.partitions):
            self.logs.setdefault(partition, [])

    def append(self, partition: int, key: bytes | None, value: bytes | None) -> int:
        log = self.logs[partition]
        log.append(RawRecord(len(log), key, value))
        return len(log) - 1

    def high_watermark(self, partition: int) -> int:
        return len(self.logs[partition])

    def read(self, partition: int, offset: int, most: int) -> list[RawRecord]:
        return self.logs[partition][offset : offset + most]

    def commit(self, member: str, generation: int, offsets: dict[int, int]) -> None:
        """An OffsetCommit request: refused when the member's generation is
        stale or it does not own the partition (Faust drops the refusal)."""
        for partition, offset in offsets.items():
            if generation != self.generation or self.owner.get(partition) != member:
                self.fenced_commits += 1
                continue
            self.committed[partition] = offset
            if self.on_commit is not None:
                self.on_commit(partition, offset)
