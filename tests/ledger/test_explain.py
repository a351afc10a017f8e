"""explain: every no-verdict reason of contract §7 and §17 (with the items
that decided it), the §5 chain states and the §16 forward references, on
small journals, through the same rule functions as the core."""

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


def explained_row(observations, checks, status="completed"):
    result = explain(linked(outcome(S, 10, "O", status=status, receipt_id="R1", observations=observations, checks=checks)), "O")
    assert result["chain"]["status"] == "linked"
    [row] = result["revisions"]
    assert row["selected"] is True
    return row


def reason_for(observations, checks, status="completed"):
    row = explained_row(observations, checks, status)
    return row["reason"], row["verdict"]


@pytest.mark.parametrize(
    ("observations", "checks", "code", "decided_by", "sentence"),
    [
        ([], [check(SUBJECT, status="passed")], "condition_not_observed", [], "no observation names the condition 'tests started in sandbox'"),
        ([claim(COND, basis="declared")], [check(SUBJECT, status="passed")], "condition_unverified", ["observation[0]"],
         "observation[0] name the condition 'tests started in sandbox' but are only declared or have no exact evidence"),
        ([claim(COND), claim(COND + "!")], [check(SUBJECT, status="passed")], "condition_duplicated", ["observation[0]", "observation[1]"],
         "observation[0], observation[1]: 2 verified observations of the condition (exactly one needed)"),
        ([claim(COND)], [], "check_missing", ["observation[0]"], "no check is the bound check 'ports free before pytest': it did not run"),
        ([claim(COND)], [check(SUBJECT, status="passed", basis="declared")], "check_unverified", ["observation[0]", "check[0]"],
         "check[0]: the bound check 'ports free before pytest' is only declared or has no exact evidence"),
        ([claim(COND)], [check(SUBJECT, status="passed"), check(SUBJECT.upper(), status="passed")], "check_duplicated",
         ["observation[0]", "check[0]", "check[1]"], "check[0], check[1]: 2 verified bound checks (exactly one needed)"),
        ([claim(COND)], [check(SUBJECT, status="skipped")], "check_not_run", ["observation[0]", "check[0]"],
         "the bound check check[0] 'ports free before pytest' is skipped: it did not run"),
        ([claim(COND)], [check("other check", status="passed"), check(SUBJECT, status="cancelled")], "check_not_run",
         ["observation[0]", "check[1]"], "the bound check check[1] 'ports free before pytest' is cancelled: it did not run"),
    ],
    ids=["condition-not-observed", "condition-declared", "two-conditions", "check-missing", "check-declared", "two-checks",
         "check-skipped", "check-cancelled"],
)
def test_each_unknown_reason_with_the_items_that_decided_it(observations, checks, code, decided_by, sentence):
    row = explained_row(observations, checks)
    assert (row["verdict"], row["unknown_reason"], row["decided_by"]) == (None, code, decided_by)
    assert row["reason"] == f"unknown ({code}): {sentence}"


def test_failed_bound_check_is_named_when_it_is_not_a_failure_item_of_this_revision():
    row = explained_row([claim(COND)], [check(SUBJECT, status="failed")], status="failed")
    assert (row["unknown_reason"], row["decided_by"]) == ("check_failed", ["observation[0]", "check[0]"])
    assert row["reason"] == ("unknown (check_failed): the bound check check[0] 'ports free before pytest' failed, "
                             "but no failure item matched this revision: the check and the cue disagree")


def test_an_empty_condition_is_named():
    records = [experience(S, 1, "E1", condition="..."), handoff(S, 2, "H1", [("E1", 1)]), receipt(S, 3, "R1", "H1"),
               outcome(S, 10, "O", status="completed", receipt_id="R1", observations=[claim("...")], checks=[check(SUBJECT, status="passed")])]
    [row] = explain(records, "O")["revisions"]
    assert (row["unknown_reason"], row["decided_by"]) == ("condition_empty", [])
    assert row["reason"].startswith("unknown (condition_empty): the revision's verification.condition normalizes to the empty string")


def test_verdicts_are_read_from_the_ledger():
    assert reason_for([claim(COND)], [check(SUBJECT, status="passed")]) == ("avoided: recorded in the ledger", "avoided")
    assert reason_for([], [check(CUE)], status="failed") == ("recurred: recorded in the ledger", "recurred")
    assert explained_row([], [check(CUE)], status="failed")["unknown_reason"] is None


def test_two_failure_items_on_one_revision_are_multiple_matches():
    result = explain(linked(outcome(S, 10, "O", receipt_id="R1", checks=[check(CUE), check(CUE + ".")])), "O")
    assert [item["match"]["result"] for item in result["failure_items"]] == ["matched", "matched"]
    [row] = result["revisions"]
    assert (row["unknown_reason"], row["decided_by"]) == ("multiple_matches", ["check[0]", "check[1]"])
    assert row["reason"] == ("unknown (multiple_matches): 2 failure items matched this revision (check[0], check[1]); "
                             "one outcome adds at most one recurrence (contract §7)")


