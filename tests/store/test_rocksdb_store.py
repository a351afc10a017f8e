"""The RocksDB partition store without a broker
(recurrence_ledger.store.rocksdb): the in-memory store's guarantees
on RocksDB (one changelog record per changed key, rollback, restore), the
local checkpoint and a tail restore, and every case where the local store
must not be used (missing, corrupt, another partition's or deployment's,
another incarnation of the changelog topic, too old, locked).

The adversarial runs drive the real core through ``Task`` as
tests/runtime/test_record_rollback.py does, with restarts that reopen the
store and restore only the changelog's tail (an append-only changelog with
offsets stands in for the topic), and with kills between the Kafka commit
and the local write; each must end in the state of a run that never
restarted."""

from __future__ import annotations

import os
import random
from pathlib import Path

import orjson
import pytest

from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.ledger.state import pin_unicode_version
from recurrence_ledger.store import rocksdb as rocks_store
from recurrence_ledger.store.rocksdb import RocksStore, open_store, partition_path
from recurrence_ledger.store.base import StoreError, encode_key
from recurrence_ledger.store.memory import ChangelogStore
from recurrence_ledger.runtime.task import Task
from tests.runtime.test_record_rollback import Simulated, journal_records, random_plan

TOPIC = "dep.app-ledger-state-changelog"
TOPIC_ID = "m6hc71qMSnqnIsRQcjwLgw"


def opened(root: Path, partition: int = 0, topic: str = TOPIC, topic_id: str | None = TOPIC_ID, **kwargs) -> RocksStore:
    return open_store(root, topic, partition, topic_id, **kwargs)


def committed(store: RocksStore, changes: dict[tuple, object], offset: int) -> None:
    for key, value in changes.items():
        if value is None:
            del store[key]
        else:
            store[key] = value
    store.flushed(offset)


# -- the mapping and its checkpoint ------------------------------------------------------


def test_changes_rollback_and_restore_behave_as_the_in_memory_store(tmp_path):
    memory, rocks = ChangelogStore(), opened(tmp_path)
    for store in (memory, rocks):
        store[("a",)] = {"n": 1}
        store[("gone",)] = 7
        assert store.changes() == [(b'["a"]', b'{"n":1}'), (b'["gone"]', b"7")]
        store.flushed(1)
        record = store.get(("a",))
        record["n"] = 2  # the core mutates what it read
        store[("a",)] = record
        del store[("gone",)]
        store[("new",)] = [1]
        assert store.changes() == [(b'["a"]', b'{"n":2}'), (b'["gone"]', None), (b'["new"]', b"[1]")]
        assert store.rollback() == 3
        assert store.changes() == [] and store.snapshot() == {("a",): {"n": 1}, ("gone",): 7}
        assert ("gone",) in store and ("new",) not in store and store.get(("new",), "d") == "d"
        with pytest.raises(KeyError):
            store[("new",)]
        store.mark()
        store[("x",)] = 1
        store.mark()
        store[("x",)] = 2
        store.rollback()
        assert store.changes() == [(b'["x"]', b"1")]  # the change pending at the mark stays
        assert sorted(store) == [("a",), ("gone",), ("x",)] and len(store) == 3
    rocks.close()


def test_a_checkpoint_is_written_with_its_data_and_a_reopened_store_restores_from_after_it(tmp_path):
    store = opened(tmp_path)
    assert store.restore_from() is None and store.wiped == "no local store"
    committed(store, {("a",): 1, ("b",): [2]}, offset=41)
    committed(store, {("b",): None}, offset=43)
    store[("c",)] = "uncommitted"  # killed before the commit: never on disk
    store.close()
    again = opened(tmp_path)
    assert again.wiped is None and again.restore_from() == 44
    assert again.snapshot() == {("a",): 1}
    # The tail: records after the checkpoint (one the store already has, written again: idempotent).
    again.restore(encode_key(("a",)), b"1", 44)
    again.restore(encode_key(("d",)), b'{"k":4}', 45)
    again.restored()
    again.close()
    third = opened(tmp_path)
    assert third.restore_from() == 46 and third.snapshot() == {("a",): 1, ("d",): {"k": 4}}
    third.close()


