"""The partition store's contract (``recurrence_ledger.store.base.PartitionStore``),
one suite run on every store: in memory (``store.memory.ChangelogStore``)
and on RocksDB (``store.rocksdb.RocksStore``). No broker: the changelog is
a list of ``(offset, key bytes, value bytes or None)`` records here.

What every store must do: a transaction's reads and writes as a mapping;
``changes()`` one changelog record per changed key, last value, in
first-write order, tombstones for deletions; ``rollback()`` to the last
``flushed``/``mark`` (in-place mutations of what was read included);
``restore`` from the changelog; and after a checkpoint, a reopened store
restored from its ``restore_from()`` holds the state it had."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recurrence_ledger.store.base import PartitionStore
from recurrence_ledger.store.memory import ChangelogStore
from recurrence_ledger.store.rocksdb import open_store

TOPIC = "contract-changelog"
TOPIC_ID = "contract-topic-id"

Changelog = list[tuple[int, bytes, bytes | None]]


class Opened:
    """A store under test and how to open it again where it keeps its
    data (the in-memory store keeps nothing: a new one)."""

    def __init__(self, kind: str, root: Path):
        self.kind, self.root = kind, root
        self.open_stores: list[PartitionStore] = []

    def open(self) -> PartitionStore:
        store = ChangelogStore() if self.kind == "memory" else open_store(self.root, TOPIC, 0, TOPIC_ID)
        self.open_stores.append(store)
        return store


@pytest.fixture(params=["memory", "rocksdb"])
def stores(request, tmp_path) -> Iterator[Opened]:
    opened = Opened(request.param, tmp_path)
    yield opened
    for store in opened.open_stores:
        store.close()


def commit(store: PartitionStore, changelog: Changelog) -> None:
    """What the worker's checkpoint does: the changes go to the changelog
    (offsets go on from its end), then ``flushed`` with the last offset."""
    changes = store.changes()
    for key, value in changes:
        changelog.append((len(changelog), key, value))
    store.flushed(len(changelog) - 1 if changes else None)


def restore(store: PartitionStore, changelog: Changelog) -> None:
    """Recovery: the changelog from ``restore_from()`` to its end."""
    start = store.restore_from() or 0
    for offset, key, value in changelog[start:]:
        store.restore(key, value, offset)
    store.restored(len(changelog))


def test_every_store_is_a_partition_store(stores):
    assert isinstance(stores.open(), PartitionStore)


def test_a_transaction_reads_its_own_writes_and_deletes(stores):
    store = stores.open()
    store[("a",)] = {"n": 1}
    store[("b", "x", 2)] = [1]
    assert store[("a",)] == {"n": 1} and store.get(("b", "x", 2)) == [1] and ("a",) in store
    del store[("b", "x", 2)]
    assert ("b", "x", 2) not in store and store.get(("b", "x", 2), "absent") == "absent"
    with pytest.raises(KeyError):
        store[("b", "x", 2)]
    with pytest.raises(KeyError):
        del store[("never",)]
    assert store.snapshot() == {("a",): {"n": 1}} and dict(store.items()) == {("a",): {"n": 1}} and len(store) == 1


def test_changes_are_one_changelog_record_per_changed_key_with_tombstones(stores):
    store = stores.open()
    store[("a",)] = {"n": 1}
    store[("b", "x", 2)] = [1]
    store[("a",)] = {"n": 2}
    del store[("b", "x", 2)]
    assert store.changes() == [(b'["a"]', b'{"n":2}'), (b'["b","x",2]', None)]
    changelog: Changelog = []
    commit(store, changelog)
    assert store.changes() == [] and store.snapshot() == {("a",): {"n": 2}}
    assert changelog == [(0, b'["a"]', b'{"n":2}'), (1, b'["b","x",2]', None)]


def test_rollback_undoes_writes_deletes_and_in_place_mutations_since_the_checkpoint(stores):
    store = stores.open()
    changelog: Changelog = []
    store[("scope", "s")] = {"count": 1, "items": [1]}
    store[("gone",)] = 7
    commit(store, changelog)
    record = store.get(("scope", "s"))
    record["items"].append(2)  # the core mutates what it read, then writes it back
    record["count"] = 2
    store[("scope", "s")] = record
    del store[("gone",)]
    store[("new",)] = "x"
    record["count"] = 3  # mutated again after the write
    assert store.rollback() == 3
    assert store.snapshot() == {("scope", "s"): {"count": 1, "items": [1]}, ("gone",): 7}
    assert store.changes() == []


def test_rollback_to_a_mark_keeps_the_changes_made_before_it(stores):
    store = stores.open()
    store[("pin",)] = "15.1"
    store.mark()
    store[("pin",)] = "other"
    store[("later",)] = 1
    store.rollback()
    assert store.snapshot() == {("pin",): "15.1"}
    assert store.changes() == [(b'["pin"]', b'"15.1"')]


def test_a_store_restored_from_the_changelog_holds_its_records_tombstones_applied(stores):
    store = stores.open()
    changelog: Changelog = [(0, b'["a"]', b'{"n":1}'), (1, b'["b"]', b"[1,2]"), (2, b'["a"]', b'{"n":2}'), (3, b'["b"]', None)]
    restore(store, changelog)
    assert store.snapshot() == {("a",): {"n": 2}}
    assert store[("a",)] == {"n": 2} and ("b",) not in store and store.changes() == []


def test_after_a_checkpoint_a_reopened_store_restored_from_where_it_says_holds_the_committed_state(stores):
    store = stores.open()
    changelog: Changelog = []
    store[("a",)] = 1
    store[("b",)] = {"x": [1]}
    commit(store, changelog)
    store[("a",)] = 2
    del store[("b",)]
    store[("c",)] = "c"
    commit(store, changelog)
    store[("uncommitted",)] = True  # never checkpointed: not restored
    committed = {("a",): 2, ("c",): "c"}
    store.close()
    reopened = stores.open()
    assert reopened.restore_from() in (None, len(changelog))  # the whole changelog, or after the checkpoint
    restore(reopened, changelog)
    assert reopened.snapshot() == committed


def test_reset_forgets_the_state_and_the_whole_changelog_restores_it(stores):
    store = stores.open()
    changelog: Changelog = []
    store[("a",)] = 1
    commit(store, changelog)
    store.reset("test")
    assert store.restore_from() is None
    restore(store, changelog)
    assert store.snapshot() == {("a",): 1}




def test_rollback_after_earlier_checkpoints_returns_to_the_last_committed_value(stores):
    store = stores.open()
    changelog: Changelog = []
    store[("scope", "s")] = {"count": 1}
    commit(store, changelog)
    record = store[("scope", "s")]
    record["count"] = 2
    store[("scope", "s")] = record
    commit(store, changelog)
    record = store[("scope", "s")]  # touched again in the next transaction: its image is the second checkpoint's
    record["count"] = 3
    store[("scope", "s")] = record
    store.rollback()
    assert store.snapshot() == {("scope", "s"): {"count": 2}} and store[("scope", "s")] == {"count": 2}


def test_a_second_rollback_stays_at_the_mark_and_the_changelog_gets_what_the_store_holds(stores):
    """A value written before a mark, mutated after it: the first rollback
    restores it; a second one must not bring back the mutated object as the
    pending change (the changelog would get [1, 2] while the store holds [1])."""
    store = stores.open()
    store[("scope", "s")] = {"items": [1]}
    store.mark()
    record = store[("scope", "s")]
    record["items"].append(2)
    store[("scope", "s")] = record
    store.rollback()
    store.rollback()
    changelog: Changelog = []
    commit(store, changelog)
    assert store.snapshot() == {("scope", "s"): {"items": [1]}} and changelog == [(0, b'["scope","s"]', b'{"items":[1]}')]


# -- any sequence of operations -------------------------------------------------------------

KEYS = [("scope", "s"), ("scope", "t"), ("heads", "s"), ("gone",)]
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(KEYS), st.integers(0, 9)),
        st.tuples(st.just("mutate"), st.sampled_from(KEYS), st.integers(0, 9)),  # read, change in place, write back
        st.tuples(st.just("mutate_after_write"), st.sampled_from(KEYS), st.integers(0, 9)),
        st.tuples(st.just("delete"), st.sampled_from(KEYS), st.just(0)),
        st.tuples(st.just("read"), st.sampled_from(KEYS), st.just(0)),
        st.tuples(st.sampled_from(["commit", "mark", "rollback"]), st.just(("-",)), st.just(0)),
    ),
    max_size=40,
)


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_any_sequence_of_writes_checkpoints_marks_and_rollbacks_matches_a_copy_kept_at_each_rollback_point(kind, tmp_path_factory, operations):
    """The store against a model that deep-copies the state at every
    rollback point: after each operation the store holds the model's state,
    and after a last rollback and commit the changelog restores that
    point's state."""
    opened = Opened(kind, tmp_path_factory.mktemp("store"))
    try:
        _run_against_the_model(opened.open(), operations)
    finally:
        for store in opened.open_stores:
            store.close()


def _run_against_the_model(store: PartitionStore, operations: list) -> None:
    changelog: Changelog = []
    model: dict = {}
    point: dict = {}  # the state at the rollback point
    for operation, key, number in operations:
        if operation == "put":
            store[key] = model[key] = {"n": number, "items": [number]}
        elif operation in ("mutate", "mutate_after_write") and key in model:
            record = store[key]
            record["items"].append(number)
            record["n"] = number
            store[key] = record
            if operation == "mutate_after_write":
                record["items"].append(-1)  # changed again after the write: the written object is the state
            model[key] = copy.deepcopy(record)
        elif operation == "delete" and key in model:
            del store[key]
            del model[key]
        elif operation == "read":
            assert store.get(key) == model.get(key)
        elif operation == "commit":
            commit(store, changelog)
            point = copy.deepcopy(model)
        elif operation == "mark":
            store.mark()
            point = copy.deepcopy(model)
        elif operation == "rollback":
            store.rollback()
            model = copy.deepcopy(point)
        assert store.snapshot() == model
    store.rollback()
    assert store.snapshot() == point
    commit(store, changelog)
    restored = ChangelogStore()
    restore(restored, changelog)
    assert restored.snapshot() == point
