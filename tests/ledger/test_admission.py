"""contract §12, rules 1–6: every rule accepted and rejected,
waiting for a cited outcome, the provenance horizon, near-duplicate scores
pinned by golden values, the bigram index kept to current heads, and replay
idempotency."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recurrence_ledger.ledger import admission
from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.ledger.processor import LedgerConfig
from tests.journal import Ledger, check, claim, experience, outcome

S = "svc"


def candidate(candidate_id, position=50, cites=("O-fail",), cue="port already bound", outcome_text="the tests failed",
              surface="experience_content", condition="tests started in sandbox", subject="ports free before pytest",
              verification=True, failure=True, artifact_id=None, receipts=()) -> dict:
    """An experience-candidates journal record."""
    block = None
    if failure:
        block = {
            "signature": {"recall_cue": cue, "symptom": None},
            "repair_surface": surface,
            "verification": {"condition": condition, "check_subject": subject} if verification else None,
        }
    sources = [{"source_type": "task_outcome", "source_id": source_id} for source_id in cites]
    sources += [{"source_type": "handoff_receipt", "source_id": source_id} for source_id in receipts]
    return {"topic": "experience-candidates", "value": {
        "candidate_id": candidate_id, "scope_id": S, "journal_position": position, "artifact_id": artifact_id,
        "content": {"situation": "s", "action": "a", "outcome": outcome_text, "lesson": "l", "failure": block},
        "cited_sources": sources,
    }}


FAILED = outcome(S, 1, "O-fail", status="failed", checks=[check("port already bound")])
PASSED = outcome(S, 2, "O-pass", status="completed", checks=[check("ports free", status="passed")])


def decisions(ledger: Ledger) -> dict[str, dict]:
    return {d["candidate_id"]: d for d in ledger.out["admission-decisions"]}


def decide(*records, config=None) -> dict[str, dict]:
    return decisions(Ledger(config).feed(FAILED, PASSED, *records).flush())


# --------------------------------------------------------------------- rule 1


def test_rule1_accepts_a_failed_check_and_lists_it_as_a_task_outcome_item_ref():
    d = decide(candidate("C1"))["C1"]
    assert d["decision"] == "accepted" and d["reasons"] == []
    item = FAILED["value"]["checks"][0]
    assert d["failure_refs"] == [{
        "task_outcome_ref": {"source_type": "task_outcome", "source_id": "O-fail"},
        "item_kind": "check", "item_index": 0, "item_digest": digest(item),
    }]
    assert d["signature_key"] == "port already bound" and d["repair_surface"] == "experience_content"
    assert d["missing_sources"] == [] and d["near_duplicates"] == []
    assert d["decision_digest"] == digest({k: v for k, v in d.items() if k != "decision_digest"})


def test_rule1_accepts_a_verified_observation_of_a_failed_outcome():
    blocked = outcome(S, 3, "O-blocked", status="blocked", observations=[claim("sandbox port 8080 in use")])
    d = decide(blocked, candidate("C1", cites=("O-blocked",)))["C1"]
    assert d["decision"] == "accepted"
    assert [(r["item_kind"], r["item_index"]) for r in d["failure_refs"]] == [("observation", 0)]


@pytest.mark.parametrize(
    "record",
    [
        outcome(S, 3, "O-x", status="completed", checks=[check("ports free", status="passed")]),
        outcome(S, 3, "O-x", status="failed", checks=[check("ports free", status="skipped")]),
        outcome(S, 3, "O-x", status="failed", checks=[check("ports free", basis="declared")]),
        outcome(S, 3, "O-x", status="failed", checks=[check("ports free", evidence=[{"kind": "summary", "ref": "x"}])]),
        outcome(S, 3, "O-x", status="completed", observations=[claim("port in use")]),
    ],
    ids=["passed-check", "skipped-check", "declared-check", "summary-evidence", "observation-of-completed"],
)
def test_rule1_rejects_cited_outcomes_without_a_failure_item(record):
    d = decide(record, candidate("C1", cites=("O-x",)))["C1"]
    assert (d["decision"], d["reasons"], d["failure_refs"]) == ("rejected", ["no_failure_evidence"], [])


def test_rule1_rejects_a_candidate_citing_only_a_receipt():
    d = decide(candidate("C1", cites=(), receipts=("R1",)))["C1"]
    assert d["reasons"] == ["no_failure_evidence"]


def test_rule1_uses_every_cited_outcome_with_failure_items_and_ignores_others():
    d = decide(candidate("C1", cites=("O-pass", "O-fail", "O-fail")))["C1"]
    assert d["decision"] == "accepted"
    assert [r["task_outcome_ref"]["source_id"] for r in d["failure_refs"]] == ["O-fail"]
    assert len(d["cited_sources"]) == 3  # rule 6: the citations as given


def test_a_candidate_waits_for_a_cited_outcome_that_arrives_later():
    ledger = Ledger().feed(PASSED, candidate("C1", position=5, cites=("O-late",)))
    assert ledger.out["admission-decisions"] == []
    ledger.feed(outcome(S, 4, "O-late", status="failed", checks=[check("port already bound")]))
    [d] = ledger.out["admission-decisions"]
    assert d["decision"] == "accepted" and d["failure_refs"][0]["task_outcome_ref"]["source_id"] == "O-late"
    ledger.flush()
    assert len(ledger.out["admission-decisions"]) == 1


def test_a_candidate_waits_for_all_its_cited_outcomes():
    ledger = Ledger().feed(FAILED, candidate("C1", cites=("O-fail", "O-late")))
    assert ledger.out["admission-decisions"] == []
    ledger.feed(outcome(S, 4, "O-late", status="failed", checks=[check("other")]))
    [d] = ledger.out["admission-decisions"]
    assert [r["task_outcome_ref"]["source_id"] for r in d["failure_refs"]] == ["O-fail", "O-late"]


def test_missing_source_when_the_horizon_passes():
    ledger = Ledger(LedgerConfig(provenance_horizon=5)).feed(PASSED, candidate("C1", position=3, cites=("O-never",)))
    ledger.feed(outcome(S, 7, "O-other", status="completed"))
    assert ledger.out["admission-decisions"] == []  # 3 + 5 > 7
    ledger.feed(outcome(S, 8, "O-other2", status="completed"))
    [d] = ledger.out["admission-decisions"]
    assert d["reasons"] == ["missing_source"]
    assert d["missing_sources"] == [{"source_type": "task_outcome", "source_id": "O-never"}]
    ledger.feed(outcome(S, 9, "O-never", status="failed", checks=[check("x")]))
    assert len(ledger.out["admission-decisions"]) == 1  # frozen


def test_end_of_journal_decides_a_waiting_candidate_with_what_is_known():
    d = decide(candidate("C1", cites=("O-fail", "O-never")))["C1"]
    assert d["decision"] == "accepted"
    assert d["missing_sources"] == [{"source_type": "task_outcome", "source_id": "O-never"}]


def test_a_candidate_in_a_scope_without_source_events_is_decided_at_the_end():
    d = decisions(Ledger().feed(candidate("C1", cites=("O-never",))).flush())["C1"]
    assert d["reasons"] == ["missing_source"]


# --------------------------------------------------------------------- rules 2–4


@pytest.mark.parametrize(
    ("changes", "reasons"),
    [
        ({"cue": " ¡!  "}, ["empty_cue"]),
        ({"cue": "x" * 513}, ["cue_too_long"]),
        ({"cue": "The tests failed."}, ["cue_restates_outcome"]),
        ({"surface": None}, ["missing_repair_surface"]),
        ({"verification": False}, ["missing_verification"]),
        ({"condition": " \u200b "}, ["empty_condition"]),
        ({"subject": "..."}, ["empty_check_subject"]),
        ({"failure": False}, ["missing_failure_record"]),
        ({"cue": "the tests failed", "surface": None, "subject": ""},
         ["cue_restates_outcome", "missing_repair_surface", "empty_check_subject"]),
    ],
    ids=["empty-cue", "cue-513", "restatement", "no-surface", "no-verification", "blank-condition", "blank-subject",
         "no-failure-block", "several"],
)
def test_rules_2_to_4_reject_with_the_specific_reasons(changes, reasons):
    d = decide(candidate("C1", **changes))["C1"]
    assert (d["decision"], d["reasons"]) == ("rejected", reasons)


def test_rule2_accepts_a_512_character_cue():
    assert decide(candidate("C1", cue="y" * 512))["C1"]["decision"] == "accepted"


def test_all_broken_rules_are_listed_in_rule_order():
    d = decide(candidate("C1", cites=("O-pass",), cue="", surface=None))["C1"]
    assert d["reasons"] == ["no_failure_evidence", "empty_cue", "missing_repair_surface"]
    assert d["signature_key"] is None


# --------------------------------------------------------------------- rule 5


@pytest.mark.parametrize(
    ("first", "second", "score"),
    [
        ("openapi codegen drift", "openapi codegen drift", 1.0),  # identical
        ("openapi codegen drift", "redis pool exhausted", 0.0),  # unrelated
        ("drift", "drift", 1.0),  # one token: the token itself
        ("drift", "openapi drift", 0.0),
        # 8 and 7 bigrams sharing 6: 12/15 = 0.8 exactly (a near-duplicate)
        ("generated client out of date after a contract edit", "generated client out of date after contract edit", 0.8),
        # 5 and 5 bigrams sharing 4: 8/10 = 0.8
        ("a b c d e f", "a b c d e g", 0.8),
        # 4 and 4 bigrams sharing 3: 6/8 = 0.75 (just below)
        ("a b c d e", "a b c d f", 0.75),
        # 9 and 9 bigrams sharing 8: 16/18 = 0.8889 (above)
        ("a b c d e f g h i j", "a b c d e f g h i k", 0.8889),
        # repeated bigrams count as a multiset: {a a ×2} vs {a a ×1}: 2/3
        ("a a a", "a a", 0.6667),
    ],
)
def test_dice_golden_values(first, second, score):
    assert admission.dice(first, second) == score
    assert admission.dice(second, first) == score


def test_near_duplicate_threshold_is_exact():
    assert admission.is_near_duplicate(12, 15) and admission.is_near_duplicate(8, 10)
    assert not admission.is_near_duplicate(6, 8) and not admission.is_near_duplicate(79, 99)
    assert not admission.is_near_duplicate(0, 0)


def heads_journal() -> list[dict]:
    return [
        experience(S, 10, "E-same", cue="Port already bound!"),
        experience(S, 11, "E-near", cue="generated client out of date after contract edit"),
        experience(S, 12, "E-below", cue="a b c d f"),
        experience(S, 13, "E-far", cue="redis pool exhausted"),
        experience(S, 14, "E-plain", failure=False),
    ]


def test_rule5_lists_near_duplicates_with_scores_and_flags_the_same_cue_without_rejecting():
    ledger = Ledger().feed(FAILED, *heads_journal())
    ledger.feed(candidate("C-same"), candidate("C-near", cue="Generated client out of date after a contract edit"),
                candidate("C-below", cue="a b c d e"), candidate("C-none", cue="entirely new words here"))
    d = decisions(ledger)
    assert d["C-same"]["decision"] == "accepted"
    assert d["C-same"]["near_duplicates"] == [{
        "artifact_ref": {"family": "experience", "artifact_id": "E-same", "revision": 1},
        "signature_key": "port already bound", "score": 1.0, "same_cue": True,
    }]
    assert [(n["artifact_ref"]["artifact_id"], n["score"], n["same_cue"]) for n in d["C-near"]["near_duplicates"]] == [
        ("E-near", 0.8, False)]
    assert d["C-below"]["near_duplicates"] == []  # 0.75 < 0.8
    assert d["C-none"]["near_duplicates"] == []
    assert all(x["decision"] == "accepted" for x in d.values())


def test_rule5_sorts_by_score_then_artifact_ref():
    ledger = Ledger().feed(FAILED, experience(S, 10, "E-b", cue="a b c d e f"), experience(S, 11, "E-a", cue="a b c d e g"),
                           experience(S, 12, "E-c", cue="a b c d e f"))
    ledger.feed(candidate("C1", cue="a b c d e f"))
    assert [(n["artifact_ref"]["artifact_id"], n["score"]) for n in decisions(ledger)["C1"]["near_duplicates"]] == [
        ("E-b", 1.0), ("E-c", 1.0), ("E-a", 0.8)]


def test_rule5_compares_with_current_heads_only_and_skips_the_revised_artifact():
    ledger = Ledger().feed(FAILED, experience(S, 10, "E7", cue="port already bound"),
                           experience(S, 11, "E8", cue="port already bound"))
    ledger.feed(experience(S, 12, "E7", revision=2, cue="sandbox network missing"))  # E7's head changes cue
    ledger.feed(experience(S, 13, "E8", revision=2, failure=False))  # E8's head has no failure block
    ledger.feed(experience(S, 9, "E8", revision=1, cue="port already bound"))  # duplicate: no change
    ledger.feed(candidate("C1"), candidate("C2", cue="Sandbox network missing"), candidate("C3", cue="sandbox network missing", artifact_id="E7"))
    d = decisions(ledger)
    assert d["C1"]["near_duplicates"] == []
    assert [n["artifact_ref"] for n in d["C2"]["near_duplicates"]] == [{"family": "experience", "artifact_id": "E7", "revision": 2}]
    assert d["C3"]["near_duplicates"] == []  # its own artifact's head
    store = ledger.processor.state.store
    postings = {key[2]: value for key, value in store.items() if key[0] == "cue_bigram"}
    assert postings == {"sandbox network": {"E7": 2}, "network missing": {"E7": 2}}


def test_a_late_lower_revision_does_not_enter_the_index():
    ledger = Ledger().feed(FAILED, experience(S, 10, "E7", revision=2, cue="new cue words"),
                           experience(S, 5, "E7", revision=1, cue="old cue words"))
    ledger.feed(candidate("C1", cue="old cue words"))
    assert decisions(ledger)["C1"]["near_duplicates"] == []


# --------------------------------------------------------------------- identity and replay


def test_a_candidate_is_decided_once_and_a_conflicting_one_is_dead_lettered():
    ledger = Ledger().feed(FAILED, candidate("C1"), candidate("C1"))
    ledger.feed(candidate("C1", cue="something else"))
    assert len(ledger.out["admission-decisions"]) == 1
    assert ledger.reasons() == ["identity_conflict"]


def test_a_candidate_uses_no_journal_position():
    ledger = Ledger().feed(FAILED, candidate("C1", position=1), outcome(S, 3, "O-3", status="completed"))
    assert ledger.reasons() == []
    assert ledger.stats(S)["as_of_position"] == 3


def test_candidates_do_not_change_ledger_outputs():
    base = [FAILED, PASSED, *heads_journal()]
    without = Ledger().feed(*base).flush()
    with_candidates = Ledger().feed(*base[:3], candidate("C1"), *base[3:], candidate("C2", cites=("O-late",))).flush()
    for topic in ("recurrence-matches", "recurrence-observations", "recurrence-statistics", "revision-statistics"):
        assert with_candidates.out[topic] == without.out[topic], topic


def test_replaying_the_journal_writes_no_new_decision():
    records = [FAILED, candidate("C-wait", cites=("O-late",)), *heads_journal(), candidate("C1"),
               outcome(S, 30, "O-late", status="failed", checks=[check("x")])]
    ledger = Ledger().feed(*records).flush()
    first = list(ledger.out["admission-decisions"])
    assert len(first) == 2
    ledger.feed(*records).flush()
    assert ledger.out["admission-decisions"] == first


def test_the_bigram_index_is_rebuilt_the_same_from_a_replayed_journal():
    records = heads_journal() + [experience(S, 20, "E-near", revision=2, cue="client out of date")]
    one = Ledger().feed(*records).processor.state.store
    two = Ledger().feed(*records, *records).processor.state.store
    assert {k: v for k, v in one.items() if k[0] == "cue_bigram"} == {k: v for k, v in two.items() if k[0] == "cue_bigram"}


def test_decisions_are_byte_identical_across_runs():
    records = [FAILED, *heads_journal(), candidate("C1", cue="Port already bound"), candidate("C2", cites=("O-x",))]
    runs = [json.dumps(Ledger().feed(*records).flush().out["admission-decisions"], sort_keys=True) for _ in range(2)]
    assert runs[0] == runs[1]


# A small vocabulary makes shared and repeated bigrams common.
WORDS = st.sampled_from(["port", "already", "bound", "of", "the", "sandbox", "drift"])
CUES = st.lists(WORDS, min_size=1, max_size=7).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(heads=st.lists(CUES, min_size=1, max_size=25), probes=st.lists(CUES, min_size=1, max_size=5))
def test_the_index_finds_exactly_what_scoring_every_head_finds(heads, probes):
    ledger = Ledger().feed(FAILED, *[experience(S, 10 + i, f"E{i}", cue=cue) for i, cue in enumerate(heads)])
    ledger.feed(*[candidate(f"C{i}", cue=cue) for i, cue in enumerate(probes)])
    got = decisions(ledger)
    for i, cue in enumerate(probes):
        brute = sorted(
            ((-admission.dice(cue, head), f"E{j}") for j, head in enumerate(heads)
             if admission.is_near_duplicate(*admission.dice_parts(admission.cue_bigrams(cue), admission.cue_bigrams(head)))),
        )
        assert [(-n["score"], n["artifact_ref"]["artifact_id"]) for n in got[f"C{i}"]["near_duplicates"]] == brute
