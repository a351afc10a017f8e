"""contract §8 (rev. 2): every run of a revision's history can reach the
review threshold, whenever its recurrences arrive.

A run is the recurred verdicts between an opening avoided verdict (or the
start of history) and the next avoided verdict (or the end), named by the
opening avoided verdict's position (None: start of history). One
ReviewCandidate per run name, ever; a published one is never withdrawn.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger import chunks
from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
from recurrence_ledger.ledger.processor import LedgerConfig, LedgerProcessor
from recurrence_ledger.ledger.severity import REASON_BUCKETS
from recurrence_ledger.ledger.streaks import AVOIDED_CHUNKS, review_candidate_id
from recurrence_ledger.store.memory import ChangelogStore
from tests.conftest import facts, read_outputs
from tests.journal import Ledger, check, claim, experience, handoff, line, outcome, receipt, write_journal

CASES = Path(__file__).resolve().parents[1] / "cases"
S = "scope"
CUE = "port already bound"
E1 = {"family": "experience", "artifact_id": "E1", "revision": 1}


def late_run_case() -> tuple[Path, dict]:
    """(journal, expected facts) of tests/cases/late_run: a recurrence that
    arrives after the avoided verdict that closed its run."""
    journal = CASES / "late_run.jsonl"
    return journal, json.loads((CASES / "late_run.expected.json").read_text())


def chain(surface: str = "experience_content") -> list[dict]:
    """E1 (cue CUE) cited by H1, received through R1."""
    return [experience(S, 1, "E1", surface=surface), handoff(S, 2, "H1", [("E1", 1)]), receipt(S, 3, "R1", "H1")]


def recurred(position: int, receipt_id: str | None = "R1") -> dict:
    return outcome(S, position, f"O{position}", receipt_id=receipt_id, checks=[check(CUE)])


def avoided(position: int) -> dict:
    return outcome(S, position, f"O{position}", status="completed", receipt_id="R1",
                   observations=[claim("tests started in sandbox")], checks=[check("ports free before pytest", status="passed")])


def runs(ledger: Ledger) -> list[tuple[int | None, int, list[str]]]:
    """(run_start_position, streak, failure outcome ids) per published candidate."""
    return [
        (c["run_start_position"], c["streak"], [ref["task_outcome_ref"]["source_id"] for ref in c["failure_refs"]])
        for c in ledger.out["review-candidates"]
    ]


# -- the project's late-run case ----------------------------------------------------


def test_late_run_case_gives_its_expected_facts(tmp_path):
    journal, expected = late_run_case()
    summary = run_journal(journal, tmp_path, show_progress=False, validate_outputs=True)
    assert facts(read_outputs(tmp_path)) == expected
    assert summary.dead_letters == expected["dead_letter"] == 0


def test_late_run_case_publishes_the_same_candidate_as_position_order(tmp_path):
    journal, _ = late_run_case()
    records = [json.loads(text) for text in journal.read_text().splitlines()]
    in_order = write_journal(tmp_path / "in_order.jsonl", sorted(records, key=lambda r: r["value"]["journal_position"]))
    run_journal(journal, tmp_path / "late", show_progress=False, validate_outputs=True)
    run_journal(in_order, tmp_path / "ordered", show_progress=False, validate_outputs=True)
    late, ordered = read_outputs(tmp_path / "late"), read_outputs(tmp_path / "ordered")
    assert late["review-candidates"] == ordered["review-candidates"]
    [candidate] = late["review-candidates"]
    assert (candidate["run_start_position"], candidate["streak"]) == (None, 3)
    assert [(ref["task_outcome_ref"]["source_id"], ref["item_kind"], ref["item_index"]) for ref in candidate["failure_refs"]] == [
        ("TO-mon", "check", 0), ("TO-tue", "observation", 0), ("TO-wed-late", "check", 0),
    ]
    recurred_refs = {o["failure_ref"]["item_digest"] for o in late["recurrence-observations"] if o["event"] == "recurred"}
    assert {ref["item_digest"] for ref in candidate["failure_refs"]} == recurred_refs
    assert candidate["candidate_id"] == review_candidate_id(
        "warehouse-sync", {"family": "experience", "artifact_id": "EXP-stale-lock", "revision": 1},
        "stale lock file blocked the import", None)
    assert late["recurrence-statistics"][-1] == ordered["recurrence-statistics"][-1]


# -- closed runs ----------------------------------------------------------------------


def test_the_example_of_the_contract_delivered_late():
    """Recurred 10, 20, avoided 50, then recurred 30: the run opened at the
    start of history holds three recurrences."""
    ledger = Ledger().feed(*chain(), recurred(10), recurred(20), avoided(50))
    assert ledger.out["review-candidates"] == []
    ledger.feed(recurred(30))
    assert runs(ledger) == [(None, 3, ["O10", "O20", "O30"])]
    stats = ledger.stats(S)
    assert (stats["needing_review"], stats["top_revisions"]) == (0, [])  # the streak is 0: after the avoided at 50


def test_a_late_recurrence_pending_on_a_receipt_that_arrives_after_the_avoided_one():
    ledger = Ledger().feed(
        *chain(), recurred(10), recurred(20),
        recurred(30, receipt_id="R2"),  # pending: R2 (position 25) has not arrived
        avoided(50),
    )
    assert ledger.stats(S)["pending_outcomes"] == 1
    assert ledger.out["review-candidates"] == []
    ledger.feed(receipt(S, 25, "R2", "H1"))
    assert runs(ledger) == [(None, 3, ["O10", "O20", "O30"])]
    assert ledger.stats(S)["pending_outcomes"] == 0


def test_a_late_recurrence_in_a_run_between_two_avoided_verdicts():
    ledger = Ledger().feed(*chain(), avoided(50), recurred(60), recurred(70), avoided(80), recurred(90))
    assert ledger.stats(S)["top_revisions"][0]["terminal_recurred_streak"] == 1
    ledger.feed(recurred(65))
    assert runs(ledger) == [(50, 3, ["O60", "O65", "O70"])]
    stats = ledger.stats(S)
    assert (stats["top_revisions"][0]["terminal_recurred_streak"], stats["needing_review"]) == (1, 0)
    # The run is named: one more late recurrence in it publishes nothing new.
    ledger.feed(recurred(75))
    assert len(ledger.out["review-candidates"]) == 1


def test_a_late_unlinked_recurrence_counts_in_its_run_too():
    ledger = Ledger().feed(*chain(), recurred(10), recurred(20), avoided(50), recurred(30, receipt_id=None))
    assert ledger.matches()[-1] == ("O30", "check", 0, "scope_heads", "matched", "E1r1")
    assert runs(ledger) == [(None, 3, ["O10", "O20", "O30"])]


def test_a_closed_run_of_another_repair_surface_publishes_nothing():
    ledger = Ledger().feed(*chain("working_state"), recurred(10), recurred(20), avoided(50), recurred(30))
    assert ledger.out["review-candidates"] == []


def test_the_threshold_is_the_deployments():
    ledger = Ledger(LedgerConfig(review_threshold=2)).feed(*chain(), recurred(10), avoided(50), recurred(60), recurred(20))
    assert runs(ledger) == [(None, 2, ["O10", "O20"])]


# -- a late avoided verdict splitting a run -------------------------------------------------


def test_a_late_avoided_verdict_does_not_withdraw_or_republish_the_split_run():
    ledger = Ledger().feed(*chain(), recurred(10), recurred(20), recurred(30))
    assert runs(ledger) == [(None, 3, ["O10", "O20", "O30"])]
    ledger.feed(avoided(15))  # splits the flagged run: [10] stays None, [20, 30] become run 15
    assert len(ledger.out["review-candidates"]) == 1  # 15 holds 2: no candidate; None stays published
    stats = ledger.stats(S)
    assert (stats["top_revisions"][0]["terminal_recurred_streak"], stats["needing_review"]) == (2, 0)
    ledger.feed(recurred(12), recurred(13))  # run None is back to three: its name was published already
    assert len(ledger.out["review-candidates"]) == 1
    ledger.feed(recurred(40))  # run 15 reaches three: a new name
    assert runs(ledger)[1] == (15, 3, ["O20", "O30", "O40"])


def test_a_late_avoided_verdict_splitting_off_a_run_at_the_threshold_publishes_it():
    """Position order would publish both runs; so does this arrival order
    (the split-off half has a name of its own)."""
    ledger = Ledger().feed(*chain(), *(recurred(p) for p in (10, 20, 30, 40, 50, 60)))
    ledger.feed(avoided(25))
    assert runs(ledger) == [(None, 3, ["O10", "O20", "O30"]), (25, 4, ["O30", "O40", "O50", "O60"])]
    assert ledger.stats(S)["needing_review"] == 1
    ordered = Ledger().feed(*chain(), *(recurred(p) for p in (10, 20)), avoided(25), *(recurred(p) for p in (30, 40, 50, 60)))
    assert [c["candidate_id"] for c in ordered.out["review-candidates"]] == [ledger.out["review-candidates"][1]["candidate_id"]]


# -- state ---------------------------------------------------------------------------------


def test_runs_are_kept_compactly_per_run_and_work_with_the_worker_store():
    """The run state survives the worker's changelog round trip (tuple keys
    with -1 for the start of history, JSON values), and holds positions and
    item coordinates, not whole failure refs."""
    store = ChangelogStore()
    processor = LedgerProcessor(store, validate_outputs=True)
    for offset, record in enumerate([*chain(), recurred(10), recurred(20), avoided(50)]):
        ingest_journal_line(processor, line(record), Coordinates("source-journal", None, offset, None))
    restored = ChangelogStore()
    for key, value in store.changes():
        restored.restore(key, value)
    assert restored.data == store.data
    runs_kept = {key[4]: value for key, value in restored.data.items() if key[0] == "run"}
    assert runs_kept == {-1: [[10, "O10", "check", 0], [20, "O20", "check", 0]]}
    assert chunks.values(restored.data, AVOIDED_CHUNKS, "avoided_at", S, "E1", 1) == [50]
    assert restored.data[(AVOIDED_CHUNKS, S, "E1", 1, 0)] == [50]
    emits = ingest_journal_line(LedgerProcessor(restored), line(recurred(30)), Coordinates("source-journal", None, 9, None))
    [candidate] = [emit.value for emit in emits if emit.topic == "review-candidates"]
    assert [ref["task_outcome_ref"]["source_id"] for ref in candidate["failure_refs"]] == ["O10", "O20", "O30"]


def test_a_revision_record_written_before_revision_2_is_converted():
    """Revision 1 kept only the current run (with whole refs): the record is
    converted on its next verdict; runs closed before it were not kept, so a
    verdict before its last avoided one keeps the old behaviour."""
    ledger = Ledger().feed(*chain(), recurred(10), avoided(20), recurred(30))
    state = ledger.processor.state
    [ref30] = [o["failure_ref"] for o in ledger.out["recurrence-observations"] if o["event"] == "recurred" and o["task_outcome_position"] == 30]
    for key in [key for key in state.store if key[0] in ("run", "avoided_at", AVOIDED_CHUNKS)]:
        del state.store[key]
    record = state.get("streak", S, "E1", 1)
    del record["streak"]
    record["run"] = [[30, ref30]]
    ledger.feed(recurred(40), recurred(5), avoided(35))
    record = state.get("streak", S, "E1", 1)
    assert "run" not in record and record["tracked_from"] == 20
    assert state.get("run", S, "E1", 1, 20) == [[30, "O30", "check", 0]]
    assert state.get("run", S, "E1", 1, 35) == [[40, "O40", "check", 0]]
    assert chunks.values(state.store, AVOIDED_CHUNKS, "avoided_at", S, "E1", 1) == [20, 35]
    assert ledger.stats(S)["top_revisions"][0]["terminal_recurred_streak"] == 1
    ledger.feed(recurred(45), recurred(50))
    assert runs(ledger) == [(35, 3, ["O40", "O45", "O50"])]


# -- the property: candidates do not depend on arrival order ----------------------------------


def candidates_by_model(history: list[bool], order: list[int], threshold: int) -> tuple[set, bool]:
    """From scratch after every arrival: the names of runs that held ≥
    ``threshold`` recurred verdicts at some point (each publishes once), and
    whether a late avoided verdict split a run already flagged."""
    positions = [10 * (index + 1) for index in range(len(history))]
    arrived: list[int] = []
    flagged: set = set()
    split_flagged = False
    for index in order:
        if not history[index]:
            before = [positions[i] for i in arrived if not history[i] and positions[i] < positions[index]]
            if (max(before) if before else None) in flagged:
                split_flagged = True
        arrived.append(index)
        counts: dict = {}
        name = None
        for i in sorted(arrived):
            if history[i]:
                counts[name] = counts.get(name, 0) + 1
            else:
                name = positions[i]
        flagged |= {run for run, count in counts.items() if count >= threshold}
    return flagged, split_flagged


def feed_history(history: list[bool], order: list[int], threshold: int) -> Ledger:
    ledger = Ledger(LedgerConfig(review_threshold=threshold)).feed(*chain())
    for index in order:
        position = 10 * (index + 1)
        ledger.feed(recurred(position) if history[index] else avoided(position))
    return ledger


@settings(max_examples=300, deadline=None)
@given(
    history=st.lists(st.booleans(), min_size=1, max_size=12),
    threshold=st.sampled_from([1, 2, 3]),
    data=st.data(),
)
def test_review_candidates_do_not_depend_on_arrival_order(history, threshold, data):
    order = data.draw(st.permutations(range(len(history))), label="arrival order")
    late = feed_history(history, order, threshold)
    in_order = feed_history(history, list(range(len(history))), threshold)

    def names(ledger: Ledger) -> set:
        return {c["run_start_position"] for c in ledger.out["review-candidates"]}

    flagged, split_flagged = candidates_by_model(history, order, threshold)
    event(f"split a flagged run: {split_flagged}")
    assert names(late) == flagged
    assert len(late.out["review-candidates"]) == len(flagged)  # one candidate per run name
    assert names(in_order) == candidates_by_model(history, list(range(len(history))), threshold)[0]
    if not split_flagged:
        assert {c["candidate_id"] for c in late.out["review-candidates"]} == {c["candidate_id"] for c in in_order.out["review-candidates"]}
    else:
        assert names(in_order) <= names(late)
    # Streak and statistics stay as they are: the final view does not depend
    # on arrival order — but for ``reviews`` (contract §18), which counts the
    # candidates, each open here (no revision above this one).
    late_stats, in_order_stats = late.stats(S), in_order.stats(S)
    for ledger, stats in ((late, late_stats), (in_order, in_order_stats)):
        assert stats.pop("reviews") == {
            "open": len(ledger.out["review-candidates"]), "approved": 0, "rejected": 0, "superseded": 0, "rejected_by_reason": dict.fromkeys(REASON_BUCKETS, 0), "promotion_rate": None,
        }
    assert late_stats == in_order_stats
    for candidate in late.out["review-candidates"]:
        positions = [int(ref["task_outcome_ref"]["source_id"][1:]) for ref in candidate["failure_refs"]]
        assert positions == sorted(positions) and len(positions) == candidate["streak"] >= threshold
        assert all(history[p // 10 - 1] for p in positions)
        assert all(p > (candidate["run_start_position"] or 0) for p in positions)
