"""contract §9 and §3 immutability: bad records go to dead-letter with a
distinct reason code, and the valid records around them are unaffected."""

from __future__ import annotations

import base64
import json

import pytest

from tests.journal import Ledger, check, experience, mutated, outcome

S = "scope"
CUE = "port already bound"


def valid_outcome(position=2, source_id="O1"):
    return outcome(S, position, source_id, checks=[check(CUE)])


BAD_LINES = {
    "malformed_json": b'{"topic": "task-outcomes", "value": {',
    "invalid_envelope": b'["task-outcomes", {}]',
    "unknown_topic": json.dumps({"topic": "task-outcome", "value": {}}).encode(),
    "missing_field": json.dumps(mutated(valid_outcome(), ["value", "status"], delete=True)).encode(),
    "wrong_type": json.dumps(mutated(valid_outcome(), ["value", "journal_position"], "7")).encode(),
    "unexpected_field": json.dumps(mutated(valid_outcome(), ["value", "extra"], 1)).encode(),
    "invalid_value": json.dumps(mutated(valid_outcome(), ["value", "status"], "exploded")).encode(),
    "too_long": json.dumps(mutated(valid_outcome(), ["value", "checks"], [check(CUE)] * 300)).encode(),
}


@pytest.mark.parametrize("reason", sorted(BAD_LINES))
def test_bad_record_goes_to_dead_letter_and_processing_continues(reason):
    raw = BAD_LINES[reason]
    ledger = Ledger().feed(experience(S, 1, "E1"), raw, valid_outcome())
    assert ledger.reasons() == [reason]
    [dead] = ledger.out["dead-letter"]
    assert base64.b64decode(dead["raw"]) == raw
    assert (dead["topic"], dead["partition"], dead["offset"]) == ("source-journal", None, 1)
    assert dead["message"]
    assert ledger.observations() == ["recurred E1r1 O1"]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"topic": "task-outcomes", "value": NaN}',
        b'{"topic": "task-outcomes", "topic": "x", "value": {}}',
        b"\xff\xfe not utf-8",
        b"[" * 100_000 + b"]" * 100_000,
        b"",
    ],
    ids=["nan", "repeated-key", "not-utf8", "deep-nesting", "empty"],
)
def test_hostile_json_is_malformed_json(raw):
    assert Ledger().feed(raw).reasons() == ["malformed_json"]


def test_negative_position_bool_and_float_are_rejected():
    ledger = Ledger().feed(
        mutated(valid_outcome(), ["value", "journal_position"], -1),
        mutated(valid_outcome(), ["value", "journal_position"], True),
        mutated(valid_outcome(), ["value", "journal_position"], 2.0),
        mutated(valid_outcome(), ["value", "journal_position"], 2**64),
    )
    assert ledger.reasons() == ["invalid_value", "wrong_type", "wrong_type", "invalid_value"]


def test_lone_surrogate_has_no_canonical_form_and_is_rejected():
    raw = json.dumps(outcome(S, 2, "O1", checks=[check("port \ud800 bound")])).encode()
    assert b"\\ud800" in raw
    ledger = Ledger().feed(experience(S, 1, "E1"), raw, valid_outcome(3, "O2"))
    assert ledger.reasons() == ["invalid_value"]
    assert ledger.observations() == ["recurred E1r1 O2"]


def test_control_characters_in_ids_are_rejected():
    assert Ledger().feed(mutated(valid_outcome(), ["value", "scope_id"], "a\x1fb")).reasons() == ["invalid_value"]


def test_wrong_families_and_source_types_are_rejected():
    ledger = Ledger().feed(
        mutated(experience(S, 1, "E1"), ["value", "artifact_ref", "family"], "handoff"),
        mutated(valid_outcome(), ["value", "source_ref", "source_type"], "handoff_receipt"),
    )
    assert ledger.reasons() == ["invalid_value", "invalid_value"]


def test_more_than_64_citations_is_too_long():
    from tests.journal import handoff

    ledger = Ledger().feed(handoff(S, 1, "H1", [(f"E{i}", 1) for i in range(65)]))
    assert ledger.reasons() == ["too_long"]


def test_duplicate_identity_with_identical_content_changes_nothing():
    ledger = Ledger().feed(experience(S, 1, "E1"), valid_outcome())
    before = {topic: list(values) for topic, values in ledger.out.items()}
    ledger.feed(experience(S, 1, "E1"), valid_outcome())
    assert {topic: list(values) for topic, values in ledger.out.items()} == before


def test_duplicate_identity_with_different_content_is_a_conflict_and_the_first_stands():
    ledger = Ledger().feed(experience(S, 1, "E1"), valid_outcome())
    ledger.feed(outcome(S, 2, "O1", status="completed"), experience(S, 1, "E1", cue="rewritten cue"))
    assert ledger.reasons() == ["identity_conflict", "identity_conflict"]
    ledger.feed(outcome(S, 3, "O2", checks=[check(CUE)]))  # the first E1 still matches
    assert ledger.observations() == ["recurred E1r1 O1", "recurred E1r1 O2"]


def test_second_source_at_a_used_position_is_a_position_conflict():
    ledger = Ledger().feed(experience(S, 1, "E1"), outcome(S, 1, "O1", checks=[check(CUE)]), valid_outcome(2, "O2"))
    assert ledger.reasons() == ["position_conflict"]
    assert ledger.observations() == ["recurred E1r1 O2"]


def test_same_position_in_another_scope_is_fine():
    ledger = Ledger().feed(experience(S, 1, "E1"), experience("other", 1, "E1"))
    assert ledger.reasons() == []
