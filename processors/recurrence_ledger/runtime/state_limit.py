"""State records held to the worker's size limit (contract §9,
``oversized_output``).

An output value over ``max_output_bytes`` is caught on its own record
(``kafka.records.Outputs.oversized``). A state record is written to the
changelog only at a checkpoint, one per changed key, so the record that
grew it past the limit is known only then — and Kafka would refuse the
whole transaction (MSG_SIZE_TOO_LARGE), every time the batch is processed
again: one scope whose heads map outgrows Kafka's limit stopped every
partition of its worker for good, retrying without a word.

So the worker checks each checkpoint's changelog against
``max_state_bytes`` first (:meth:`StateLimit.over`). A state record over it
aborts the transaction and rewinds, like any aborted transaction, and its
key is *watched* on its partition: processing the batch again, the size of
the watched key is checked after each record of that partition that wrote
it (:meth:`StateLimit.check`), so the record that grows it past the limit
is rolled back alone and dead-lettered as ``oversized_output`` — the rule
for outputs — and the rest of the batch commits. Watches end with the next
commit (a batch cut before that record commits what it has; the next one
finds the key again).

The check serializes the watched value only when the record changed its
length (entries added or removed: how the state's maps and lists grow), so
a watch costs a batch no more than one serialization per growing write. A
value that grew without a change of length escapes it; should the same key
be found over the limit again, every record that writes it is checked.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from recurrence_ledger.runtime.task import Task
from recurrence_ledger.store.base import DELETED, decode_key


class StateLimit:
    """State records of at most ``limit`` bytes (``max_state_bytes``, as
    serialized on the changelog); the keys watched per (changelog topic,
    partition) — every key found over the limit since the last commit —
    with the length each watched value had when last measured."""

    def __init__(self, limit: int):
        self.limit = limit
        self.watched: dict[tuple[str, int], set[tuple]] = {}
        self.thorough: set[tuple] = set()  # keys found over the limit again: every write measured
        self._measured: dict[tuple[str, int, tuple], int] = {}

    def over(self, changelog: Iterable[tuple[str, int, bytes, bytes | None]]) -> str | None:
        """Of a checkpoint's ``changelog`` records ``(topic, partition,
        key, value)``, the first value over the limit: its key is watched
        from now on, and the returned text says why the transaction is not
        committed. None when every value fits."""
        for topic, partition, key, value in changelog:
            if value is not None and len(value) > self.limit:
                state_key = decode_key(key)
                keys = self.watched.setdefault((topic, partition), set())
                if state_key in keys:
                    self.thorough.add(state_key)
                keys.add(state_key)
                self._measured.pop((topic, partition, state_key), None)
                return (f"the state record {key[:200].decode('utf-8', 'replace')} of {topic}[{partition}] is {len(value)} bytes, over "
                        f"the limit {self.limit} (max_state_bytes): the batch is processed again, and the record that grows it "
                        "past the limit is dead-lettered as oversized_output")
        return None

    def check(self, changelog_topic: str, task: Task) -> str | None:
        """After a record of ``task``'s partition: why it must be rolled
        back — a watched key's value, as written since the last commit, is
        over the limit — or None."""
        if not self.watched:
            return None
        for key in self.watched.get((changelog_topic, task.partition), ()):
            value = task.store.dirty.get(key, DELETED)
            if value is DELETED:
                continue
            where = (changelog_topic, task.partition, key)
            length = len(value) if isinstance(value, (dict, list, str)) else -1
            if key not in self.thorough and self._measured.get(where) == length:
                continue
            self._measured[where] = length
            size = len(orjson.dumps(value))
            if size > self.limit:
                del self._measured[where]  # the record is rolled back: the value is back to a length not measured
                return f"it grows the state record {list(key)!r}"[:300] + f" to {size} bytes; the worker's limit is {self.limit} (max_state_bytes)"
        return None

    def clear(self) -> None:
        """A checkpoint committed: nothing is watched any more."""
        self.watched.clear()
        self._measured.clear()
