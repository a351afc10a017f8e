"""Contract §17 on the read side without a Redis: the revisions' sort by
unknown and binding_suspect filter, when the follower reads the view's totals and the gauges they set. The same on a real Redis,
with the figures of tests/cases/unknown_reasons.expected.json, is
tests/e2e/test_unknown_view.py."""

from __future__ import annotations

from types import MappingProxyType

from prometheus_client import generate_latest

from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS
from recurrence_ledger.read.follower import TOTALS_IDLE_INTERVAL_S, TOTALS_INTERVAL_S, FollowerMetrics, totals_due
from recurrence_ledger.read.reader import select_revisions
from recurrence_ledger.read.totals import ViewTotals


def row(artifact_id: str, streak: int = 0, **figures) -> dict:
    base = {
        "scope_id": "s", "artifact_ref": {"family": "experience", "artifact_id": artifact_id, "revision": 1}, "signature_key": "cue",
        "terminal_recurred_streak": streak, "needs_review": False, "repair_surface": "experience_content", "selected": 0, "recurred": 0,
        "avoided": 0, "yield": None, "low_yield": False,
    }
    return {**base, **figures}


def test_sort_by_unknown_and_the_binding_suspect_filter():
    rows = [row("A", unknown=1), row("B", unknown=9, binding_suspect=True), row("C", streak=2, unknown=1), row("D")]  # D: a rev. 2 row
    assert [r["artifact_ref"]["artifact_id"] for r in select_revisions(rows, "unknown")] == ["B", "C", "A", "D"]  # ties: contract §8 order
    assert [r["artifact_ref"]["artifact_id"] for r in select_revisions(rows, binding_suspect=True)] == ["B"]
    assert [r["artifact_ref"]["artifact_id"] for r in select_revisions(rows, binding_suspect=False)] == ["C", "A", "D"]


def test_when_a_follower_reads_the_totals():
    assert totals_due(None, 5.0, False)
    assert not totals_due(100.0, 100.0 + TOTALS_INTERVAL_S - 0.1, True)
    assert totals_due(100.0, 100.0 + TOTALS_INTERVAL_S, True)
    assert not totals_due(100.0, 100.0 + TOTALS_INTERVAL_S, False)
    assert totals_due(100.0, 100.0 + TOTALS_IDLE_INTERVAL_S, False)


def test_the_gauges_exist_from_the_start_and_take_the_totals():
    metrics = FollowerMetrics()
    before = generate_latest(metrics.registry).decode()
    assert all(f'recurrence_ledger_view_unknown_selections{{reason="{reason}"}} 0.0' in before for reason in UNKNOWN_REASONS)
    metrics.set_totals(ViewTotals(scopes=2, unknown_reasons={**dict.fromkeys(UNKNOWN_REASONS, 0), "check_not_run": 5}, sums=MappingProxyType(
        {"binding_suspects": 1, "ambiguous_matches": 3, "unmatched_failures": 4, "forward_references": 6})))
    after = generate_latest(metrics.registry).decode()
    assert 'recurrence_ledger_view_unknown_selections{reason="check_not_run"} 5.0' in after
    for line in ("recurrence_ledger_view_binding_suspects 1.0", "recurrence_ledger_view_ambiguous_matches 3.0",
                 "recurrence_ledger_view_unmatched_failures 4.0", "recurrence_ledger_view_forward_references 6.0"):
        assert line in after
    assert "recurrence_ledger_view_totals_timestamp_seconds " in after
