"""Where the Redis view is, per followed partition: the view followers'
``follow-position`` offsets (``recurrence_ledger.read.keys.Keys.position``).

A follower commits its offsets to Kafka only after Redis took the batch, so
Kafka's committed offsets say what Redis *was given*. They cannot say what
Redis still holds: a Redis restarted from an older snapshot (RDB or AOF
written before its crash) comes back with the view of an earlier batch, and
one without persistence comes back empty; a follower carrying on from its
committed offsets would never write the records in between again — the
view would differ from the ledger for good, silently. So after every batch
the follower records, last, the next offset of each partition of it, in
Redis itself, before it commits the same offsets to Kafka; and before it
writes a batch, and while nothing arrives, it compares
(:meth:`ViewPositions.lost`): a partition whose recorded offset is below
what the follower recorded itself, or below the group's committed offset,
lost its records since, and is read again from the recorded offset (the
writes are idempotent: what Redis still has is not changed by seeing it
again). Offsets, not batch starts, are compared: a transaction's commit
marker takes an offset no record has.

A partition without a recorded offset is read again from the beginning
too: Redis lost the view (no persistence, or its keys deleted), or it was
written before followers recorded offsets, or by ``view rebuild`` — the
writes change nothing where it was not lost. (A follower checks every
assigned partition within seconds of getting it, so a partition with no
record yet has its offset, 0, recorded at once; a new partition starts at
0 anyway.)

A batch's offsets are recorded only if Redis still holds, for each of its
partitions, at least what the follower found before writing it
(``lua/record_position.lua``): Redis emptied while the batch was written
fails it, and the follower checks again instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import redis

from recurrence_ledger.read.keys import Keys
from recurrence_ledger.read.scripts import run_call, scripts

#: A followed partition: ``(logical topic, partition)``.
Partition = tuple[str, int]


class ViewPositions:
    """What one follower knows of the view's positions in ``client`` (its
    namespace's ``keys``): ``expected``, partition → the offset Redis must
    hold at least (what the follower recorded itself, or the group's
    committed offset). Each method raises what redis-py raises when Redis
    does not answer."""

    def __init__(self, client: redis.Redis, keys: Keys):
        self.client, self.keys = client, keys
        self.expected: dict[Partition, int] = {}

    def forget(self, partitions: Iterable[Partition]) -> None:
        """A rebalance: another follower may have recorded these partitions further since."""
        for partition in partitions:
            self.expected.pop(partition, None)

    def lost(self, partitions: Iterable[Partition]) -> dict[Partition, tuple[int, int]]:
        """Of ``partitions`` (those with an ``expected`` offset), the ones
        Redis lost records of, each with ``(where to read again, where it
        should be)`` (module docstring); ``expected`` then says where. A
        partition without a recorded offset is recorded at 0."""
        starts = {key: self.expected[key] for key in partitions if key in self.expected}
        if not starts:
            return {}
        wanted = list(starts)
        fields = [self.keys.applied_field(topic, partition) for topic, partition in wanted]
        found_there = self.client.hmget(self.keys.position, fields)
        missing = {field: 0 for field, offset in zip(fields, found_there, strict=True) if offset is None}
        recorded = [int(offset or 0) for offset in found_there]
        if missing:  # HSET, which the ledger's Redis ACL allows (deploy/redis.sh); a later record of the follower only raises them
            self.client.hset(self.keys.position, mapping=missing)
        found = {partition: (offset, starts[partition]) for partition, offset in zip(wanted, recorded, strict=True) if offset < starts[partition]}
        self.expected.update({partition: offset for partition, (offset, _) in found.items()})
        return found

    def record(self, ends: dict[Partition, int]) -> bool:
        """Record ``ends`` (partition → the next offset after a batch Redis
        took whole) as the view's position, unless Redis no longer holds
        what :meth:`lost` found before the batch (``lua/record_position.lua``;
        a partition it did not look at, its committed offset unknown, is not
        held to anything): then nothing is recorded, and False says to check
        again."""
        if not ends:
            return True
        args: list[Any] = []
        for (topic, partition), offset in ends.items():
            args += [self.keys.applied_field(topic, partition), self.expected.get((topic, partition), -1), offset]
        if run_call(self.client, scripts(self.client).record_position, [self.keys.position], args) != 1:
            return False
        self.expected.update(ends)
        return True


def ends(messages: Iterable[Any]) -> dict[tuple[str, int], int]:
    """``(topic, partition)`` → the offset after the last of ``messages``
    (consumed Kafka messages)."""
    found: dict[tuple[str, int], int] = {}
    for message in messages:
        key = (message.topic(), message.partition())
        found[key] = max(found.get(key, 0), message.offset() + 1)
    return found
