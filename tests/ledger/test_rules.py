"""One test per rule of contract §5–§8, written as given journal / when
applied / then outputs."""

from __future__ import annotations

from recurrence_ledger.ledger.processor import LedgerConfig
from tests.journal import Ledger, check, claim, experience, handoff, outcome, receipt

S = "scope"
CUE = "port already bound"


def linked_chain(*cites, handoff_id="H1", receipt_id="R1", start=10):
    """Handoff + resolving receipt records at positions start, start+1."""
    return [handoff(S, start, handoff_id, cites), receipt(S, start + 1, receipt_id, handoff_id)]


# -- §5 linked chain and selected ---------------------------------------------


def test_handoff_citing_a_revision_twice_gives_one_candidate_and_one_selected():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        *linked_chain(("E1", 1), ("E1", 1)),
        outcome(S, 20, "O1", receipt_id="R1", checks=[check("Port already bound!")]),
    )
    [match] = ledger.out["recurrence-matches"]
    assert [ref["artifact_id"] for ref in match["candidate_refs"]] == ["E1"]
    assert (match["candidate_set_mode"], match["result"]) == ("handoff_citations", "matched")
    assert ledger.observations() == ["selected E1r1 O1", "recurred E1r1 O1"]


def test_only_failure_bearing_cited_revisions_are_selected():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        experience(S, 2, "PLAIN", failure=False),
        *linked_chain(("E1", 1), ("PLAIN", 1)),
        outcome(S, 20, "O1", status="completed", receipt_id="R1"),
    )
    assert ledger.observations() == ["selected E1r1 O1"]
    assert ledger.stats(S)["unknown"] == 1


def test_unlinked_outcome_writes_no_selected():
    ledger = Ledger().feed(experience(S, 1, "E1"), outcome(S, 2, "O1", status="completed"))
    assert ledger.observations() == []
    assert ledger.stats(S)["selected"] == 0


def test_receipts_that_do_not_resolve_leave_the_outcome_unlinked():
    bad_receipts = [
        receipt(S, 11, "R-rejected", "H1", status="rejected"),
        receipt(S, 12, "R-current", "H1", selection="current"),
        receipt(S, 13, "R-missing", "H1", evidence_status="missing"),
    ]
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        handoff(S, 10, "H1", [("E1", 1)]),
        *bad_receipts,
        *[outcome(S, 20 + i, f"O{i}", receipt_id=r["value"]["source_ref"]["source_id"], checks=[check(CUE)])
          for i, r in enumerate(bad_receipts)],
    )
    # No selected: each outcome is matched against scope heads and recurs.
    assert ledger.observations() == ["recurred E1r1 O0", "recurred E1r1 O1", "recurred E1r1 O2"]
    assert {m[3] for m in ledger.matches()} == {"scope_heads"}
    stats = ledger.stats(S)
    assert (stats["selected"], stats["unlinked_handoff_citations"], stats["pending_outcomes"]) == (0, 1, 0)


def test_outcome_whose_receipt_never_arrives_is_pending_then_unlinked_at_end_of_journal():
    ledger = Ledger(LedgerConfig(provenance_horizon=None)).feed(
        experience(S, 1, "E1"),
        outcome(S, 2, "O1", receipt_id="R-never", checks=[check(CUE)]),
    )
    assert ledger.out["recurrence-matches"] == []
    stats = ledger.stats(S)
    assert (stats["pending_outcomes"], stats["recurred"], stats["as_of_position"]) == (1, 0, 2)
    ledger.flush()
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "matched", "E1r1")]
    assert ledger.observations() == ["recurred E1r1 O1"]
    assert (ledger.stats(S)["pending_outcomes"], ledger.stats(S)["recurred"]) == (0, 1)


def test_pending_outcome_is_linked_when_its_receipt_handoff_and_experience_arrive_late():
    ledger = Ledger().feed(
        outcome(S, 20, "O1", receipt_id="R1", checks=[check(CUE)]),
        receipt(S, 11, "R1", "H1"),
        handoff(S, 10, "H1", [("E1", 1)]),
    )
    assert ledger.stats(S)["pending_outcomes"] == 1
    ledger.feed(experience(S, 1, "E1"))
    assert ledger.matches() == [("O1", "check", 0, "handoff_citations", "matched", "E1r1")]
    assert ledger.observations() == ["selected E1r1 O1", "recurred E1r1 O1"]
    stats = ledger.stats(S)
    assert (stats["pending_outcomes"], stats["selected"], stats["unlinked_handoff_citations"]) == (0, 1, 0)


