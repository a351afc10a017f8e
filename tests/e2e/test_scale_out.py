"""Scale-out on Kafka: three worker processes on 12 partitions, a rebalance
mid-run — one member SIGKILLed, one added — and still exactly once: every
output topic's facts are the embedded runner's for the same journal (no
missing, extra or re-sent identity; the same records as multisets) and every
view key ends on the embedded runner's value (contract §10) — with the
in-memory store and with the RocksDB store (``--state-dir``, one per
worker)."""

from __future__ import annotations

import re

import pytest

from recurrence_ledger.workload import Workload, generate_journal
from tests.e2e import harness
from tests.journal import write_journal

PARTITIONS = 12
# ~3,500 events over 60 scopes, spread over the 12 partitions by key; small
# transactions so the kill lands between many committed ones.
WORKLOAD = Workload(scopes=60, outcomes_per_scope=50, heads_per_scope=4, handoffs=2, seed=41, candidates=0.2)
#: Many small transactions; the broker's minimum session timeout, so the
#: killed static member's partitions move on after 6 s.
OPTIONS = ("--max-batch", "40", "--session-timeout-ms", "6000")


@pytest.mark.slow
@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_three_workers_on_twelve_partitions_with_a_kill_and_a_join_stay_exactly_once(store, topic_prefix, bootstrap, tmp_path):
    journal = write_journal(tmp_path / "journal.jsonl", generate_journal(WORKLOAD))
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journal, prefix)
    reference = harness.embedded(journal, tmp_path / "embedded")
    total = len(harness.lines(reference["recurrence-observations"]))

    logs = harness.kill_and_join(bootstrap, prefix, tmp_path, total=total, assigned="assigned partitions", options=OPTIONS,
                                 rocksdb=store == "rocksdb")
    # The group was rebalanced after the kill: the new member restored and
    # processed partitions of its own.
    assert re.search(r"partition \d+ restored", logs["w4"].read_text()), logs["w4"].read_text()[-2000:]
    assert sum(logs[name].read_text().count("assigned partitions") for name in ("w1", "w3")) >= 3
    if store == "rocksdb":  # every worker kept its partitions' state in RocksDB databases of its own dir
        for instance in ("w1", "w2", "w3", "w4"):
            assert list((tmp_path / f"state-{instance}").rglob("CURRENT")), instance

    # The killed member's open transaction (if the kill caught one) holds
    # back read_committed readers of its partitions until the broker aborts it.
    harness.wait_transactions_settled(bootstrap, prefix, PARTITIONS)
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
