"""contract §18: review decisions in the core — each bad input gets its
dead-letter reason and leaves every other decision as it was, a decision
changes no ledger fact, and the review-status rows follow the rules of
§18 (status, fix_revision, repair) as the fix revision's figures change.

The journals are small and written here; every expected value is worked
out from §18 by hand (threshold 3, the default)."""

from __future__ import annotations

import base64
import json

import pytest

from recurrence_ledger.catalogue import LEDGER_TOPICS
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.ledger.reviews import repair_state, review_status_key
from recurrence_ledger.ledger.severity import REASON_BUCKETS
from recurrence_ledger.ledger.streaks import review_candidate_id
from tests.journal import Ledger, check, claim, experience, handoff, line, outcome, receipt

S = "review-unit"
CUE = "port already bound"
#: E1 r1's first run, as §8 names it.
CANDIDATE = review_candidate_id(S, {"family": "experience", "artifact_id": "E1", "revision": 1}, CUE, None)
NO_CANDIDATE = "sha256:" + "f" * 64


def recurrences(*positions: int, artifact_id: str = "E1") -> list[dict]:
    """Unlinked failed outcomes whose verified check names E1's cue."""
    return [outcome(S, position, f"O{artifact_id}-{position}", checks=[check(CUE if artifact_id == "E1" else f"{artifact_id} failed")])
            for position in positions]


def with_candidate() -> list[dict]:
    """E1 r1 (position 1) and three recurrences (10, 11, 12): its first run
    reaches the threshold at position 12 and publishes CANDIDATE."""
    return [experience(S, 1, "E1", cue=CUE), *recurrences(10, 11, 12)]


def decision(position: int, decision_id: str = "D1", verdict: str = "approved", candidate: str = CANDIDATE, reason: str | None = None,
             fix: int | None = None, fix_artifact: str = "E1", **fields) -> dict:
    value = {"scope_id": S, "decision_id": decision_id, "candidate_id": candidate, "journal_position": position, "decision": verdict,
             "reason": reason if reason is not None or verdict == "approved" else "does not help", "reviewer": "rev-1",
             "decided_at": "2025-03-01T09:00:00Z",
             "fix_revision": None if fix is None else {"family": "experience", "artifact_id": fix_artifact, "revision": fix}}
    return {"topic": "review-decisions", "value": {**value, **fields}}


def dead(ledger: Ledger) -> list[tuple[int, str]]:
    """(journal line, reason) of every dead letter."""
    return [(letter["offset"], letter["reason"]) for letter in ledger.out["dead-letter"]]


def status(ledger: Ledger, candidate: str = CANDIDATE) -> dict:
    """The candidate's last review-status row."""
    return [row for row in ledger.out["review-status"] if row["candidate_id"] == candidate][-1]


# --------------------------------------------------------------------- bad input, one reason each


def test_the_same_decision_again_is_a_duplicate_and_other_content_an_identity_conflict():
    ledger = Ledger().feed(*with_candidate(), decision(20), decision(20), decision(20, reason="other words")).flush()
    assert dead(ledger) == [(6, "identity_conflict")]
    assert status(ledger)["decision"]["reason"] is None  # the first version stands


def test_a_second_decision_is_already_decided_and_the_first_stands():
    ledger = Ledger().feed(*with_candidate(), decision(20, "D1", "rejected", reason="flaky runner"), decision(21, "D2")).flush()
    assert dead(ledger) == [(5, "already_decided")]
    [letter] = ledger.out["dead-letter"]
    assert "already rejected by decision 'D1'" in letter["message"]
    row = status(ledger)
    assert (row["status"], row["decision"]["decision_id"], row["decision"]["reason"]) == ("rejected", "D1", "flaky runner")


