"""State format 3 (docs/upgrading.md, "State format 3"): the lists that
grow with a revision's history kept in chunks (``ledger.chunks``), so adding
an entry rewrites one chunk instead of the list; a list of format 2 read as
it is and split into chunks when it next grows; the same facts and views
whatever the chunk size and whatever the layout the state was left in."""

from __future__ import annotations

import bisect
import json
import random
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from recurrence_ledger.ledger import chunks
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger.state import STATE_FORMAT_KEY
from recurrence_ledger.ledger.streaks import AVOIDED_CHUNKS
from tests.journal import fix_journal
from tests.ledger.test_state_format import feed, unchunked

S = "chunks"
HEAD = ("list", S, "E1", 1)


@contextmanager
def chunk_size(size: int):
    """``chunks.CHUNK`` set to ``size`` for the block."""
    kept = chunks.CHUNK
    chunks.CHUNK = size
    try:
        yield
    finally:
        chunks.CHUNK = kept


class Writes(dict):
    """A store that counts its writes and keeps what each wrote, as a
    changelog would (:meth:`restored`)."""

    def __init__(self):
        super().__init__()
        self.writes = 0
        self.written: dict = {}

    def __setitem__(self, key, value):
        self.writes += 1
        self.written[key] = json.loads(json.dumps(value))
        super().__setitem__(key, value)

    def restored(self) -> dict:
        """The store as its writes restore it: equal to the store unless a
        value was changed in place without being written again."""
        return self.written


def chunk_records(store: dict) -> list:
    return [value for key, value in store.items() if key[0] == "piece"]


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 5), before=st.integers(0, 12), appended=st.integers(0, 30))
def test_an_appended_list_reads_back_in_order_and_an_append_writes_one_chunk(size, before, appended):
    store = Writes()
    model = [f"old{n}" for n in range(before)]
    if before:
        store[HEAD] = list(model)  # format 2: one plain list
    with chunk_size(size):
        for number in range(appended):
            writes = store.writes
            chunks.append(store, f"new{number}", "piece", *HEAD)
            model.append(f"new{number}")
            assert chunks.entries(store, "piece", *HEAD) == model and store.restored() == store
            assert store.writes - writes <= (before // size + 2 if number == 0 and before else 2)
    assert chunks.entries(store, "piece", *HEAD) == model
    if appended:
        head = store[HEAD]
        assert all(len(chunk) == size for chunk in chunk_records(store)) and 1 <= len(head["open"]) <= size
        assert len(chunk_records(store)) == head["chunks"] == (len(model) - 1) // size
    assert chunks.entries(store, "piece", "list", S, "E2", 1) == []


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 5), before=st.lists(st.integers(0, 60), max_size=15, unique=True),
       inserted=st.lists(st.integers(0, 60), max_size=40), probes=st.lists(st.integers(-1, 62), min_size=1, max_size=8))
def test_a_sorted_set_answers_as_a_sorted_list_and_an_insert_writes_at_most_three_records(size, before, inserted, probes):
    store = Writes()
    model = sorted(before)
    if before:
        store[HEAD] = list(model)  # format 2: one sorted plain list

    def check():
        assert chunks.values(store, "piece", *HEAD) == model
        assert store.restored() == store
        for probe in probes:
            at = bisect.bisect_left(model, probe)
            assert chunks.before(store, probe, "piece", *HEAD) == (model[at - 1] if at else None)

    with chunk_size(size):
        check()
        for number, value in enumerate(inserted):
            writes = store.writes
            assert chunks.insert(store, value, "piece", *HEAD) is (value not in model)
            if value not in model:
                bisect.insort(model, value)
            check()
            converted = number == 0 and before
            assert store.writes - writes <= ((len(before) + size - 1) // size + 1 if converted else 0) + 3
        if inserted:
            assert all(1 <= len(chunk) <= size for chunk in chunk_records(store))
            assert store[HEAD]["firsts"] == [store[("piece", S, "E1", 1, number)][0] for number in store[HEAD]["ids"]]


def many_candidates(runs: int, seed: int | None = None) -> list[dict]:
    """E1 r2 failing three times in four (a run at the threshold, so a
    candidate, every four outcomes) after E1 r1's candidate; approved. With
    ``seed``, the Task Outcomes arrive in a shuffled order: late verdicts
    split runs and fall in closed ones."""
    records = fix_journal(S, [True, True, True, False] * runs, approve=True)
    if seed is not None:
        head, outcomes, decision = records[:7], records[7:-1], records[-1:]
        random.Random(seed).shuffle(outcomes)
        records = [*head, *outcomes, *decision]
    return records


def test_the_facts_and_views_do_not_depend_on_the_chunk_size():
    for seed in (None, 1, 2, 3):
        records = many_candidates(12, seed)
        with chunk_size(2):
            small = LedgerProcessor()
            got = feed(small, records)
        large = LedgerProcessor()
        assert feed(large, records) == got, seed
        assert len([value for topic, value in got if topic == "review-candidates"]) >= 13
        assert small.state.store[("reviews", S, "E1")]["chunks"] >= 6 and large.state.store[("reviews", S, "E1")]["chunks"] == 0
        avoided_chunks = len(small.state.store[("avoided_at", S, "E1", 2)]["ids"])
        assert avoided_chunks == 6 if seed is None else avoided_chunks >= 6  # in order: full chunks of 2
        assert unchunked(small.state.store) == unchunked(large.state.store)
    assert chunks.values(small.state.store, AVOIDED_CHUNKS, "avoided_at", S, "E1", 2) == list(range(60, 510, 40))


def test_a_format_2_store_goes_on_with_the_same_facts_and_becomes_format_3():
    for seed in (None, 4):
        records = many_candidates(12, seed)
        split = len(records) // 2
        with chunk_size(3):
            reference = LedgerProcessor()
            feed(reference, records[:split])
            old = {**unchunked(reference.state.store), STATE_FORMAT_KEY: 2}
            assert isinstance(old[("reviews", S, "E1")], list) and len(old[("reviews", S, "E1")]) >= 4
            assert isinstance(old[("avoided_at", S, "E1", 2)], list) and old[("streak", S, "E1", 2)]["published"]
            upgraded = LedgerProcessor(old)
            assert feed(upgraded, records[split:]) == feed(reference, records[split:])
            store = upgraded.state.store
            assert store[STATE_FORMAT_KEY] == 3 and not upgraded.state.legacy_positions()
            assert unchunked(store) == unchunked(reference.state.store)
            assert "published" not in store[("streak", S, "E1", 2)]
            assert isinstance(store[("avoided_at", S, "E1", 2)], dict) and isinstance(store[("reviews", S, "E1")], dict)
