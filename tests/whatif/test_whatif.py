"""Policy replay (contract §20) without a broker: the thresholds a what-if
computes beside the core are exactly what the core decides at those
thresholds; a what-if at the baseline reports no difference; the report
lists what changes per scope; a horizon what-if runs a pass of its own."""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recurrence_ledger.catalogue import ADMISSION_DECISIONS, REVIEW_CANDIDATES
from recurrence_ledger.embedded import journal_lines, run_journal
from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.whatif.compare import compare, rejected_avoided
from recurrence_ledger.whatif.policies import Policy, Sweep, passes
from recurrence_ledger.whatif.replay import JournalInput, UnreadableJournal, replay
from recurrence_ledger.whatif.report import build_report, markdown
from recurrence_ledger.whatif.shadow import WhatIfProcessor
from recurrence_ledger import policy
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import CASE_NAMES, REPO, case
from tests.journal import Ledger, check, experience, handoff, outcome, receipt, write_journal
from tests.plugins.processes import run_cli

EXAMPLE = REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    """A generated journal with admission candidates (some wait), late
    revisions and every kind of outcome."""
    records = generate_journal(Workload(scopes=4, outcomes_per_scope=150, heads_per_scope=4, handoffs=2, seed=11, candidates=0.3))
    return write_journal(tmp_path_factory.mktemp("workload") / "workload.jsonl", records)


def journals(workload: Path) -> list[Path]:
    return [case(name)[0] for name in CASE_NAMES] + [EXAMPLE, workload]


def file_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def run(journal: Path, policies, **options):
    source = JournalInput(journal).open()
    try:
        return replay(source, policies, show_progress=False, **options)
    finally:
        source.close()


def test_every_threshold_of_one_pass_is_what_the_core_publishes_at_it(workload, tmp_path):
    reviews, nears = range(1, 7), (Fraction(1, 2), Fraction(4, 5), Fraction(9, 10), Fraction(1))
    for journal in journals(workload):
        processor = WhatIfProcessor(LedgerConfig(), reviews, nears)
        with open(journal, "rb") as handle:
            for number, line in journal_lines(handle):
                ingest_journal_line(processor, line, Coordinates("source-journal", None, number, None))
        processor.flush()
        for threshold in reviews:
            run_journal(journal, tmp_path / "rj", LedgerConfig(review_threshold=threshold), show_progress=False)
            published = [canonical_json(c) for c in processor.candidates[(threshold, 1)]]
            assert published == file_lines(tmp_path / "rj" / f"{REVIEW_CANDIDATES}.jsonl"), (journal.name, threshold)
        for threshold in nears:
            run_journal(journal, tmp_path / "rj", LedgerConfig(near_duplicate_threshold=threshold), show_progress=False)
            decided = [canonical_json(d) for d in processor.decisions[threshold].values()]
            assert decided == file_lines(tmp_path / "rj" / f"{ADMISSION_DECISIONS}.jsonl"), (journal.name, threshold)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), native=st.integers(1, 5))
def test_late_verdicts_in_any_arrival_order_publish_what_the_core_publishes_at_every_threshold(seed, native):
    """Outcomes in a random order: late recurred verdicts lengthen closed
    runs, late avoided verdicts split published ones (contract §8)."""
    records = list(generate_journal(Workload(scopes=2, outcomes_per_scope=40, heads_per_scope=2, handoffs=1, seed=seed % 1000)))
    outcomes = [r for r in records if r["topic"] == "task-outcomes"]
    random.Random(seed).shuffle(outcomes)
    journal = [r for r in records if r["topic"] != "task-outcomes"] + outcomes
    processor = WhatIfProcessor(LedgerConfig(review_threshold=native), range(1, 7))
    for number, record in enumerate(journal):
        ingest_journal_line(processor, json.dumps(record).encode(), Coordinates("source-journal", None, number, None))
    processor.flush()
    for threshold in range(1, 7):
        core = Ledger(LedgerConfig(review_threshold=threshold)).feed(*journal).flush()
        assert processor.candidates[(threshold, 1)] == core.out[REVIEW_CANDIDATES], threshold