def test_provenance_horizon_decides_unlinked_and_the_decision_is_frozen():
    ledger = Ledger(LedgerConfig(provenance_horizon=5)).feed(
        experience(S, 1, "E1"),
        handoff(S, 2, "H1", [("E1", 1)]),
        outcome(S, 3, "O1", receipt_id="R-late", checks=[check(CUE)]),
        experience(S, 7, "OTHER", cue="something else"),
    )
    assert ledger.stats(S)["pending_outcomes"] == 1
    ledger.feed(experience(S, 8, "OTHER2", cue="another thing"))  # as_of 8 ≥ 3 + 5
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "matched", "E1r1")]
    ledger.feed(receipt(S, 9, "R-late", "H1"))  # too late: the decision stands
    assert ledger.observations() == ["recurred E1r1 O1"]
    stats = ledger.stats(S)
    assert (stats["pending_outcomes"], stats["selected"], stats["unlinked_handoff_citations"]) == (0, 0, 1)


# -- §6 failure items and matching ---------------------------------------------


def test_superseded_revision_is_never_in_scope_heads():
    ledger = Ledger().feed(
        experience(S, 1, "E1", revision=1),
        experience(S, 2, "E1", revision=2),
        experience(S, 3, "E2", cue="other failure"),
        outcome(S, 4, "O1", checks=[check(CUE)]),
    )
    [match] = ledger.out["recurrence-matches"]
    assert [(r["artifact_id"], r["revision"]) for r in ledger.candidate_refs(match)] == [("E1", 2), ("E2", 1)]
    assert ledger.observations() == ["recurred E1r2 O1"]


def test_head_without_failure_block_removes_the_artifact_from_scope_heads():
    ledger = Ledger().feed(
        experience(S, 1, "E1", revision=1),
        experience(S, 2, "E1", revision=2, failure=False),
        outcome(S, 3, "O1", checks=[check(CUE)]),
    )
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "unmatched", None)]
    assert ledger.candidate_refs(ledger.out["recurrence-matches"][0]) == []


def test_linked_outcome_failure_matching_an_uncited_experience_is_unmatched():
    ledger = Ledger().feed(
        experience(S, 1, "CITED", cue="something else"),
        experience(S, 2, "UNCITED"),
        *linked_chain(("CITED", 1)),
        outcome(S, 20, "O1", receipt_id="R1", checks=[check(CUE)]),
    )
    assert ledger.matches() == [("O1", "check", 0, "handoff_citations", "unmatched", None)]
    assert ledger.observations() == ["selected CITEDr1 O1"]


def test_two_revisions_with_the_same_cue_are_ambiguous():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        experience(S, 2, "E2"),
        outcome(S, 3, "O1", checks=[check(CUE)]),
    )
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "ambiguous", None)]
    assert ledger.observations() == []


def test_failure_items_exclude_skipped_cancelled_unknown_declared_and_summary_only():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        outcome(S, 2, "O1", checks=[
            check(CUE, status="skipped"),
            check(CUE, status="cancelled"),
            check(CUE, status="unknown"),
            check(CUE, status="passed"),
            check(CUE, basis="declared"),
            check(CUE, evidence=[{"kind": "summary", "ref": "log"}]),
            check(CUE, evidence=[]),
        ]),
    )
    assert ledger.out["recurrence-matches"] == []
    assert ledger.observations() == []


def test_timed_out_and_unavailable_checks_are_failure_items():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        outcome(S, 2, "O1", checks=[check(CUE, status="timed_out")]),
        outcome(S, 3, "O2", checks=[check(CUE, status="unavailable")]),
    )
    assert ledger.observations() == ["recurred E1r1 O1", "recurred E1r1 O2"]


def test_observations_are_failure_items_only_in_failed_or_blocked_outcomes():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        outcome(S, 2, "O-completed", status="completed", observations=[claim(CUE)]),
        outcome(S, 3, "O-cancelled", status="cancelled", observations=[claim(CUE)]),
        outcome(S, 4, "O-blocked", status="blocked", observations=[claim(CUE)]),
        outcome(S, 5, "O-declared", status="failed", observations=[claim(CUE, basis="declared")]),
    )
    assert ledger.matches() == [("O-blocked", "observation", 0, "scope_heads", "matched", "E1r1")]
    assert ledger.observations() == ["recurred E1r1 O-blocked"]


