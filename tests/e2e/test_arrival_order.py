"""Same facts in every arrival order (contract §16) on both runners: the
fixture journals with forward references and with every unknown reason,
their lines shuffled (seeded) and put in causal order (tests.journal.causal_order:
each Experience revision ahead of the Task Outcomes at later positions,
every event keeping its journal_position), run through run-journal and
through the real Kafka worker (its own topic prefix per order, all orders'
workers at once). tests/ledger/test_arrival_order.py draws many more orders
through the core alone."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from recurrence_ledger.catalogue import REVIEW_STATUS, STATISTICS
from tests.conftest import case, facts, final_views
from tests.e2e import harness
from tests.journal import CAUSAL_CASES, causal_order, fix_journal, stale_selection_journal, write_journal

#: Arrival orders run per case, and the seed of their shuffles.
ORDERS = 3
SEED = 16


def arrival_orders(lines: list[bytes], count: int, seed: int) -> list[list[bytes]]:
    """``count`` distinct causal orders (:func:`causal_order`) of the journal
    ``lines``, none of them the journal's own, each line kept byte for byte;
    shuffled by ``random.Random(seed)``."""
    records = [json.loads(line) for line in lines]
    by_record = {id(record): line for record, line in zip(records, lines, strict=True)}
    shuffle = random.Random(seed)
    orders: list[list[bytes]] = []
    while len(orders) < count:
        order = [by_record[id(record)] for record in causal_order(shuffle.sample(records, len(records)))]
        if order != lines and order not in orders:
            orders.append(order)
    return orders


def as_facts(outputs: dict[str, bytes]) -> dict:
    """The case facts (tests/conftest.py ``facts``) of a run's output files."""
    return facts({topic: harness.lines(data) for topic, data in outputs.items()})


@pytest.fixture
def prefixes(bootstrap: str) -> Iterator[list[str]]:
    """A list to append topic prefixes (harness.new_prefix) to; each one's
    topics are deleted after the test."""
    made: list[str] = []
    yield made
    for prefix in made:
        harness.remove_prefix(bootstrap, prefix)


@pytest.mark.parametrize("name", CAUSAL_CASES)
def test_every_arrival_order_gives_the_same_facts_on_kafka_and_in_run_journal(name, bootstrap, prefixes, tmp_path):
    journal, expected = case(name)
    lines = [line for line in journal.read_bytes().splitlines() if line.strip()]
    reference = harness.embedded(journal, tmp_path / "embedded")
    assert as_facts(reference) == expected

    orders = arrival_orders(lines, ORDERS, SEED)
    paths: list[Path] = []
    workers = []
    try:  # every order's worker at once, each on its own prefix
        for number, order in enumerate(orders):
            assert sorted(order) == sorted(lines)  # the same events, positions kept: only the arrival differs
            paths.append(write_journal(tmp_path / f"order{number}.jsonl", order))
            prefixes.append(harness.new_prefix())
            harness.prepare(bootstrap, prefixes[-1], partitions=1)
            harness.publish(bootstrap, paths[-1], prefixes[-1])  # one partition of source-journal: arrival = file order
            workers.append(harness.start_worker(bootstrap, prefixes[-1], tmp_path / f"worker{number}.log"))
        for number, worker in enumerate(workers):
            assert harness.wait_exit(worker, 120, tmp_path / f"worker{number}.log") == 0
    finally:
        for worker in workers:
            if worker.poll() is None:
                harness.kill(worker)

    for number, (order, path, prefix) in enumerate(zip(orders, paths, prefixes, strict=True)):
        positions = [json.loads(line)["value"]["journal_position"] for line in order]
        where = f"{name}, arrival order {number} (seed {SEED}), positions {positions}"
        embedded = harness.embedded(path, tmp_path / f"embedded{number}")
        kafka = harness.exported(bootstrap, prefix, tmp_path / f"kafka{number}")
        print(where)  # shown with a failure below
        assert as_facts(embedded) == expected
        assert as_facts(kafka) == expected
        harness.assert_same_outputs(kafka, embedded)  # the worker and run-journal agree byte for byte on this order
        # ... and with the journal's own order: the same ledger facts (in another
        # order of publication) and the same final view value per key.
        harness.assert_same_outputs(kafka, reference, multiset=True)


def test_position_decided_figures_are_the_same_when_events_arrive_late_on_kafka_and_in_run_journal(bootstrap, prefixes, tmp_path):
    """Two figures decided by position (contract §14, §18 rev. 4), in an
    arrival order that no causal order allows: a higher revision at an
    earlier position that arrives after the selections it makes stale
    (``stale_revision_selections``), and an ``avoided`` verdict of a fix
    revision that arrives after the recurrences around it (its repair:
    ``recurring`` by position, ``failed`` had it been decided by arrival).
    The fix revision's repair surface publishes no candidate of its own, so
    the ledger facts of the two orders are the same as well."""
    stale = stale_selection_journal("stale")
    fix = fix_journal("repair", [True, True, False, True, True], approve=True, fix_surface="recall_policy")
    in_order = write_journal(tmp_path / "in-order.jsonl", [*stale, *fix])
    late_revision, late_avoided = stale[4], fix[-4]
    assert (late_revision["value"]["journal_position"], late_avoided["value"]["journal_position"]) == (15, 50)
    arrival = [record for record in [*stale, *fix] if record is not late_revision and record is not late_avoided]
    late = write_journal(tmp_path / "late.jsonl", [*arrival, late_revision, late_avoided])

    reference = harness.embedded(in_order, tmp_path / "embedded-in-order")
    embedded = harness.embedded(late, tmp_path / "embedded-late")
    prefixes.append(harness.new_prefix())
    harness.prepare(bootstrap, prefixes[-1], partitions=1)
    harness.publish(bootstrap, late, prefixes[-1])
    harness.run_to_idle(bootstrap, prefixes[-1], tmp_path / "worker.log")
    kafka = harness.exported(bootstrap, prefixes[-1], tmp_path / "kafka")

    for outputs in (reference, embedded, kafka):
        statistics = harness.last_statistics(outputs[STATISTICS])
        assert statistics["stale"]["stale_revision_selections"] == 2
        assert statistics["repair"]["repairs"] == {"pending": 0, "held": 0, "recurring": 1, "failed": 0}
        [row] = final_views(REVIEW_STATUS, harness.lines(outputs[REVIEW_STATUS])).values()
        assert (row["status"], row["repair"]["status"], row["repair"]["recurred"], row["repair"]["avoided"]) == ("approved", "recurring", 4, 1)
    harness.assert_same_outputs(kafka, embedded)
    harness.assert_same_outputs(kafka, reference, multiset=True)
