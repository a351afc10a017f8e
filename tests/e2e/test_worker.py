"""The worker on the real broker and Redis: same outputs as the embedded
runner (contract §10), scale-out, SIGKILL recovery, poison records (§9)."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from recurrence_ledger.kafka.kafka_io import publish_raw
from recurrence_ledger.read.projection import RedisView
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import CASE_NAMES, case
from tests.e2e import harness
from tests.journal import write_journal
from tests.plugins.processes import free_port






@pytest.mark.parametrize("name", CASE_NAMES)
def test_worker_outputs_are_byte_identical_to_run_journal(topic_prefix, name, bootstrap, redis_url, tmp_path):
    journal, expected = case(name)
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=4)
    harness.publish(bootstrap, journal, prefix)
    log = tmp_path / "worker.log"
    harness.run_to_idle(bootstrap, prefix, log, redis_url=redis_url)

    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka")
    reference = harness.embedded(journal, tmp_path / "embedded")
    harness.assert_same_outputs(kafka, reference)
    # Dead letters carry where they were read (a Kafka offset, a line number)
    # and the bytes as published; their reasons and messages are the same.
    dead = sorted((d["reason"], d["message"]) for d in harness.lines(kafka["dead-letter"]))
    assert dead == sorted((d["reason"], d["message"]) for d in harness.lines(reference["dead-letter"]))
    assert Counter(reason for reason, _ in dead) == expected["dead_letter_reasons"]

    view = RedisView(redis_url, namespace=default_namespace(prefix))
    try:
        for scope_id, record in harness.last_statistics(reference["recurrence-statistics"]).items():
            assert view.read(scope_id) == record
            assert record["recurred"] == expected["scopes"][scope_id]["statistics"]["recurred"]
    finally:
        view.clear()


def test_two_workers_over_four_partitions_equal_one_process(topic_prefix, bootstrap, tmp_path):
    journal = write_journal(
        tmp_path / "journal.jsonl",
        generate_journal(Workload(scopes=60, outcomes_per_scope=12, heads_per_scope=4, handoffs=2, seed=21, candidates=0.3)),
    )
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=4)
    harness.publish(bootstrap, journal, prefix)
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    workers = [harness.start_worker(bootstrap, prefix, log, instance=f"w{i}", idle_exit=6) for i, log in enumerate(logs, 1)]
    for worker, log in zip(workers, logs, strict=True):
        assert harness.wait_exit(worker, 180, log) == 0

    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka")
    reference = harness.embedded(journal, tmp_path / "embedded")
    # Scopes are spread over partitions: compare facts as multisets of records.
    harness.assert_same_outputs(kafka, reference, multiset=True)
    assert len(harness.last_statistics(kafka["recurrence-statistics"])) == 60
    assert all(count == 0 for report in harness.identity_report(kafka, reference).values() for count in report.values())
    # Both workers did work.
    assert all("assigned partitions" in log.read_text() for log in logs)


@pytest.mark.slow
def test_sigkill_mid_journal_loses_and_duplicates_nothing(topic_prefix, bootstrap, redis_url, tmp_path, record_property):
    journal = write_journal(
        tmp_path / "journal.jsonl",
        generate_journal(Workload(scopes=8, outcomes_per_scope=400, heads_per_scope=6, handoffs=3, seed=5, candidates=0.1)),
    )
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=4)
    harness.publish(bootstrap, journal, prefix)
    reference = harness.embedded(journal, tmp_path / "embedded")
    total_observations = len(harness.lines(reference["recurrence-observations"]))

    log = tmp_path / "worker.log"
    worker = harness.start_worker(bootstrap, prefix, log, redis_url=redis_url, idle_exit=None)
    observations_topic = harness.physical(prefix, "recurrence-observations")
    harness.wait_until(lambda: harness.count_records(bootstrap, observations_topic) > total_observations // 4, 120, "a quarter of the outputs")
    harness.kill(worker)
    restarted = harness.start_worker(bootstrap, prefix, log, redis_url=redis_url)
    assert harness.wait_exit(restarted, 180, log) == 0

    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka")
    report = harness.identity_report(kafka, reference)
    record_property("resent_after_sigkill", json.dumps(report))
    print("identity report after SIGKILL:", report)
    for topic, counts in report.items():
        assert counts == {"missing": 0, "extra": 0, "resent": 0}, topic
    assert harness.last_statistics(kafka["recurrence-statistics"]) == harness.last_statistics(reference["recurrence-statistics"])
    harness.assert_same_outputs(kafka, reference, multiset=True)
    view = RedisView(redis_url, namespace=default_namespace(prefix))
    try:
        for scope_id, record in harness.last_statistics(reference["recurrence-statistics"]).items():
            assert view.read(scope_id) == record
    finally:
        view.clear()


def test_poison_records_go_to_dead_letter_and_valid_ones_are_processed(topic_prefix, bootstrap, tmp_path):
    journal, expected = case("minimum_case")
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=1)
    first = write_journal(tmp_path / "first.jsonl", records[:5])
    rest = write_journal(tmp_path / "rest.jsonl", records[5:])
    harness.publish(bootstrap, first, prefix)
    source = harness.physical(prefix, "source-journal")
    outcomes = harness.physical(prefix, "task-outcomes")
    publish_raw(bootstrap, source, b"migration-lock", b"\x00\x00\x00\x00\x01\xff\xff\xff")  # truncated Avro
    publish_raw(bootstrap, outcomes, b"migration-lock", b"\x07not avro")  # wrong magic byte
    publish_raw(bootstrap, source, b"migration-lock", b'{"topic": "task-outcomes", "value": {"scope_id": "migration-lock"}}')
    publish_raw(bootstrap, source, None, json.dumps(records[0]).encode())  # no key
    publish_raw(bootstrap, source, b"migration-lock\xff", json.dumps(records[0]).encode())  # a key that is not UTF-8
    harness.publish(bootstrap, rest, prefix)

    log = tmp_path / "worker.log"
    harness.run_to_idle(bootstrap, prefix, log)

    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka")
    dead = harness.lines(kafka["dead-letter"])
    # Across topics Kafka gives no order: compare as a set of coordinates.
    assert sorted((d["topic"], d["partition"], d["offset"], d["reason"]) for d in dead) == sorted([
        (source, 0, 5, "undecodable_avro"),
        (source, 0, 6, "missing_field"),
        (source, 0, 7, "key_mismatch"),
        (source, 0, 8, "key_mismatch"),
        (outcomes, 0, 0, "bad_magic_byte"),
    ])
    assert all(d["message"] and d["raw"] for d in dead)
    reference = harness.embedded(journal, tmp_path / "embedded")
    harness.assert_same_outputs(kafka, reference)
    assert harness.last_statistics(kafka["recurrence-statistics"])["migration-lock"]["avoided"] == expected["scopes"]["migration-lock"]["statistics"]["avoided"]


def test_prometheus_metrics(topic_prefix, bootstrap, tmp_path):
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    journal, _ = case("minimum_case")
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=1)
    harness.publish(bootstrap, journal, prefix)
    source = harness.physical(prefix, "source-journal")
    publish_raw(bootstrap, source, b"migration-lock", b"\x00\x00\x00\x00\x01\xff")  # one poison record
    port = free_port()
    log = tmp_path / "worker.log"
    # on every interface: 127.0.0.2 reaches it (an endpoint bound to 127.0.0.1 alone refuses it), as another host would
    worker = harness.start_worker(bootstrap, prefix, log, idle_exit=None, extra=("--metrics-port", str(port), "--metrics-host", "0.0.0.0"))
    try:
        dead_letter = harness.physical(prefix, "dead-letter")
        harness.wait_until(lambda: harness.count_records(bootstrap, dead_letter) == 1, 60, "the dead letter")
        time.sleep(2.5)  # one lag refresh
        text = urllib.request.urlopen(f"http://127.0.0.2:{port}/metrics", timeout=10).read().decode()
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text) for sample in family.samples
    }
    assert samples[("recurrence_ledger_records_total", (("topic", source),))] == 11
    assert samples[("recurrence_ledger_dead_letters_total", (("reason", "undecodable_avro"),))] == 1
    assert samples[("recurrence_ledger_outputs_total", (("topic", "recurrence-observations"),))] == 6
    assert samples[("recurrence_ledger_outputs_total", (("topic", "recurrence-matches"),))] == 2
    assert samples[("recurrence_ledger_pending_outcomes", ())] == 0
    # 11 input records and the one record the scope stage wrote to the pattern stage's repartition topic (contract §23)
    assert samples[("recurrence_ledger_processing_latency_seconds_count", ())] == 12
    assert samples[("recurrence_ledger_consumer_lag", (("partition", "0"), ("topic", source)))] == 0
    lagging = {dict(labels)["topic"] for name, labels in samples if name == "recurrence_ledger_consumer_lag"}
    unused = harness.physical(prefix, "task-outcomes")  # an input topic nothing was published to has a series too
    assert unused in lagging and samples[("recurrence_ledger_consumer_lag", (("partition", "0"), ("topic", unused)))] == 0, lagging


def test_a_bad_journal_line_gets_the_same_reason_after_publish_as_in_run_journal(topic_prefix, bootstrap, tmp_path):
    """contract §9: the same bad line, the same dead letter on both paths.
    ``publish`` sends a line it cannot use as is — without a key when no
    scope_id can be read from it — and the worker judges the value before
    the key, as run-journal judges the line: broken JSON is malformed_json,
    not a record without a key."""
    journal, _ = case("minimum_case")
    lines = [line for line in journal.read_bytes().splitlines() if line.strip()]
    bad = [
        b'{"topic": "task-outcomes", "value": {"scope_id": "migration-lock", "journal_position": 9',  # cut short
        b'{"topic": "task-outcomes", "value": {"scope_id": ',  # broken before its scope_id
        b'{"topic": "task-outcomes", "value": {"scope_id": "", "journal_position": 9}}',  # no scope_id to key it by
        b'{"topic": "no-such-topic", "value": {}}',
        b'["task-outcomes"]',
    ]
    mixed = write_journal(tmp_path / "mixed.jsonl", [*lines[:3], *bad, *lines[3:]])
    harness.prepare(bootstrap, topic_prefix, partitions=1)
    harness.publish(bootstrap, mixed, topic_prefix)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")

    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    reference = harness.embedded(mixed, tmp_path / "embedded")

    def letters(outputs: dict[str, bytes]) -> list[tuple[str, str]]:
        """(raw bytes, reason) per dead letter, in order; the messages of the
        two decode paths may word a reason differently."""
        return [(d["raw"], d["reason"]) for d in harness.lines(outputs["dead-letter"])]

    assert [reason for _, reason in letters(reference)] == [
        "malformed_json", "malformed_json", "invalid_value", "unknown_topic", "invalid_envelope",
    ]
    assert letters(kafka) == letters(reference)
    harness.assert_same_outputs(kafka, harness.embedded(journal, tmp_path / "valid"))
