"""The partition store's interface (quixstreams' ``state/base``): what every
store of one input partition's state keeps, whatever holds the data.

The core (``recurrence_ledger.ledger``) reads and writes its state through a
``MutableMapping[tuple, JSON value]`` (docs/contract.md §3). A
:class:`PartitionStore` is that mapping, plus

- the changes since the last checkpoint (:meth:`~PartitionStore.changes`:
  one changelog record per changed key, in first-write order; written to the
  compacted changelog topic in the same Kafka transaction as the outputs
  they produced), made the new rollback point by
  :meth:`~PartitionStore.flushed`;
- a rollback to the start of the open batch (:meth:`~PartitionStore.mark`,
  :meth:`~PartitionStore.rollback`): every key the batch touched back to its
  value at the rollback point, from the serialized copy the store took the
  first time the batch touched it;
- recovery from the changelog (:meth:`~PartitionStore.restore_from`,
  :meth:`~PartitionStore.restore`, :meth:`~PartitionStore.restored`,
  :meth:`~PartitionStore.reset`) and :meth:`~PartitionStore.close`.

Two siblings implement it: :class:`recurrence_ledger.store.memory.ChangelogStore`
(a dict; the default) and :class:`recurrence_ledger.store.rocksdb.RocksStore`
(RocksDB with a local checkpoint, ``--state-dir``). One test suite
(``tests/store/test_partition_store_contract.py``) runs on both.

Keys are the core's tuples; on the changelog they are canonical JSON arrays
(:func:`encode_key`), values JSON, deletions tombstones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, MutableMapping
from typing import Any

import orjson

from recurrence_ledger.errors import RecurrenceLedgerError

#: The mark of a deleted key in a store's ``dirty`` changes (and caches).
DELETED = object()


class StoreError(RecurrenceLedgerError):
    """The local state store failed (a full disk, an I/O error, corruption
    found by a read, a directory locked by another worker): the worker must
    stop — never dead-letter the record it was applying, never commit
    another transaction on top. Its committed state is on the changelog.
    ``restartable``: a restart cures it (a corruption the store marked, so
    the next open wipes it and restores it from the changelog): the worker
    exits with the restart code, not 1."""

    def __init__(self, message: str, *, restartable: bool = False):
        super().__init__(message)
        self.restartable = restartable


def encode_key(key: tuple) -> bytes:
    """Changelog record key of a state key: canonical JSON array bytes."""
    return orjson.dumps(list(key))


def decode_key(raw: bytes) -> tuple:
    """State key of a changelog record key (inverse of :func:`encode_key`)."""
    return tuple(orjson.loads(raw))


class PartitionStore(MutableMapping, ABC):
    """One partition's state (module docstring). ``dirty``: keys written
    since the last :meth:`flushed`, with their last value (or
    :data:`DELETED`). ``before``: serialized value at the rollback point (the
    last :meth:`flushed` or :meth:`mark`) of every key touched since then
    (None when the key did not exist). A store records ``before`` in
    :meth:`_touch` and puts it back in :meth:`_put_back`."""

    #: Why a local copy of the state was not used (None: none was, or it was).
    wiped: str | None = None
    #: The changelog offset a kept, untrusted local copy reflects
    #: (``store.rocksdb.RocksStore``); None: nothing kept (always, in memory).
    kept_checkpoint: int | None = None

    def __init__(self) -> None:
        self.dirty: dict[tuple, Any] = {}
        self.before: dict[tuple, bytes | None] = {}
        self._dirty_at_mark: dict[tuple, Any] = {}

    @abstractmethod
    def _touch(self, key: tuple) -> None:
        """Record ``key``'s serialized value at the rollback point in ``before``."""

    @abstractmethod
    def _put_back(self, key: tuple, raw: bytes | None) -> Any:
        """Set ``key`` to its serialized value ``raw`` at the rollback point
        (None: absent); returns the restored value (or :data:`DELETED`)."""

    # -- checkpoints ------------------------------------------------------------
    def changes(self) -> list[tuple[bytes, bytes | None]]:
        """Changelog records ``(key bytes, value bytes or None for a
        tombstone)`` for every key written since the last :meth:`flushed`,
        one per key, in first-write order."""
        return [(encode_key(key), None if value is DELETED else orjson.dumps(value)) for key, value in self.dirty.items()]

    def flushed(self, offset: int | None = None) -> None:
        """The changes are committed (the checkpoint's transaction is, its
        last changelog record of this partition at ``offset``): the current
        state is the new rollback point, with nothing to write."""
        self.dirty.clear()
        self.before.clear()
        self._dirty_at_mark = {}

    def mark(self) -> None:
        """Make the current state the rollback point, keeping the pending
        changes for the next checkpoint (e.g. the Unicode pin written right
        after recovery, before the partition's first record)."""
        self.before.clear()
        self._dirty_at_mark = dict(self.dirty)

    def rollback(self) -> int:
        """Return every key touched since the rollback point to its value
        then (a deserialized copy, as recovery would load it), and the
        pending changes to what they were then. Returns the number of keys
        restored."""
        dirty = dict(self._dirty_at_mark)
        for key, raw in self.before.items():
            value = self._put_back(key, raw)
            if key in dirty:  # the object marked dirty may have been mutated since: use the restored copy
                dirty[key] = value
        restored = len(self.before)
        self.before.clear()
        self.dirty = dirty
        # The rollback point's pending changes are now these restored
        # objects: a second rollback must not bring back the ones mutated
        # since the mark (the changelog would get them while the data does not).
        self._dirty_at_mark = dict(dirty)
        return restored

    # -- recovery ---------------------------------------------------------------
    @abstractmethod
    def restore_from(self) -> int | None:
        """The changelog offset recovery starts at (None: the beginning)."""

    @abstractmethod
    def restore(self, key: bytes, value: bytes | None, offset: int | None = None) -> None:
        """Apply one changelog record (recovery; not a change to write back)."""

    @abstractmethod
    def restored(self, end: int | None = None) -> None:
        """Recovery reached the changelog's end (``end``: the offset of the
        next record to be written), or a batch of restored records is done."""

    @abstractmethod
    def reset(self, reason: str) -> None:
        """Forget the state (recovery then restores the whole changelog)."""

    @abstractmethod
    def close(self) -> None:
        """The partition is revoked or the worker stops."""

    @abstractmethod
    def snapshot(self) -> dict[tuple, Any]:
        """The whole current state, decoded."""

    # -- reseeding an empty changelog (runtime.reseed) ----------------------------
    def reflects(self, offsets: dict[str, int], whole: bool = False) -> None:
        """The data reflects the consumer group's committed input offsets
        ``offsets`` of this partition (physical input topic → next offset):
        a commit's (merged into what it reflected) or, with ``whole``, the
        group's when the store was restored. Kept with the next checkpoint
        (``store.rocksdb``), so a reseed can tell a store behind the
        group's offsets; nothing to record by default."""

    def reseed_refusal(self, consumed: dict[str, int]) -> str | None:
        """Why this store cannot be written back to an empty changelog when
        the group's committed input offsets beyond offset 0
        are ``consumed``; None when it can. By default (in memory) nothing
        survives a stop."""
        return "the worker keeps its state in memory (no --state-dir store survived its stop)"

    def records(self) -> Iterator[tuple[bytes, bytes]]:
        """Every state record as changelog ``(key, value)`` bytes."""
        for key, value in self.snapshot().items():
            yield encode_key(key), orjson.dumps(value)

    def adopt(self, offset: int) -> None:
        """The store's records were written to a new changelog, the last at
        ``offset`` (nothing to record by default)."""
