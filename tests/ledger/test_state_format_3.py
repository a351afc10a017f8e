"""State format 3 (docs/upgrading.md, "State format 3"): an artifact's
review candidate ids kept in chunks, so a new candidate rewrites at most one
chunk instead of every id the artifact ever had; a list of format 2 read as
it is and split into chunks when it next grows; the same facts and views
whatever the chunk size."""

from __future__ import annotations

import json
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from recurrence_ledger.ledger import state as state_module
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger.reviews import REVIEW_IDS
from recurrence_ledger.ledger.state import STATE_FORMAT_KEY, LedgerState
from tests.journal import fix_journal
from tests.ledger.test_state_format import feed

S = "chunks"


@contextmanager
def chunk_size(size: int):
    """``LIST_CHUNK`` set to ``size`` for the block."""
    kept = state_module.LIST_CHUNK
    state_module.LIST_CHUNK = size
    try:
        yield
    finally:
        state_module.LIST_CHUNK = kept


class Writes(dict):
    """A store that counts its writes."""

    writes = 0

    def __setitem__(self, key, value):
        self.writes += 1
        super().__setitem__(key, value)


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 5), before=st.integers(0, 12), appended=st.integers(0, 30))
def test_a_chunked_list_reads_back_in_order_and_an_append_writes_one_chunk(size, before, appended):
    store = Writes()
    if before:
        store[("reviews", S, "E1")] = [f"old{n}" for n in range(before)]  # format 2: one plain list
    state = LedgerState(store)
    model = [f"old{n}" for n in range(before)]
    with chunk_size(size):
        for number in range(appended):
            writes = store.writes
            state.append_chunked(f"new{number}", REVIEW_IDS, "reviews", S, "E1")
            model.append(f"new{number}")
            assert state.chunked(REVIEW_IDS, "reviews", S, "E1") == model
            converting = number == 0 and before
            assert store.writes - writes <= (before // size + 2 if converting else 2)
    assert state.chunked(REVIEW_IDS, "reviews", S, "E1") == model
    if appended:
        head = store[("reviews", S, "E1")]
        chunks = [store[(REVIEW_IDS, S, "E1", number)] for number in range(head["chunks"])]
        assert all(len(chunk) == size for chunk in chunks) and 1 <= len(head["open"]) <= size
        assert len([key for key in store if key[0] == REVIEW_IDS]) == head["chunks"] == (len(model) - 1) // size
    assert state.chunked(REVIEW_IDS, "reviews", S, "E2") == []


def many_candidates(runs: int) -> list[dict]:
    """E1 r2 failing three times in four (a run at the threshold, so a
    candidate, every four outcomes) after E1 r1's candidate; approved."""
    return fix_journal(S, [True, True, True, False] * runs, approve=True)


def test_the_facts_and_views_do_not_depend_on_the_chunk_size():
    records = many_candidates(12)
    with chunk_size(2):
        small = LedgerProcessor()
        got = feed(small, records)
    large = LedgerProcessor()
    assert feed(large, records) == got
    assert len([value for topic, value in got if topic == "review-candidates"]) == 13
    head = small.state.store[("reviews", S, "E1")]
    assert (head["chunks"], len(head["open"])) == (6, 1)
    assert large.state.store[("reviews", S, "E1")]["chunks"] == 0
    assert small.state.chunked(REVIEW_IDS, "reviews", S, "E1") == large.state.chunked(REVIEW_IDS, "reviews", S, "E1")


def to_format_2(store: dict) -> dict:
    """The same state as format 2 wrote it: an artifact's candidate ids in
    one plain list, format record 2."""
    old = {}
    for key, value in json.loads(json.dumps([[list(key), value] for key, value in store.items()])):  # a copy
        key = tuple(key)
        if key[0] == REVIEW_IDS:
            continue
        if key[0] == "reviews":
            value = LedgerState(store).chunked(REVIEW_IDS, *key)
        old[key] = 2 if key == STATE_FORMAT_KEY else value
    return old


def test_a_format_2_store_goes_on_with_the_same_facts_and_becomes_format_3():
    records = many_candidates(12)
    split = len(records) // 2
    with chunk_size(3):
        reference = LedgerProcessor()
        feed(reference, records[:split])
        old = to_format_2(reference.state.store)
        assert isinstance(old[("reviews", S, "E1")], list) and len(old[("reviews", S, "E1")]) >= 4
        upgraded = LedgerProcessor(old)
        assert feed(upgraded, records[split:]) == feed(reference, records[split:])
        store = upgraded.state.store
        assert store[STATE_FORMAT_KEY] == 3 and not upgraded.state.legacy_positions()
        assert upgraded.state.chunked(REVIEW_IDS, "reviews", S, "E1") == reference.state.chunked(REVIEW_IDS, "reviews", S, "E1")
        assert store[("reviews", S, "E1")]["chunks"] == 4
