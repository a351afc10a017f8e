"""A RevisionStatistics row carries its ``version`` (record revision 4): the
ledger states which of two rows of a revision is the newer, so a reader
(the view follower's guard, ``recurrence_ledger.read.follower_view``)
compares versions and never works the order out itself."""

from __future__ import annotations

from recurrence_ledger.ledger.records import RevisionStatistics
from recurrence_ledger.ledger.statistics import row_version
from tests.conftest import case, read_outputs
from recurrence_ledger.embedded import run_journal


def figures(**counts) -> dict:
    return {"selected": 0, "recurred": 0, "avoided": 0, "ambiguous": 0, **counts}


def test_the_version_counts_ambiguous_matches():
    # A revision's row can change by an ambiguous match alone.
    assert row_version(figures(selected=1, ambiguous=2)) > row_version(figures(selected=1, ambiguous=1))
    assert row_version(figures(selected=2, recurred=1, avoided=1)) == 4
    assert row_version({"selected": 1, "recurred": 0, "avoided": 0}) == 1  # a row of revision 2 has no ambiguous


def test_every_row_of_a_revision_has_a_higher_version_than_the_one_before(tmp_path):
    for name in ("unknown_reasons", "review_loop", "worked_example"):
        journal, _ = case(name)
        run_journal(journal, tmp_path / name, show_progress=False)
        last: dict = {}
        for row in read_outputs(tmp_path / name)["revision-statistics"]:
            RevisionStatistics.model_validate(row)
            key = (row["scope_id"], row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"])
            assert row["version"] > last.get(key, -1), (name, key)
            last[key] = row["version"]
