"""Which partition a tenant's events land in.

Every producer must map a tenant to the same partition, or one tenant's events
would be split across partitions and lose their order. redstring's producers
use librdkafka's ``murmur2_random`` partitioner, which is the Java client's
default (murmur2 of the key, positive, modulo the partition count); any Kafka
client with its default Java-compatible partitioner agrees.
"""

from __future__ import annotations

PARTITIONER = "murmur2_random"


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as an int32."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(tenant: str, partitions: int) -> int:
    """The partition of ``tenant`` on a topic with ``partitions`` partitions."""
    return (murmur2(tenant.encode("utf-8")) & 0x7FFFFFFF) % partitions
