"""explain: every no-verdict reason of contract §7 (and the §5 chain
states) on small journals, through the same rule functions as the core."""

from __future__ import annotations

import pytest

from recurrence_ledger.ledger.explain import OutcomeNotFound, explain_outcome
from recurrence_ledger.ledger.intake import validate
from recurrence_ledger.ledger.processor import LedgerConfig
from tests.journal import Ledger, check, claim, experience, handoff, outcome, receipt

S = "scope"
CUE = "port already bound"
COND, SUBJECT = "tests started in sandbox", "ports free before pytest"


def explain(records, outcome_id, flush=True, config=None):
    ledger = Ledger(config).feed(*records)
    if flush:
        ledger.flush()
    events = [(r["topic"], validate(r["topic"], r["value"])) for r in records]
    return explain_outcome(S, outcome_id, events, ledger.out["recurrence-matches"], ledger.out["recurrence-observations"],
                           ledger.out["candidate-sets"])


def linked(*outcomes):
    return [experience(S, 1, "E1"), handoff(S, 2, "H1", [("E1", 1)]), receipt(S, 3, "R1", "H1"), *outcomes]


def reason_for(observations, checks, status="completed"):
    result = explain(linked(outcome(S, 10, "O", status=status, receipt_id="R1", observations=observations, checks=checks)), "O")
    assert result["chain"]["status"] == "linked"
    [row] = result["revisions"]
    assert row["selected"] is True
    return row["reason"], row["verdict"]


@pytest.mark.parametrize(
    ("observations", "checks", "expected"),
    [
        ([], [check(SUBJECT, status="passed")], "unknown: no verified observation of the condition"),
        ([claim(COND, basis="declared")], [check(SUBJECT, status="passed")], "unknown: the condition is only declared or has no exact evidence"),
        ([claim(COND), claim(COND + "!")], [check(SUBJECT, status="passed")], "unknown: 2 verified observations of the condition (exactly one needed)"),
        ([claim(COND)], [], "unknown: the bound check did not run"),
        ([claim(COND)], [check(SUBJECT, status="passed", basis="declared")], "unknown: the bound check is only declared or has no exact evidence"),
        ([claim(COND)], [check(SUBJECT, status="passed"), check(SUBJECT.upper(), status="passed")], "unknown: 2 verified bound checks (exactly one needed)"),
        ([claim(COND)], [check(SUBJECT, status="skipped")], "unknown: the bound check skipped"),
    ],
    ids=["no-condition", "condition-declared", "two-conditions", "check-did-not-run", "check-declared", "two-checks", "check-skipped"],
)
def test_each_unknown_reason(observations, checks, expected):
    assert reason_for(observations, checks) == (expected, None)


def test_failed_bound_check_is_named_when_it_is_not_a_failure_item_of_this_revision():
    assert reason_for([claim(COND)], [check(SUBJECT, status="failed")], status="failed") == ("unknown: the bound check failed", None)


def test_verdicts_are_read_from_the_ledger():
    assert reason_for([claim(COND)], [check(SUBJECT, status="passed")]) == ("avoided: recorded in the ledger", "avoided")
    assert reason_for([], [check(CUE)], status="failed") == ("recurred: recorded in the ledger", "recurred")


def test_two_failure_items_on_one_revision_is_an_ambiguous_verdict():
    result = explain(linked(outcome(S, 10, "O", receipt_id="R1", checks=[check(CUE), check(CUE + ".")])), "O")
    assert [item["match"]["result"] for item in result["failure_items"]] == ["matched", "matched"]
    assert result["revisions"][0]["reason"] == "no verdict: 2 failure items matched this revision (ambiguous verdict)"


def test_receipt_that_does_not_resolve():
    result = explain(
        [experience(S, 1, "E1"), handoff(S, 2, "H1", [("E1", 1)]), receipt(S, 3, "R1", "H1", status="rejected"),
         outcome(S, 10, "O", receipt_id="R1", checks=[check(CUE)])],
        "O",
    )
    assert result["chain"]["status"] == "unlinked"
    assert result["chain"]["reason"].startswith("receipt R1 does not resolve (status=rejected")
    assert result["failure_items"][0]["match"]["candidate_set_mode"] == "scope_heads"
    assert result["failure_items"][0]["match"]["candidates"] == ["E1 r1"]  # resolved through candidate-sets
    assert result["revisions"] == [{
        "artifact_ref": "E1 r1", "signature_key": CUE, "repair_surface": "experience_content",
        "selected": False, "verdict": "recurred", "reason": "recurred: recorded in the ledger",
    }]


def test_pending_then_missing_provenance():
    records = [experience(S, 1, "E1"), outcome(S, 10, "O", receipt_id="R-never", status="completed")]
    pending = explain(records, "O", flush=False, config=LedgerConfig(provenance_horizon=None))
    assert pending["chain"]["status"] == "pending"
    assert pending["chain"]["reason"].startswith("pending: receipt R-never was never seen")
    decided = explain([*records[:1], outcome(S, 10, "O", receipt_id="R-never", checks=[check(CUE)])], "O")
    assert decided["chain"]["status"] == "unlinked"
    assert decided["chain"]["reason"].startswith("missing provenance: receipt R-never was never seen")


def test_no_receipt_and_unknown_outcome():
    result = explain([experience(S, 1, "E1"), outcome(S, 2, "O", status="completed")], "O")
    assert (result["chain"]["reason"], result["revisions"]) == ("the outcome names no Handoff Receipt", [])
    with pytest.raises(OutcomeNotFound):
        explain([experience(S, 1, "E1")], "nope")


def test_a_scope_heads_set_missing_from_candidate_sets_is_reported_as_unknown():
    records = [experience(S, 1, "E1"), outcome(S, 2, "O", checks=[check(CUE)])]
    ledger = Ledger().feed(*records).flush()
    events = [(r["topic"], validate(r["topic"], r["value"])) for r in records]
    result = explain_outcome(S, "O", events, ledger.out["recurrence-matches"], ledger.out["recurrence-observations"])
    [item] = result["failure_items"]
    assert item["match"]["candidates"] is None
    assert item["match"]["candidate_set_digest"] == ledger.out["candidate-sets"][0]["candidate_set_digest"]
