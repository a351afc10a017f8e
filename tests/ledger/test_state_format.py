"""State formats 2 and 3 (docs/upgrading.md, "State format 2", "State
format 3"): the holders of journal positions kept by ranges, the format
recorded in the store, and a store written in format 1 (one record per
position, no format record) that keeps working: its positions still
conflict, its events are still duplicates, and the facts that follow are
those of a new store. Format 3's lists in chunks are in
``test_state_format_3.py``."""

from __future__ import annotations

import json

import pytest

from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger import chunks
from recurrence_ledger.ledger.reviews import REVIEW_IDS
from recurrence_ledger.ledger.state import (
    LEGACY_POSITIONS_KEY,
    POSITION_BUCKET,
    STATE_FORMAT,
    STATE_FORMAT_KEY,
    UNICODE_VERSION_KEY,
    StateFormatError,
)
from recurrence_ledger.ledger.streaks import AVOIDED_CHUNKS, HISTORY_START, PUBLISHED_CHUNKS
from recurrence_ledger.store.memory import ChangelogStore
from recurrence_ledger.workload import Workload, generate_journal
from tests.journal import check, experience, line, outcome

S = "scope"


def feed(processor: LedgerProcessor, records: list[dict | bytes]) -> list[tuple[str, bytes]]:
    """Apply journal records; the emits as (topic, canonical-ish JSON bytes)."""
    out = []
    for offset, record in enumerate(records):
        raw = record if isinstance(record, bytes) else line(record)
        for emit in ingest_journal_line(processor, raw, Coordinates("source-journal", None, offset, None)):
            out.append((emit.topic, json.dumps(emit.value, sort_keys=True).encode()))
    return out


def unchunked(store: dict) -> dict:
    """A copy of ``store`` with the lists of state format 3 as format 2
    kept them: an artifact's candidate ids and a revision's avoided
    positions in one plain list each, its run names with a candidate in its
    streak record's ``published`` list."""
    old = {}
    for key, value in store.items():
        if key[0] in (REVIEW_IDS, AVOIDED_CHUNKS, PUBLISHED_CHUNKS, "published_runs"):
            continue
        if key[0] == "reviews" and isinstance(value, dict):
            value = chunks.entries(store, REVIEW_IDS, *key)
        elif key[0] == "avoided_at" and isinstance(value, dict):
            value = chunks.values(store, AVOIDED_CHUNKS, *key)
        elif key[0] == "streak":
            names = chunks.values(store, PUBLISHED_CHUNKS, "published_runs", *key[1:])
            value = {**value, "published": [*value.get("published", ()), *(None if name == HISTORY_START else name for name in names)]}
        old[key] = value
    return {key: json.loads(json.dumps(value)) for key, value in old.items()}  # a copy


def to_format_1(store: dict) -> dict:
    """The same state as a version before state formats wrote it: one
    ``("position", scope_id, position)`` record per position, no range
    records, no open range in the scope records, the streak ranking in a
    ``("ranked", scope_id)`` record, the lists of format 3 unchunked, no
    format record."""
    old = {}
    for key, value in unchunked(store).items():
        if key in (STATE_FORMAT_KEY, LEGACY_POSITIONS_KEY):
            continue
        if key[0] == "positions":
            old.update({("position", key[1], int(position)): holder for position, holder in value.items()})
        elif key[0] == "scope":
            if "positions" in value:
                _, holders = value.pop("positions")
                old.update({("position", key[1], int(position)): holder for position, holder in holders.items()})
            if "ranked" in value:
                old[("ranked", key[1])] = value.pop("ranked")
            old[key] = value
        else:
            old[key] = value
    return old


def journal(shape: Workload) -> list[bytes]:
    return [json.dumps(record).encode() for record in generate_journal(shape)]


def test_a_new_store_records_format_3_and_keeps_positions_by_range():
    processor = LedgerProcessor()
    feed(processor, [experience(S, 1, "E1"), *[outcome(S, p, f"O{p}", checks=[check("x")]) for p in range(2, 2 + POSITION_BUCKET + 3)]])
    store = processor.state.store
    assert store[STATE_FORMAT_KEY] == STATE_FORMAT == 3 and LEGACY_POSITIONS_KEY not in store
    assert not [key for key in store if key[0] == "position"]
    # positions 1..63 in the closed range 0, 64..68 open in the scope record
    assert store[("positions", S, 0)] == {"1": "experience E1 1", **{str(p): f"outcome O{p}" for p in range(2, 64)}}
    assert store[("scope", S)]["positions"] == [1, {str(p): f"outcome O{p}" for p in range(64, 69)}]


