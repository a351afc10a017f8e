"""Where the Redis view is, per followed partition: the view followers'
``follow-position`` offsets (``recurrence_ledger.read.keys.Keys.position``).

A follower commits its offsets to Kafka only after Redis took the batch, so
Kafka's committed offsets say what Redis *was given*. They cannot say what
Redis still holds: a Redis restarted from an older snapshot (RDB or AOF
written before its crash) comes back with the view of an earlier batch, and
a follower carrying on from its committed offsets would never write the
records in between again — the view would differ from the ledger for good,
silently. So after every batch the follower writes, last, the next offset
of each partition of it (:func:`record`), in Redis itself, before it commits
the same offsets to Kafka; and before it writes a batch, and while nothing
arrives, it compares (:func:`lost`): a partition whose recorded offset is
below what the follower recorded itself, or below the group's committed
offset, lost its records since, and is read again from the recorded offset
(the writes are idempotent: what Redis still has is not changed by seeing
it again). Offsets, not batch starts, are compared: a transaction's commit
marker takes an offset no record has. A partition without a recorded
offset (a view written before this existed, or by ``view rebuild``; a
partition with no record yet) is trusted, and recorded at once where it
is: the follower checks every assigned partition within seconds of getting
it, so a snapshot taken later holds a position for each — also for the
partitions whose first record comes long after. Once the follower has seen
a partition's position in Redis, though, a position gone means Redis came
back empty (no persistence, or its keys deleted): the partition is read
again from its beginning.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import Any

import redis

from recurrence_ledger.read.keys import Keys


def lost(client: redis.Redis, keys: Keys, starts: dict[tuple[str, int], int], seen: Container[tuple[str, int]] = ()) -> dict[tuple[str, int], int]:
    """The partitions of ``starts`` (``(logical topic, partition)`` → the
    offset Redis must have reached: the follower's own last record of it,
    or the group's committed offset) whose recorded position in Redis is
    below it, each with that recorded offset (where to read again). One
    without a recorded position is recorded at its ``starts`` offset (at
    worst below what another follower records at the same moment: that
    partition is then read again once, changing nothing) — unless it is in
    ``seen`` (the follower saw its position in Redis before): then Redis
    lost it with the view, and it is recorded and returned at offset 0.
    Raises what redis-py raises when Redis does not answer."""
    if not starts:
        return {}
    wanted = list(starts)
    fields = [keys.applied_field(topic, partition) for topic, partition in wanted]
    recorded = client.hmget(keys.position, fields)
    missing = {}
    for number, (partition, field, offset) in enumerate(zip(wanted, fields, recorded, strict=True)):
        if offset is None:
            gone = partition in seen  # it was there: gone with the view, read it all again
            recorded[number] = 0 if gone else None
            missing[field] = 0 if gone else starts[partition]
    if missing:  # HSET, which the ledger's Redis ACL allows (deploy/redis.sh); a follower's later record only raises it
        client.hset(keys.position, mapping=missing)
    return {
        partition: int(offset)
        for partition, offset in zip(wanted, recorded, strict=True)
        if offset is not None and int(offset) < starts[partition]
    }


def record(client: redis.Redis, keys: Keys, ends: dict[tuple[str, int], int]) -> None:
    """Record ``ends`` (``(logical topic, partition)`` → the next offset
    after a batch Redis took whole) as the view's position. Raises what
    redis-py raises when Redis does not answer."""
    if ends:
        client.hset(keys.position, mapping={keys.applied_field(topic, partition): offset for (topic, partition), offset in ends.items()})


def ends(messages: Iterable[Any]) -> dict[tuple[str, int], int]:
    """``(topic, partition)`` → the offset after the last of ``messages``
    (consumed Kafka messages)."""
    found: dict[tuple[str, int], int] = {}
    for message in messages:
        key = (message.topic(), message.partition())
        found[key] = max(found.get(key, 0), message.offset() + 1)
    return found
