"""contract §22 (rev. 4): severity in the core — a critical revision goes to
review at the critical review threshold (needs_review, needing_review, a
candidate per run that reaches it), binding_suspect keeps the review
threshold, recurred verdicts are counted by severity, an unknown severity
is invalid_value and the first valid version of the event stands.

Every expected value is worked out from §8 and §22 by hand (review threshold
3, critical review threshold 1: the defaults)."""

from __future__ import annotations

import pytest

from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.ledger.severity import is_critical, severity_review_threshold, severity_of
from recurrence_ledger.ledger.streaks import review_candidate_id
from tests.journal import Ledger, check, claim, experience, handoff, outcome, receipt

S = "severity-unit"
CUE = "cross tenant write"


def fails(*positions: int, cue: str = CUE) -> list[dict]:
    """Unlinked failed outcomes whose verified check names ``cue``."""
    return [outcome(S, position, f"O-{position}", checks=[check(cue)]) for position in positions]


def passes(position: int) -> dict:
    """A linked outcome through H1 (receipt R-<position>) that verifies the
    condition and passes the bound check: avoided for the cited revision."""
    return outcome(S, position, f"O-{position}", "completed", f"R-{position}",
                   checks=[check("ports free before pytest", "passed")], observations=[claim("tests started in sandbox")])


def row(ledger: Ledger, artifact_id: str = "C1") -> dict:
    return [r for r in ledger.out["revision-statistics"] if r["artifact_ref"]["artifact_id"] == artifact_id][-1]


def test_a_critical_revision_needs_review_and_publishes_a_candidate_at_its_first_recurrence():
    ledger = Ledger().feed(experience(S, 1, "C1", cue=CUE, severity="critical"), *fails(10)).flush()
    [candidate] = ledger.out["review-candidates"]
    assert candidate["candidate_id"] == review_candidate_id(S, {"family": "experience", "artifact_id": "C1", "revision": 1}, CUE, None)
    assert candidate["streak"] == 1
    assert candidate["reason"] == f"recurred 1 times in a row with no avoided verdict in between (critical review threshold 1) for signature '{CUE}'"
    assert (row(ledger)["severity"], row(ledger)["needs_review"]) == ("critical", True)
    stats = ledger.stats(S)
    assert stats["needing_review"] == 1
    assert stats["recurred_by_severity"] == {"critical": 1, "high": 0, "medium": 0, "low": 0, "unrated": 0}
    assert stats["top_revisions"][0]["severity"] == "critical"


def test_each_run_of_a_critical_revision_that_reaches_the_threshold_gets_its_candidate():
    journal = [experience(S, 1, "C1", cue=CUE, severity="critical"), handoff(S, 2, "H1", [("C1", 1)]),
               *fails(10), receipt(S, 19, "R-20", "H1"), passes(20), *fails(30, 31)]
    ledger = Ledger().feed(*journal).flush()
    assert [(c["run_start_position"], c["streak"]) for c in ledger.out["review-candidates"]] == [(None, 1), (20, 1)]
    assert row(ledger)["terminal_recurred_streak"] == 2
    assert ledger.stats(S)["recurred_by_severity"]["critical"] == 3


def test_a_critical_recall_policy_revision_needs_review_without_a_candidate():
    ledger = Ledger().feed(experience(S, 1, "P1", cue=CUE, surface="recall_policy", severity="critical"), *fails(10)).flush()
    assert ledger.out["review-candidates"] == []
    assert row(ledger, "P1")["needs_review"] is True
    assert ledger.stats(S)["needing_review"] == 1


def test_other_severities_keep_the_review_threshold_and_are_counted_by_severity():
    journal = [experience(S, 1, "H", cue="alpha", severity="high"), experience(S, 2, "L", cue="beta", severity="low"),
               experience(S, 3, "U", cue="gamma"), *fails(10, 11, cue="alpha"), *fails(12, cue="beta"), *fails(13, cue="gamma")]
    ledger = Ledger().feed(*journal).flush()
    assert ledger.out["review-candidates"] == []
    assert ledger.stats(S)["needing_review"] == 0
    assert ledger.stats(S)["recurred_by_severity"] == {"critical": 0, "high": 2, "medium": 0, "low": 1, "unrated": 1}
    assert [row(ledger, a)["severity"] for a in ("H", "L", "U")] == ["high", "low", None]
    ledger = Ledger().feed(*journal, *fails(14, cue="alpha")).flush()
    assert [c["artifact_ref"]["artifact_id"] for c in ledger.out["review-candidates"]] == ["H"]


def test_the_critical_review_threshold_is_policy():
    ledger = Ledger(LedgerConfig(critical_review_threshold=2)).feed(experience(S, 1, "C1", cue=CUE, severity="critical"), *fails(10)).flush()
    assert ledger.out["review-candidates"] == [] and row(ledger)["needs_review"] is False
    ledger.feed(*fails(11)).flush()
    assert [c["streak"] for c in ledger.out["review-candidates"]] == [2]
    assert "(critical review threshold 2)" in ledger.out["review-candidates"][0]["reason"]


@pytest.mark.parametrize("value", ["Critical", "CRITICAL", "severe", "", " critical"])
def test_an_unknown_severity_is_invalid_value_and_the_first_valid_version_stands(value):
    bad = experience(S, 1, "C1", cue=CUE, severity=value)
    ledger = Ledger().feed(bad, experience(S, 1, "C1", cue=CUE, severity="critical"), *fails(10)).flush()
    assert ledger.reasons() == ["invalid_value"]
    assert "severity" in ledger.out["dead-letter"][0]["message"]
    assert len(ledger.out["review-candidates"]) == 1