def test_a_late_event_in_a_closed_range_and_conflicts_in_every_range():
    processor = LedgerProcessor()
    emits = feed(processor, [
        experience(S, 200, "E1"), experience(S, 5, "E2"),  # 200 opens range 3; 5 lands in range 0's record
        outcome(S, 5, "O-late", checks=[check("x")]), outcome(S, 200, "O-open", checks=[check("x")]),
        outcome(S, 70, "O-new", checks=[check("x")]),
    ])
    dead = [json.loads(value) for topic, value in emits if topic == "dead-letter"]
    assert [(d["reason"], d["offset"]) for d in dead] == [("position_conflict", 2), ("position_conflict", 3)]
    assert "already used by experience E2 1" in dead[0]["message"]
    assert "already used by experience E1 1" in dead[1]["message"]
    store = processor.state.store
    assert store[("positions", S, 0)] == {"5": "experience E2 1"}
    assert store[("positions", S, 1)] == {"70": "outcome O-new"}
    assert store[("scope", S)]["positions"] == [3, {"200": "experience E1 1"}]


def test_a_format_1_store_keeps_working_with_the_facts_of_a_format_2_store():
    records = journal(Workload(scopes=3, outcomes_per_scope=150, heads_per_scope=4, handoffs=2, seed=5))
    first, rest = records[:300], records[300:]
    new = LedgerProcessor()
    feed(new, first)
    old = LedgerProcessor(to_format_1(new.state.store))
    assert old.state.legacy_positions() and not new.state.legacy_positions()
    # the old layout's positions still conflict, and its events are still duplicates
    replayed = [*first[:50], *rest]
    conflicting = [line(outcome("scope-00000", 1, "O-collide", checks=[check("x")]))]
    want = feed(new, [*replayed, *conflicting])
    got = feed(old, [*replayed, *conflicting])
    assert got == want
    assert [json.loads(value)["reason"] for topic, value in got if topic == "dead-letter"] == ["position_conflict"]
    assert len([value for topic, value in got if topic == "recurrence-observations"]) > 100
    # the store now says which format it is and that its old records stay in force ...
    assert (old.state.store[STATE_FORMAT_KEY], old.state.store[LEGACY_POSITIONS_KEY]) == (3, True)
    assert LedgerProcessor(dict(old.state.store)).state.legacy_positions()
    # ... new positions go to ranges; the old records are never rewritten
    assert len([key for key in old.state.store if key[0] == "position"]) == 300
    # the rankings moved into the scope records as they changed
    assert not [key for key in old.state.store if key[0] == "ranked"]
    assert all(old.state.store[key] == new.state.store[key] for key in new.state.store if key[0] == "scope" and "ranked" in new.state.store[key])


def test_a_format_1_changelog_restores_into_a_worker_store_that_keeps_it():
    """The worker's path: a changelog written before formats restored into a
    fresh ChangelogStore, the Unicode pin written, then the next records."""
    records = journal(Workload(scopes=2, outcomes_per_scope=60, heads_per_scope=3, handoffs=2, seed=9))
    reference = LedgerProcessor()
    feed(reference, records[:100])
    store = ChangelogStore()
    for key, value in to_format_1(reference.state.store).items():
        store.restore(json.dumps(list(key)).encode(), json.dumps(value).encode())
    store[UNICODE_VERSION_KEY] = "14.0.0"
    processor = LedgerProcessor(store)
    assert feed(processor, records[90:]) == feed(reference, records[90:])
    changes = dict(store.changes())
    assert (changes[b'["deployment","state_format"]'], changes[b'["deployment","legacy_positions"]']) == (b"3", b"true")


def test_an_empty_worker_store_records_the_format_with_its_first_transaction():
    store = ChangelogStore()
    store[UNICODE_VERSION_KEY] = "14.0.0"  # the pin comes first, after the (empty) restore
    feed(LedgerProcessor(store), [experience(S, 1, "E1")])
    assert dict(store.changes())[b'["deployment","state_format"]'] == b"3"


def test_a_newer_format_is_refused_with_the_way_out():
    processor = LedgerProcessor({STATE_FORMAT_KEY: STATE_FORMAT + 1, ("scope", S): {}})
    with pytest.raises(StateFormatError, match=r"format 4, but this version of recurrence-ledger reads formats 1 to 3.*upgrading.md"):
        feed(processor, [experience(S, 1, "E1")])


def test_the_worker_decides_the_format_after_the_restore_and_refuses_a_newer_one():
    from recurrence_ledger.runtime.task import Task
    from recurrence_ledger.ledger.processor import LedgerConfig

    task = Task(0, LedgerConfig())
    task.pin_unicode(False, "changelog")
    assert task.store.data[STATE_FORMAT_KEY] == 3 and not task.processor.state.legacy_positions()
    newer = Task(1, LedgerConfig())
    newer.store.restore(b'["deployment","state_format"]', b"4")
    with pytest.raises(StateFormatError, match="format 4"):
        newer.pin_unicode(False, "changelog")