def test_two_decisions_that_waited_for_one_candidate_the_first_to_arrive_stands():
    """Both wait; when the candidate is published the first one is applied
    and the second is dead-lettered then, with its own line and bytes."""
    second = decision(21, "D2", "rejected", reason="not a lesson problem")
    journal = [experience(S, 1, "E1", cue=CUE), *recurrences(10, 11), decision(20, "D1"), second, *recurrences(12)]
    ledger = Ledger().feed(*journal).flush()
    assert dead(ledger) == [(4, "already_decided")]
    assert base64.b64decode(ledger.out["dead-letter"][0]["raw"]) == line(second)
    assert status(ledger)["decision"]["decision_id"] == "D1"


def test_a_decision_for_an_unknown_candidate_is_dead_lettered_when_the_horizon_passes():
    config = LedgerConfig(provenance_horizon=5)
    ledger = Ledger(config).feed(experience(S, 1, "E1", cue=CUE), decision(3, candidate=NO_CANDIDATE))
    assert dead(ledger) == []  # it waits
    ledger.feed(outcome(S, 7, "O-7", status="completed"))  # as_of 7 < 3 + 5
    assert dead(ledger) == []
    ledger.feed(outcome(S, 8, "O-8", status="completed"))  # as_of 8 reaches 3 + 5
    assert dead(ledger) == [(1, "unknown_candidate")]
    assert "reached the decision's position 3 plus the provenance horizon 5" in ledger.out["dead-letter"][0]["message"]
    ledger.feed(decision(2, "D-late", candidate=NO_CANDIDATE))  # already past its horizon: at once
    assert dead(ledger) == [(1, "unknown_candidate"), (4, "unknown_candidate")]


def test_a_decision_whose_candidate_never_comes_is_dead_lettered_at_the_end_of_the_journal():
    ledger = Ledger().feed(experience(S, 1, "E1", cue=CUE), decision(3, candidate=NO_CANDIDATE))
    assert dead(ledger) == []
    ledger.flush()
    assert dead(ledger) == [(1, "unknown_candidate")]
    assert ledger.out["dead-letter"][0]["message"].endswith("the input ended before it was published")


@pytest.mark.parametrize("arrives", ["before the candidate", "after the candidate"])
def test_a_decision_that_refers_forward_to_its_candidate_is_unknown_candidate(arrives):
    """The candidate is published by the outcome at position 12; a decision
    at position 11 refers forward (contract §16), whenever it arrives."""
    early = decision(11)
    journal = [experience(S, 1, "E1", cue=CUE), *recurrences(9, 10), outcome(S, 11, "O-ok", status="completed")]
    journal += [early, *recurrences(12)] if arrives == "before the candidate" else [*recurrences(12), early]
    ledger = Ledger().feed(*journal, decision(12, "D-at-12")).flush()
    assert [reason for _, reason in dead(ledger)] == ["unknown_candidate"]
    assert "published at journal position 12, after the decision's position 11" in ledger.out["dead-letter"][0]["message"]
    assert status(ledger)["decision"]["decision_id"] == "D-at-12"  # at the candidate's own position: applied


@pytest.mark.parametrize(("fix", "fix_artifact"), [(1, "E1"), (2, "E2"), (1, "E0")])
def test_a_fix_revision_that_is_no_higher_revision_of_the_candidate_s_artifact_is_invalid_value(fix, fix_artifact):
    ledger = Ledger().feed(*with_candidate(), decision(20, fix=fix, fix_artifact=fix_artifact), decision(21, "D2", fix=2)).flush()
    assert dead(ledger) == [(4, "invalid_value")]
    assert "is not a higher revision of the candidate's artifact 'E1' (revision 1)" in ledger.out["dead-letter"][0]["message"]
    assert status(ledger)["decision"]["decision_id"] == "D2"  # the bad one left nothing behind


def test_a_fix_revision_checked_when_a_waiting_decision_meets_its_candidate():
    journal = [experience(S, 1, "E1", cue=CUE), *recurrences(10, 11), decision(20, fix=1), *recurrences(12)]
    ledger = Ledger().feed(*journal).flush()
    assert dead(ledger) == [(3, "invalid_value")]
    assert status(ledger)["status"] == "open"


