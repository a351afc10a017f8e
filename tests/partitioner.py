"""The Java client's default partitioner for keyed records, in Python.

Kafka's ``DefaultPartitioner`` / ``BuiltInPartitioner`` places a keyed record
on ``toPositive(murmur2(key)) % partitions``; librdkafka does the same with
``partitioner=murmur2_random``. The tests use this to check that our
producers place a scope where any Java producer would. Golden values are in
``tests/kafka/test_partitioner.py``, taken from ``org.apache.kafka.common.utils.Utils``
of kafka-clients 3.9.1.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """``Utils.murmur2(data)`` of the Java client: a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = data[whole:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, partitions: int) -> int:
    """The partition a Java producer (or librdkafka's ``murmur2_random``)
    chooses for a non-null ``key`` among ``partitions`` partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
