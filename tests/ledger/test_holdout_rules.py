"""contract §21: withheld lessons in the core beyond the fixture cases —
the verified assignment and its mismatches (§21.5), a critical revision
never withheld, the input's bounds (§21.1), and a Handoff written before
revision 4 staying the same event."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from recurrence_ledger.holdout import assign
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.intake import BadRecord, validate
from recurrence_ledger.ledger.severity import is_critical
from recurrence_ledger.ledger.withheld import assignment, identity_value
from tests.conftest import case
from tests.journal import Ledger

SALT, RATE = "salt-1", Fraction(1, 2)
CUE, COND, SUBJ = "Cache stampede on deploy", "Enabled request coalescing", "Cache hit ratio above floor"


def xref(artifact_id: str, revision: int = 1) -> dict:
    return {"family": "experience", "artifact_id": artifact_id, "revision": revision}


def href(artifact_id: str, revision: int = 1) -> dict:
    return {"family": "handoff", "artifact_id": artifact_id, "revision": revision}


def journal() -> list[dict]:
    """E7 cited by H3 and H1, withheld by H1 and H3 (per Handoff, one arm
    each); under salt-1 at 1/2, H1/E7 is assigned withheld and H3/E7 treated."""
    scope = "s1"
    lines = [{"topic": "experience-revisions", "value": {
        "scope_id": scope, "journal_position": 1, "artifact_ref": xref("E7"),
        "content": {"situation": "s", "action": "a", "outcome": "o", "lesson": "l", "failure": {
            "signature": {"recall_cue": CUE, "symptom": None}, "repair_surface": "working_state",
            "verification": {"condition": COND, "check_subject": SUBJ}}}}}]
    position = 2
    arms = {("H1", 1): "withheld", ("H1", 2): "cited", ("H3", 1): "withheld", ("H3", 2): "cited"}
    for (handoff, revision), arm in arms.items():
        lines.append({"topic": "handoff-revisions", "value": {
            "scope_id": scope, "journal_position": position, "artifact_ref": href(handoff, revision),
            "artifact_citations": [{"artifact_ref": xref("E7")}] if arm == "cited" else [], "memory_citations": [],
            "withheld_citations": [{"artifact_ref": xref("E7")}] if arm == "withheld" else []}})
        receipt = f"R-{handoff}-{revision}"
        lines.append({"topic": "handoff-receipts", "value": {
            "scope_id": scope, "journal_position": position + 1, "source_ref": {"source_type": "handoff_receipt", "source_id": receipt},
            "status": "accepted", "selection": "exact", "selected_revision": href(handoff, revision),
            "current_revision": href(handoff, revision), "evidence_status": "available"}})
        lines.append({"topic": "task-outcomes", "value": {
            "scope_id": scope, "journal_position": position + 2, "source_ref": {"source_type": "task_outcome", "source_id": f"O-{handoff}-{revision}"},
            "status": "failed", "handoff_receipt_ref": {"source_type": "handoff_receipt", "source_id": receipt}, "observations": [],
            "checks": [{"name": CUE, "status": "failed", "basis": "verified", "evidence": [{"kind": "exact", "ref": "ci:1"}], "details": None}]}})
        position += 3
    return lines


def test_the_assignment_of_this_journal():
    assert assign(SALT, RATE, "s1", "H1", "E7") is True
    assert assign(SALT, RATE, "s1", "H3", "E7") is False


def test_without_the_policy_every_pair_is_unverified_and_counts():
    out = Ledger().feed(*journal()).flush().out
    assert sorted((h["handoff_ref"]["artifact_id"], h["assignment"], h["verdict"]) for h in out["holdout-observations"]) == [
        ("H1", "unverified", "recurred"), ("H3", "unverified", "recurred")]
    effect = out["revision-statistics"][-1]["effect"]
    assert effect["treated"] == {"resolved": 2, "recurred": 2}
    assert effect["withheld"] == {"withheld": 2, "resolved": 2, "recurred": 2}
    assert effect["assignment_mismatches"] == 0


def test_mismatched_pairs_are_counted_and_left_out_of_both_arms():
    config = LedgerConfig(holdout_salt=SALT, holdout_rate=RATE)
    out = Ledger(config).feed(*journal()).flush().out
    assert sorted((h["handoff_ref"]["artifact_id"], h["assignment"]) for h in out["holdout-observations"]) == [("H1", "verified"), ("H3", "mismatch")]
    effect = out["revision-statistics"][-1]["effect"]
    # treated: H3 (verified) counts, H1 (assigned withheld, cited: mismatch) does not; withheld: H1 counts, H3 does not
    assert effect["treated"] == {"resolved": 1, "recurred": 1}
    assert effect["withheld"] == {"withheld": 2, "resolved": 1, "recurred": 1}
    assert effect["assignment_mismatches"] == 2
    assert effect["verdict"] == "insufficient" and effect["probability_helps"] == 0.5
    # the selected observations and verdicts stay as §5–§7 decide them
    plain = Ledger().feed(*journal()).flush().out
    assert out["recurrence-observations"] == plain["recurrence-observations"]
    assert out["recurrence-matches"] == plain["recurrence-matches"]


def test_a_critical_revision_is_assigned_to_the_treated_arm():
    config = LedgerConfig(holdout_salt=SALT, holdout_rate=RATE)
    failure = {"signature_key": "x"}
    assert not is_critical(failure)
    assert assignment(config, "s1", href("H1"), xref("E7"), failure, withheld=True) == "verified"
    critical = {**failure, "severity": "critical"}
    assert is_critical(critical)
    assert assignment(config, "s1", href("H1"), xref("E7"), critical, withheld=True) == "mismatch"
    assert assignment(config, "s1", href("H1"), xref("E7"), critical, withheld=False) == "verified"
    assert assignment(LedgerConfig(), "s1", href("H1"), xref("E7"), critical, withheld=True) == "unverified"


def handoff(**extra) -> dict:
    return {"scope_id": "s1", "journal_position": 2, "artifact_ref": href("H1"), "artifact_citations": [], "memory_citations": [], **extra}


@pytest.mark.parametrize(
    "entries",
    [
        [{"artifact_ref": xref(f"E{i}")} for i in range(65)],
        [{"artifact_ref": {"family": "experience", "artifact_id": "E1"}}],
        [xref("E1")],
        ["E1"],
        [{"artifact_ref": {"family": "lesson", "artifact_id": "E1", "revision": 1}}],
        {"artifact_ref": xref("E1")},
    ],
    ids=["65-entries", "no-revision", "bare-ref", "a-string", "unknown-family", "not-a-list"],
)
def test_a_bad_withheld_entry_is_invalid_value(entries):
    with pytest.raises(BadRecord) as error:
        validate("handoff-revisions", handoff(withheld_citations=entries))
    assert error.value.reason == "invalid_value"


def test_64_entries_and_a_handoff_entry_are_valid():
    entries = [{"artifact_ref": xref(f"E{i}")} for i in range(63)] + [{"artifact_ref": href("H0")}]
    assert len(validate("handoff-revisions", handoff(withheld_citations=entries))["withheld_citations"]) == 64


def test_a_handoff_without_withheld_entries_is_the_event_it_was_before_revision_4():
    old = handoff()
    new = validate("handoff-revisions", old)
    assert new["withheld_citations"] == []
    assert identity_value(new) == old
    # a journal of revision 3 replayed into its own state: every Handoff is a duplicate
    path, _ = case("worked_example")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ledger = Ledger().feed(*lines).flush()
    before = {topic: list(values) for topic, values in ledger.out.items()}
    ledger.feed(*lines).flush()
    assert {topic: values for topic, values in ledger.out.items() if topic not in ("recurrence-statistics", "revision-statistics")} == {
        topic: values for topic, values in before.items() if topic not in ("recurrence-statistics", "revision-statistics")}


def test_a_withheld_entry_never_published_makes_the_outcome_wait_until_the_horizon():
    path, _ = case("holdout_waiting")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ledger = Ledger().feed(*lines[:-1])
    assert ledger.out["recurrence-statistics"][-1]["pending_outcomes"] == 1
    assert ledger.out["recurrence-observations"] == [] and ledger.out["holdout-observations"] == []
    ledger.feed(lines[-1])  # position 10,010: the horizon (10,000 positions) has passed
    last = ledger.out["recurrence-statistics"][-1]
    assert (last["pending_outcomes"], last["selected"], last["withheld"]) == (0, 0, 0)
    assert [match["candidate_set_mode"] for match in ledger.out["recurrence-matches"]] == []