@pytest.mark.parametrize(("fields", "reason"), [
    ({"decision": "rejected", "reason": None}, "invalid_value"),
    ({"decision": "rejected", "reason": " \t\u200b\u2060\ufeff"}, "invalid_value"),
    ({"decision": "rejected", "reason": "r" * 16_385}, "too_long"),
    ({"decision": "rejected", "reason": "no", "fix_revision": {"family": "experience", "artifact_id": "E1", "revision": 2}}, "invalid_value"),
    ({"fix_revision": {"family": "handoff", "artifact_id": "E1", "revision": 2}}, "invalid_value"),
    ({"decision": "withdrawn"}, "invalid_value"),
    ({"decided_at": "2025-03-01 09:00:00"}, "invalid_value"),
    ({"decided_at": "2025-03-01T09:00:00-05:00"}, "invalid_value"),
    ({"decided_at": "2025-13-01T09:00:00Z"}, "invalid_value"),
    ({"decided_at": "2025-03-01T09:00:00Z\n"}, "invalid_value"),
    ({"decided_at": "\u0662\u0660\u0662\u0665-03-01T09:00:00Z"}, "invalid_value"),  # Arabic-Indic digits: RFC 3339's are ASCII
    ({"decided_at": "\uff12\uff10\uff12\uff15-03-01T09:00:00Z"}, "invalid_value"),  # fullwidth digits
    ({"candidate_id": "E1 r1"}, "invalid_value"),
    ({"reviewer": ""}, "invalid_value"),
    ({"reviewer": "r" * 513}, "too_long"),
    ({"decision_id": "D\x07"}, "invalid_value"),
    ({"journal_position": -1}, "invalid_value"),
    ({"reviewer": 7}, "wrong_type"),
])
def test_a_decision_that_breaks_a_field_rule_is_dead_lettered_and_the_next_one_is_applied(fields, reason):
    ledger = Ledger().feed(*with_candidate(), decision(20, **fields), decision(21, "D2")).flush()
    assert dead(ledger) == [(4, reason)]
    assert status(ledger)["decision"]["decision_id"] == "D2"


def test_decided_at_takes_utc_in_every_rfc_3339_spelling():
    for stamp in ("2025-03-01T09:00:00Z", "2025-03-01t09:00:00z", "2025-03-01T09:00:00.123456789+00:00", "2024-02-29T23:59:59Z"):
        ledger = Ledger().feed(*with_candidate(), decision(20, decided_at=stamp)).flush()
        assert dead(ledger) == [] and status(ledger)["decision"]["decided_at"] == stamp


def test_too_many_waiting_decisions_in_a_scope():
    ledger = Ledger(LedgerConfig(max_pending_candidates=2)).feed(
        experience(S, 1, "E1", cue=CUE), *(decision(5, f"D{n}", candidate=f"sha256:{n:064x}") for n in range(3)))
    assert dead(ledger) == [(3, "too_many_pending")]
    ledger.flush()
    assert [reason for _, reason in dead(ledger)] == ["too_many_pending", "unknown_candidate", "unknown_candidate"]


# --------------------------------------------------------------------- a decision changes no ledger fact


