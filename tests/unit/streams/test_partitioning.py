"""Kafka's murmur2 partitioner, checked against values of the Java client."""

from __future__ import annotations

import pytest

from streams.kafka.partitioning import murmur2, partition_for


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        # From org.apache.kafka.common.utils.UtilsTest#testMurmur2.
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_a_tenant_always_lands_in_one_partition_in_range() -> None:
    seen = {partition_for(f"tenant-{i}", 12) for i in range(200)}
    assert seen <= set(range(12)) and len(seen) == 12
    assert partition_for("acme", 12) == partition_for("acme", 12)
