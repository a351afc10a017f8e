"""Contract §21.4 on the read side without a Redis: the revisions' sort by
probability_helps and the effect filter take each row's published effect
(the verdict and probability the ledger decided), never a rule of their
own. The same through the API on a real Redis, with the rows of
tests/cases/holdout_effects, is tests/e2e/test_effect_view.py."""

from __future__ import annotations

from recurrence_ledger.read.reader import effect_verdict, probability_helps, select_revisions


def effect(probability: float | None, verdict: str) -> dict:
    return {
        "treated": {"resolved": 5, "recurred": 1}, "withheld": {"withheld": 5, "resolved": 5, "recurred": 4}, "assignment_mismatches": 0,
        "recurrence_rate_treated": 0.2, "recurrence_rate_withheld": 0.8, "probability_helps": probability, "verdict": verdict,
    }


def row(artifact_id: str, streak: int = 0, **figures) -> dict:
    base = {
        "scope_id": "s", "artifact_ref": {"family": "experience", "artifact_id": artifact_id, "revision": 1}, "signature_key": "cue",
        "terminal_recurred_streak": streak, "needs_review": False, "repair_surface": "experience_content", "selected": 0, "recurred": 0,
        "avoided": 0, "yield": None, "low_yield": False,
    }
    return {**base, **figures}


ROWS = [
    row("A", effect=effect(0.0431, "harms")),
    row("B"),  # a row written before revision 4: no effect at all
    row("C", effect=None),
    row("D", effect=effect(0.96, "helps")),
    row("E", streak=2, effect=effect(None, "insufficient")),  # an arm with nothing resolved: no probability
    row("F", effect=effect(0.96, "helps")),
    row("G", effect=effect(0.5, "insufficient")),
]


def ids(rows: list[dict]) -> list[str]:
    return [r["artifact_ref"]["artifact_id"] for r in rows]


def test_sort_by_probability_helps_puts_the_likeliest_help_first_and_no_probability_last():
    # ties (D, F; and the rows without a probability) in contract §8 order: streak desc, then ArtifactRef
    assert ids(select_revisions(ROWS, "probability_helps")) == ["D", "F", "G", "A", "E", "B", "C"]


def test_the_effect_filter_keeps_the_published_verdict():
    assert ids(select_revisions(ROWS, effect="harms")) == ["A"]
    assert ids(select_revisions(ROWS, "probability_helps", effect="helps")) == ["D", "F"]
    assert ids(select_revisions(ROWS, effect="insufficient")) == ["E", "G"]
    assert ids(select_revisions(ROWS, effect="undecided")) == []


def test_a_row_without_an_effect_has_no_verdict_and_no_probability():
    assert [effect_verdict(r) for r in ROWS] == ["harms", None, None, "helps", "insufficient", "helps", "insufficient"]
    assert [probability_helps(r) for r in ROWS] == [0.0431, None, None, 0.96, None, 0.96, 0.5]


def test_the_follower_has_a_gauge_per_effect_verdict_from_the_start():
    from types import MappingProxyType

    from prometheus_client import generate_latest

    from recurrence_ledger.read.follower import FollowerMetrics
    from recurrence_ledger.read.totals import TOTAL_FIELDS, ViewTotals

    metrics = FollowerMetrics()
    before = generate_latest(metrics.registry).decode()
    assert all(f'recurrence_ledger_view_effects{{verdict="{verdict}"}} 0.0' in before for verdict in ("helps", "harms", "undecided", "insufficient"))
    metrics.set_totals(ViewTotals(scopes=2, sums=MappingProxyType(dict.fromkeys(TOTAL_FIELDS, 0)),
                                  effects={"helps": 1, "harms": 2, "undecided": 0, "insufficient": 4}))
    after = generate_latest(metrics.registry).decode()
    for line in ('recurrence_ledger_view_effects{verdict="harms"} 2.0', 'recurrence_ledger_view_effects{verdict="helps"} 1.0',
                 'recurrence_ledger_view_effects{verdict="insufficient"} 4.0'):
        assert line in after