def test_changes_without_their_changelog_offset_are_refused(tmp_path):
    store = opened(tmp_path)
    store[("a",)] = 1
    with pytest.raises(StoreError, match="without their changelog offset"):
        store.flushed(None)
    store.close()


def test_the_cache_is_dropped_past_its_bound_and_reads_come_from_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(rocks_store, "CACHE_KEYS", 3)
    store = opened(tmp_path)
    committed(store, {(f"k{n}",): n for n in range(5)}, offset=0)
    assert store.cache == {}
    assert store[("k4",)] == 4 and ("k9",) not in store
    store.close()


# -- when the local store is not used -------------------------------------------------------


def _checkpointed(root: Path, partition: int = 0) -> None:
    store = opened(root, partition)
    committed(store, {("scope", "s"): {"partition": partition}}, offset=10)
    store.close()


def test_a_missing_directory_restores_the_whole_changelog(tmp_path):
    _checkpointed(tmp_path)
    import shutil

    shutil.rmtree(partition_path(tmp_path, TOPIC, 0))
    store = opened(tmp_path)
    assert store.restore_from() is None and store.snapshot() == {}
    store.close()


def test_another_partitions_directory_copied_in_place_is_wiped(tmp_path):
    import shutil

    _checkpointed(tmp_path, partition=3)
    shutil.copytree(partition_path(tmp_path, TOPIC, 3), partition_path(tmp_path, TOPIC, 5))
    store = opened(tmp_path, partition=5)
    assert store.restore_from() is None and store.snapshot() == {}
    assert store.wiped == "its partition is 3, this one's 5"
    store.close()
    three = opened(tmp_path, partition=3)  # the original is untouched
    assert three.restore_from() == 11 and three.snapshot() == {("scope", "s"): {"partition": 3}}
    three.close()


