"""Pure parts of the history read models and their neighbours (no Redis, no
broker): runs named as contract §8 names them, unknown selections (§7),
explain command lines quoted for a shell, the scope index's order, and the
dead-letter reasons the worker's metrics start at 0 (contract §9)."""

from __future__ import annotations

import re
import shlex

from recurrence_ledger.api.routes.history import explain_command, iso
from recurrence_ledger.read.pages import runs_of, with_runs
from recurrence_ledger.read.records import pad
from recurrence_ledger.runtime.metrics import DEAD_LETTER_REASONS, WorkerMetrics
from recurrence_ledger.read.projection import scope_index
from recurrence_ledger.read.keys import SCOPE_SORTS
from tests.conftest import REPO


def member(position, event, outcome, kind=None):
    return [position, event, outcome, kind, None if kind is None else 0, None if kind is None else "sha256:" + "a" * 64, "0123456789abcdef"]


HISTORY = [
    member(4, "selected", "o4"), member(4, "recurred", "o4", "check"), member(5, "recurred", "o5", "check"),
    member(7, "avoided", "o7"), member(7, "selected", "o7"), member(8, "selected", "o8"), member(9, "recurred", "o9", "check"),
]


def test_runs_are_named_by_their_opening_avoided_verdict():
    rows = with_runs(reversed(HISTORY))  # any input order
    assert [(r["task_outcome_position"], r["event"], r["run"], r["verdict"]) for r in rows] == [
        (4, "selected", None, "recurred"), (4, "recurred", None, "recurred"), (5, "recurred", None, "recurred"),
        (7, "selected", 7, "avoided"), (7, "avoided", 7, "avoided"), (8, "selected", 7, None), (9, "recurred", 7, "recurred"),
    ]
    runs = runs_of(rows, threshold=2, open_candidates={7: "sha256:c"})
    assert [(r["run_start_position"], r["recurred"], r["first_position"], r["last_position"], r["reaches_threshold"], r["current"], r["review_candidate"])
            for r in runs] == [(None, 2, 4, 5, True, False, None), (7, 1, 7, 9, False, True, "sha256:c")]
    assert all(r["complete"] for r in runs)


def test_a_truncated_history_names_its_oldest_run_from_the_floor_and_marks_it_incomplete():
    rows = with_runs(HISTORY[5:], floor=7)
    assert [r["run"] for r in rows] == [7, 7]
    assert [r["complete"] for r in runs_of(rows, 3, floor=7, truncated=True)] == [False]
    assert [r["complete"] for r in runs_of(with_runs(HISTORY[3:]), 3, truncated=True)] == [True]


def test_positions_compare_as_text_when_padded():
    assert pad(7) < pad(10) < pad(2**63 - 1) and len(pad(2**63 - 1)) == 19


def test_explain_commands_are_quoted_for_a_shell():
    command = explain_command("team a's scope", "run 1;rm", "prod.")
    assert shlex.split(command) == ["recurrence-ledger", "explain", "team a's scope", "run 1;rm", "--topic-prefix", "prod."]
    assert explain_command("s", "o") == "recurrence-ledger explain s o"
    assert iso(0) == "1970-01-01T00:00:00.000Z"


def test_scope_index_orders_largest_first_and_null_rates_last():
    records = [
        {"scope_id": "b", "needing_review": 2, "recurred": 1, "repeat_failure_rate": None},
        {"scope_id": "a", "needing_review": 2, "recurred": 5, "repeat_failure_rate": 0.25},
        {"scope_id": "c", "needing_review": 0, "recurred": 5, "repeat_failure_rate": 1.0},
    ]
    order = {sort: [r["scope_id"] for r in sorted(records, key=lambda r: (scope_index(r)[sort], r["scope_id"]))] for sort in SCOPE_SORTS}
    assert order == {"scope_id": ["a", "b", "c"], "needing_review": ["a", "b", "c"], "recurred": ["a", "c", "b"], "repeat_failure_rate": ["c", "a", "b"]}


def test_dead_letter_counters_start_at_zero_for_every_contract_reason():
    section = (REPO / "docs" / "contract.md").read_text().split("## §9", 1)[1].split("## §10", 1)[0]
    codes = re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE)
    assert sorted(codes) == sorted(DEAD_LETTER_REASONS)
    text = __import__("prometheus_client").generate_latest(WorkerMetrics().registry).decode()
    assert all(f'recurrence_ledger_dead_letters_total{{reason="{code}"}} 0.0' in text for code in codes)
