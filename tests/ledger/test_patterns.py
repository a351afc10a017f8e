"""contract §23: signature patterns across the scopes of a pattern group —
the groups, the scope stage's absolute counts, the pattern stage's view and
candidates, and their independence of arrival order.

The fixture ``tests/cases/patterns.jsonl``: six scopes (``teamA/svc1..3``,
``teamB/svc1..2``, ``solo``) each with one recurred verdict for the cue
"Schema migration lock timeout"; ``teamA/svc2`` has a second one, and
``teamA/svc1`` two for "Flaky DNS mirror".
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recurrence_ledger.catalogue import PATTERN_CANDIDATES, PATTERN_REPARTITION, SIGNATURE_PATTERNS
from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.normalize import canonical_json, digest
from recurrence_ledger.ledger.patterns import PatternStage, contribution, pattern_candidate_id, pattern_group, pattern_key
from recurrence_ledger.ledger.processor import LedgerProcessor
from tests.conftest import CASES, final_views, read_outputs
from tests.journal import Ledger

LOCK = "schema migration lock timeout"
DNS = "flaky dns mirror"
SCOPES = ["solo", "teamA/svc1", "teamA/svc2", "teamA/svc3", "teamB/svc1", "teamB/svc2"]


def journal() -> list[dict]:
    return [json.loads(line) for line in (CASES / "patterns.jsonl").read_text().splitlines() if line.strip()]


def run(tmp_path, **policy) -> dict[str, list[dict]]:
    run_journal(CASES / "patterns.jsonl", tmp_path, LedgerConfig(**policy), show_progress=False, validate_outputs=True)
    return read_outputs(tmp_path)


@pytest.mark.parametrize(
    ("scope_id", "separator", "group"),
    [
        ("teamA/svc1", None, ""),
        ("teamA/svc1", "/", "teamA"),
        ("teamA/svc1/x", "/", "teamA"),
        ("solo", "/", "solo"),  # no separator in it: a group of its own, named by the whole scope_id
        ("/lead", "/", ""),
        ("a::b", "::", "a"),
    ],
)
def test_a_scope_s_group_is_its_scope_id_up_to_the_first_separator(scope_id, separator, group):
    assert pattern_group(scope_id, separator) == group


def test_an_empty_separator_is_refused():
    with pytest.raises(ValueError, match="pattern_group_separator"):
        LedgerConfig(pattern_group_separator="")


def test_without_a_separator_every_scope_is_in_one_group(tmp_path):
    out = run(tmp_path)
    views = final_views(SIGNATURE_PATTERNS, out[SIGNATURE_PATTERNS])
    assert views == {
        ("", DNS): {"group": "", "signature_key": DNS, "scope_count": 1, "scopes": ["teamA/svc1"], "recurred": 2},
        ("", LOCK): {"group": "", "signature_key": LOCK, "scope_count": 6, "scopes": SCOPES, "recurred": 7},
    }
    assert out[PATTERN_CANDIDATES] == [{
        "candidate_id": digest({"group": "", "signature_key": LOCK, "threshold": 3}),
        "group": "",
        "signature_key": LOCK,
        "threshold": 3,
        "reason": "recurred in 3 scopes (pattern threshold 3)",
    }]


def test_with_a_separator_patterns_are_counted_per_group_and_name_only_its_scopes(tmp_path):
    out = run(tmp_path, pattern_group_separator="/")
    views = final_views(SIGNATURE_PATTERNS, out[SIGNATURE_PATTERNS])
    assert views == {
        ("solo", LOCK): {"group": "solo", "signature_key": LOCK, "scope_count": 1, "scopes": ["solo"], "recurred": 1},
        ("teamA", DNS): {"group": "teamA", "signature_key": DNS, "scope_count": 1, "scopes": ["teamA/svc1"], "recurred": 2},
        ("teamA", LOCK): {"group": "teamA", "signature_key": LOCK, "scope_count": 3,
                          "scopes": ["teamA/svc1", "teamA/svc2", "teamA/svc3"], "recurred": 4},
        ("teamB", LOCK): {"group": "teamB", "signature_key": LOCK, "scope_count": 2, "scopes": ["teamB/svc1", "teamB/svc2"], "recurred": 2},
    }
    for (group, _), view in views.items():
        assert all(pattern_group(scope, "/") == group for scope in view["scopes"])
    assert [(c["group"], c["signature_key"], c["reason"]) for c in out[PATTERN_CANDIDATES]] == [
        ("teamA", LOCK, 'recurred in 3 scopes of pattern group "teamA" (pattern threshold 3)'),
    ]


def test_the_threshold_crossing_publishes_one_candidate_per_pattern(tmp_path):
    out = run(tmp_path, pattern_group_separator="/", pattern_threshold=2)
    assert sorted((c["group"], c["signature_key"], c["threshold"]) for c in out[PATTERN_CANDIDATES]) == [
        ("teamA", LOCK, 2), ("teamB", LOCK, 2),
    ]
    assert all(c["candidate_id"] == pattern_candidate_id(c["group"], c["signature_key"], 2) for c in out[PATTERN_CANDIDATES])
    assert run(tmp_path / "one", pattern_threshold=1)[PATTERN_CANDIDATES] == [
        {"candidate_id": pattern_candidate_id("", key, 1), "group": "", "signature_key": key, "threshold": 1,
         "reason": "recurred in 1 scopes (pattern threshold 1)"}
        for key in (LOCK, DNS)
    ]


def test_the_candidate_comes_with_the_contribution_that_reaches_the_threshold_and_never_again():
    stage = PatternStage(threshold=3, validate_outputs=True)
    add = lambda scope, n: stage.apply({"group": "g", "signature_key": "k", "scope_id": scope, "recurred": n})  # noqa: E731
    assert add("a", 1) == [] and add("a", 2) == [] and add("b", 1) == []
    [candidate] = add("c", 5)
    assert candidate.topic == PATTERN_CANDIDATES and candidate.key == pattern_key("g", "k")
    assert add("d", 1) == [] and add("c", 6) == []
    [view] = stage.end_batch()
    assert view.value == {"group": "g", "signature_key": "k", "scope_count": 4, "scopes": ["a", "b", "c", "d"], "recurred": 2 + 1 + 6 + 1}
    assert stage.end_batch() == []  # nothing changed since


def test_a_count_not_above_the_known_one_changes_nothing():
    stage = PatternStage(threshold=2)
    stage.apply({"group": "", "signature_key": "k", "scope_id": "a", "recurred": 3})
    stage.end_batch()
    assert stage.apply({"group": "", "signature_key": "k", "scope_id": "a", "recurred": 3}) == []  # a replay
    assert stage.apply({"group": "", "signature_key": "k", "scope_id": "a", "recurred": 2}) == []  # an older record
    assert stage.end_batch() == []


def test_a_view_names_the_first_100_scopes_in_code_point_order():
    stage = PatternStage(threshold=500, validate_outputs=True)
    names = [f"s{index:03d}" for index in range(150)] + ["Z", "é"]
    random.Random(7).shuffle(names)
    for name in names:
        stage.apply({"group": "", "signature_key": "k", "scope_id": name, "recurred": 1})
    [view] = stage.end_batch()
    assert view.value["scope_count"] == 152 and view.value["scopes"] == sorted(names)[:100] and view.value["scopes"][0] == "Z"


def test_the_scope_stage_writes_each_changed_count_once_per_batch_as_an_absolute_count():
    ledger = Ledger(LedgerConfig(pattern_group_separator="/"), view_batch=10_000)
    processor = ledger.processor
    ledger.feed(*journal())
    emits = processor.contributions()
    assert all(emit.topic == PATTERN_REPARTITION and emit.key == pattern_key(emit.value["group"], emit.value["signature_key"]) for emit in emits)
    assert [(e.value["scope_id"], e.value["signature_key"], e.value["recurred"]) for e in emits] == [
        ("solo", LOCK, 1), ("teamA/svc1", DNS, 2), ("teamA/svc1", LOCK, 1), ("teamA/svc2", LOCK, 2),
        ("teamA/svc3", LOCK, 1), ("teamB/svc1", LOCK, 1), ("teamB/svc2", LOCK, 1),
    ]
    assert processor.contributions() == []
    assert emits[0] == contribution("solo", LOCK, 1, "/")


def test_avoided_and_selected_verdicts_contribute_nothing():
    records = [line for line in journal() if line["value"]["scope_id"] == "solo"]
    failed = records[-1]
    passed = json.loads(json.dumps(failed))
    passed["value"]["status"] = "completed"
    passed["value"]["source_ref"]["source_id"] = "job-pass"
    passed["value"]["journal_position"] = 20
    passed["value"]["checks"] = []
    ledger = Ledger().feed(*records[:-1], passed)
    ledger.flush()
    assert ledger.processor.contributions() == []


def test_a_rolled_back_record_takes_its_count_marks_with_it():
    processor = LedgerProcessor()
    ledger = Ledger()
    ledger.processor = processor
    records = [line for line in journal() if line["value"]["scope_id"] == "solo"]
    ledger.feed(*records[:-1])
    processor.mark()
    ledger.feed(records[-1])
    processor.rolled_back()
    assert processor.contributions() == []


def contributions_of(counts: dict[str, list[int]], key: str = "k") -> list[dict]:
    return [{"group": "", "signature_key": key, "scope_id": scope, "recurred": n} for scope, ns in counts.items() for n in ns]


@settings(max_examples=150, deadline=None)
@given(
    counts=st.dictionaries(st.text("abcé/", min_size=1, max_size=3), st.lists(st.integers(1, 6), min_size=1, max_size=4).map(sorted), max_size=8),
    threshold=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 1),
    batch=st.integers(1, 7),
)
def test_the_final_view_and_the_candidates_do_not_depend_on_arrival_order(counts, threshold, seed, batch):
    """Each scope's counts grow (they are absolute counts of a growing
    number); any interleaving of the scopes' sequences — and any order at
    all, even one that brings a scope's older count last — in any batches
    gives the same final view and the same candidates, byte for byte."""
    records = contributions_of(counts) + contributions_of({scope: ns[:1] for scope, ns in counts.items()}, key="other")

    def outcome(order: list[dict]) -> tuple[dict, list[bytes]]:
        stage = PatternStage(threshold=threshold, validate_outputs=True)
        views: list[dict] = []
        facts: list[bytes] = []
        for index, record in enumerate(order, 1):
            facts += [canonical_json(emit.value) for emit in stage.apply(record)]
            if index % batch == 0:
                views += [emit.value for emit in stage.end_batch()]
        views += [emit.value for emit in stage.end_batch()]
        return final_views(SIGNATURE_PATTERNS, views), sorted(facts)

    shuffled = list(records)
    random.Random(seed).shuffle(shuffled)
    expected = outcome(records)
    assert outcome(shuffled) == expected
    assert outcome(list(reversed(records))) == expected
    finals = expected[0]
    if counts:
        assert finals[("", "k")]["scope_count"] == len(counts)
        assert finals[("", "k")]["recurred"] == sum(ns[-1] for ns in counts.values())
    assert len(expected[1]) == (len(counts) >= threshold) * 2


def test_a_stage_restarted_with_another_threshold_publishes_each_thresholds_candidate_once():
    """The state keeps the thresholds published at (contract §23.4): a stage
    on the same store with threshold 5 after 3 publishes the candidate of
    5 when the count reaches 5; back at 3, nothing more for 3; lowered to 2
    below the count, 2's candidate with the next scope that joins."""
    store: dict = {}

    def add(stage: PatternStage, scope: str) -> list:
        return [emit.value["threshold"] for emit in stage.apply({"group": "g", "signature_key": "k", "scope_id": scope, "recurred": 1})]

    at_3 = PatternStage(store, threshold=3)
    assert [add(at_3, scope) for scope in "abc"] == [[], [], [3]]
    at_5 = PatternStage(store, threshold=5)
    assert [add(at_5, scope) for scope in "de"] == [[], [5]]
    again_3 = PatternStage(store, threshold=3)
    assert add(again_3, "f") == []
    at_2 = PatternStage(store, threshold=2)
    assert add(at_2, "g") == [2] and add(at_2, "h") == []
    assert store[("pattern", "g", "k")]["candidates"] == [3, 5, 2]


def test_a_pattern_kept_before_the_thresholds_were_counts_its_candidate_as_the_current_thresholds():
    store: dict = {("pattern", "g", "k"): {"scope_count": 3, "recurred": 3, "scopes": ["a", "b", "c"], "candidate": True}}
    stage = PatternStage(store, threshold=3)
    assert stage.apply({"group": "g", "signature_key": "k", "scope_id": "d", "recurred": 1}) == []
    assert store[("pattern", "g", "k")] == {"scope_count": 4, "recurred": 4, "scopes": ["a", "b", "c", "d"], "candidates": [3]}


def test_a_scope_without_the_separator_is_in_the_group_of_the_scopes_under_it():
    """Contract §23.1: ``teamA`` and ``teamA/x`` are both in the group
    ``teamA``; ``teamB`` is not; ``/x`` is in the group ``""``."""
    assert [pattern_group(scope, "/") for scope in ("teamA", "teamA/x", "teamA/y/z", "teamB", "/x")] == ["teamA", "teamA", "teamA", "teamB", ""]
