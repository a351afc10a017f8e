"""The RocksDB partition store (``--state-dir``): one partition's state on
disk, with the in-memory store's interface and guarantees
(``store.base.PartitionStore``, a sibling of ``store.memory.ChangelogStore``: one changelog record per changed key per
transaction, rollback to the last checkpoint or mark, restore from the
changelog), and a local checkpoint of the changelog offset it reflects, so a
restart on the same machine restores only the changelog's tail.

Layout: ``<state dir>/<changelog topic>/<partition>/`` is a RocksDB
database (rocksdict, the binding quixstreams uses); beside it
``<partition>.lock`` is held with an exclusive ``flock`` while the store is
open, so two workers never share one directory (RocksDB's own LOCK file
guards the database too; ours also covers a wipe). Keys are the changelog's
record keys (canonical JSON arrays, ``store.base.encode_key``), values the
changelog's record values: restoring copies bytes, never decodes them. Two
local keys start with a NUL byte (a JSON array never does):

- ``\\x00identity``: ``{"format", "changelog_topic", "partition",
  "topic_id"}`` — the deployment's changelog topic, the partition and the
  changelog topic's Kafka topic id (its creation identity, KIP-516);
- ``\\x00checkpoint``: ``{"offset", "written_at", "clean", "consumed"}`` —
  the offset of the last changelog record the data reflects, when (Unix
  seconds), whether its owner wrote it on a clean close (after its last
  committed transaction: what ``--reseed-changelog`` may write back,
  ``runtime.reseed``), and the consumer group's committed input offsets the
  data reflects (``{topic: next offset}``; a clean store whose offsets are
  not the group's is behind it and is never reseeded).

Both are written in the same ``WriteBatch`` as the data they describe
(quixstreams' ``RocksDBStorePartition.write`` and
``recover_from_changelog_message`` do the same with their
``CHANGELOG_OFFSET_KEY``), so data and offset are always consistent.

When the local write happens: only after the Kafka transaction carrying the
changelog records committed (:meth:`RocksStore.flushed` with the last
changelog offset, from the producer's delivery reports; quixstreams'
``Checkpoint.commit`` step 5). A kill between the commit and the local
write leaves the store at the previous checkpoint: the restart restores the
tail after it, which holds the committed transaction's records — the same
values written again, so restore is idempotent.

When the local store is not used (:func:`open_store` wipes it and the
worker restores the whole changelog): it is missing, RocksDB reports it
corrupt (an error starting "Corruption" on open: quixstreams'
``RocksDBStorePartition._open_rocksdict`` destroys and recreates the
database the same way when a changelog exists, ``on_corrupted_recreate``),
a read failed on corruption before (``<partition>.corrupt``), or its
identity is another deployment's topic or partition. A store of this
partition whose topic id is another (the changelog deleted and created
again) or whose checkpoint is older than the changelog's
``delete.retention.ms`` (a tombstone written after it may have been
compacted away) is kept as it is (``kept_checkpoint``), like one whose
offset is beyond the changelog's end or before its start: recovery wipes it
only when the changelog can give the state back, and otherwise the worker
refuses to run with the store untouched (``runtime.changelog_guard``).

The per-transaction cache (Kafka Streams' record cache): the core reads,
modifies and writes JSON records, so every key a transaction touches is
read from RocksDB and decoded once, kept decoded until the checkpoint
(writes go to the cache; the changed keys are encoded once, by
``changes()`` for the changelog, and the WriteBatch after the commit
writes those same bytes), and the raw bytes read are the rollback snapshot
for free. Between checkpoints up to :data:`CACHE_KEYS`
decoded records stay cached (hot scope records); past that the cache is
dropped at the next checkpoint.

Errors: :class:`store.base.StoreError` for anything the disk or RocksDB refuses
(a full disk, an I/O error, another worker holding the lock) — the worker
stops with it, never dead-letters a record for it, and never commits
another transaction after a failed local write.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from rocksdict import BlockBasedOptions, Cache, DBCompressionType, Options, Rdict, WriteBatch, WriteBufferManager

from recurrence_ledger.store.base import DELETED, PartitionStore, StoreError, decode_key, encode_key

log = logging.getLogger("recurrence_ledger.worker")

#: On-disk format of the store (the identity's ``format``); another value is wiped.
FORMAT = 1
IDENTITY_KEY = b"\x00identity"
CHECKPOINT_KEY = b"\x00checkpoint"
#: Decoded records kept between checkpoints (beyond it the cache is dropped at a checkpoint).
CACHE_KEYS = 20_000
#: Changelog records restored per WriteBatch.
RESTORE_BATCH = 5_000
#: Seconds to wait for another process's lock (a rebalance's previous owner closing).
LOCK_WAIT_S = 10.0
#: Kafka's default ``delete.retention.ms`` (24 h), when the topic's cannot be read.
DEFAULT_DELETE_RETENTION_MS = 86_400_000


#: Bytes of RocksDB's block cache, and of memtables, shared by every
#: partition store of the process (a worker's RocksDB memory does not grow
#: with its partition count).
BLOCK_CACHE_BYTES = 64 * 1024 * 1024
MEMTABLE_BYTES = 64 * 1024 * 1024


@functools.cache
def _shared_memory() -> tuple[Cache, WriteBufferManager]:
    return Cache(BLOCK_CACHE_BYTES), WriteBufferManager(MEMTABLE_BYTES, False)


def rocksdb_options() -> Options:
    """RocksDB options of a partition store: quixstreams' ``RocksDBOptions``
    (lz4, bloom filter of 10 bits per key) with the block cache and the
    memtable budget shared by the process's stores (Kafka Streams'
    bounded-memory ``RocksDBConfigSetter`` recipe: one Cache and one
    WriteBufferManager for every store)."""
    cache, memtables = _shared_memory()
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_write_buffer_size(16 * 1024 * 1024)
    options.set_max_write_buffer_number(2)
    options.set_write_buffer_manager(memtables)
    table = BlockBasedOptions()
    table.set_block_cache(cache)
    table.set_bloom_filter(10, block_based=True)
    options.set_block_based_table_factory(table)
    options.set_compression_type(DBCompressionType.lz4())
    return options


def partition_path(state_dir: Path, changelog_topic: str, partition: int) -> Path:
    """The RocksDB directory of one partition: ``<state_dir>/<topic>/<partition>``."""
    return Path(state_dir) / changelog_topic / str(partition)


class RocksStore(PartitionStore):
    """One partition's state in RocksDB (module docstring); open it with
    :func:`open_store`. ``cache`` holds decoded values (or the deletion
    mark) of keys touched since the last checkpoint; ``before`` and
    ``dirty`` are the in-memory store's."""

    def __init__(self, db: Rdict, path: Path, lock: Any, identity: dict, restore_from: int | None, reason: str | None,
                 kept_checkpoint: int | None = None):
        super().__init__()  # no dict of everything: the state is in RocksDB and the cache
        self.db = db
        self.path = path
        self._lock = lock
        self.identity = identity
        self.cache: dict[tuple, Any] = {}
        self._restore_from = restore_from
        self._checkpoint = None if restore_from is None else restore_from - 1  # offset the data reflects
        self.wiped = reason  #: why the local store was not used (None: it was)
        #: Untrusted for a tail restore but kept on disk until recovery
        #: decides (``changelog_guard.plan_restore``): its topic id or age
        #: does not match, yet it may be the only intact copy of the state.
        #: The changelog offset its data reflects; None when nothing is kept.
        self.kept_checkpoint = kept_checkpoint
        self._restore_batch: WriteBatch | None = None
        self._restore_count = 0
        self._restore_offset: int | None = None
        self.closed = False
        self.failed = False  #: a write or read failed: nothing more is written
        self._current = False  # restored to the changelog's end, and its owner since
        self._encoded: list[tuple[bytes, bytes | None]] | None = None  # changes() since the last write
        self._consumed: dict[str, int] | None = None  # the input offsets the data reflects (None: unknown)

    # -- reads and writes (the core's mapping) ------------------------------------
    def _read(self, key: tuple) -> Any:
        try:
            raw = self.db.get(encode_key(key))
        except Exception as error:  # rocksdict raises plain Exception
            raise self._failed("read", error) from error
        return raw

    def _touch(self, key: tuple) -> None:
        value = self.cache.get(key, None)
        if key in self.cache:
            self.before[key] = None if value is DELETED else orjson.dumps(value)
            return
        raw = self._read(key)
        self.before[key] = raw
        self.cache[key] = DELETED if raw is None else orjson.loads(raw)

    def _value(self, key: tuple) -> Any:
        if key not in self.before:
            self._touch(key)
        return self.cache[key]

    def __getitem__(self, key: tuple) -> Any:
        value = self._value(key)
        if value is DELETED:
            raise KeyError(key)
        return value

    def get(self, key: tuple, default: Any = None) -> Any:
        value = self._value(key)
        return default if value is DELETED else value

    def __contains__(self, key: object) -> bool:
        return self._value(key) is not DELETED  # type: ignore[arg-type]

    def __setitem__(self, key: tuple, value: Any) -> None:
        if key not in self.before:
            self._touch(key)
        self.cache[key] = value
        self.dirty[key] = value
        self._encoded = None

    def __delitem__(self, key: tuple) -> None:
        if self._value(key) is DELETED:
            raise KeyError(key)
        self.cache[key] = DELETED
        self.dirty[key] = DELETED
        self._encoded = None

    def __iter__(self) -> Iterator[tuple]:
        for raw in self.db.keys():
            if raw[:1] == b"\x00":
                continue
            key = decode_key(raw)
            if self.cache.get(key, None) is not DELETED:
                yield key
        for key, value in list(self.cache.items()):
            if value is not DELETED and self.db.get(encode_key(key)) is None:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def snapshot(self) -> dict[tuple, Any]:
        """The whole current state, decoded (tests and tools)."""
        state = {}
        for raw, value in self.db.items():
            if raw[:1] != b"\x00":
                state[decode_key(raw)] = orjson.loads(value)
        for key, value in self.cache.items():
            if value is DELETED:
                state.pop(key, None)
            else:
                state[key] = value
        return state

    # -- checkpoints ----------------------------------------------------------------
    def changes(self) -> list[tuple[bytes, bytes | None]]:
        """As ``PartitionStore.changes``; kept until the next write, so
        :meth:`flushed` writes the same bytes without encoding them again."""
        self._encoded = super().changes()
        return self._encoded

    def flushed(self, offset: int | None = None) -> None:
        """The changes are committed in Kafka, the last changelog record at
        ``offset``: write them and the checkpoint in one WriteBatch. Raises
        StoreError when RocksDB refuses the write (the store is then closed:
        nothing later may build on it)."""
        if self.dirty:
            if offset is None:
                raise StoreError(f"{self.path}: changes committed without their changelog offset")
            batch = WriteBatch(raw_mode=True)
            for raw_key, raw_value in self._encoded if self._encoded is not None else super().changes():
                if raw_value is None:
                    batch.delete(raw_key)
                else:
                    batch.put(raw_key, raw_value)
            batch.put(CHECKPOINT_KEY, checkpoint_value(offset, consumed=self._consumed))
            self._write(batch, "checkpoint")
            self._checkpoint = offset
        touched = self.before.keys() | self.dirty.keys()
        super().flushed()
        self._encoded = None
        if len(self.cache) > CACHE_KEYS:
            # Keep what this transaction touched (the hot records: scope
            # records, head lists) when it fits; drop the rest.
            self.cache = {key: self.cache[key] for key in touched} if len(touched) <= CACHE_KEYS // 2 else {}

    def rollback(self) -> int:
        """As ``PartitionStore.rollback``, on the cache."""
        self._encoded = None
        return super().rollback()

    def _put_back(self, key: tuple, raw: bytes | None) -> Any:
        value = self.cache[key] = DELETED if raw is None else orjson.loads(raw)
        return value

    # -- recovery ---------------------------------------------------------------------
    def restore_from(self) -> int | None:
        """The changelog offset to restore from: one past the checkpoint, or
        None for the whole changelog."""
        return self._restore_from

    def restore(self, key: bytes, value: bytes | None, offset: int | None = None) -> None:
        """Apply one changelog record at ``offset`` (batched; see :meth:`restored`)."""
        if self._restore_batch is None:
            self._restore_batch = WriteBatch(raw_mode=True)
        if value is None:
            self._restore_batch.delete(key)
        else:
            self._restore_batch.put(key, value)
        self._restore_offset = offset
        self._restore_count += 1
        if self._restore_count >= RESTORE_BATCH:
            self.restored()

    def restored(self, end: int | None = None) -> None:
        """Write the records restored so far with their checkpoint; with
        ``end`` (recovery reached the changelog's end, the offset the next
        record will get), the checkpoint says the store reflects everything
        before it, as of now — an empty changelog's too, so the next start
        restores from there."""
        if end is not None:
            self._restore_offset = max(end - 1, -1 if self._restore_offset is None else self._restore_offset)
        if self._restore_offset is not None:
            batch = self._restore_batch or WriteBatch(raw_mode=True)
            batch.put(CHECKPOINT_KEY, checkpoint_value(self._restore_offset, consumed=self._consumed))
            self._write(batch, "restore")
            self._checkpoint = self._restore_offset
        self._current = end is not None
        self._restore_batch, self._restore_count = None, 0
        self.cache.clear()

    def reset(self, reason: str) -> None:
        """Wipe the local store (``reason`` logged) and restore the whole
        changelog into it."""
        self.kept_checkpoint = None
        self.db.close()
        self.db = _wipe_and_create(self.path, self.identity, reason)
        self.cache.clear()
        self._restore_from = self._checkpoint = None
        self.wiped = reason

    # -- reseeding an empty changelog (runtime.reseed) -----------------------------------
    def reflects(self, offsets: dict[str, int], whole: bool = False) -> None:
        """As ``PartitionStore.reflects``: kept with the next checkpoint."""
        self._consumed = dict(offsets) if whole or self._consumed is None else {**self._consumed, **offsets}

    def reseed_refusal(self, consumed: dict[str, int]) -> str | None:
        """Why this store cannot be written back to an empty changelog, or
        None: it holds checkpointed state whose last checkpoint was written
        on a clean close (a crash may leave it a transaction behind the
        committed offsets, and the changelog that had that transaction is
        gone) and reflects exactly the group's committed input offsets
        ``consumed`` (those beyond offset 0): a clean store
        the group carried on without — another worker, or a run without
        this --state-dir, committed after it — is behind them, and writing
        it back would silently lose every transaction in between."""
        raw = self.db.get(CHECKPOINT_KEY)
        if raw is None or (self._restore_from is None and self.kept_checkpoint is None):
            return "it holds no checkpointed state"
        checkpoint = orjson.loads(raw)
        if not checkpoint.get("clean", False):
            return ("its last checkpoint was not written by a clean stop (a crash may have left it one transaction "
                    "behind the committed offsets)")
        recorded = checkpoint.get("consumed")
        if recorded is None:
            return "its checkpoint does not record the input offsets it reflects (written before they were recorded)"
        behind = {topic: offset for topic, offset in consumed.items() if recorded.get(topic) != offset}
        if behind:
            named = ", ".join(f"{topic}@{recorded.get(topic)} (the group: @{offset})" for topic, offset in sorted(behind.items()))
            return (f"it reflects other input offsets than the group committed — {named}: the group carried on without "
                    "this store (another worker, or a run without this --state-dir), so it is behind the committed state")
        return None

    def records(self) -> Iterator[tuple[bytes, bytes]]:
        """Every state record as changelog ``(key, value)`` bytes, as stored."""
        for raw, value in self.db.items():
            if raw[:1] != b"\x00":
                yield raw, value

    def adopt(self, offset: int) -> None:
        """Its records were written to a new changelog, the last at
        ``offset``: record this changelog's identity and that checkpoint
        (one WriteBatch); the store is trusted again."""
        batch = WriteBatch(raw_mode=True)
        batch.put(IDENTITY_KEY, orjson.dumps(self.identity))
        batch.put(CHECKPOINT_KEY, checkpoint_value(offset, consumed=self._consumed))
        self._write(batch, "reseed")
        self._restore_from, self._checkpoint = offset + 1, offset
        self.kept_checkpoint = None
        self.wiped = None

    def close(self) -> None:
        """Close the database and release the directory's lock (pending,
        uncommitted changes are dropped: the last checkpoint stays, its
        time refreshed once the store was restored to the changelog's end:
        only its owner wrote after that)."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._current and not self.failed:
                # Restored to the end, and the owner since: nothing but its
                # own commits was written after the checkpoint, so it is
                # current as of now (a store closed mid-restore is not).
                self.db.put(CHECKPOINT_KEY, checkpoint_value(self._checkpoint, clean=True, consumed=self._consumed))
        except Exception as error:
            log.warning("state store %s: refreshing its checkpoint failed: %s", self.path, error)
        cancelled = False
        try:
            # Stop background flushes and compactions first, so a revoke
            # releases the directory at once (quixstreams'
            # RocksDBStorePartition.close; the WAL keeps unflushed data).
            self.db.cancel_all_background(True)
            cancelled = True
        except Exception as error:
            log.warning("state store %s: stopping its background work failed: %s", self.path, error)
        try:
            self.db.close()
        except Exception as error:
            # After a cancel, "Shutdown in progress" is benign: the database
            # closes and its lock is released (quixstreams' close). Anything
            # else (e.g. a full disk): what was written is in the WAL.
            if not (cancelled and "shutdown in progress" in str(error).lower()):
                log.warning("state store %s: closing it failed: %s", self.path, error)
        finally:
            _release(self._lock)

    # -- internals -----------------------------------------------------------------------
    def _write(self, batch: WriteBatch, what: str) -> None:
        try:
            self.db.write(batch)
        except Exception as error:
            raise self._failed(f"{what} write", error) from error

    def _failed(self, what: str, error: Exception) -> StoreError:
        self.failed = True
        text = str(error)
        marked = text.startswith("Corruption")
        if marked:  # the next open wipes it and restores it from the changelog: a restart cures it
            _corrupt_marker(self.path).write_text(f"{what}: {text}\n")
        self.close()
        then = "the next start restores it from the changelog" if marked else "its last committed state is on the changelog"
        return StoreError(f"state store {self.path}: {what} failed: {text} — the worker stops; {then} (docs/operating.md, \"RocksDB state\")",
                          restartable=marked)


def checkpoint_value(offset: int, clean: bool = False, consumed: dict[str, int] | None = None) -> bytes:
    """The ``\\x00checkpoint`` value for changelog offset ``offset``;
    ``clean``: written by the store's owner on a clean close, after its last
    committed transaction (the store reflects exactly the committed offsets);
    ``consumed``: those committed input offsets (``{topic: next offset}``,
    None: unknown)."""
    return orjson.dumps({"offset": offset, "written_at": time.time(), "clean": clean, "consumed": consumed})


def _corrupt_marker(path: Path) -> Path:
    return path.with_name(path.name + ".corrupt")


def _lock(path: Path, wait_s: float) -> Any:
    handle = open(path.with_name(path.name + ".lock"), "a+")  # noqa: SIM115 - held while the store is open
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                raise StoreError(f"state store {path} is locked by another worker process (two workers cannot share a "
                                 "--state-dir partition; give each its own)") from None
            time.sleep(0.2)
            continue
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return handle


def _release(handle: Any) -> None:
    try:
        fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


def _open(path: Path) -> Rdict:
    return Rdict(str(path), options=rocksdb_options())


def _wipe_and_create(path: Path, identity: dict, reason: str) -> Rdict:
    log.warning("state store %s not used (%s): restoring the whole changelog", path, reason)
    shutil.rmtree(path, ignore_errors=True)
    _corrupt_marker(path).unlink(missing_ok=True)
    try:
        db = _open(path)
        db.put(IDENTITY_KEY, orjson.dumps(identity))
    except Exception as error:
        raise StoreError(f"state store {path}: cannot create it: {error}") from error
    return db


def open_store(state_dir: Path, changelog_topic: str, partition: int, topic_id: str | None,
               delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS, lock_wait_s: float = LOCK_WAIT_S) -> RocksStore:
    """Open (or create) partition ``partition``'s store under ``state_dir``
    for ``changelog_topic`` (its Kafka ``topic_id``, None when unknown),
    locked for this process. A store that cannot be trusted (module
    docstring) is wiped and restores the whole changelog (its ``wiped``
    says why). Raises StoreError when another process holds the lock or
    the directory cannot be written. A store that is this partition's but
    whose topic id or checkpoint age does not match is kept as it is (its
    ``kept_checkpoint`` set, ``restore_from()`` None): recovery wipes it only
    when the changelog can give the state back (``changelog_guard``)."""
    path = partition_path(state_dir, changelog_topic, partition)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StoreError(f"state directory {path.parent}: {error}") from error
    lock = _lock(path, lock_wait_s)
    identity = {"format": FORMAT, "changelog_topic": changelog_topic, "partition": partition, "topic_id": topic_id}
    try:
        db, restore_from, reason, kept = _open_checked(path, identity, delete_retention_ms)
    except BaseException:
        _release(lock)
        raise
    return RocksStore(db, path, lock, identity, restore_from, reason, kept)


def _open_checked(path: Path, identity: dict, delete_retention_ms: int) -> tuple[Rdict, int | None, str | None, int | None]:
    """(database, offset to restore from, why not trusted, the kept data's checkpoint offset)."""
    if not path.exists():
        return _wipe_and_create(path, identity, "no local store"), None, "no local store", None
    if _corrupt_marker(path).exists():
        reason = f"a read found it corrupt ({_corrupt_marker(path).read_text().strip()})"
        return _wipe_and_create(path, identity, reason), None, reason, None
    try:
        db = _open(path)
    except Exception as error:
        text = str(error)
        if not text.startswith(("Corruption", "Invalid argument")):
            raise StoreError(f"state store {path}: cannot open it: {text}") from error
        reason = f"corrupt: {text}"
        return _wipe_and_create(path, identity, reason), None, reason, None
    try:
        reason, restore_from, keep = _check(db, identity, delete_retention_ms)
    except Exception as error:  # a read failing on open: corrupt
        reason, restore_from, keep = f"corrupt: {error}", None, False
    if reason is None:
        return db, restore_from, None, None
    if keep:
        log.info("state store %s not trusted for a tail restore (%s): kept until the changelog is checked", path, reason)
        return db, None, reason, _kept_offset(db)
    db.close()
    return _wipe_and_create(path, identity, reason), None, reason, None


def _kept_offset(db: Rdict) -> int | None:
    """The changelog offset a store's checkpoint names (None: no checkpoint)."""
    raw = db.get(CHECKPOINT_KEY)
    return None if raw is None else int(orjson.loads(raw)["offset"])


def _check(db: Rdict, identity: dict, delete_retention_ms: int) -> tuple[str | None, int | None, bool]:
    """(why the store cannot be used or None, the offset to restore from,
    whether its data is this partition's and kept until recovery decides)."""
    raw_identity, raw_checkpoint = db.get(IDENTITY_KEY), db.get(CHECKPOINT_KEY)
    if raw_identity is None:
        return "no identity record: not a store of this version", None, False
    recorded = orjson.loads(raw_identity)
    for field in ("format", "changelog_topic", "partition", "topic_id"):
        if recorded.get(field) != identity[field] or identity[field] is None:
            # Another topic id (or an unknown one) is this partition's state
            # of a changelog deleted and created again: maybe its only copy.
            keep = field == "topic_id" and raw_checkpoint is not None
            return f"its {field} is {recorded.get(field)!r}, this one's {identity[field]!r}", None, keep
    if raw_checkpoint is None:
        return "empty", None, False
    checkpoint = orjson.loads(raw_checkpoint)
    age_ms = (time.time() - checkpoint["written_at"]) * 1000
    if age_ms > delete_retention_ms:
        return (f"its checkpoint is {age_ms / 3_600_000:.1f} h old, beyond the changelog's delete.retention.ms "
                f"({delete_retention_ms / 3_600_000:.1f} h): a deletion since may have been compacted away"), None, True
    return None, int(checkpoint["offset"]) + 1, False
