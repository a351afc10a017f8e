"""What-if (contract §20) over the pattern settings of contract §23: the
pattern threshold and the group separator change no verdict, so they are
read off the pass's final state, and the report lists the pattern
candidates another setting adds and removes."""

from __future__ import annotations

from recurrence_ledger.ledger.patterns import pattern_candidate_id
from recurrence_ledger.whatif.policies import Policy, passes
from recurrence_ledger.whatif.replay import JournalInput, replay
from recurrence_ledger.whatif.report import build_report
from tests.conftest import CASES

LOCK = "schema migration lock timeout"


def run(tmp_path, *policies: Policy):
    source = JournalInput(CASES / "patterns.jsonl").open()
    try:
        return replay(source, list(policies), out_dir=tmp_path, show_progress=False)
    finally:
        source.close()


def test_pattern_settings_share_one_pass_and_report_the_candidates_added_and_removed(tmp_path):
    baseline = Policy()
    grouped = Policy(pattern_group_separator="/", pattern_threshold=2)
    assert len(passes([baseline, grouped])) == 1
    outcome = run(tmp_path, baseline, grouped)
    document = build_report(outcome, baseline, {}, [grouped])
    [comparison] = document["comparisons"]
    assert comparison["differs"] and comparison["scopes"] == {}  # no scope's own figures change
    assert comparison["changed_settings"] == ["pattern_threshold", "pattern_group_separator"]
    assert comparison["pattern_candidates"] == {
        "added": [
            {"candidate_id": pattern_candidate_id("teamA", LOCK, 2), "group": "teamA", "signature_key": LOCK, "threshold": 2},
            {"candidate_id": pattern_candidate_id("teamB", LOCK, 2), "group": "teamB", "signature_key": LOCK, "threshold": 2},
        ],
        "removed": [{"candidate_id": pattern_candidate_id("", LOCK, 3), "group": "", "signature_key": LOCK, "threshold": 3}],
    }
    assert comparison["totals"]["pattern_candidates_added"] == 2 and comparison["totals"]["pattern_candidates_removed"] == 1
    assert comparison["totals"]["baseline"]["pattern_candidates"] == 1


def test_a_threshold_no_pattern_reaches_removes_every_candidate(tmp_path):
    baseline, high = Policy(), Policy(pattern_threshold=7)
    outcome = run(tmp_path, baseline, high)
    [comparison] = build_report(outcome, baseline, {}, [high])["comparisons"]
    assert comparison["pattern_candidates"]["added"] == []
    assert [row["signature_key"] for row in comparison["pattern_candidates"]["removed"]] == [LOCK]
    assert outcome.results[high].pattern_candidates == {}
