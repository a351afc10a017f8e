"""contract §24 (rev. 4): review reasons and the promotion rate — a rejected
decision may carry a reason_code, counted in ``reviews.rejected_by_reason``
(``unspecified`` without one, summing to ``rejected``); a code with an
approved decision, or an unknown code, is invalid_value and the first valid
version stands; ``promotion_rate`` = approved / (approved + rejected), null
without decisions. Worked out by hand (review threshold 3)."""

from __future__ import annotations

import pytest

from recurrence_ledger.ledger.severity import REASON_BUCKETS, promotion_rate, rejected_by_reason
from recurrence_ledger.ledger.streaks import review_candidate_id
from tests.journal import Ledger, check, experience, outcome

S = "reasons-unit"
ARTIFACTS = ("A", "B", "C", "D")


def candidate(artifact_id: str) -> str:
    return review_candidate_id(S, {"family": "experience", "artifact_id": artifact_id, "revision": 1}, f"{artifact_id.lower()} fails", None)


def four_candidates() -> list[dict]:
    """A–D r1, each recurring three times: four open candidates."""
    journal = [experience(S, n, a, cue=f"{a} fails") for n, a in enumerate(ARTIFACTS, start=1)]
    for n, artifact_id in enumerate(ARTIFACTS):
        journal += [outcome(S, 10 + 3 * n + k, f"O-{artifact_id}-{k}", checks=[check(f"{artifact_id} fails")]) for k in range(3)]
    return journal


def decide(artifact_id: str, verdict: str, decision_id: str | None = None, **fields) -> dict:
    value = {"scope_id": S, "decision_id": decision_id or f"D-{artifact_id}", "candidate_id": candidate(artifact_id),
             "journal_position": 40, "decision": verdict, "reason": "see notes" if verdict == "rejected" else None,
             "reviewer": "rev-1", "decided_at": "2026-12-02T06:00:00Z", "fix_revision": None}
    return {"topic": "review-decisions", "value": {**value, **fields}}


def test_rejections_are_counted_by_reason_code_and_the_promotion_rate_is_exact():
    ledger = Ledger().feed(
        *four_candidates(),
        decide("A", "rejected", reason_code="false_cause"),
        decide("B", "rejected", reason_code="other"),
        decide("C", "rejected"),
        decide("D", "approved"),
    ).flush()
    reviews = ledger.stats(S)["reviews"]
    assert (reviews["approved"], reviews["rejected"], reviews["open"]) == (1, 3, 0)
    assert reviews["rejected_by_reason"] == {**dict.fromkeys(REASON_BUCKETS, 0), "false_cause": 1, "other": 1, "unspecified": 1}
    assert reviews["promotion_rate"] == 0.25


def test_without_decisions_the_promotion_rate_is_null():
    reviews = Ledger().feed(*four_candidates()).flush().stats(S)["reviews"]
    assert reviews["promotion_rate"] is None and reviews["open"] == 4
    assert reviews["rejected_by_reason"] == dict.fromkeys(REASON_BUCKETS, 0)


def test_a_reason_code_with_an_approved_decision_is_invalid_value_and_the_first_valid_version_stands():
    ledger = Ledger().feed(*four_candidates(), decide("A", "approved", reason_code="duplicate"),
                           decide("A", "rejected", reason_code="duplicate")).flush()
    assert ledger.reasons() == ["invalid_value"]
    assert "reason_code" in ledger.out["dead-letter"][0]["message"]
    reviews = ledger.stats(S)["reviews"]
    assert (reviews["rejected"], reviews["rejected_by_reason"]["duplicate"], reviews["promotion_rate"]) == (1, 1, 0.0)


@pytest.mark.parametrize("code", ["False_Cause", "wrong", "", "unspecified"])
def test_an_unknown_reason_code_is_invalid_value(code):
    ledger = Ledger().feed(*four_candidates(), decide("A", "rejected", reason_code=code)).flush()
    assert ledger.reasons() == ["invalid_value"]
    assert ledger.stats(S)["reviews"]["rejected"] == 0


def test_the_same_decision_with_another_code_is_an_identity_conflict_and_without_one_a_duplicate():
    plain = decide("A", "rejected")
    explicit = decide("A", "rejected", reason_code=None)
    ledger = Ledger().feed(*four_candidates(), plain, explicit, decide("A", "rejected", reason_code="weak_evidence")).flush()
    assert ledger.reasons() == ["identity_conflict"]
    assert ledger.stats(S)["reviews"]["rejected_by_reason"]["unspecified"] == 1


def test_a_decision_that_waited_for_its_candidate_counts_its_code_when_applied():
    journal = four_candidates()
    ledger = Ledger().feed(*journal[:-1], {**decide("D", "rejected", reason_code="not_reproducible"),
                                           }).feed(journal[-1]).flush()
    reviews = ledger.stats(S)["reviews"]
    assert reviews["rejected_by_reason"]["not_reproducible"] == 1 and reviews["rejected"] == 1


def test_the_figures_sum_from_the_stored_counts():
    assert rejected_by_reason(3, {"broad_scope": 2}) == {**dict.fromkeys(REASON_BUCKETS, 0), "broad_scope": 2, "unspecified": 1}
    assert rejected_by_reason(2, None)["unspecified"] == 2  # a scope recorded before revision 4
    assert [promotion_rate(a, r) for a, r in ((0, 0), (2, 1), (1, 2), (1, 7))] == [None, 0.6667, 0.3333, 0.125]
