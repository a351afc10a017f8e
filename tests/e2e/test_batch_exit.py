"""Batch runs (``--exit-when-idle``) after crashes, on the real broker: a
batch run exits 0 only when every input partition of the group is committed
to its end — not when its own assignment is done — and otherwise exits 4
naming the partitions left (docs/kafka.md, "Batch runs")."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from confluent_kafka import Consumer

from recurrence_ledger.runtime.catch_up import NOT_CAUGHT_UP_EXIT
from recurrence_ledger.runtime.worker_config import input_consumer_config
from recurrence_ledger import catalogue
from recurrence_ledger.workload import Workload, generate_journal
from tests.e2e import harness

# ~10,000 events: the first two runs are killed mid-stream.
WORKLOAD = Workload(scopes=40, outcomes_per_scope=200, heads_per_scope=4, handoffs=2, seed=29, candidates=0.2)
SESSION = ("--session-timeout-ms", "6000")  # the broker's group.min.session.timeout.ms


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    path = tmp_path_factory.mktemp("batch") / "journal.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in generate_journal(WORKLOAD)))
    return path


@pytest.fixture(scope="module")
def reference(journal, tmp_path_factory):
    return harness.embedded(journal, tmp_path_factory.mktemp("reference"))


def kill_after(process, seconds: float) -> None:
    time.sleep(seconds)
    assert process.poll() is None, "the worker finished before it could be killed"
    harness.kill(process)


@pytest.mark.parametrize("membership", ["--static-membership", "--dynamic-membership"])
def test_batch_run_after_two_kills_exits_only_when_complete(topic_prefix, membership, bootstrap, journal, reference, tmp_path):
    """publish; start, kill -9 after 4 s; start, kill -9 after 3 s; batch run.
    Dynamic members: the batch run is first given only the partitions the
    dead incarnations do not hold, and must wait for the rest (their session
    times out). Static members: it takes all of them back at once."""
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=4)
    harness.publish(bootstrap, journal, prefix)
    log = tmp_path / "worker.log"
    options = dict(instance="w1", extra=(*SESSION, membership))
    kill_after(harness.start_worker(bootstrap, prefix, log, idle_exit=None, **options), 4)
    kill_after(harness.start_worker(bootstrap, prefix, log, idle_exit=None, **options), 3)
    batch_log = tmp_path / "batch.log"
    batch = harness.start_worker(bootstrap, prefix, batch_log, idle_exit=2, **options)
    assert harness.wait_exit(batch, 120, batch_log) == 0, batch_log.read_text()[-3000:]
    text = batch_log.read_text()
    assert "caught up" in text
    if membership == "--static-membership":
        assert "not caught up" not in text  # all four partitions came back at once
    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka")
    report = harness.identity_report(kafka, reference)
    print("identity report:", report)
    for topic, counts in report.items():
        assert counts == {"missing": 0, "extra": 0, "resent": 0}, topic
    harness.assert_same_outputs(kafka, reference, multiset=True)


def test_batch_run_that_cannot_catch_up_exits_4_naming_the_partitions(topic_prefix, bootstrap, journal, tmp_path):
    """Another live member of the group holds two partitions and never
    commits: the batch run processes its own two, waits
    ``--max-wait-caught-up`` without progress, and exits 4 naming the other
    two and their holder."""
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=4)
    harness.publish(bootstrap, journal, prefix)
    group = catalogue.physical("ledger", prefix)
    inputs = [catalogue.physical(name, prefix) for name in catalogue.INPUT_TOPICS]
    holder = Consumer(input_consumer_config(bootstrap, group, "holder", 6000))
    holder.subscribe(inputs)
    stop = threading.Event()
    held: list[int] = []

    def hold() -> None:  # serve rebalances; commit nothing (one thread uses the consumer)
        while not stop.is_set():
            holder.poll(0.2)
            held[:] = sorted({tp.partition for tp in holder.assignment()})

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        harness.wait_until(lambda: len(held) > 0, 30, "the holder's assignment")
        log = tmp_path / "batch.log"
        batch = harness.start_worker(bootstrap, prefix, log, instance="w1", idle_exit=2, extra=(*SESSION, "--max-wait-caught-up", "6"))
        code = harness.wait_exit(batch, 120, log)
    finally:
        stop.set()
        thread.join(timeout=10)
        holder.close()
    text = log.read_text()
    assert code == NOT_CAUGHT_UP_EXIT, text[-3000:]
    assert len(held) == 2, held
    named = {int(number) for number in re.findall(r"source-journal\[(\d+)\] \(committed", text.split("not caught up after waiting")[-1])}
    assert named == set(held), text[-3000:]
    assert "held by member holder" in text
    assert "stopped after" in text
