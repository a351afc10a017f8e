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

A missing offset:

- no offset at all (the hash is gone) while the group has read past the
  beginning: Redis lost the view (or it was written before this existed,
  or by ``view rebuild``): every partition of the followed topics is
  recorded at 0, so every follower — also one that joins later — reads its
  partitions again from the beginning;
- one partition's, where the follower saw one before (it keeps what it saw
  across rebalances: no one deletes a position): lost with the view, read
  again from the beginning;
- otherwise (a partition with no record yet, or new) trusted, and recorded
  at once where it is: the follower checks every assigned partition within
  seconds of getting it, so a snapshot taken later holds a position for
  each.

A batch's offsets are recorded only if Redis still holds, for each of its
partitions, at least what the follower found before writing it
(``lua/record_position.lua``): Redis emptied while the batch was written
fails it, and the follower checks again instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import redis
from confluent_kafka import KafkaException

from recurrence_ledger.read.keys import Keys
from recurrence_ledger.read.scripts import run_call, scripts

log = logging.getLogger("recurrence_ledger.follower")

#: A followed partition: ``(logical topic, partition)``.
Partition = tuple[str, int]


class ViewPositions:
    """What one follower knows of the view's positions in ``client`` (its
    namespace's ``keys``): ``expected``, partition → the offset Redis must
    hold at least (what the follower recorded itself, or the group's
    committed offset); ``seen``, the partitions whose position it found in
    Redis. ``every_partition()``: every partition of the followed topics.
    Each method raises what redis-py raises when Redis does not answer."""

    def __init__(self, client: redis.Redis, keys: Keys, every_partition: Callable[[], Iterable[Partition]]):
        self.client, self.keys, self.every_partition = client, keys, every_partition
        self.expected: dict[Partition, int] = {}
        self.seen: set[Partition] = set()

    def forget(self, partitions: Iterable[Partition]) -> None:
        """A rebalance: another follower may have recorded these partitions further since."""
        for partition in partitions:
            self.expected.pop(partition, None)

    def lost(self, partitions: Iterable[Partition]) -> dict[Partition, tuple[int, int]]:
        """Of ``partitions`` (those with an ``expected`` offset), the ones
        Redis lost records of, each with ``(where to read again, where it
        should be)`` (module docstring); ``expected`` then says where."""
        starts = {key: self.expected[key] for key in partitions if key in self.expected}
        if not starts:
            return {}
        wanted = list(starts)
        fields = [self.keys.applied_field(topic, partition) for topic, partition in wanted]
        recorded: list[Any] = self.client.hmget(self.keys.position, fields)
        if any(starts.values()) and all(offset is None for offset in recorded) and not self.client.exists(self.keys.position):
            try:
                others = self.every_partition()
            except KafkaException as error:  # those of the other followers are then found when they look
                log.warning("the followed topics' partitions not listed (%s)", error.args[0])
                others = []
            every = {self.keys.applied_field(topic, partition): 0 for topic, partition in {*others, *wanted}}
            self.client.hset(self.keys.position, mapping=every)  # HSET, which the ledger's Redis ACL allows (deploy/redis.sh)
            recorded = [0] * len(wanted)
        missing = {}
        for number, (partition, field, offset) in enumerate(zip(wanted, fields, recorded, strict=True)):
            if offset is None:
                gone = partition in self.seen  # it was there: gone with the view, read it all again
                recorded[number] = 0 if gone else None
                missing[field] = 0 if gone else starts[partition]
        if missing:  # a later record of the follower only raises them
            self.client.hset(self.keys.position, mapping=missing)
        self.seen.update(wanted)
        found = {partition: (int(offset), starts[partition]) for partition, offset in zip(wanted, recorded, strict=True)
                 if offset is not None and int(offset) < starts[partition]}
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


def every_partition(consumer: Any, topics: dict[str, str]) -> list[Partition]:
    """Every partition of the followed ``topics`` (physical → logical name),
    from the broker's metadata through ``consumer`` (a confluent-kafka
    Consumer). Raises KafkaException when the broker does not answer."""
    found = [consumer.list_topics(topic, timeout=10).topics[topic] for topic in topics]
    return [(topics[metadata.topic], partition) for metadata in found for partition in metadata.partitions]


def ends(messages: Iterable[Any]) -> dict[tuple[str, int], int]:
    """``(topic, partition)`` → the offset after the last of ``messages``
    (consumed Kafka messages)."""
    found: dict[tuple[str, int], int] = {}
    for message in messages:
        key = (message.topic(), message.partition())
        found[key] = max(found.get(key, 0), message.offset() + 1)
    return found
