"""RevisionStatistics names the runs that reach the review threshold
(contract §8, record revision 5): the review page marks runs as the ledger
decided, never with a threshold of its own."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.ledger.state import LedgerState
from recurrence_ledger.ledger.streaks import runs_reaching_threshold
from tests.conftest import case, read_outputs
from tests.journal import Ledger
from tests.ledger.test_review_runs import S, avoided, chain, recurred


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


# -- the run names kept in step with the runs -----------------------------------------------


def runs_by_model(arrived: list[tuple[int, bool]], threshold: int) -> list[int | None]:
    """The names of the runs holding ≥ ``threshold`` recurred verdicts among
    the ``(position, recurred)`` verdicts ``arrived``, from scratch: None
    (the start of history) first, then by position."""
    counts: dict[int | None, int] = {}
    name = None
    for position, was_recurred in sorted(arrived):
        if was_recurred:
            counts[name] = counts.get(name, 0) + 1
        else:
            name = position
    return sorted((run for run, count in counts.items() if count >= threshold), key=lambda run: -1 if run is None else run)


@settings(max_examples=200, deadline=None)
@given(
    history=st.lists(st.booleans(), min_size=1, max_size=14),
    threshold=st.sampled_from([1, 2, 3]),
    data=st.data(),
)
def test_the_run_names_kept_between_rows_are_the_runs_at_the_threshold_after_every_arrival(history, threshold, data):
    """Late recurrences lengthen closed runs and late avoided verdicts split
    them: after every verdict, in any arrival order, the row names exactly
    the runs a count from scratch finds, and so does a state that reads the
    same store afresh (a restored worker) — the names kept between rows,
    so that a row reads no run record, never drift from the runs."""
    order = data.draw(st.permutations(range(len(history))), label="arrival order")
    ledger = Ledger(LedgerConfig(review_threshold=threshold)).feed(*chain())
    state = ledger.processor.state
    arrived: list[tuple[int, bool]] = []
    for index in order:
        position = 10 * (index + 1)
        ledger.feed(recurred(position) if history[index] else avoided(position))
        arrived.append((position, history[index]))
        expected = runs_by_model(arrived, threshold)
        assert ledger.out["revision-statistics"][-1]["runs_reaching_threshold"] == expected
        record = state.get("streak", S, "E1", 1)
        assert runs_reaching_threshold(state, S, "E1", 1, record, threshold) == expected
        assert runs_reaching_threshold(LedgerState(state.store), S, "E1", 1, record, threshold) == expected
        assert record["full_runs"] == len(expected)
