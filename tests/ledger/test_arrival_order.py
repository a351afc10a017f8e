"""Same facts, same final views in every arrival order (contract §16): the
fixture journals with forward references and with every unknown reason,
their positions fixed, arrive in any order through the embedded runner's
core (intake + LedgerProcessor). The orders drawn keep every Experience
revision ahead of the Task Outcomes at later positions (tests.journal.causal_order
says why); tests/e2e/test_arrival_order.py runs such orders through
run-journal and the Kafka worker.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from recurrence_ledger.catalogue import OUTPUT_TOPICS, REVIEW_STATUS, REVISION_STATISTICS, STATISTICS
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import case, facts, final_views
from tests.journal import CAUSAL_CASES, Ledger, causal_order, fix_journal, stale_selection_journal

VIEWS = (STATISTICS, REVISION_STATISTICS)


def records(name: str) -> list[dict]:
    journal, _ = case(name)
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def outcome_of(order: list[dict], view_batch: int) -> tuple[dict, dict]:
    """(ledger facts as sorted canonical JSON per topic, final view values
    per key) of one arrival order."""
    out = Ledger(view_batch=view_batch).feed(*order).flush().out
    ledger = {topic: sorted(canonical_json(value) for value in out[topic]) for topic in OUTPUT_TOPICS if topic not in VIEWS}
    views = {topic: final_views(topic, out[topic]) for topic in VIEWS}
    return ledger, views


@pytest.mark.parametrize("name", CAUSAL_CASES)
def test_the_journal_order_gives_the_expected_facts(name):
    _, expected = case(name)
    assert facts(Ledger(view_batch=1000).feed(*records(name)).flush().out) == expected


@pytest.mark.parametrize("name", CAUSAL_CASES)
def test_reversed_arrival_gives_the_same_facts_and_views(name):
    journal = records(name)
    assert outcome_of(causal_order(journal[::-1]), 1) == outcome_of(journal, 1000)


@pytest.mark.parametrize("name", CAUSAL_CASES)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_arrival_order_gives_the_same_facts_and_views(name, data):
    journal = records(name)
    order = causal_order(data.draw(st.permutations(journal), label="arrival"))
    view_batch = data.draw(st.integers(min_value=1, max_value=len(journal) + 1), label="view_batch")
    ledger, views = outcome_of(order, view_batch)
    reference_ledger, reference_views = outcome_of(journal, 1000)
    assert ledger == reference_ledger
    assert views == reference_views
    _, expected = case(name)
    out = Ledger(view_batch=view_batch).feed(*order).flush().out
    assert facts(out) == expected


# ------------------------------------------------ position-decided figures in any arrival order
#
# Two figures are decided by journal position alone, so their final value is
# the same in every arrival order — not only the causal orders above:
# ``stale_revision_selections`` (a selection whose revision was no longer its
# artifact's head at the outcome's position, contract §14) and a repair's
# status (contract §18, "Repair status by position"). The journals are
# random: the synthetic workload (whose every 10th artifact gets a revision 2
# mid-journal) and a fix revision with a random history of verdicts; the
# arrival order is any permutation, and so is the view batch.



def position_figures(order: list[dict], view_batch: int, config: LedgerConfig | None = None) -> tuple[dict, dict, dict]:
    """(stale_revision_selections per scope, repairs counts per scope,
    repair status per review-status key of the candidates of revision 1)
    of the final views of one arrival order."""
    out = Ledger(config, view_batch=view_batch).feed(*order).flush().out
    stats = final_views(STATISTICS, out[STATISTICS]).values()
    rows = {key: row for key, row in final_views(REVIEW_STATUS, out[REVIEW_STATUS]).items() if row["artifact_ref"]["revision"] == 1}
    return (
        {s["scope_id"]: s["stale_revision_selections"] for s in stats},
        {s["scope_id"]: {k: v for k, v in s["repairs"].items() if v} for s in stats},
        {key: None if row["repair"] is None else row["repair"]["status"] for key, row in rows.items()},
    )


@settings(max_examples=60, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(seed=st.integers(min_value=0, max_value=10_000), data=st.data())
def test_stale_revision_selections_do_not_depend_on_arrival_order(seed, data):
    journal = list(generate_journal(Workload(scopes=1, outcomes_per_scope=16, heads_per_scope=10, handoffs=2, seed=seed)))
    order = data.draw(st.permutations(journal), label="arrival")
    view_batch = data.draw(st.integers(min_value=1, max_value=len(journal) + 1), label="view_batch")
    stale, _, _ = position_figures(order, view_batch)
    assert stale == position_figures(journal, 1000)[0]


def test_a_higher_revision_at_an_earlier_position_that_arrives_later_makes_the_selections_after_it_stale():
    journal = stale_selection_journal("stale")
    late = [record for record in journal if record is not journal[4]] + [journal[4]]  # E1 r2 (position 15) last
    assert position_figures(journal, 1)[0] == position_figures(late, 1)[0] == {"stale": 2}  # O20 and O30 selected E1 r1 after r2


FIX_SCOPE = "repair"


def repair_by_position(history: list[bool], threshold: int) -> str:
    """contract §18 (rev. 4), worked out on the history in position order."""
    runs, run = [], 0
    for recurred in history:
        if recurred:
            run += 1
        else:
            runs.append(run)
            run = 0
    runs.append(run)
    if max(runs) >= threshold:
        return "failed"
    if history and not history[-1]:
        return "held"
    return "recurring" if run >= 1 else "pending"


@settings(max_examples=200, deadline=None)
@given(
    history=st.lists(st.booleans(), max_size=9),
    threshold=st.sampled_from([1, 2, 3]),
    approve=st.booleans(),
    data=st.data(),
)
def test_a_repair_status_is_decided_by_position_in_every_arrival_order(history, threshold, approve, data):
    journal = fix_journal(FIX_SCOPE, history, approve)
    order = causal_order(data.draw(st.permutations(journal), label="arrival"))
    view_batch = data.draw(st.integers(min_value=1, max_value=len(journal) + 1), label="view_batch")
    config = LedgerConfig(review_threshold=threshold)
    _, repairs, rows = position_figures(order, view_batch, config)
    expected = repair_by_position(history, threshold)
    assert list(rows.values()) == [expected]  # E1 r1's one candidate, approved or superseded: its fix is r2
    assert repairs[FIX_SCOPE] == {expected: 1}
    assert (repairs, rows) == position_figures(journal, 1000, config)[1:]


def test_a_late_avoided_that_splits_the_only_failed_run_turns_failed_back():
    """Threshold 3: r2 recurs at 30, 40, 60 and 70, avoided at 50 — by
    position two runs of 2 and the latest verdict recurred: recurring. When
    the avoided at 50 arrives last, the run 30–70 held 4 first (failed
    then), yet the final status is decided by position."""
    history = [True, True, False, True, True]
    journal = fix_journal(FIX_SCOPE, history, approve=False)
    late = [record for record in journal if record["value"].get("journal_position") != 50] + [journal[-3]]
    assert late[-1]["value"]["journal_position"] == 50
    config = LedgerConfig(review_threshold=3)
    assert position_figures(late, 1, config)[2] == position_figures(journal, 1, config)[2]
    assert set(position_figures(late, 1, config)[2].values()) == {"recurring"}
