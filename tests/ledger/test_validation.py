"""The validation matrix (contract §13) rejects every record that breaks it, both in the
core's plain-dict check and in the pydantic models."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from recurrence_ledger.ledger.validation import LedgerInvariantError, check_record
from recurrence_ledger.ledger.records import RecurrenceMatch, RecurrenceObservation
from tests.journal import Ledger, check, claim, experience, handoff, outcome, receipt

S = "scope"


@pytest.fixture(scope="module")
def records():
    ledger = Ledger().feed(
        experience(S, 1, "E1", cue="port bound", condition="tests started", subject="ports free"),
        handoff(S, 2, "H1", [("E1", 1)]),
        receipt(S, 3, "R1", "H1"),
        outcome(S, 4, "O-rec", receipt_id="R1", checks=[check("port bound")]),
        outcome(S, 5, "O-avoid", status="completed", receipt_id="R1",
                observations=[claim("tests started")], checks=[check("ports free", status="passed")]),
    )
    by_event = {o["event"]: o for o in ledger.out["recurrence-observations"]}
    return ledger.out["recurrence-matches"][0], by_event


def broken(record, **changes):
    record = copy.deepcopy(record)
    record.update(changes)
    return record


def assert_rejected(kind, model, record):
    with pytest.raises(LedgerInvariantError):
        check_record(kind, record)
    with pytest.raises(ValidationError):
        model.model_validate(record)


def test_valid_records_pass(records):
    match, by_event = records
    assert set(by_event) == {"selected", "recurred", "avoided"}
    check_record("match", match)
    RecurrenceMatch.model_validate(match)
    for record in by_event.values():
        check_record("observation", record)
        RecurrenceObservation.model_validate(record)


@pytest.mark.parametrize(
    "changes",
    [
        {"result": "unmatched"},  # target present
        {"artifact_ref": None},  # matched without target
        {"candidate_refs": []},  # target outside the frozen set
        {"task_outcome_ref": {"source_type": "task_outcome", "source_id": "other"}},
        {"candidate_refs": None},  # a handoff_citations set is never stored by reference
        {"candidate_set_mode": "handoff_citations", "candidate_refs": None},
    ],
)
def test_broken_matches_are_rejected(records, changes):
    assert_rejected("match", RecurrenceMatch, broken(records[0], **changes))


def test_a_scope_heads_match_refers_to_its_set_by_digest_and_may_still_carry_it_inline():
    """contract §6, §13 (rev. 2): candidate_refs null only with scope_heads
    and a candidate_set_digest; a scope_heads match written before rev. 2
    (refs inline) stays valid."""
    ledger = Ledger().feed(experience(S, 1, "E1", cue="port bound"), outcome(S, 2, "O-unlinked", checks=[check("port bound")]))
    [match] = ledger.out["recurrence-matches"]
    assert (match["candidate_set_mode"], match["candidate_refs"], match["result"]) == ("scope_heads", None, "matched")
    check_record("match", match)
    RecurrenceMatch.model_validate(match)
    inline = broken(match, candidate_refs=ledger.candidate_refs(match))
    check_record("match", inline)
    RecurrenceMatch.model_validate(inline)
    assert_rejected("match", RecurrenceMatch, broken(match, candidate_set_mode="handoff_citations"))
    with pytest.raises(LedgerInvariantError):
        check_record("match", broken(match, candidate_set_digest=""))
    with pytest.raises(ValidationError):
        RecurrenceMatch.model_validate(broken(match, candidate_set_digest=None))


def test_unsorted_candidates_are_rejected_by_the_model(records):
    match = broken(records[0])
    match["candidate_refs"] = [{"family": "experience", "artifact_id": "Z", "revision": 1}, *match["candidate_refs"]]
    with pytest.raises(ValidationError):
        RecurrenceMatch.model_validate(match)


@pytest.mark.parametrize(
    ("event", "changes"),
    [
        ("selected", {"failure_ref": "recurred"}),
        ("selected", {"handoff_ref": None}),
        ("recurred", {"recurrence_match_digest": None}),
        ("recurred", {"condition_ref": "avoided"}),
        ("avoided", {"check_ref": None}),
        ("avoided", {"failure_ref": "recurred"}),
        ("avoided", {"handoff_receipt_ref": None, "handoff_ref": None}),
        ("avoided", {"condition_ref": "check_ref"}),  # wrong item kind
        ("recurred", {"artifact_ref": {"family": "handoff", "artifact_id": "H1", "revision": 1}}),
    ],
)
def test_broken_observations_are_rejected(records, event, changes):
    _, by_event = records
    resolved = {}
    for name, value in changes.items():
        if value == "recurred":
            value = by_event["recurred"][name]
        elif value == "avoided":
            value = by_event["avoided"]["condition_ref"]
        elif value == "check_ref":
            value = by_event["avoided"]["check_ref"]
        resolved[name] = value
    assert_rejected("observation", RecurrenceObservation, broken(by_event[event], **resolved))
