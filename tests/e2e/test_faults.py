"""Faults on the real broker and Redis: crashes at five points of the
transaction cycle, a broker restart mid-stream, scaling out and back, Redis
down for part of the run. Every run must end with outputs identical, by
identity and count, to run-journal's (contract §10) — exactly once."""

from __future__ import annotations

import json
import time

import pytest

from recurrence_ledger.read.projection import RedisView
from recurrence_ledger.runtime.checkpoint import RESTART_EXIT
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.workload import Workload, generate_journal
from tests.e2e import harness

WORKLOAD = Workload(scopes=8, outcomes_per_scope=150, heads_per_scope=4, handoffs=2, seed=13, candidates=0.2)  # ~1,250 events: several transactions
SLOW = ("--max-batch", "40")  # many small transactions, so every fault point is reached
MAX_RESTARTS = 3  # supervisor restarts a broker-restart run may take



@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    path = tmp_path_factory.mktemp("faults") / "journal.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in generate_journal(WORKLOAD)))
    return path


@pytest.fixture(scope="module")
def reference(journal, tmp_path_factory):
    return harness.embedded(journal, tmp_path_factory.mktemp("reference"))


def start(bootstrap, prefix, log, *, fault=None, instance="w1", idle_exit=4.0, redis_url=None):
    return harness.start_worker(bootstrap, prefix, log, instance=instance, idle_exit=idle_exit, redis_url=redis_url, extra=SLOW,
                                fault=fault)


@pytest.mark.parametrize(
    "faults",
    [
        ["consumed:3"],  # polled a batch, processed nothing
        ["produced:3"],  # outputs produced, changelog and offsets not yet
        ["offsets_sent:3"],  # everything sent, commit_transaction not called
        ["committed:3"],  # committed, Redis view not yet written
        ["committed:2", "restoring:10"],  # then again while restoring state from the changelog
    ],
    ids=lambda faults: "+".join(f.split(":")[0] for f in faults),
)
def test_sigkill_at_each_point_of_the_cycle(topic_prefix, faults, bootstrap, journal, reference, tmp_path):
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=4)
    harness.publish(bootstrap, journal, prefix)
    log = tmp_path / "worker.log"
    for fault in faults:
        crashed = start(bootstrap, prefix, log, fault=fault, idle_exit=None)
        assert crashed.wait(timeout=120) == -9, f"{fault} was not reached:\n{log.read_text()[-3000:]}"
    restarted = start(bootstrap, prefix, log)
    assert harness.wait_exit(restarted, 180, log) == 0
    assert "fault injection: SIGKILL at" in log.read_text()
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")


def test_scale_from_one_to_two_workers_and_back(topic_prefix, bootstrap, journal, reference, tmp_path):
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=4)
    harness.publish(bootstrap, journal, prefix)
    first_log, second_log = tmp_path / "w1.log", tmp_path / "w2.log"
    first = start(bootstrap, prefix, first_log, instance="w1", idle_exit=8)
    observations = harness.physical(prefix, "recurrence-observations")
    harness.wait_until(lambda: harness.count_records(bootstrap, observations) > 20, 60, "first outputs")
    second = start(bootstrap, prefix, second_log, instance="w2", idle_exit=None)
    harness.wait_until(lambda: "assigned partitions" in second_log.read_text(), 60, "the second worker's assignment")
    time.sleep(1.0)
    second.terminate()  # SIGTERM: commits its open transaction, leaves the group
    assert second.wait(timeout=60) == 0, second_log.read_text()[-3000:]
    assert harness.wait_exit(first, 180, first_log) == 0
    assert first_log.read_text().count("assigned partitions") >= 2  # it got partitions back
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")


@pytest.mark.slow
def test_broker_restart_mid_stream(kafka_server, journal, reference, tmp_path):
    """On a broker of the test's own (free ports, its own run dir): the
    shared broker and the tests running on it are not disturbed."""
    broker = kafka_server()
    broker.start()
    bootstrap = broker.bootstrap
    prefix = harness.new_prefix()
    harness.prepare(bootstrap, prefix, partitions=2)
    harness.publish(bootstrap, journal, prefix)
    log = tmp_path / "worker.log"
    worker = start(bootstrap, prefix, log, idle_exit=10)
    observations = harness.physical(prefix, "recurrence-observations")
    harness.wait_until(lambda: harness.count_records(bootstrap, observations) > 20, 60, "first outputs")
    started = time.monotonic()
    broker.restart_keep_data()
    print(f"broker restarted in {time.monotonic() - started:.1f} s")
    # As a supervisor does (docs/kafka.md, "Supervision"): a worker whose
    # Kafka clients cannot recover in place after the restart (an abort or
    # a commit that timed out, a fenced producer, a fatal consumer) exits
    # with RESTART_EXIT and is started again; any other code is a failure.
    codes = [harness.wait_exit(worker, 240, log)]
    while codes[-1] == RESTART_EXIT and len(codes) <= MAX_RESTARTS:
        print(f"worker exited for a restart (exit {RESTART_EXIT}); restarting it")
        codes.append(harness.wait_exit(start(bootstrap, prefix, log, idle_exit=10), 240, log))
    print("exit codes:", codes)
    assert codes[-1] == 0 and set(codes) <= {0, RESTART_EXIT}, (codes, log.read_text()[-4000:])
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")