def test_an_ambiguous_item_is_named_for_each_of_its_eligible_candidates():
    records = [experience(S, 1, "E1"), experience(S, 2, "E2"), experience(S, 3, "E3", cue="disk full"),
               handoff(S, 4, "H1", [("E1", 1), ("E2", 1), ("E3", 1)]), receipt(S, 5, "R1", "H1"),
               outcome(S, 10, "O", receipt_id="R1", checks=[check("Disk full"), check(CUE)])]
    result = explain(records, "O")
    assert [item["match"]["result"] for item in result["failure_items"]] == ["matched", "ambiguous"]
    rows = {row["artifact_ref"]: row for row in result["revisions"]}
    assert {ref: (row["verdict"], row["unknown_reason"], row["decided_by"]) for ref, row in rows.items()} == {
        "E1 r1": (None, "ambiguous", ["check[1]"]), "E2 r1": (None, "ambiguous", ["check[1]"]), "E3 r1": ("recurred", None, []),
    }
    assert rows["E1 r1"]["reason"] == "unknown (ambiguous): check[1] matched this revision's cue and another candidate's: ambiguous, no match (contract §6)"


def test_forward_references_are_named():
    base = [experience(S, 1, "E1")]
    forward_receipt = explain([*base, handoff(S, 2, "H1", [("E1", 1)]), outcome(S, 3, "O", receipt_id="R1", checks=[check(CUE)]),
                               receipt(S, 4, "R1", "H1")], "O")
    assert forward_receipt["chain"]["status"] == "unlinked"
    assert forward_receipt["chain"]["forward_references"] == [
        {"referring": "task outcome O", "referring_position": 3, "referenced": "receipt R1", "referenced_position": 4}]
    assert forward_receipt["chain"]["reason"] == (
        "forward reference: receipt R1 is at journal position 4, after task outcome O at 3; a reference to a later event "
        "links nothing (contract §16), so the outcome was decided as unlinked at once")
    assert forward_receipt["failure_items"][0]["match"]["candidate_set_mode"] == "scope_heads"

    forward_handoff = explain([*base, receipt(S, 2, "R1", "H1"), outcome(S, 3, "O", receipt_id="R1", checks=[check(CUE)]),
                               handoff(S, 4, "H1", [("E1", 1)])], "O")
    assert forward_handoff["chain"]["status"] == "unlinked"
    assert forward_handoff["chain"]["reason"].startswith("forward reference: Handoff H1 r1 is at journal position 4, after receipt R1 at 2")

    forward_citation = explain([*base, handoff(S, 2, "H1", [("E1", 1), ("E9", 1)]), receipt(S, 3, "R1", "H1"),
                                outcome(S, 4, "O", status="completed", receipt_id="R1"), experience(S, 5, "E9", cue="other cue")], "O")
    assert forward_citation["chain"]["status"] == "linked" and forward_citation["chain"]["cited"] == ["E1 r1"]
    assert forward_citation["chain"]["forward_references"] == [
        {"referring": "Handoff H1 r1", "referring_position": 2, "referenced": "Experience E9 r1", "referenced_position": 5}]
    assert forward_citation["chain"]["reason"] == (
        "receipt R1 resolves to Handoff H1 r1; it cites Experience E9 r1, published later (position 5): "
        "a forward citation, not a member of the cited set (contract §16)")
    assert [row["artifact_ref"] for row in forward_citation["revisions"]] == ["E1 r1"]


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
        "unknown_reason": None, "decided_by": [],
    }]


def test_pending_then_missing_provenance():
    records = [experience(S, 1, "E1"), outcome(S, 10, "O", receipt_id="R-never", status="completed")]
    pending = explain(records, "O", flush=False, config=LedgerConfig(provenance_horizon=None))
    assert pending["chain"]["status"] == "pending"
    assert pending["chain"]["reason"].startswith("pending: receipt R-never was never seen")
    decided = explain([*records[:1], outcome(S, 10, "O", receipt_id="R-never", checks=[check(CUE)])], "O")
    assert decided["chain"]["status"] == "unlinked"
    assert decided["chain"]["reason"].startswith("missing provenance: receipt R-never was never seen")


def test_a_passing_outcome_the_end_of_a_journal_decided_is_unlinked_not_pending():
    """It leaves no match and no observation to tell it by: the journal's
    end decided it all the same (contract §5), as its statistics count."""
    records = [experience(S, 1, "E1"), outcome(S, 10, "O", receipt_id="R-never", status="completed")]
    ledger = Ledger(LedgerConfig(provenance_horizon=None)).feed(*records).flush()
    assert ledger.out["recurrence-matches"] == ledger.out["recurrence-observations"] == []
    events = [(r["topic"], validate(r["topic"], r["value"])) for r in records]
    ended = explain_outcome(S, "O", events, [], [], input_ended=True)
    assert ended["chain"] == {
        "status": "unlinked", "receipt": "R-never", "handoff": None, "cited": [], "forward_references": [],
        "reason": "missing provenance: receipt R-never was never seen; decided as unlinked by the provenance horizon or, at the latest, "
                  "the end of the input",
    }
    assert explain_outcome(S, "O", events, [], [])["chain"]["status"] == "pending"  # on Kafka it waits for the horizon


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
