"""tests/partitioner.py against values printed by the Java client itself
(kafka-clients 3.9.1: ``Utils.murmur2`` and ``Utils.toPositive(h) % n``)."""

from __future__ import annotations

import pytest

from tests.partitioner import java_partition, murmur2

# key, murmur2, partition of 2, of 3, of 4
JAVA_GOLDEN = [
    ("scope-a", -1912582853, 1, 0, 3),
    ("scope-b", -999263838, 0, 2, 2),
    ("poison-scope", 426108052, 0, 1, 0),
    ("port-bound", -325024243, 1, 1, 1),
    ("s1", 322709757, 1, 0, 1),
    ("billing-api", -622201770, 0, 2, 2),
    ("21", -973932308, 0, 0, 0),
    ("foobar", -790332482, 0, 0, 2),
    ("a-little-bit-long-string", -985981536, 0, 2, 0),
    ("", 275646681, 1, 0, 1),
    ("x", 2121525046, 0, 1, 2),
]


@pytest.mark.parametrize(("key", "hashed", "of2", "of3", "of4"), JAVA_GOLDEN)
def test_murmur2_and_partition_equal_the_java_client(key, hashed, of2, of3, of4):
    assert murmur2(key.encode()) == hashed
    assert [java_partition(key.encode(), n) for n in (2, 3, 4)] == [of2, of3, of4]