def test_another_deployments_store_is_wiped_a_recreated_topics_is_kept_until_recovery_decides(tmp_path):
    import shutil

    _checkpointed(tmp_path)
    other = "other.app-ledger-state-changelog"
    shutil.copytree(partition_path(tmp_path, TOPIC, 0), partition_path(tmp_path, other, 0))
    store = opened(tmp_path, topic=other)
    assert store.restore_from() is None and store.snapshot() == {} and "changelog_topic" in store.wiped
    store.close()
    # The topic deleted and created again: not trusted for a tail restore,
    # but kept as it is (it may be the only intact copy of the state) until
    # recovery checks the changelog (changelog_guard) and wipes it by reset.
    recreated = opened(tmp_path, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    assert recreated.restore_from() is None and "topic_id" in recreated.wiped and recreated.kept_checkpoint == 10
    assert recreated.snapshot() == {("scope", "s"): {"partition": 0}}
    recreated.close()
    unknown = opened(tmp_path, topic_id=None)  # the broker did not tell: cannot be checked
    assert unknown.restore_from() is None and unknown.kept_checkpoint == 10
    unknown.reset(unknown.wiped)
    assert unknown.snapshot() == {} and unknown.kept_checkpoint is None
    unknown.close()


def test_a_checkpoint_older_than_the_tombstone_retention_is_wiped(tmp_path):
    _checkpointed(tmp_path)
    store = opened(tmp_path, delete_retention_ms=0)
    assert store.restore_from() is None and "delete.retention.ms" in store.wiped and store.kept_checkpoint == 10
    store.close()


@pytest.mark.parametrize("damage", ["current", "manifest", "every file", "sst bytes flipped"])
def test_a_corrupt_directory_is_wiped_or_refused_never_read_as_state(tmp_path, damage):
    _checkpointed(tmp_path)
    path = partition_path(tmp_path, TOPIC, 0)
    if damage == "sst bytes flipped":  # same size: only the block checksums tell
        flushed = opened(tmp_path)
        flushed.db.flush()
        flushed.close()
        names = []
        for name in (n for n in os.listdir(path) if n.endswith(".sst")):
            data = bytearray((path / name).read_bytes())
            for at in range(0, len(data) // 2, 5):
                data[at] ^= 0xFF
            (path / name).write_bytes(bytes(data))
    else:
        names = {"current": ["CURRENT"], "manifest": [n for n in os.listdir(path) if n.startswith("MANIFEST")],
                 "every file": [n for n in os.listdir(path) if n != "LOCK"]}[damage]
    for name in names:
        (path / name).write_bytes(b"\x13garbage" * 64)
    try:
        store = opened(tmp_path)
    except StoreError as error:  # refused with a clear error is acceptable too
        assert str(path) in str(error)
        return
    assert store.restore_from() is None and store.snapshot() == {} and store.wiped.startswith(("corrupt", "no identity"))
    store.close()


def test_a_corruption_found_by_a_read_stops_the_worker_and_the_next_open_wipes_the_store(tmp_path):
    store = opened(tmp_path)
    committed(store, {("a",): 1}, offset=0)
    store.cache.clear()

    class Failing:
        def get(self, key):
            raise Exception("Corruption: block checksum mismatch")

        def close(self):
            pass

    real, store.db = store.db, Failing()
    with pytest.raises(StoreError, match="read failed: Corruption") as failed:
        store.get(("a",))
    assert failed.value.restartable and "the next start restores it from the changelog" in str(failed.value)  # exit 3, not 1
    real.close()
    again = opened(tmp_path)
    assert again.restore_from() is None and again.wiped.startswith("a read found it corrupt")
    again.close()


def test_two_processes_cannot_open_one_partition(tmp_path):
    import subprocess
    import sys

    store = opened(tmp_path)
    code = (
        "import sys; from recurrence_ledger.store.rocksdb import open_store; from recurrence_ledger.store.base import StoreError\n"
        f"try: open_store(sys.argv[1], {TOPIC!r}, 0, {TOPIC_ID!r}, lock_wait_s=0.5)\n"
        "except StoreError as e: print(e); sys.exit(7)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=os.environ)
    assert done.returncode == 7, done.stderr
    assert "locked by another worker" in done.stdout
    store.close()
    again = opened(tmp_path)  # released on close
    again.close()


def test_a_full_disk_fails_the_write_loudly_and_a_restart_restores_from_the_last_checkpoint(tmp_path, monkeypatch):
    """The write RocksDB refuses (here: ENOSPC, as a full volume reports it)
    raises StoreError and closes the store; the committed state is on the
    changelog, and a restart restores the tail after the last checkpoint
    that was written. The real full volume is tests/e2e/test_rocks_worker.py."""
    store = opened(tmp_path)
    committed(store, {("a",): 1}, offset=5)

    def full(batch):
        raise Exception("IO error: No space left on device: While appending to file: 000008.log")

    store[("a",)] = 2
    monkeypatch.setattr(store, "db", type("Full", (), {"write": staticmethod(full), "close": store.db.close, "get": store.db.get})())
    with pytest.raises(StoreError, match="No space left on device"):
        store.flushed(7)
    assert store.closed
    again = opened(tmp_path)
    assert again.restore_from() == 6 and again.snapshot() == {("a",): 1}
    again.close()


# -- the core through Task, with restarts from the local store -----------------------------------


class RocksSimulated(Simulated):
    """``Simulated`` with a RocksDB store: the changelog is append-only
    with offsets; a restart reopens the store and restores the tail after
    its checkpoint; ``kill_after_commit`` crashes between the commit and
    the local write."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log: list[tuple[bytes, bytes | None]] = []
        super().__init__()

    def _fresh_task(self) -> Task:
        store = open_store(self.root, TOPIC, 0, TOPIC_ID)
        start = store.restore_from() or 0
        for offset in range(start, len(self.log)):
            store.restore(*self.log[offset], offset)
        store.restored()
        task = Task(0, LedgerConfig(), store)
        pin_unicode_version(task.store)
        task.mark()
        task.ready = True
        return task

    def checkpoint(self, kill_after_commit: bool = False) -> None:
        for emit in self.task.processor.end_batch():
            self.views.append((emit.topic, emit.key, orjson.dumps(emit.value)))
        changes = self.task.store.changes()
        for key, value in changes:
            self.log.append((key, value))
            if value is None:
                self.changelog.pop(key, None)
            else:
                self.changelog[key] = value
        if kill_after_commit:
            self.task.store.close()
            self.task = self._fresh_task()
            return
        self.task.checkpointed(len(self.log) - 1 if changes else None)

    def restart(self) -> None:
        self.task.store.close()
        self.task = self._fresh_task()

    def state(self) -> dict[bytes, bytes]:
        return {encode_key(key): orjson.dumps(value) for key, value in self.task.store.snapshot().items()}


@pytest.mark.parametrize("seed", range(4))
def test_failures_restarts_and_kills_after_the_commit_equal_a_run_that_never_failed(tmp_path, seed):
    rng = random.Random(seed)
    every = journal_records()
    batches, failing, restarts = random_plan(rng, len(every), fail_rate=0.1)
    kills = {number for number in range(len(batches)) if rng.random() < 0.15}
    got = RocksSimulated(tmp_path / "got")
    for number, batch in enumerate(batches):
        for index in batch:
            got.apply(every[index], index in failing)
        got.checkpoint(kill_after_commit=number in kills)
        if number in restarts:
            got.restart()
    want = Simulated()
    for batch in batches:
        for index in batch:
            if index not in failing:
                want.apply(every[index], False)
        want.checkpoint()
    assert got.facts == want.facts
    assert got.final_views() == want.final_views()
    assert got.state() == want.state() == got.changelog
    got.restart()
    assert got.state() == want.state()
    got.task.store.close()


def test_closing_refreshes_the_checkpoint_time_only_of_a_store_restored_to_the_end(tmp_path, monkeypatch):
    """The age check (delete.retention.ms) trusts a checkpoint's time as the
    moment the store reflected the whole changelog up to its offset: a
    store closed while restoring its tail (another worker wrote records
    after its checkpoint, not all read yet) must keep its old time."""
    from recurrence_ledger.store.rocksdb import CHECKPOINT_KEY

    clock = {"now": 1_000.0}
    monkeypatch.setattr(rocks_store.time, "time", lambda: clock["now"])
    store = opened(tmp_path)
    committed(store, {("a",): 1}, offset=5)
    store.close()
    written_at = lambda: orjson.loads(opened_db_value(tmp_path, CHECKPOINT_KEY))["written_at"]  # noqa: E731
    assert written_at() == 1_000.0
    clock["now"] = 2_000.0
    partial = opened(tmp_path, delete_retention_ms=10**12)
    partial.restore(encode_key(("b",)), b"2", 6)  # the tail, not to its end yet
    partial.close()
    assert written_at() == 1_000.0
    clock["now"] = 3_000.0
    whole = opened(tmp_path, delete_retention_ms=10**12)
    whole.restore(encode_key(("b",)), b"2", 6)
    whole.restored(7)
    clock["now"] = 4_000.0
    whole.close()
    assert written_at() == 4_000.0


def opened_db_value(root: Path, key: bytes) -> bytes:
    store = opened(root, delete_retention_ms=10**12)
    try:
        return store.db.get(key)
    finally:
        store.failed = True  # read only: do not refresh
        store.close()


def test_the_local_write_is_the_changelog_records_bytes_even_after_a_late_write(tmp_path):
    store = opened(tmp_path)
    store[("a",)] = {"n": 1}
    assert store.changes() == [(b'["a"]', b'{"n":1}')]
    store[("a",)] = {"n": 2}  # written after changes(): those bytes are stale, not reused
    store.flushed(3)
    assert store.db.get(b'["a"]') == b'{"n":2}'
    store[("b",)] = 1
    assert store.changes() == [(b'["b"]', b"1")]
    store.rollback()
    store.flushed(None)  # nothing left to write after the rollback
    assert store.db.get(b'["b"]') is None
    store.close()
