"""What-if covers the critical review threshold (contract §20, §22): each
(review threshold, critical review threshold) pair computed beside the core
in one pass publishes what the core publishes at that policy, and a what-if
comparison of another critical review threshold reports the review
candidates and revisions needing review it adds and removes."""

from __future__ import annotations

import json

from recurrence_ledger.catalogue import REVIEW_CANDIDATES
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
from recurrence_ledger.whatif.compare import compare
from recurrence_ledger.whatif.policies import SETTINGS, Policy, passes
from recurrence_ledger.whatif.replay import JournalInput, replay
from recurrence_ledger.whatif.shadow import WhatIfProcessor
from tests.conftest import case
from tests.journal import Ledger

PAIRS = [(3, 1), (3, 2), (2, 1), (1, 3), (4, 4)]


def test_every_review_pair_of_one_pass_is_what_the_core_publishes_at_it():
    for name in ("critical_runs", "review_reasons"):
        journal, _ = case(name)
        records = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines() if line.strip()]
        processor = WhatIfProcessor(LedgerConfig(), PAIRS)
        for number, record in enumerate(records):
            ingest_journal_line(processor, json.dumps(record).encode(), Coordinates("source-journal", None, number, None))
        processor.flush()
        for review, critical in [(3, 1), *PAIRS]:
            core = Ledger(LedgerConfig(review_threshold=review, critical_review_threshold=critical)).feed(*records).flush()
            assert processor.candidates[(review, critical)] == core.out[REVIEW_CANDIDATES], (name, review, critical)


def test_a_critical_threshold_of_2_removes_the_critical_candidates_of_one_recurrence(tmp_path):
    journal, _ = case("critical_runs")
    baseline, alternative = Policy(), Policy(critical_review_threshold=2)
    [group] = passes([baseline, alternative])  # one pass: verdicts do not depend on it
    assert group.review_thresholds == ((3, 1), (3, 2))
    source = JournalInput(journal).open()
    try:
        outcome = replay(source, [baseline, alternative], out_dir=tmp_path / "what-if", show_progress=False)
    finally:
        source.close()
    comparison = compare(outcome.results[baseline], outcome.results[alternative])
    assert comparison["changed_settings"] == ["critical_review_threshold"]
    scope = comparison["scopes"]["tenant-guard"]
    assert sorted((row["artifact_id"], row["streak"]) for row in scope["review_candidates"]["removed"]) == [("X1", 1), ("X1", 1)]
    assert scope["review_candidates"]["added"] == []
    assert sorted(row["artifact_id"] for row in scope["revisions_needing_review"]["removed"]) == ["P1", "X1"]
    assert SETTINGS["critical-review-threshold"].name == "critical_review_threshold"