def test_text_that_normalizes_to_empty_matches_nothing():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        outcome(S, 2, "O1", checks=[check(" !!! \u200b")]),
    )
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "unmatched", None)]


def test_recall_cue_that_normalizes_to_empty_is_rejected_to_dead_letter():
    ledger = Ledger().feed(experience(S, 1, "E1", cue="  ...  "), experience(S, 2, "E2", cue="x" * 513))
    assert ledger.reasons() == ["invalid_value", "too_long"]


def test_fuzzy_similarity_never_matches():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        outcome(S, 2, "O1", checks=[check("port already bound!"), check("port is already bound"), check("port already  bound.")]),
    )
    assert [m[4] for m in ledger.matches()] == ["matched", "unmatched", "matched"]


def test_replay_rule_reuses_a_recorded_match_even_after_heads_changed():
    first = Ledger().feed(experience(S, 1, "E1"), outcome(S, 2, "O1", checks=[check(CUE)]))
    [recorded] = first.out["recurrence-matches"]
    # A fresh processor whose state was rebuilt from the ledger topic only,
    # and whose scope has since gained E1 revision 2 (a new head).
    second = Ledger()
    second.processor.restore_match(recorded)
    second.feed(experience(S, 1, "E1"), experience(S, 5, "E1", revision=2), outcome(S, 2, "O1", checks=[check(CUE)]))
    assert second.out["recurrence-matches"] == []  # reused, not re-decided
    [recurred] = second.out["recurrence-observations"]
    assert recurred["artifact_ref"]["revision"] == 1
    assert recurred["recurrence_match_digest"] == recorded["match_digest"]
    assert recurred == first.out["recurrence-observations"][0]


def test_late_experience_revision_does_not_change_a_frozen_unlinked_match():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        outcome(S, 10, "O1", checks=[check(CUE)]),
        experience(S, 5, "E1", revision=2),  # per-kind topic: arrives after O1
    )
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "matched", "E1r1")]
    assert ledger.stats(S)["late_revisions"] == 1
    # A later outcome sees the new head; one decided late in position uses history.
    ledger.feed(outcome(S, 11, "O2", checks=[check(CUE)]), outcome(S, 3, "O0", checks=[check(CUE)]))
    assert ledger.matches()[1:] == [
        ("O2", "check", 0, "scope_heads", "matched", "E1r2"),
        ("O0", "check", 0, "scope_heads", "matched", "E1r1"),
    ]


# -- §7 verdicts -----------------------------------------------------------------


def avoided_outcome(source_id, position, *extra_checks, observations=None, subject_status="passed"):
    return outcome(
        S, position, source_id, status="completed", receipt_id="R1",
        observations=observations if observations is not None else [claim("Tests started in sandbox.")],
        checks=[check("ports free before pytest", status=subject_status), *extra_checks],
    )


def test_avoided_needs_verified_condition_and_passing_bound_check():
    ledger = Ledger().feed(experience(S, 1, "E1"), *linked_chain(("E1", 1)), avoided_outcome("O1", 20))
    [selected, avoided] = ledger.out["recurrence-observations"]
    assert avoided["event"] == "avoided"
    assert (avoided["condition_ref"]["item_kind"], avoided["condition_ref"]["item_index"]) == ("observation", 0)
    assert (avoided["check_ref"]["item_kind"], avoided["check_ref"]["item_index"]) == ("check", 0)
    assert avoided["handoff_ref"]["artifact_id"] == "H1"
    assert ledger.stats(S)["unknown"] == 0


def test_no_avoided_without_exactly_one_condition_or_with_declared_or_failed_check():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        *linked_chain(("E1", 1)),
        avoided_outcome("O-two-conditions", 20, observations=[claim("tests started in sandbox"), claim("TESTS started in sandbox")]),
        avoided_outcome("O-no-condition", 21, observations=[]),
        avoided_outcome("O-check-failed", 22, subject_status="failed"),
        avoided_outcome("O-two-checks", 23, check("Ports free before pytest!", status="passed")),
        outcome(S, 24, "O-declared", status="completed", receipt_id="R1",
                observations=[claim("tests started in sandbox")], checks=[check("ports free before pytest", status="passed", basis="declared")]),
    )
    assert [o.split()[0] for o in ledger.observations()] == ["selected"] * 5
    assert ledger.stats(S)["unknown"] == 5


