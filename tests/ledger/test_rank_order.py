"""One revision rank order (contract §8): the core's ranking, the API's
``sort=streak``, the ``rank`` command and the Redis view all sort with
``recurrence_ledger.ledger.statistics.rank_key``."""

from __future__ import annotations

from typing import get_args

from recurrence_ledger.read.reader import select_revisions
from recurrence_ledger.cli.ops import ranked_rows
from recurrence_ledger.ledger.models import RepairSurface
from recurrence_ledger.ledger.statistics import REPAIR_SURFACES, rank_key
from recurrence_ledger.workload import Workload, generate_journal
from tests.journal import Ledger


def row(scope_id: str, artifact_id: str, revision: int, streak: int, signature: str = "s", recurred: int = 0) -> dict:
    """A RevisionStatistics row."""
    return {
        "scope_id": scope_id, "artifact_ref": {"family": "experience", "artifact_id": artifact_id, "revision": revision},
        "signature_key": signature, "terminal_recurred_streak": streak, "needs_review": streak >= 3,
        "repair_surface": "experience_content", "selected": recurred, "recurred": recurred, "avoided": 0,
        "yield": 0.0 if recurred else None, "low_yield": False,
    }


#: Ties everywhere: equal streaks with different recurrence counts, revision
#: 10 against 2 (numeric, not text order), one ArtifactRef under two
#: signatures, and the same revision in two scopes.
TIES = {
    "b-scope": [row("b-scope", "E1", 1, 2, recurred=9), row("b-scope", "E1", 10, 2), row("b-scope", "E1", 2, 2, recurred=5),
                row("b-scope", "A9", 1, 2, "z"), row("b-scope", "A9", 1, 2, "a"), row("b-scope", "Z", 1, 3), row("b-scope", "C", 1, 0)],
    "a-scope": [row("a-scope", "E1", 1, 2, recurred=1), row("a-scope", "E1", 2, 0)],
}


def ident(rows: list[dict]) -> list[tuple]:
    return [(r["scope_id"], r["artifact_ref"]["artifact_id"], r["artifact_ref"]["revision"], r["signature_key"]) for r in rows]


def test_rank_key_is_streak_then_artifact_ref_then_signature_then_scope():
    ranked = sorted((r for rows in TIES.values() for r in rows), key=rank_key)
    assert ident(ranked) == [
        ("b-scope", "Z", 1, "s"),
        ("b-scope", "A9", 1, "a"), ("b-scope", "A9", 1, "z"),
        ("a-scope", "E1", 1, "s"), ("b-scope", "E1", 1, "s"), ("b-scope", "E1", 2, "s"), ("b-scope", "E1", 10, "s"),
        ("b-scope", "C", 1, "s"), ("a-scope", "E1", 2, "s"),
    ]


def test_rank_command_and_api_sort_streak_list_the_same_rows_in_the_same_order():
    for scope_id, rows in TIES.items():
        api_rows = select_revisions(list(reversed(rows)), "streak")
        cli_rows = ranked_rows({scope_id: list(reversed(rows))}, limit=100)
        assert ident(cli_rows) == ident(api_rows)
        assert [r["rank"] for r in cli_rows] == list(range(1, len(rows) + 1))
    # Every scope at once: the same order, scope id as the last tiebreak.
    every = ranked_rows(TIES, limit=100)
    assert ident(every) == ident(sorted((r for rows in TIES.values() for r in rows), key=rank_key))


def test_other_api_sorts_break_ties_in_rank_order():
    rows = TIES["b-scope"]
    by_recurred = select_revisions(rows, "recurred")
    assert ident(by_recurred)[:2] == [("b-scope", "E1", 1, "s"), ("b-scope", "E1", 2, "s")]
    zero = [r for r in by_recurred if r["recurred"] == 0]
    assert ident(zero) == ident(sorted(zero, key=rank_key))


def test_the_core_ranking_is_rank_key_order():
    ledger = Ledger()
    for record in generate_journal(Workload(scopes=3, outcomes_per_scope=120, heads_per_scope=14, handoffs=2, seed=11)):
        ledger.feed(record)
    ledger.flush()
    last_rows: dict[tuple, dict] = {}
    for revision in ledger.out["revision-statistics"]:
        last_rows[(revision["scope_id"], revision["artifact_ref"]["artifact_id"], revision["artifact_ref"]["revision"])] = revision
    latest = {record["scope_id"]: record for record in ledger.out["recurrence-statistics"]}
    tied = 0
    for scope_id, record in latest.items():
        streaks = sorted((r for r in last_rows.values() if r["scope_id"] == scope_id and r["terminal_recurred_streak"] > 0), key=rank_key)
        top = record["top_revisions"]
        assert top, scope_id
        assert ident([{**r, "scope_id": scope_id} for r in top]) == ident(streaks[: len(top)])
        tied += sum(a["terminal_recurred_streak"] == b["terminal_recurred_streak"] for a, b in zip(top, top[1:]))
    assert tied > 0  # the fixture has ties for the order to decide


def test_repair_surfaces_are_the_model_literal():
    assert REPAIR_SURFACES == get_args(RepairSurface)
