"""Same facts, same final views in every arrival order (contract §16): the
fixture journals with forward references and with every unknown reason,
their positions fixed, arrive in any order through the embedded runner's
core (intake + LedgerProcessor).

Two rules of earlier revisions stay arrival-dependent on purpose, so the
orders drawn keep clear of them: an Experience revision that arrives after
an unlinked outcome at a later position was decided does not reopen its
frozen ``scope_heads`` match (contract §1, ``late_revisions``), so every
Experience revision arrives before the Task Outcomes at later positions;
and a review candidate keeps the failure refs known when it is published
(§8), so these journals bring no run to the review threshold. The
provenance horizon (10,000 positions) never passes inside them: only the
end of the journal decides what still waits.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recurrence_ledger.catalogue import OUTPUT_TOPICS, REVISION_STATISTICS, STATISTICS
from recurrence_ledger.ledger.normalize import canonical_json
from tests.conftest import case, facts, final_views
from tests.journal import Ledger

#: The cases whose facts must not depend on arrival order.
CAUSAL_CASES = ("forward_refs", "unknown_reasons")
VIEWS = (STATISTICS, REVISION_STATISTICS)


def records(name: str) -> list[dict]:
    journal, _ = case(name)
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def causal(order: list[dict]) -> list[dict]:
    """``order`` with each Task Outcome moved after every Experience
    revision at an earlier position (contract §1's late revisions left
    out); an order that already keeps the rule is returned unchanged, so
    every such order can be drawn."""
    waiting, arrived = list(order), []
    while waiting:
        for index, record in enumerate(waiting):
            value = record["value"]
            if record["topic"] == "task-outcomes" and any(
                other["topic"] == "experience-revisions" and other["value"]["journal_position"] < value["journal_position"]
                for other in waiting
            ):
                continue
            arrived.append(waiting.pop(index))
            break
    return arrived


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
    assert outcome_of(causal(journal[::-1]), 1) == outcome_of(journal, 1000)


@pytest.mark.parametrize("name", CAUSAL_CASES)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_arrival_order_gives_the_same_facts_and_views(name, data):
    journal = records(name)
    order = causal(data.draw(st.permutations(journal), label="arrival"))
    view_batch = data.draw(st.integers(min_value=1, max_value=len(journal) + 1), label="view_batch")
    ledger, views = outcome_of(order, view_batch)
    reference_ledger, reference_views = outcome_of(journal, 1000)
    assert ledger == reference_ledger
    assert views == reference_views
    _, expected = case(name)
    out = Ledger(view_batch=view_batch).feed(*order).flush().out
    assert facts(out) == expected