def test_recurred_plus_passing_bound_check_is_recurred_not_avoided():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        *linked_chain(("E1", 1)),
        avoided_outcome("O1", 20, check(CUE, status="failed")),
    )
    assert ledger.observations() == ["selected E1r1 O1", "recurred E1r1 O1"]
    assert ledger.stats(S)["avoided"] == 0


def test_two_failure_items_matching_one_revision_write_no_verdict():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        *linked_chain(("E1", 1)),
        outcome(S, 20, "O-linked", receipt_id="R1", checks=[check(CUE), check("PORT ALREADY BOUND")]),
        outcome(S, 21, "O-unlinked", checks=[check(CUE)], observations=[claim(CUE)]),
    )
    assert [m[4] for m in ledger.matches()] == ["matched"] * 4
    assert ledger.observations() == ["selected E1r1 O-linked"]
    stats = ledger.stats(S)
    assert (stats["recurred"], stats["unknown"]) == (0, 1)


def test_two_chains_for_one_revision_are_two_observations():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        *linked_chain(("E1", 1)),
        outcome(S, 20, "O1", status="completed", receipt_id="R1"),
        outcome(S, 21, "O2", status="completed", receipt_id="R1"),
    )
    ids = {o["observation_id"] for o in ledger.out["recurrence-observations"]}
    assert len(ids) == 2
    assert ledger.stats(S)["selected"] == 2


# -- §8 streaks, review, statistics ------------------------------------------------


def recurrences(positions, artifact="E1", prefix="O"):
    return [outcome(S, p, f"{prefix}{p}", checks=[check(CUE)]) for p in positions]


def test_streak_counts_recurred_after_last_avoided_in_position_order():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        *linked_chain(("E1", 1)),
        *recurrences([20, 21]),
        avoided_outcome("A22", 22),
        *recurrences([23]),
    )
    assert ledger.stats(S)["top_revisions"][0]["terminal_recurred_streak"] == 1
    # A late recurred before the avoided changes nothing; one after it counts.
    ledger.feed(*recurrences([15]), *recurrences([30]))
    stats = ledger.stats(S)
    assert stats["top_revisions"][0]["terminal_recurred_streak"] == 2
    assert stats["recurred"] == 5


def test_late_avoided_is_inserted_by_position_not_appended():
    ledger = Ledger().feed(experience(S, 1, "E1"), *linked_chain(("E1", 1)), *recurrences([20, 22, 23]))
    assert ledger.stats(S)["needing_review"] == 1
    ledger.feed(avoided_outcome("A21", 21))
    stats = ledger.stats(S)
    assert stats["top_revisions"][0]["terminal_recurred_streak"] == 2
    assert stats["needing_review"] == 0


def test_review_candidate_once_per_run_for_experience_content():
    ledger = Ledger().feed(experience(S, 1, "E1"), *linked_chain(("E1", 1)), *recurrences([20, 21, 22, 23]))
    [candidate] = ledger.out["review-candidates"]
    assert (candidate["streak"], candidate["run_start_position"], candidate["repair_surface"]) == (3, None, "experience_content")
    assert [ref["task_outcome_ref"]["source_id"] for ref in candidate["failure_refs"]] == ["O20", "O21", "O22"]
    assert "3 times" in candidate["reason"]
    # A late recurrence lengthening the same run publishes nothing new.
    ledger.feed(*recurrences([19]))
    assert len(ledger.out["review-candidates"]) == 1
    # An avoided opens a new run; reaching 3 again publishes a second candidate.
    ledger.feed(avoided_outcome("A30", 30), *recurrences([31, 32, 33]))
    assert [c["run_start_position"] for c in ledger.out["review-candidates"]] == [None, 30]
    assert len({c["candidate_id"] for c in ledger.out["review-candidates"]}) == 2


def test_other_repair_surfaces_need_review_but_publish_no_candidate():
    ledger = Ledger().feed(experience(S, 1, "E1", surface="recall_policy"), *recurrences([2, 3, 4]))
    assert ledger.out["review-candidates"] == []
    assert ledger.stats(S)["needing_review"] == 1


def test_streaks_never_cross_revisions():
    ledger = Ledger().feed(
        experience(S, 1, "E1"), *recurrences([2, 3]),
        experience(S, 4, "E1", revision=2), *recurrences([5, 6]),
    )
    rows = [(r["artifact_ref"]["revision"], r["terminal_recurred_streak"]) for r in ledger.stats(S)["top_revisions"]]
    assert rows == [(1, 2), (2, 2)]
    assert ledger.stats(S)["needing_review"] == 0