def test_decisions_change_no_ledger_fact_use_no_position_and_move_no_as_of_position():
    journal = [*with_candidate(), experience(S, 30, "E1", 2, cue=CUE), *recurrences(31, 32, 33)]
    decisions = [decision(12, "D1", fix=2), decision(12, "D2", "rejected", reason="again"), decision(99, candidate=NO_CANDIDATE, decision_id="D3")]
    plain = Ledger().feed(*journal).flush()
    decided = Ledger().feed(*journal[:4], *decisions, *journal[4:]).flush()
    for topic in LEDGER_TOPICS:
        assert decided.out[topic] == plain.out[topic], topic
    # decision D1 sits at position 12, the outcome's; as_of_position is the source events' 33
    with_reviews, without = decided.stats(S), plain.stats(S)
    assert with_reviews.pop("reviews") == {"open": 1, "approved": 1, "rejected": 0, "superseded": 0, "rejected_by_reason": dict.fromkeys(REASON_BUCKETS, 0), "promotion_rate": 1.0}
    assert without.pop("reviews") == {"open": 1, "approved": 0, "rejected": 0, "superseded": 1, "rejected_by_reason": dict.fromkeys(REASON_BUCKETS, 0), "promotion_rate": None}
    assert with_reviews.pop("repairs") == {"pending": 0, "held": 0, "recurring": 0, "failed": 1}
    assert without.pop("repairs") == {"pending": 0, "held": 0, "recurring": 0, "failed": 1}
    assert with_reviews == without and with_reviews["as_of_position"] == 33
    assert [reason for _, reason in dead(decided)] == ["already_decided", "unknown_candidate"]


# --------------------------------------------------------------------- the review-status view


def test_status_fix_revision_and_repair_follow_the_fix_revision():
    """E1 r1's candidate approved with fix r2: pending until r2 has a terminal
    verdict; recurring after one recurrence; held after an avoided verdict;
    recurring again; failed when a run of r2 reaches 3 — and failed stays."""
    ledger = Ledger().feed(*with_candidate(), decision(20, fix=2, reason="lock the port"))
    row = status(ledger)
    assert (row["status"], row["fix_revision"], row["repair"]["status"]) == ("approved", {"family": "experience", "artifact_id": "E1", "revision": 2}, "pending")
    assert row["decision"] == {"decision_id": "D1", "decision": "approved", "reason": "lock the port", "reviewer": "rev-1",
                               "decided_at": "2025-03-01T09:00:00Z", "journal_position": 20}
    ledger.feed(experience(S, 30, "E1", 2, cue=CUE, condition="ports freed", subject="port check"),
                handoff(S, 31, "H", [("E1", 2)]), receipt(S, 32, "R", "H"))
    assert status(ledger)["repair"] == {"status": "pending", "selected": 0, "recurred": 0, "avoided": 0, "unknown": 0, "terminal_recurred_streak": 0, "effect": None}
    ledger.feed(*recurrences(40))
    assert status(ledger)["repair"] == {"status": "recurring", "selected": 0, "recurred": 1, "avoided": 0, "unknown": 0, "terminal_recurred_streak": 1, "effect": None}
    ledger.feed(outcome(S, 41, "O-held", status="completed", receipt_id="R",
                        observations=[claim("ports freed")], checks=[check("port check", status="passed")]))
    assert status(ledger)["repair"] == {"status": "held", "selected": 1, "recurred": 1, "avoided": 1, "unknown": 0, "terminal_recurred_streak": 0, "effect": None}
    ledger.feed(outcome(S, 42, "O-quiet", status="completed", receipt_id="R"))  # selected, no verdict: unknown
    assert status(ledger)["repair"] == {"status": "held", "selected": 2, "recurred": 1, "avoided": 1, "unknown": 1, "terminal_recurred_streak": 0, "effect": None}
    ledger.feed(*recurrences(43, 44))
    assert status(ledger)["repair"]["status"] == "recurring"
    ledger.feed(*recurrences(45))
    assert status(ledger)["repair"] == {"status": "failed", "selected": 2, "recurred": 4, "avoided": 1, "unknown": 1, "terminal_recurred_streak": 3, "effect": None}
    ledger.feed(outcome(S, 46, "O-held-2", status="completed", receipt_id="R",
                        observations=[claim("ports freed")], checks=[check("port check", status="passed")]))
    assert status(ledger)["repair"]["status"] == "failed"  # final, although the streak is 0 again
    assert status(ledger)["repair"]["terminal_recurred_streak"] == 0


