"""A changelog that lost state its consumer group's committed offsets say
existed, on the real broker: deleted (and created again by the worker),
recreated under a --state-dir store, truncated at its start, recreated with
another partition count. The worker must refuse to run (exit 5, one error
line with the ways out), commit nothing, keep the local store in place —
never carry on with empty state and different outputs — and
``--reseed-changelog`` must write an intact local store back so the run
ends exactly as run-journal's."""

from __future__ import annotations

import time

import orjson
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from recurrence_ledger.catalogue import OUTPUT_TOPICS
from recurrence_ledger.runtime.changelog_guard import CHANGELOG_LOST_EXIT
from recurrence_ledger.kafka.kafka_admin import admin_client, topic_identity
from recurrence_ledger.store.base import encode_key
from recurrence_ledger.store.rocksdb import open_store
from recurrence_ledger.workload import Workload
from tests.e2e import harness

WORKLOAD = Workload(scopes=8, outcomes_per_scope=60, heads_per_scope=4, handoffs=2, seed=29, candidates=0.2)
PARTITIONS = 4
SLOW = ("--max-batch", "40")


@pytest.fixture(scope="module")
def journals(tmp_path_factory):
    """The whole journal, and its two halves (published one after the other)."""
    return harness.halved_journal(WORKLOAD, tmp_path_factory.mktemp("changelog-loss"))


@pytest.fixture(scope="module")
def reference(journals, tmp_path_factory):
    return harness.embedded(journals[0], tmp_path_factory.mktemp("reference"))


def run(bootstrap, prefix, log, *extra) -> int:
    worker = harness.start_worker(bootstrap, prefix, log, idle_exit=4.0, extra=(*SLOW, *extra))
    return harness.wait_exit(worker, 180, log)


def output_counts(bootstrap, prefix) -> dict[str, int]:
    return {name: harness.count_records(bootstrap, harness.physical(prefix, name)) for name in OUTPUT_TOPICS}


def assert_refused(log, before: int, code: int, bootstrap, prefix, counts: dict[str, int] | None) -> str:
    """Exit 5, one red error line naming the refusal and its ways out, no
    output committed since ``counts`` were taken (None: the caller checks
    what was committed itself)."""
    text = log.read_text()[before:]
    assert code == CHANGELOG_LOST_EXIT, text[-4000:]
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "refusing to run partition" in errors[0], text[-4000:]
    assert "replay --from earliest" in errors[0] and "A lost or truncated changelog" in errors[0]
    if counts is not None:
        assert output_counts(bootstrap, prefix) == counts
    return errors[0]


def test_a_deleted_changelog_is_refused_not_recreated_empty_and_run_on(topic_prefix, bootstrap, journals, tmp_path):
    """In memory (no --state-dir): the worker creates the missing changelog
    topic, then finds it empty while the group has committed offsets."""
    prefix, log = topic_prefix, tmp_path / "worker.log"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    assert run(bootstrap, prefix, log) == 0, log.read_text()[-3000:]
    harness.delete_changelog(bootstrap, prefix)
    harness.publish(bootstrap, journals[2], prefix)
    counts = output_counts(bootstrap, prefix)
    before = len(log.read_text())
    error = assert_refused(log, before, run(bootstrap, prefix, log), bootstrap, prefix, counts)
    assert "it is empty" in error and "consumer group " in error
    again = len(log.read_text())  # refused every time, never "healed" by the first refusal
    assert_refused(log, again, run(bootstrap, prefix, log), bootstrap, prefix, counts)