def test_review_threshold_is_configurable():
    ledger = Ledger(LedgerConfig(review_threshold=2)).feed(experience(S, 1, "E1"), *recurrences([2, 3]))
    assert len(ledger.out["review-candidates"]) == 1


def test_top_revisions_order_and_limit():
    records = [experience(S, i, f"E{i}", cue=f"cue {i}") for i in (1, 2, 3)]
    outcomes = []
    position = 10
    for artifact, count in (("1", 1), ("2", 2), ("3", 1)):
        for _ in range(count):
            outcomes.append(outcome(S, position, f"O{position}", checks=[check(f"cue {artifact}")]))
            position += 1
    ledger = Ledger(LedgerConfig(top_revisions_limit=2)).feed(*records, *outcomes)
    rows = [(r["artifact_ref"]["artifact_id"], r["terminal_recurred_streak"]) for r in ledger.stats(S)["top_revisions"]]
    assert rows == [("E2", 2), ("E1", 1)]  # streak desc, then ArtifactRef order; limit 2


def test_unlinked_handoff_citations_counts_pairs_until_an_outcome_links():
    ledger = Ledger().feed(
        experience(S, 1, "E1"),
        experience(S, 2, "E2", cue="other"),
        experience(S, 3, "PLAIN", failure=False),
        handoff(S, 5, "H1", [("E1", 1), ("E2", 1), ("PLAIN", 1)]),
        handoff(S, 6, "H2", [("E1", 1), ("LATE", 1), ("FORWARD", 1)]),
    )
    assert ledger.stats(S)["unlinked_handoff_citations"] == 3
    ledger.feed(experience(S, 4, "LATE", cue="late one"))  # arrives late, published before H2: counted when it arrives
    assert ledger.stats(S)["unlinked_handoff_citations"] == 4
    ledger.feed(experience(S, 10, "FORWARD", cue="forward one"))  # published after H2: a forward citation (§16), never counted
    assert (ledger.stats(S)["unlinked_handoff_citations"], ledger.stats(S)["forward_references"]) == (4, 1)
    ledger.feed(receipt(S, 7, "R1", "H1"), outcome(S, 8, "O1", status="completed", receipt_id="R1"))
    assert ledger.stats(S)["unlinked_handoff_citations"] == 2
    ledger.feed(outcome(S, 9, "O2", status="completed", receipt_id="R1"))
    assert ledger.stats(S)["unlinked_handoff_citations"] == 2


def test_statistics_are_republished_only_when_they_change():
    ledger = Ledger().feed(experience(S, 1, "E1"), outcome(S, 2, "O1", checks=[check(CUE)]))
    count = len(ledger.out["recurrence-statistics"])
    ledger.feed(experience(S, 1, "E1"))  # duplicate: nothing changes
    assert len(ledger.out["recurrence-statistics"]) == count
    assert ledger.stats(S)["as_of_position"] == 2


def test_scopes_are_independent():
    ledger = Ledger().feed(
        experience("a", 1, "E1"),
        experience("b", 1, "E1"),
        outcome("a", 2, "O1", checks=[check(CUE)]),
    )
    assert ledger.stats("a")["recurred"] == 1
    assert ledger.stats("b")["recurred"] == 0


def test_top_revisions_carry_the_revision_yield_figures():
    ledger = Ledger().feed(
        experience(S, 1, "E1", surface="recall_policy"),
        *linked_chain(("E1", 1)),
        *[outcome(S, p, f"O{p}", receipt_id="R1", checks=[check(CUE)]) for p in (20, 22)],
        avoided_outcome("A21", 21),
    )
    [row] = ledger.stats(S)["top_revisions"]
    assert {k: row[k] for k in ("repair_surface", "selected", "recurred", "avoided", "yield", "low_yield", "terminal_recurred_streak")} == {
        "repair_surface": "recall_policy", "selected": 3, "recurred": 2, "avoided": 1, "yield": 0.3333,
        "low_yield": False, "terminal_recurred_streak": 1,
    }
    ledger.feed(*[outcome(S, p, f"O{p}", receipt_id="R1", checks=[check(CUE)]) for p in (23, 24, 25)])
    [row] = ledger.stats(S)["top_revisions"]
    assert (row["selected"], row["recurred"], row["yield"], row["low_yield"]) == (6, 5, 0.1667, True)