def test_superseded_then_decided_and_the_lowest_higher_revision_whatever_arrives_first():
    """Without a decision a higher revision supersedes the candidate; an
    approval without fix_revision takes the lowest known revision above the
    candidate's: r3 while only r3 is known, r2 once r2 arrives (late)."""
    ledger = Ledger().feed(*with_candidate())
    assert (status(ledger)["status"], status(ledger)["fix_revision"], status(ledger)["repair"]) == ("open", None, None)
    ledger.feed(experience(S, 30, "E1", 3, cue=CUE))
    row = status(ledger)
    assert (row["status"], row["fix_revision"]["revision"], row["repair"]["status"]) == ("superseded", 3, "pending")
    ledger.feed(decision(31))
    assert (status(ledger)["status"], status(ledger)["fix_revision"]["revision"]) == ("approved", 3)
    ledger.feed(experience(S, 20, "E1", 2, cue=CUE))
    assert status(ledger)["fix_revision"]["revision"] == 2
    assert ledger.stats(S)["reviews"] == {"open": 0, "approved": 1, "rejected": 0, "superseded": 0, "rejected_by_reason": dict.fromkeys(REASON_BUCKETS, 0), "promotion_rate": 1.0}
    assert ledger.stats(S)["repairs"] == {"pending": 1, "held": 0, "recurring": 0, "failed": 0}


def test_a_rejected_candidate_has_no_fix_revision_and_no_repair_whatever_follows():
    ledger = Ledger().feed(*with_candidate(), decision(20, verdict="rejected", reason="the runner is flaky"),
                           experience(S, 30, "E1", 2, cue=CUE), *recurrences(31, 32, 33))
    row = status(ledger)
    assert (row["status"], row["fix_revision"], row["repair"], row["decision"]["reason"]) == ("rejected", None, None, "the runner is flaky")
    assert ledger.stats(S)["reviews"] == {  # r2's own candidate is open
        "open": 1, "approved": 0, "rejected": 1, "superseded": 0,
        "rejected_by_reason": {**dict.fromkeys(REASON_BUCKETS, 0), "unspecified": 1}, "promotion_rate": 0.0,
    }


def test_rows_are_published_once_per_key_per_batch_and_only_when_they_change():
    ledger = Ledger(view_batch=100).feed(*with_candidate(), decision(20), experience(S, 30, "E1", 2, cue=CUE))
    ledger.end_batch()
    [row] = ledger.out["review-status"]
    assert row["status"] == "approved" and row["fix_revision"]["revision"] == 2
    ledger.feed(experience(S, 31, "E2", cue="disk full")).end_batch()  # nothing of E1 changed
    ledger.feed(*recurrences(32, artifact_id="E2")).end_batch()
    assert len(ledger.out["review-status"]) == 1
    ledger.feed(*recurrences(33)).end_batch()  # r2's figures changed
    assert len(ledger.out["review-status"]) == 2 and ledger.out["review-status"][-1]["repair"]["status"] == "recurring"


def test_the_record_key_is_the_canonical_json_of_candidate_and_scope():
    assert review_status_key("s", "sha256:00") == '{"candidate_id":"sha256:00","scope_id":"s"}'
    assert json.loads(review_status_key("é", "x")) == {"candidate_id": "x", "scope_id": "é"}


def test_repair_state_of_a_streak_record_and_its_runs_at_the_threshold():
    assert repair_state(None, 0) == "pending"
    assert repair_state({"recurred": 0, "avoided": 0, "streak": 0, "selected": 4}, 0) == "pending"
    assert repair_state({"recurred": 1, "avoided": 1, "streak": 0}, 0) == "held"
    assert repair_state({"recurred": 2, "avoided": 1, "streak": 2}, 0) == "recurring"
    assert repair_state({"recurred": 3, "avoided": 1, "streak": 0}, 1) == "failed"
    # by position (contract §18 rev. 4): a published candidate whose run a late
    # avoided split no longer says failed — only a run that holds the threshold now
    assert repair_state({"recurred": 3, "avoided": 1, "streak": 1, "published": [None]}, 0) == "recurring"
