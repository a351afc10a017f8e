"""contract §17 (rev. 3): every unknown selection has exactly one reason;
each revision counts its unknowns by reason, its ambiguous matches and
whether its binding is suspect; each scope sums them and counts ambiguous
and unmatched failures."""

from __future__ import annotations

import pytest

from recurrence_ledger.ledger.records import RevisionStatistics, ScopeStatistics, UnknownReasons
from recurrence_ledger.ledger.state import LedgerState
from recurrence_ledger.ledger.statistics import unknown_figures
from recurrence_ledger.ledger.streaks import revision_record
from recurrence_ledger.ledger.verdicts import SUSPECT_REASONS, UNKNOWN_REASONS, Binding, unknown_reason
from recurrence_ledger.serde import avro
from tests.conftest import case
from tests.journal import Ledger, check, claim, experience, handoff, outcome, receipt

S = "scope"
CUE = "port already bound"
COND, SUBJECT = "tests started in sandbox", "ports free before pytest"


def linked(*records, cites=(("E1", 1),)):
    return [experience(S, 1, "E1"), handoff(S, 2, "H1", list(cites)), receipt(S, 3, "R1", "H1"), *records]


def row(ledger: Ledger, artifact_id: str = "E1") -> dict:
    return [r for r in ledger.out["revision-statistics"] if r["artifact_ref"]["artifact_id"] == artifact_id][-1]


def test_the_eleven_reasons_are_one_list_in_the_model_the_schema_and_the_records():
    assert UNKNOWN_REASONS == tuple(UnknownReasons.model_fields) == (
        "multiple_matches", "ambiguous", "condition_empty", "condition_not_observed", "condition_unverified",
        "condition_duplicated", "check_missing", "check_unverified", "check_duplicated", "check_not_run", "check_failed")
    assert tuple(field["name"] for field in avro.parsed_schema("UnknownReasons")["fields"]) == UNKNOWN_REASONS
    assert SUSPECT_REASONS == {"condition_empty", "check_missing", "check_unverified", "check_duplicated", "check_not_run", "check_failed"}
    ledger = Ledger().feed(*linked(outcome(S, 4, "O", status="completed", receipt_id="R1"))).flush()
    assert list(ledger.stats(S)["unknown_reasons"]) == list(UNKNOWN_REASONS)  # every key, in order (before canonical JSON)
    assert list(row(ledger)["unknown_reasons"]) == list(UNKNOWN_REASONS)


def test_the_first_reason_that_holds_wins():
    assert unknown_reason(2, True, None) == "multiple_matches"
    assert unknown_reason(0, True, Binding("condition_empty")) == "ambiguous"
    assert unknown_reason(0, False, Binding("check_failed", (0,), (1,))) == "check_failed"
    with pytest.raises(ValueError):
        unknown_reason(1, False, None)  # one matched item: recurred
    with pytest.raises(ValueError):
        unknown_reason(0, False, Binding(None, (0,), (0,)))  # the binding holds: avoided


def test_every_unknown_selection_of_the_fixture_has_one_reason_and_the_sums_hold():
    journal, expected = case("unknown_reasons")
    import json

    ledger = Ledger().feed(*[json.loads(line) for line in journal.read_text().splitlines()]).flush()
    stats = ledger.stats("bind-audit")
    assert all(count >= 1 for count in stats["unknown_reasons"].values())  # every reason at least once
    assert sum(stats["unknown_reasons"].values()) == stats["unknown"] == 14
    rows = {r["artifact_ref"]["artifact_id"]: r for r in ledger.out["revision-statistics"]}
    assert sum(r["unknown"] for r in rows.values()) == stats["unknown"]
    for revision in rows.values():
        assert sum(revision["unknown_reasons"].values()) == revision["unknown"]
        RevisionStatistics.model_validate(revision)
    ScopeStatistics.model_validate(stats)
    assert stats["binding_suspects"] == sum(r["binding_suspect"] for r in rows.values()) == 1


