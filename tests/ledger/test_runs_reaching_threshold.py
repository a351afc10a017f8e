"""RevisionStatistics names the runs that reach the review threshold
(contract §8, record revision 5): the review page marks runs as the ledger
decided, never with a threshold of its own."""

from __future__ import annotations

from recurrence_ledger.embedded import run_journal
from tests.conftest import case, read_outputs


def last_rows(tmp_path, name: str) -> dict[tuple[str, int], dict]:
    journal, _ = case(name)
    run_journal(journal, tmp_path, show_progress=False)
    rows = {}
    for row in read_outputs(tmp_path)["revision-statistics"]:
        rows[(row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"])] = row
    return rows


def test_a_run_an_avoided_verdict_closed_still_reaches_the_threshold(tmp_path):
    row = last_rows(tmp_path, "late_run")[("EXP-stale-lock", 1)]
    # three recurrences before the avoided verdict at 40 (one of them late): the run from the start reaches 3
    assert (row["terminal_recurred_streak"], row["needs_review"], row["runs_reaching_threshold"]) == (0, False, [None])


def test_a_run_below_the_threshold_is_not_named(tmp_path):
    rows = last_rows(tmp_path, "forward_refs")
    assert [(key, row["terminal_recurred_streak"], row["runs_reaching_threshold"]) for key, row in sorted(rows.items())] == [(("F1", 1), 2, [])]


def test_every_revision_names_only_its_runs_at_the_threshold(tmp_path):
    rows = last_rows(tmp_path, "review_loop")
    named = {key: row["runs_reaching_threshold"] for key, row in rows.items()}
    assert named[("EXP-a", 1)] == [None] and named[("EXP-c", 2)] == [None]
    assert named[("EXP-a", 2)] == [] and named[("EXP-b", 2)] == []
