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


@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_three_workers_on_twelve_partitions_with_a_kill_and_a_join_stay_exactly_once(store, topic_prefix, bootstrap, tmp_path):
    journal = write_journal(tmp_path / "journal.jsonl", generate_journal(WORKLOAD))
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journal, prefix)
    reference = harness.embedded(journal, tmp_path / "embedded")
    total = len(harness.lines(reference["recurrence-observations"]))

    def start(instance: str, idle_exit: float | None):
        log = tmp_path / f"{instance}.log"
        # RocksDB: a state dir per worker, as on separate machines.
        extra = (*OPTIONS, "--state-dir", str(tmp_path / f"state-{instance}")) if store == "rocksdb" else OPTIONS
        return harness.start_worker(bootstrap, prefix, log, instance=instance, idle_exit=idle_exit, extra=extra), log

    # Batch runs exit once the whole group is caught up, so w1 and w3 wait
    # for the killed member's partitions to be processed too.
    (w1, log1), (w2, log2), (w3, log3) = start("w1", 6), start("w2", None), start("w3", 6)
    observations = harness.physical(prefix, "recurrence-observations")
    harness.wait_until(lambda: all("assigned partitions" in log.read_text() for log in (log1, log2, log3)), 90, "three members assigned")
    counts: list[int] = []

    def progressed() -> bool:
        counts.append(harness.count_records(bootstrap, observations))
        return counts[-1] > total // 10

    harness.wait_until(progressed, 120, "a tenth of the outputs")
    assert w2.poll() is None and w1.poll() is None and w3.poll() is None, "the run ended before the rebalance"
    harness.kill(w2)
    w4, log4 = start("w4", 6)

    for worker, log in ((w1, log1), (w3, log3), (w4, log4)):
        assert harness.wait_exit(worker, 240, log) == 0
    # The kill was mid-run, and the group was rebalanced after it: the new
    # member restored and processed partitions of its own.
    assert counts[-1] < total
    assert re.search(r"partition \d+ restored", log4.read_text()), log4.read_text()[-2000:]
    assert sum(log.read_text().count("assigned partitions") for log in (log1, log3)) >= 3
    if store == "rocksdb":  # every worker kept its partitions' state in RocksDB databases of its own dir
        for instance in ("w1", "w2", "w3", "w4"):
            assert list((tmp_path / f"state-{instance}").rglob("CURRENT")), instance

    # The killed member's open transaction (if the kill caught one) holds
    # back read_committed readers of its partitions until the broker aborts it.
    harness.wait_transactions_settled(bootstrap, prefix, PARTITIONS)
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