def test_binding_suspect_needs_the_threshold_and_ends_with_any_terminal_verdict():
    skipped = [check(SUBJECT, status="skipped")]
    ledger = Ledger().feed(*linked(
        outcome(S, 4, "O1", status="completed", receipt_id="R1", observations=[claim(COND)], checks=skipped),
        outcome(S, 5, "O2", status="completed", receipt_id="R1", observations=[claim(COND)]),  # check_missing
        outcome(S, 6, "O3", status="completed", receipt_id="R1"),  # condition_not_observed: not a suspect reason
    ))
    assert (row(ledger)["binding_suspect"], ledger.stats(S)["binding_suspects"]) == (False, 0)
    ledger.feed(outcome(S, 7, "O4", status="completed", receipt_id="R1", observations=[claim(COND)], checks=skipped))
    assert (row(ledger)["binding_suspect"], ledger.stats(S)["binding_suspects"]) == (True, 1)
    assert row(ledger)["unknown_reasons"]["check_not_run"] == 2
    ledger.feed(outcome(S, 8, "O5", checks=[check(CUE)]))  # an unlinked recurrence: E1 has a terminal verdict now
    assert (row(ledger)["binding_suspect"], ledger.stats(S)["binding_suspects"]) == (False, 0)
    assert (row(ledger)["unknown"], row(ledger)["recurred"]) == (4, 1)  # the unlinked verdict settles no selection
    ledger.feed(outcome(S, 9, "O6", status="completed", receipt_id="R1", observations=[claim(COND)], checks=skipped))
    assert (row(ledger)["binding_suspect"], ledger.stats(S)["binding_suspects"]) == (False, 0)


def test_ambiguous_matches_count_for_each_eligible_revision_and_give_it_a_row():
    ledger = Ledger().feed(
        experience(S, 1, "E1"), experience(S, 2, "E2"), experience(S, 3, "E3", cue="other"),
        outcome(S, 4, "O1", checks=[check(CUE)]),  # unlinked: scope_heads, E1 and E2 eligible
        outcome(S, 5, "O2", checks=[check("nothing known")]),  # unmatched
        outcome(S, 6, "O3", observations=[claim("")], checks=[]),  # an empty match input: unmatched
    ).flush()
    stats = ledger.stats(S)
    assert (stats["ambiguous_matches"], stats["unmatched_failures"], stats["selected"]) == (1, 2, 0)
    assert {r["artifact_ref"]["artifact_id"]: (r["ambiguous"], r["selected"], r["unknown"]) for r in ledger.out["revision-statistics"]} == {
        "E1": (1, 0, 0), "E2": (1, 0, 0)}


def test_a_linked_ambiguous_item_is_the_reason_of_its_eligible_candidates_only():
    ledger = Ledger().feed(
        experience(S, 1, "E1"), experience(S, 2, "E2"), experience(S, 3, "E3", cue="other"),
        handoff(S, 4, "H1", [("E1", 1), ("E2", 1), ("E3", 1)]), receipt(S, 5, "R1", "H1"),
        outcome(S, 6, "O", receipt_id="R1", checks=[check(CUE)]),
    ).flush()
    reasons = {r["artifact_ref"]["artifact_id"]: {k: v for k, v in r["unknown_reasons"].items() if v} for r in ledger.out["revision-statistics"]}
    assert reasons == {"E1": {"ambiguous": 1}, "E2": {"ambiguous": 1}, "E3": {"condition_not_observed": 1}}
    assert ledger.stats(S)["ambiguous_matches"] == 1


def test_an_avoided_verdict_beats_an_ambiguous_item():
    """§17 reasons are for selections without a terminal verdict: an
    ambiguous item is not a matched one, so avoided still holds (§7)."""
    ledger = Ledger().feed(
        experience(S, 1, "E1"), experience(S, 2, "E2"), handoff(S, 3, "H1", [("E1", 1), ("E2", 1)]), receipt(S, 4, "R1", "H1"),
        outcome(S, 5, "O", receipt_id="R1", observations=[claim(COND)], checks=[check(SUBJECT, status="passed"), check(CUE)]),
    ).flush()
    assert ledger.observations() == ["selected E1r1 O", "avoided E1r1 O", "selected E2r1 O", "avoided E2r1 O"]
    assert (ledger.stats(S)["unknown"], ledger.stats(S)["ambiguous_matches"]) == (0, 1)


def test_a_revision_record_written_before_revision_3_takes_its_verdicts_as_linked():
    state = LedgerState()
    state.put({"signature_key": CUE, "repair_surface": "experience_content", "last_avoided": None, "streak": 2, "published": [],
               "selected": 3, "recurred": 2, "avoided": 0}, "streak", S, "E1", 1)
    assert unknown_figures(state.get("streak", S, "E1", 1))["unknown"] == 1
    assert revision_record(state, ("streak", S, "E1", 1), CUE, "experience_content")["linked_verdicts"] == 2
    assert unknown_figures({"selected": 1, "recurred": 4})["unknown"] == 0  # more verdicts than selections: never below 0