def test_a_severity_of_the_wrong_type_is_wrong_type():
    ledger = Ledger().feed(experience(S, 1, "C1", cue=CUE, severity=4)).flush()
    assert ledger.reasons() == ["wrong_type"]


def test_a_revision_sent_again_with_another_severity_is_an_identity_conflict_and_without_one_a_duplicate():
    plain = experience(S, 1, "C1", cue=CUE)
    explicit_null = {**plain, "value": {**plain["value"], "content": {**plain["value"]["content"],
                                                                       "failure": {**plain["value"]["content"]["failure"], "severity": None}}}}
    ledger = Ledger().feed(plain, explicit_null, experience(S, 1, "C1", cue=CUE, severity="critical")).flush()
    assert ledger.reasons() == ["identity_conflict"]


def test_unrated_journals_give_the_facts_they_gave_before_revision_4():
    """No severity: the review threshold decides, as before (facts are
    compared byte for byte with revision 3's in tests/cli)."""
    journal = [experience(S, 1, "U", cue=CUE), *fails(10, 11)]
    ledger = Ledger().feed(*journal).flush()
    assert ledger.out["review-candidates"] == [] and ledger.stats(S)["recurred_by_severity"]["unrated"] == 2


def test_binding_suspect_keeps_the_review_threshold_for_a_critical_revision():
    journal = [experience(S, 1, "C1", cue=CUE, severity="critical"), handoff(S, 2, "H1", [("C1", 1)])]
    for n, position in enumerate((10, 12, 14)):
        journal += [receipt(S, position, f"R-{position + 1}", "H1"),
                    outcome(S, position + 1, f"O-{position + 1}", "completed", f"R-{position + 1}",
                            observations=[claim("tests started in sandbox")])]  # check_missing
    ledger = Ledger().feed(*journal[:4]).flush()
    assert row(ledger)["binding_suspect"] is False  # one suspect unknown: below the review threshold 3 (not the critical 1)
    ledger = Ledger().feed(*journal).flush()
    assert row(ledger)["binding_suspect"] is True


def test_a_critical_fix_revision_fails_its_repair_at_the_critical_threshold():
    cue = "port already bound"
    scope = "review-unit"
    journal = [experience(scope, 1, "E1", cue=cue), *[outcome(scope, p, f"O{p}", checks=[check(cue)]) for p in (10, 11, 12)]]
    candidate = review_candidate_id(scope, {"family": "experience", "artifact_id": "E1", "revision": 1}, cue, None)
    approve = {"topic": "review-decisions", "value": {
        "scope_id": scope, "decision_id": "D1", "candidate_id": candidate, "journal_position": 20, "decision": "approved",
        "reason": None, "reviewer": "r", "decided_at": "2025-03-01T09:00:00Z",
        "fix_revision": {"family": "experience", "artifact_id": "E1", "revision": 2}}}
    journal += [approve, experience(scope, 21, "E1", 2, cue=cue, severity="critical"), outcome(scope, 30, "O30", checks=[check(cue)])]
    ledger = Ledger().feed(*journal).flush()
    [status] = [r for r in ledger.out["review-status"] if r["candidate_id"] == candidate][-1:]
    assert status["repair"]["status"] == "failed"
    assert ledger.stats(scope)["repairs"]["failed"] == 1


def test_is_critical_reads_every_form_of_a_revision():
    event = experience(S, 1, "C1", severity="critical")["value"]
    assert is_critical(event) and is_critical(event["content"]["failure"]) and is_critical({"failure": {"severity": "critical"}})
    assert not is_critical(experience(S, 1, "C1")["value"]) and not is_critical(None)
    assert not is_critical(experience(S, 1, "C1", failure=False)["value"])
    assert severity_of({"severity": "low"}) == "low"
    assert [severity_review_threshold(s, 3, 1) for s in ("critical", "high", None)] == [1, 3, 3]


def test_a_critical_revision_beside_changes_no_candidate_of_an_unrated_one():
    base = [experience(S, 1, "U", cue="other"), *fails(10, 11, 12, cue="other")]
    alone = Ledger().feed(*base).flush()
    beside = Ledger().feed(experience(S, 0, "C1", cue=CUE, severity="critical"), *base).flush()
    assert beside.out["review-candidates"] == alone.out["review-candidates"]
    assert [c["streak"] for c in alone.out["review-candidates"]] == [3]


def _candidate(severity=None) -> dict:
    failure = {"signature": {"recall_cue": CUE, "symptom": None}, "repair_surface": "experience_content",
               "verification": {"condition": "tenant pinned", "check_subject": "tenant check"}}
    if severity is not None:
        failure["severity"] = severity
    return {"topic": "experience-candidates", "value": {
        "candidate_id": "K1", "scope_id": S, "journal_position": 20, "artifact_id": None,
        "content": {"situation": "s", "action": "a", "outcome": "o", "lesson": "l", "failure": failure}, "cited_sources": []}}


def test_an_admission_candidate_takes_a_severity_and_refuses_an_unknown_one():
    ledger = Ledger().feed(experience(S, 1, "C1", cue=CUE), _candidate("Critical"), _candidate("critical"), _candidate(None)).flush()
    # the unknown value is bad input; the valid one is decided; the same candidate without it is another content
    assert ledger.reasons() == ["invalid_value", "identity_conflict"]
    assert [d["candidate_id"] for d in ledger.out["admission-decisions"]] == ["K1"]