def test_the_alternatives_output_files_are_run_journals_byte_for_byte(workload, tmp_path):
    for journal in journals(workload):
        for alternative in (Policy(review_threshold=4), Policy(near_duplicate_threshold=Fraction(3, 5), review_threshold=2)):
            run(journal, [Policy(), alternative], out_dir=tmp_path / "wi", facts_of=alternative)
            run_journal(journal, tmp_path / "rj", alternative.config(), show_progress=False)
            for path in sorted((tmp_path / "rj").iterdir()):
                assert (tmp_path / "wi" / "ledger" / path.name).read_bytes() == path.read_bytes(), (journal.name, path.name)


def test_a_what_if_at_the_baseline_reports_no_difference(workload, tmp_path):
    for journal in journals(workload):
        outcome_ = run(journal, [Policy(), Policy()], out_dir=tmp_path)
        comparison = compare(outcome_.results[Policy()], outcome_.results[Policy()])
        assert comparison["differs"] is False and comparison["scopes"] == {}
        assert "**No difference**" in markdown(build_report(outcome_, Policy(), {}, [Policy()]))


def test_the_report_lists_the_candidates_a_lower_threshold_adds_with_their_revision_and_streak(workload, tmp_path):
    base, alternative = Policy(), Policy(review_threshold=2)
    outcome_ = run(workload, [base, alternative], out_dir=tmp_path)
    comparison = compare(outcome_.results[base], outcome_.results[alternative])
    expected = {}
    for threshold in (3, 2):
        run_journal(workload, tmp_path / str(threshold), LedgerConfig(review_threshold=threshold), show_progress=False)
        candidates = map(json.loads, file_lines(tmp_path / str(threshold) / f"{REVIEW_CANDIDATES}.jsonl"))
        expected[threshold] = {candidate["candidate_id"]: candidate for candidate in candidates}
    added = {row["candidate_id"]: row for entry in comparison["scopes"].values() for row in entry.get("review_candidates", {}).get("added", [])}
    assert set(added) == set(expected[2]) - set(expected[3]) and added
    for candidate_id, row in added.items():
        candidate = expected[2][candidate_id]
        assert (row["artifact_id"], row["revision"], row["streak"]) == (
            candidate["artifact_ref"]["artifact_id"], candidate["artifact_ref"]["revision"], candidate["streak"])
    assert comparison["totals"]["review_candidates_removed"] == 0 and comparison["totals"]["review_candidates_added"] == len(added)
    assert comparison["totals"]["alternative"]["revisions_needing_review"] >= comparison["totals"]["baseline"]["revisions_needing_review"]


def test_admission_decisions_that_change_name_both_near_duplicate_lists(tmp_path):
    outcome_ = run(EXAMPLE, [Policy(), Policy(near_duplicate_threshold=Fraction(9, 10))], out_dir=tmp_path)
    comparison = compare(outcome_.results[Policy()], outcome_.results[Policy(near_duplicate_threshold=Fraction(9, 10))])
    [change] = comparison["scopes"]["billing-api"]["admission_decisions_changed"]
    assert change["candidate_id"] == "cand-client-regen"
    assert change["baseline"]["near_duplicates"] == [{"artifact_id": "EXP-schema-drift", "revision": 2, "score": 0.8}]
    assert change["alternative"]["near_duplicates"] == [] and change["alternative"]["decision"] == "accepted"


def horizon_journal(path: Path) -> Path:
    """O1 (position 4) names receipt R1 (position 3), which arrives last: it
    waits; eight more outcomes move the scope past a horizon of 5."""
    s = "horizon-scope"
    records = [
        experience(s, 1, "E1", cue="port already bound"),
        handoff(s, 2, "H1", [("E1", 1)]),
        outcome(s, 4, "O1", receipt_id="R1", checks=[check("port already bound")]),
        *[outcome(s, 5 + n, f"F{n}", status="completed", checks=[check("lint", status="passed")]) for n in range(8)],
        receipt(s, 3, "R1", "H1"),
    ]
    return write_journal(path, records)


def test_a_shorter_horizon_is_a_pass_of_its_own_and_the_report_names_the_outcome_it_unlinked(tmp_path):
    journal = horizon_journal(tmp_path / "horizon.jsonl")
    base, alternative = Policy(), Policy(provenance_horizon=5)
    assert len(passes([base, alternative])) == 2
    outcome_ = run(journal, [base, alternative], out_dir=tmp_path / "wi", facts_of=alternative)
    assert outcome_.passes == 2
    comparison = compare(outcome_.results[base], outcome_.results[alternative])
    entry = comparison["scopes"]["horizon-scope"]
    assert entry["horizon_unlinked"] == {"added": [{"task_outcome_id": "O1", "journal_position": 4}], "removed": []}
    assert entry["statistics"]["baseline"]["selected"] == 1 and entry["statistics"]["alternative"]["selected"] == 0
    run_journal(journal, tmp_path / "rj", alternative.config(), show_progress=False)
    for path in (tmp_path / "rj").iterdir():
        assert (tmp_path / "wi" / "ledger" / path.name).read_bytes() == path.read_bytes(), path.name


