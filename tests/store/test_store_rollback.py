"""The partition store and a record's rollback, without a broker
(recurrence_ledger.store.memory, recurrence_ledger.runtime.task.Task).

The rollback tests drive the real core through the worker's own decode
shell (``process_message``) over the fixture cases, with records that look
like consumed Kafka records: failing any one record and rolling it back
must leave exactly the state — and produce exactly the later outputs — of
a run in which that record never existed."""

from __future__ import annotations

import orjson
import pytest

from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.store.base import decode_key, encode_key
from recurrence_ledger.store.memory import ChangelogStore
from recurrence_ledger.kafka.records import process_message
from recurrence_ledger.runtime.task import Task
from tests.conftest import CASE_NAMES, case
from tests.consumed import Record, consumed


def records(name: str) -> list[Record]:
    journal, _ = case(name)
    return consumed(line for line in journal.read_bytes().splitlines() if line.strip())


def state_of(store: ChangelogStore) -> bytes:
    """The store's content as the changelog would restore it."""
    return b"\n".join(sorted(encode_key(key) + b"=" + orjson.dumps(value) for key, value in store.data.items()))


# -- the store ------------------------------------------------------------------------


def test_changes_hold_one_record_per_changed_key_with_its_last_value_and_tombstones():
    store = ChangelogStore()
    store[("a",)] = {"n": 1}
    store[("b", "x", 2)] = [1]
    store[("a",)] = {"n": 2}
    del store[("b", "x", 2)]
    assert store.changes() == [(b'["a"]', b'{"n":2}'), (b'["b","x",2]', None)]
    store.flushed()
    assert store.changes() == [] and store.data == {("a",): {"n": 2}}


def test_rollback_undoes_writes_deletes_and_in_place_mutations_since_the_last_flush():
    store = ChangelogStore()
    store[("scope", "s")] = {"count": 1, "items": [1]}
    store[("gone",)] = 7
    store.flushed()
    record = store.get(("scope", "s"))
    record["items"].append(2)  # the core mutates what it read, then writes it back
    record["count"] = 2
    store[("scope", "s")] = record
    del store[("gone",)]
    store[("new",)] = "x"
    record["count"] = 3  # mutated again after the write
    assert store.rollback() == 3
    assert store.data == {("scope", "s"): {"count": 1, "items": [1]}, ("gone",): 7}
    assert store.changes() == []


def test_rollback_keeps_changes_pending_at_the_mark():
    store = ChangelogStore()
    store[("deployment", "unicode_version")] = "15.0.0"  # written after recovery, not yet in the changelog
    store.mark()
    store[("deployment", "unicode_version")] = "other"
    store[("x",)] = 1
    store.rollback()
    assert store.data == {("deployment", "unicode_version"): "15.0.0"}
    assert store.changes() == [(b'["deployment","unicode_version"]', b'"15.0.0"')]


def test_restore_reads_changelog_records_and_tombstones():
    store = ChangelogStore()
    store.restore(encode_key(("outcome", "s", "o1")), b'{"digest":"d"}')
    store.restore(encode_key(("gone",)), b"1")
    store.restore(encode_key(("gone",)), None)
    assert store.data == {("outcome", "s", "o1"): {"digest": "d"}}
    assert store.changes() == []
    assert decode_key(encode_key(("a", 1, "b"))) == ("a", 1, "b")


def test_reads_and_membership_snapshot_each_key_once_per_batch():
    store = ChangelogStore()
    store[("k",)] = [1]
    store.flushed()
    assert ("k",) in store and ("missing",) not in store
    store.get(("k",)).append(2)  # mutated without a write: still undone
    assert store.before == {("k",): b"[1]", ("missing",): None}
    store.rollback()
    assert store.data == {("k",): [1]}


# -- a record's rollback through the core --------------------------------------------


def run(records_: list[Record], fail_at: int | None = None, batch: int = 4) -> tuple[list, bytes, list[bytes]]:
    """Apply ``records_`` through a Task in checkpoints of ``batch``
    records; the record at ``fail_at`` is applied, then declared failed and
    rolled back as the worker does. Returns (emits of kept records, final
    state, changelog records of every checkpoint)."""
    task = Task(0, LedgerConfig())
    task.mark()
    task.ready = True
    outputs, changelog = [], []

    def reapply(record: Record) -> None:
        process_message(task.processor, record, "")

    for number, record in enumerate(records_):
        emits = process_message(task.processor, record, "")
        if number == fail_at:
            task.rollback(reapply)
        else:
            task.applied.append(record)
            outputs += [(emit.topic, emit.key, orjson.dumps(emit.value)) for emit in emits]
        if (number + 1) % batch == 0:
            outputs += [(emit.topic, emit.key, orjson.dumps(emit.value)) for emit in task.processor.end_batch()]
            changelog += [key + b"=" + (value or b"<tombstone>") for key, value in task.store.changes()]
            task.checkpointed()
    outputs += [(emit.topic, emit.key, orjson.dumps(emit.value)) for emit in task.processor.end_batch()]
    return outputs, state_of(task.store), changelog


@pytest.mark.parametrize("name", CASE_NAMES)
def test_rolling_back_any_record_equals_never_having_seen_it(name):
    every = records(name)
    for fail_at in range(len(every)):
        without = [record for number, record in enumerate(every) if number != fail_at]
        # Offsets differ in the "without" run, and no output names its input offset.
        expected_outputs, expected_state, _ = run(without, batch=10_000)
        outputs, state, _ = run(every, fail_at=fail_at, batch=10_000)
        assert state == expected_state, f"record {fail_at}"
        assert outputs == expected_outputs, f"record {fail_at}"


def test_a_rollback_touches_only_the_open_batch():
    every = records("worked_example")
    fail_at = len(every) - 2
    _, state, changelog = run(every, fail_at=fail_at, batch=3)
    without = [record for number, record in enumerate(every) if number != fail_at]
    _, expected_state, _ = run(without, batch=10_000)
    assert state == expected_state
    assert changelog  # earlier checkpoints were written and are not undone
