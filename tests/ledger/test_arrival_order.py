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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recurrence_ledger.catalogue import OUTPUT_TOPICS, REVISION_STATISTICS, STATISTICS
from recurrence_ledger.ledger.normalize import canonical_json
from tests.conftest import case, facts, final_views
from tests.journal import CAUSAL_CASES, Ledger, causal_order

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