def test_policies_share_a_pass_unless_their_horizons_differ():
    groups = passes([Policy(review_threshold=4), Policy(), Policy(near_duplicate_threshold=Fraction(1, 2)), Policy(provenance_horizon=7), Policy()])
    assert [group.native for group in groups] == [Policy(review_threshold=4), Policy(provenance_horizon=7)]
    assert groups[0].review_thresholds == ((4, 1), (3, 1)) and groups[0].near_duplicate_thresholds == (Fraction(4, 5), Fraction(1, 2))
    assert Sweep(policy.REVIEW_THRESHOLD, (2, 3)).policies(Policy(top_revisions=5)) == (Policy(2, top_revisions=5), Policy(3, top_revisions=5))
    with pytest.raises(ValueError):
        Policy(review_threshold=0)


def test_rejected_candidates_avoided_counts_only_with_review_decisions(workload, tmp_path):
    base, alternative = Policy(), Policy(review_threshold=5)
    outcome_ = run(workload, [base, alternative], out_dir=tmp_path)
    results = outcome_.results
    assert rejected_avoided(results[base], results[alternative], None) is None
    raised = [(scope_id, candidate_id) for scope_id, per_scope in results[base].candidates.items() for candidate_id in per_scope]
    kept = {(scope_id, candidate_id) for scope_id, per_scope in results[alternative].candidates.items() for candidate_id in per_scope}
    decisions = {candidate: "rejected" if n % 2 else "approved" for n, candidate in enumerate(raised)}
    expected = sum(1 for candidate in raised if decisions[candidate] == "rejected" and candidate not in kept)
    assert rejected_avoided(results[base], results[alternative], decisions) == expected > 0


def test_a_journal_that_cannot_be_read_is_an_error_naming_it(tmp_path):
    for path in (tmp_path / "missing.jsonl", tmp_path):
        with pytest.raises(UnreadableJournal, match=str(path)):
            JournalInput(path).open()


def test_a_what_if_into_the_folder_of_another_leaves_only_its_own_files(tmp_path):
    """A sweep writes a chart and no ledger files, one alternative the
    reverse: into the same --out, each removes what the other left, so the
    folder never shows a chart or ledger files of another run."""
    journal, _ = case("review_loop")
    out = tmp_path / "out"
    single = ("what-if", str(journal), "--out", str(out), "--review-threshold", "2", "--quiet")
    assert run_cli(*single).returncode == 0
    assert (out / "ledger" / "recurrence-matches.jsonl").is_file() and not (out / "chart.png").exists()
    result = run_cli("what-if", str(journal), "--out", str(out), "--sweep", "review-threshold=2..4", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (out / "chart.png").is_file() and not (out / "ledger").exists()
    assert json.loads((out / "report.json").read_text())["ledger_files"] is None
    assert run_cli(*single).returncode == 0
    assert (out / "ledger" / "recurrence-matches.jsonl").is_file() and not (out / "chart.png").exists()


def test_an_output_folder_that_cannot_be_written_is_one_line_not_a_traceback(tmp_path):
    """run-journal, what-if and run: a file where the folder should be (or
    any file error reading the journal or writing the outputs) is one red
    line naming the error, exit 1."""
    journal, _ = case("review_loop")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    for command in (("run-journal", str(journal)), ("run-journal", str(journal), "--jobs", "2"),
                    ("what-if", str(journal), "--review-threshold", "2"), ("run", str(journal))):
        result = run_cli(*command, "--out", str(blocker / "sub"), env={"COLUMNS": "400", "KAFKA_BOOTSTRAP_SERVERS": ""})
        text = " ".join((result.stdout + result.stderr).split())
        assert result.returncode == 1 and "Traceback" not in text, (command, text[-600:])
        assert "Not a directory" in text and "choose another folder with --out DIR" in text, (command, text[-600:])
