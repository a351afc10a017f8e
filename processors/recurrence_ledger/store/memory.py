"""The partition state store: the core's state for one input partition,
changelogged, with a rollback to the start of the open batch.

The core (``recurrence_ledger.ledger``) reads and writes its state through a
``MutableMapping[tuple, JSON value]`` (docs/contract.md §3). In the worker
that mapping is a :class:`ChangelogStore`: a dict that

- remembers which keys changed since the last checkpoint (``changes``), so
  that the checkpoint can write them to the compacted changelog topic in the
  same Kafka transaction as the outputs they produced — at most one
  changelog record per changed key per transaction (Kafka Streams' record
  cache does the same de-duplication before its changelog);
- keeps, for every key the open batch reads or writes, the value the last
  checkpoint left (serialized, the first time the batch touches the key), so
  :meth:`rollback` returns the partition to exactly the state recovery from
  the changelog would give — without reading the changelog again.

Why snapshots of what was *read*, not a buffer of what is written: the core
mutates the records it reads (a scope record, a list of heads) and writes
them back, so by the time a write arrives the object it came from has
already changed; a write buffer alone cannot undo a record. The snapshot is
taken at the first touch per batch (one ``orjson.dumps`` per distinct key
per batch, about what the changelog flush costs anyway) and reads after the
first stay one dict lookup.

A record's own transaction is built on top by the worker's ``Task``: when the
core fails on a record (or its outputs are too large for Kafka), the task
rolls the store back and re-applies the batch's earlier records of that
partition (the core is deterministic, so the state is the same as before
the failed record), and the failed record goes to dead-letter. Other
partitions and the open Kafka transaction are not touched.

Keys are the core's tuples; on the changelog they are canonical JSON arrays
(``orjson.dumps(list(key))``), values JSON, deletions tombstones.

This is the default store (small deployments; the embedded runner keeps a
plain dict). ``store.rocksdb.RocksStore`` (``--state-dir``), its sibling, has the
same interface (``store.base.PartitionStore``) on RocksDB, with a local checkpoint so a restart restores
only the changelog's tail: :meth:`ChangelogStore.restore_from`,
:meth:`~ChangelogStore.restored`, :meth:`~ChangelogStore.reset` and
:meth:`~ChangelogStore.close` are what recovery and the worker call on
either.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from recurrence_ledger.store.base import DELETED, PartitionStore, decode_key


class ChangelogStore(PartitionStore):
    """One partition's state (module docstring).

    ``data``: the live state, ``{key tuple: JSON value}``. ``dirty``: keys
    written since the last :meth:`flushed`, with their last value (or a
    deletion mark). ``before``: serialized value at the rollback point (the
    last :meth:`flushed` or :meth:`mark`) of every key touched since then
    (None when the key did not exist).
    """

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[tuple, Any] = {}

    def _touch(self, key: tuple) -> None:
        value = self.data.get(key, DELETED)
        self.before[key] = None if value is DELETED else orjson.dumps(value)

    def __getitem__(self, key: tuple) -> Any:
        if key not in self.before:
            self._touch(key)
        return self.data[key]

    def get(self, key: tuple, default: Any = None) -> Any:  # hot path: skip the ABC's try/except
        if key not in self.before:
            self._touch(key)
        return self.data.get(key, default)

    def __contains__(self, key: object) -> bool:
        if key not in self.before:
            self._touch(key)  # type: ignore[arg-type]
        return key in self.data

    def __setitem__(self, key: tuple, value: Any) -> None:
        if key not in self.before:
            self._touch(key)
        self.data[key] = value
        self.dirty[key] = value

    def __delitem__(self, key: tuple) -> None:
        if key not in self.before:
            self._touch(key)
        del self.data[key]
        self.dirty[key] = DELETED

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def _put_back(self, key: tuple, raw: bytes | None) -> Any:
        """Set ``key`` to its serialized value ``raw`` at the rollback point
        (None: absent); returns the restored value (or the deletion mark)."""
        if raw is None:
            self.data.pop(key, None)
            return DELETED
        value = self.data[key] = orjson.loads(raw)
        return value

    # -- recovery ---------------------------------------------------------------
    def restore_from(self) -> int | None:
        """The changelog offset recovery starts at: None, the beginning (the
        in-memory store keeps nothing between runs)."""
        return None

    def restore(self, key: bytes, value: bytes | None, offset: int | None = None) -> None:
        """Apply one changelog record (recovery; not a change to write back)."""
        parts = decode_key(key)
        if value is None:
            self.data.pop(parts, None)
        else:
            self.data[parts] = orjson.loads(value)

    def restored(self, end: int | None = None) -> None:
        """Recovery reached the changelog's end (offset ``end``, the next
        one to be written; nothing to do in memory)."""

    def reset(self, reason: str) -> None:
        """Forget the state (recovery then restores the whole changelog)."""
        self.data.clear()

    def close(self) -> None:
        """The partition is revoked or the worker stops (nothing to release)."""

    def snapshot(self) -> dict[tuple, Any]:
        """The whole current state (a shallow copy)."""
        return dict(self.data)