def test_scope_yield_metrics():
    ledger = Ledger().feed(
        experience(S, 1, "E1", surface="recall_policy"),
        *linked_chain(("E1", 1)),
        outcome(S, 20, "O20", receipt_id="R1", checks=[check(CUE)]),
        avoided_outcome("A21", 21),
        experience(S, 22, "E1", revision=2, surface="recall_policy"),  # r1 is superseded from here on
        outcome(S, 23, "O23", receipt_id="R1", checks=[check(CUE)]),  # linked: selects the stale r1
        outcome(S, 24, "O24", checks=[check(CUE)]),  # unlinked: recurs on r2, not in the rate
    )
    stats = ledger.stats(S)
    assert stats["repeat_failure_rate"] == 0.6667  # 2 linked recurred / (2 + 1 avoided)
    assert stats["stale_revision_selections"] == 1
    assert stats["by_repair_surface"]["recall_policy"] == {"selected": 3, "recurred": 3, "avoided": 1}
    assert stats["by_repair_surface"]["experience_content"] == {"selected": 0, "recurred": 0, "avoided": 0}


def revision_rows(ledger: Ledger) -> dict[tuple[str, int], dict]:
    """The last revision-statistics row per revision (the revisions view)."""
    return {(r["artifact_ref"]["artifact_id"], r["artifact_ref"]["revision"]): r for r in ledger.out["revision-statistics"]}


def test_the_revisions_view_covers_every_revision_beyond_top_revisions():
    ledger = Ledger(LedgerConfig(top_revisions_limit=1)).feed(
        experience(S, 1, "E1", surface="recall_policy"),
        experience(S, 2, "E2", cue="other cue", surface="working_state", subject="another check"),
        *linked_chain(("E1", 1), ("E2", 1)),
        outcome(S, 20, "O20", receipt_id="R1", checks=[check(CUE)]),
        outcome(S, 21, "O21", receipt_id="R1", checks=[check(CUE)]),
        avoided_outcome("A22", 22),
        experience(S, 23, "E1", revision=2, surface="recall_policy"),
        outcome(S, 24, "O24", checks=[check(CUE)]),  # unlinked: recurs on the head r2
    )
    rows = revision_rows(ledger)
    assert len(ledger.stats(S)["top_revisions"]) == 1
    assert set(rows) == {("E1", 1), ("E2", 1), ("E1", 2)}
    pick = ("selected", "recurred", "avoided", "yield", "low_yield", "terminal_recurred_streak", "needs_review", "repair_surface")
    assert {key: {k: row[k] for k in pick} for key, row in rows.items()} == {
        # A22 avoids E1 (its condition and check) but is only "unknown" for E2 (no bound check)
        ("E1", 1): {"selected": 3, "recurred": 2, "avoided": 1, "yield": 0.3333, "low_yield": False,
                    "terminal_recurred_streak": 0, "needs_review": False, "repair_surface": "recall_policy"},
        ("E2", 1): {"selected": 3, "recurred": 0, "avoided": 0, "yield": None, "low_yield": False,
                    "terminal_recurred_streak": 0, "needs_review": False, "repair_surface": "working_state"},
        ("E1", 2): {"selected": 0, "recurred": 1, "avoided": 0, "yield": 0.0, "low_yield": False,
                    "terminal_recurred_streak": 1, "needs_review": False, "repair_surface": "recall_policy"},
    }
    # top_revisions rows and the view agree on the figures they share
    [top] = ledger.stats(S)["top_revisions"]
    view = rows[(top["artifact_ref"]["artifact_id"], top["artifact_ref"]["revision"])]
    assert {k: top[k] for k in top} == {k: view[k] for k in top}


def test_revision_rows_are_published_only_for_revisions_the_event_changed():
    ledger = Ledger().feed(experience(S, 1, "E1"), experience(S, 2, "E2", cue="other cue"))
    assert ledger.out["revision-statistics"] == []
    ledger.feed(outcome(S, 3, "O3", checks=[check(CUE)]))
    assert [(r["artifact_ref"]["artifact_id"], r["recurred"]) for r in ledger.out["revision-statistics"]] == [("E1", 1)]
    ledger.feed(outcome(S, 3, "O3", checks=[check(CUE)]))  # duplicate
    assert len(ledger.out["revision-statistics"]) == 1
