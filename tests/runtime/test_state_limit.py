"""runtime.state_limit without a broker: a checkpoint's changelog value
over the limit is found and its key watched on its partition; after a
record, the watched value is measured when its length changed (every
write once a key was found over the limit twice) and the record that
grows it past the limit is named; a commit ends the watches. (On the real
broker, through the worker: tests/e2e/test_state_limit.py.)"""

from __future__ import annotations

from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.runtime.state_limit import StateLimit
from recurrence_ledger.runtime.task import Task
from recurrence_ledger.store.base import encode_key

TOPIC = "app-ledger-state-changelog"
KEY = ("heads", "big")


def test_a_value_over_the_limit_is_watched_and_the_record_that_grows_it_is_named():
    limit, task = StateLimit(100), Task(0, LedgerConfig())
    assert limit.over([(TOPIC, 0, encode_key(("scope", "s")), b"x" * 100), (TOPIC, 1, encode_key(KEY), None)]) is None
    why = limit.over([(TOPIC, 0, encode_key(("scope", "s")), b"x" * 10), (TOPIC, 0, encode_key(KEY), b"x" * 101)])
    assert why.startswith('the state record ["heads","big"] of app-ledger-state-changelog[0] is 101 bytes, over the limit 100 (max_state_bytes)')
    assert limit.watched == {(TOPIC, 0): {KEY}}

    assert limit.check(TOPIC, task) is None  # not written since the commit
    task.store[KEY] = {"a": "x" * 40}
    assert limit.check(TOPIC, task) is None and limit.check("other-changelog", task) is None
    task.store[KEY] = {"a": "x" * 40, "b": "y" * 60}
    assert limit.check(TOPIC, task) == "it grows the state record ['heads', 'big'] to 115 bytes; the worker's limit is 100 (max_state_bytes)"
    # Rolled back to one entry, then grown again to two: measured again, named again.
    task.store[KEY] = {"a": "x" * 40}
    assert limit.check(TOPIC, task) is None
    task.store[KEY] = {"a": "x" * 40, "c": "z" * 60}
    assert limit.check(TOPIC, task).endswith("to 115 bytes; the worker's limit is 100 (max_state_bytes)")

    limit.clear()
    assert limit.watched == {} and limit.check(TOPIC, task) is None


def test_a_value_that_grows_without_a_change_of_length_is_measured_on_every_write_once_found_again():
    limit, task = StateLimit(100), Task(0, LedgerConfig())
    limit.over([(TOPIC, 0, encode_key(KEY), b"x" * 101)])
    task.store[KEY] = {"list": [1]}
    assert limit.check(TOPIC, task) is None
    task.store[KEY] = {"list": list(range(40))}  # one key still: not measured
    assert limit.check(TOPIC, task) is None
    limit.over([(TOPIC, 0, encode_key(KEY), b"x" * 101)])  # found over the limit again: every write is measured
    assert KEY in limit.thorough
    assert limit.check(TOPIC, task).endswith("to 120 bytes; the worker's limit is 100 (max_state_bytes)")