def test_redis_down_for_part_of_the_run(topic_prefix, bootstrap, redis_server, journal, reference, tmp_path):
    server = redis_server()  # the test's own: stopped by the fixture
    redis_url = server.url
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=4)
    harness.publish(bootstrap, journal, prefix)
    log = tmp_path / "worker.log"
    # Redis is down when the worker starts and comes back half way.
    worker = start(bootstrap, prefix, log, redis_url=redis_url, idle_exit=6)
    observations = harness.physical(prefix, "recurrence-observations")
    harness.wait_until(lambda: harness.count_records(bootstrap, observations) > 100, 60, "outputs while Redis is down")
    server.start()
    assert harness.wait_exit(worker, 180, log) == 0
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
    view = RedisView(redis_url, namespace=default_namespace(prefix))
    for scope_id, record in harness.last_statistics(reference["recurrence-statistics"]).items():
        assert view.read(scope_id) == record


def test_a_core_failure_is_never_committed_half_applied(topic_prefix, bootstrap, tmp_path):
    """The core raises on the 5th record after changing its state: that
    record alone is rolled back (its partition's store returned to the last
    checkpoint, the batch's earlier records applied again), parked in
    dead-letter, and the worker goes on in the same transaction; everything
    else is as if the record had never been there."""
    from tests.conftest import case

    journal, _ = case("minimum_case")
    lines = journal.read_text().splitlines(keepends=True)
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=1)
    harness.publish(bootstrap, journal, prefix)
    log = tmp_path / "worker.log"
    worker = harness.start_worker(bootstrap, prefix, log, fault="core_error:5")
    assert harness.wait_exit(worker, 120, log) == 0
    assert "rolled back (internal_error" in log.read_text()

    without = tmp_path / "without.jsonl"
    without.write_text("".join(lines[:4] + lines[5:]))
    reference = harness.embedded(without, tmp_path / "reference")
    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka")
    harness.assert_same_outputs(kafka, reference)
    [parked] = harness.lines(kafka["dead-letter"])
    assert (parked["reason"], parked["offset"]) == ("internal_error", 4)
    assert "fault injection: core_error" in parked["message"]


def test_a_record_with_an_output_too_large_for_kafka_is_parked_not_applied(topic_prefix, bootstrap, tmp_path):
    """With --max-output-bytes 370, records 3 and 4 of the example journal's
    first 12 records (their avoided / recurred observations are 381 and 376
    bytes in Avro) cannot be produced: each is rewound and dead-lettered as
    oversized_output, the worker goes on, and every other output equals
    run-journal's on the journal without those two records."""
    example = harness.REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"
    lines = example.read_text().splitlines(keepends=True)[:12]  # its first 12 records: the later ones have large outputs too
    journal = tmp_path / "example-12.jsonl"
    journal.write_text("".join(lines))
    harness.prepare(bootstrap, topic_prefix, partitions=1)
    harness.publish(bootstrap, journal, topic_prefix)
    log = tmp_path / "worker.log"
    harness.run_to_idle(bootstrap, topic_prefix, log, extra=("--max-output-bytes", "370"))

    without = tmp_path / "without.jsonl"
    without.write_text("".join(lines[:3] + lines[5:]))
    reference = harness.embedded(without, tmp_path / "reference")
    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    for topic in harness.LEDGER_TOPICS:
        if topic != "admission-decisions":
            assert kafka[topic] == reference[topic], topic
    # Both candidates cite a parked outcome: they wait on Kafka, while the end
    # of the journal file decides them (missing_source) in the embedded run.
    assert kafka["admission-decisions"] == b""
    assert [d["reasons"] for d in harness.lines(reference["admission-decisions"])] == [
        ["missing_source"], ["missing_source", "cue_restates_outcome", "missing_repair_surface"]]
    parked = harness.lines(kafka["dead-letter"])
    assert [(d["reason"], d["offset"]) for d in parked] == [("oversized_output", 3), ("oversized_output", 4)]
    assert "recurrence-observations output is 381 bytes" in parked[0]["message"]