def delete_records_once_allowed(admin, partition: TopicPartition, within: float = 30.0) -> None:
    """DeleteRecords up to ``partition.offset``, retried while the broker
    still answers POLICY_VIOLATION: a config change is acknowledged when the
    controller has it, and the partition's log takes it up a moment later
    (KRaft applies it from the metadata log), so the first request can still
    meet the compact-only policy. Raises the last error after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        try:
            admin.delete_records([partition])[partition].result()
            return
        except KafkaException as error:
            if error.args[0].code() != KafkaError.POLICY_VIOLATION or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_changelog_truncated_at_its_start_is_refused(topic_prefix, bootstrap, journals, tmp_path):
    """Records deleted from the changelog's start (DeleteRecords, or
    retention on a compact,delete topic): a restore would miss them."""
    prefix, log = topic_prefix, tmp_path / "worker.log"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    assert run(bootstrap, prefix, log) == 0, log.read_text()[-3000:]
    topic, admin = harness.changelog_topic(prefix), admin_client(bootstrap)
    # The broker deletes records only from a topic with the delete policy
    # (as retention would on a compact,delete changelog).
    policy = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact,delete", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([policy])[policy].result()
    delete_records_once_allowed(admin, TopicPartition(topic, 2, 3))
    counts = output_counts(bootstrap, prefix)
    before = len(log.read_text())
    error = assert_refused(log, before, run(bootstrap, prefix, log), bootstrap, prefix, counts)
    assert f"{topic}[2]" in error and "first records were deleted (it starts at offset 3)" in error


def test_a_changelog_recreated_with_other_partitions_is_refused_before_anything_runs(topic_prefix, bootstrap, journals, tmp_path):
    prefix, log = topic_prefix, tmp_path / "worker.log"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    assert run(bootstrap, prefix, log) == 0, log.read_text()[-3000:]
    harness.recreate_changelog(bootstrap, prefix, PARTITIONS + 2)
    counts = output_counts(bootstrap, prefix)
    before = len(log.read_text())
    code = run(bootstrap, prefix, log)
    text = log.read_text()[before:]
    assert code == 2, text[-3000:]
    assert f"{harness.changelog_topic(prefix)}: {PARTITIONS + 2}" in text or f"{harness.changelog_topic(prefix)}={PARTITIONS + 2}" in text, text[-3000:]
    assert output_counts(bootstrap, prefix) == counts


@pytest.mark.slow
def test_a_recreated_changelog_keeps_the_local_store_and_a_reseed_from_it_ends_exactly_once(
        topic_prefix, bootstrap, journals, reference, tmp_path):
    """--state-dir: the changelog deleted and created again (empty, a new
    topic id). The worker refuses and leaves the stores as they were; with
    --reseed-changelog it writes them back to the new changelog, and the
    run over the second half ends with run-journal's outputs."""
    prefix, log, state_dir = topic_prefix, tmp_path / "worker.log", tmp_path / "state"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    assert run(bootstrap, prefix, log, "--state-dir", str(state_dir)) == 0, log.read_text()[-3000:]
    topic = harness.changelog_topic(prefix)
    state = {number: harness.changelog_state(bootstrap, topic, number) for number in range(PARTITIONS)}
    harness.recreate_changelog(bootstrap, prefix, PARTITIONS)
    harness.publish(bootstrap, journals[2], prefix)
    counts = output_counts(bootstrap, prefix)
    before = len(log.read_text())
    error = assert_refused(log, before, run(bootstrap, prefix, log, "--state-dir", str(state_dir)), bootstrap, prefix, counts)
    assert "--reseed-changelog" in error
    new_id, _ = topic_identity(bootstrap, topic)
    for number in range(PARTITIONS):  # every store still holds its state
        store = open_store(state_dir, topic, number, new_id)
        try:
            assert store.kept_checkpoint is not None
            assert {encode_key(key): orjson.dumps(value) for key, value in store.snapshot().items()} == state[number]
        finally:
            store.close()
    before = len(log.read_text())
    code = run(bootstrap, prefix, log, "--state-dir", str(state_dir), "--reseed-changelog")
    text = log.read_text()[before:]
    assert code == 0, text[-4000:]
    assert text.count("reseeded") == PARTITIONS, text[-4000:]
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
    harness.assert_stores_equal_the_changelog(bootstrap, prefix, state_dir, PARTITIONS)


@pytest.mark.slow
def test_a_recreated_pattern_changelog_is_reseeded_from_the_local_stores_too(topic_prefix, bootstrap, journals, reference, tmp_path):
    """--state-dir: the pattern stage's changelog (contract §23.5) deleted
    and created again. The worker refuses as for the ledger's; with
    --reseed-changelog it writes the pattern stage's stores back to it, and
    the run over the second half ends with run-journal's outputs — pattern
    candidates and signature patterns included."""
    prefix, log, state_dir = topic_prefix, tmp_path / "worker.log", tmp_path / "state"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    assert run(bootstrap, prefix, log, "--state-dir", str(state_dir)) == 0, log.read_text()[-3000:]
    topic = harness.changelog_topic(prefix, "pattern")
    state = {number: harness.changelog_state(bootstrap, topic, number) for number in range(PARTITIONS)}
    seeded = sorted(number for number, records in state.items() if records)
    assert seeded, "the first half gives no pattern state"
    harness.recreate_changelog(bootstrap, prefix, PARTITIONS, stage="pattern")
    harness.publish(bootstrap, journals[2], prefix)
    counts = output_counts(bootstrap, prefix)
    before = len(log.read_text())
    error = assert_refused(log, before, run(bootstrap, prefix, log, "--state-dir", str(state_dir)), bootstrap, prefix, counts)
    assert topic in error and "--reseed-changelog" in error
    before = len(log.read_text())
    code = run(bootstrap, prefix, log, "--state-dir", str(state_dir), "--reseed-changelog")
    text = log.read_text()[before:]
    assert code == 0, text[-4000:]
    # Only the pattern stage's partitions that held state are reseeded; the
    # ledger's changelog is intact and restores as usual.
    assert text.count("reseeded") == len(seeded) and text.count(f"changelog {topic} reseeded") == len(seeded), text[-4000:]
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
    new_id, _ = topic_identity(bootstrap, topic)
    for number in range(PARTITIONS):
        store = open_store(state_dir, topic, number, new_id)
        try:
            local = {encode_key(key): orjson.dumps(value) for key, value in store.snapshot().items()}
        finally:
            store.close()
        assert local == harness.changelog_state(bootstrap, topic, number), f"partition {number}"
    harness.assert_stores_equal_the_changelog(bootstrap, prefix, state_dir, PARTITIONS)
