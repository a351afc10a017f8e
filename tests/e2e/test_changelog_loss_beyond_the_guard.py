"""Changelog losses beyond tests/e2e/test_changelog_loss.py, on the real
broker: a clean --state-dir store *behind* the group's committed offsets
(another worker, or a run without that --state-dir, committed after it)
must not be reseeded — writing it back and carrying on would silently lose
every transaction in between; inputs purged up to the committed offsets
still say state existed; a killed worker's store is not reseeded. And what
must not be refused: a group reset to the earliest offsets by hand with the
changelog intact ends exactly once."""

from __future__ import annotations

import json

from recurrence_ledger.runtime.changelog_guard import CHANGELOG_LOST_EXIT
from recurrence_ledger.workload import generate_journal
from tests.e2e import harness
from tests.e2e.test_changelog_loss import PARTITIONS, WORKLOAD, output_counts, run


def test_a_clean_store_behind_the_committed_offsets_is_not_reseeded(topic_prefix, bootstrap, tmp_path):
    prefix, log, stale_dir = topic_prefix, tmp_path / "worker.log", tmp_path / "stale-state"
    lines = [json.dumps(record) + "\n" for record in generate_journal(WORKLOAD)]
    third = len(lines) // 3
    parts = [tmp_path / f"part{index}.jsonl" for index in range(3)]
    for index, part in enumerate(parts):
        part.write_text("".join(lines[index * third: None if index == 2 else (index + 1) * third]))
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, parts[0], prefix)
    # A worker with a --state-dir runs the first third and stops cleanly ...
    assert run(bootstrap, prefix, log, "--state-dir", str(stale_dir)) == 0, log.read_text()[-3000:]
    # ... then the group carries on elsewhere (here: in memory) over the second.
    harness.publish(bootstrap, parts[1], prefix)
    assert run(bootstrap, prefix, log) == 0, log.read_text()[-3000:]
    harness.recreate_changelog(bootstrap, prefix, PARTITIONS)
    harness.publish(bootstrap, parts[2], prefix)
    counts = output_counts(bootstrap, prefix)
    before = len(log.read_text())
    code = run(bootstrap, prefix, log, "--state-dir", str(stale_dir), "--reseed-changelog")
    text = log.read_text()[before:]
    assert code == CHANGELOG_LOST_EXIT, text[-4000:]
    assert "reseeded" not in text, text[-4000:]
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--reseed-changelog cannot reseed it" in errors[0] and "behind the committed state" in errors[0], text[-4000:]
    assert output_counts(bootstrap, prefix) == counts


def test_a_deleted_changelog_is_refused_after_the_inputs_were_purged_up_to_the_committed_offsets(topic_prefix, bootstrap, tmp_path):
    """The inputs' processed records deleted (DeleteRecords up to the group's
    committed offsets, to free disk, as Kafka Streams purges repartition
    topics; or input retention passing them while the group is stopped):
    the committed offsets then sit at the partitions' start, yet they still
    say state existed. A deleted changelog must be refused, not created
    again empty and run on."""
    from confluent_kafka import TopicPartition

    from recurrence_ledger.catalogue import INPUT_TOPICS
    from recurrence_ledger.kafka.kafka_admin import admin_client
    from tests.e2e.test_changelog_loss import assert_refused

    prefix, log = topic_prefix, tmp_path / "worker.log"
    _, first, second = harness.halved_journal(WORKLOAD, tmp_path)
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, first, prefix)
    assert run(bootstrap, prefix, log) == 0, log.read_text()[-3000:]
    admin = admin_client(bootstrap)
    group = f"{prefix}ledger"
    inputs = [harness.physical(prefix, name) for name in INPUT_TOPICS]
    committed = admin.list_consumer_group_offsets([__import__("confluent_kafka").ConsumerGroupTopicPartitions(group)])[group].result()
    purge = [TopicPartition(part.topic, part.partition, part.offset) for part in committed.topic_partitions
             if part.topic in inputs and part.offset > 0]
    assert purge
    for future in admin.delete_records(purge).values():
        future.result()
    harness.delete_changelog(bootstrap, prefix)
    harness.publish(bootstrap, second, prefix)
    counts = output_counts(bootstrap, prefix)
    before = len(log.read_text())
    assert_refused(log, before, run(bootstrap, prefix, log), bootstrap, prefix, counts)


def test_a_group_reset_to_the_earliest_offsets_by_hand_with_the_changelog_intact_ends_exactly_once(
        topic_prefix, bootstrap, tmp_path):
    """Not refused (docs/kafka.md): the state is whole, and every record read
    again is the same identity with the same content — no fact re-sent, the
    outputs exactly run-journal's."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    from recurrence_ledger.catalogue import INPUT_TOPICS
    from recurrence_ledger.kafka.kafka_admin import admin_client

    prefix, log, state_dir = topic_prefix, tmp_path / "worker.log", tmp_path / "state"
    whole, first, second = harness.halved_journal(WORKLOAD, tmp_path)
    reference = harness.embedded(whole, tmp_path / "reference")
    flags = ("--state-dir", str(state_dir), "--dynamic-membership")
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, first, prefix)
    assert run(bootstrap, prefix, log, *flags) == 0, log.read_text()[-3000:]
    admin, group = admin_client(bootstrap), f"{prefix}ledger"
    earliest = [TopicPartition(harness.physical(prefix, name), number, 0) for name in INPUT_TOPICS for number in range(PARTITIONS)]

    def reset() -> bool:
        try:
            admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, earliest)])[group].result()
        except Exception as error:  # the group may not be empty yet
            print("reset:", error)
            return False
        return True

    harness.wait_until(reset, 60, "the group's offsets reset")
    harness.publish(bootstrap, second, prefix)
    before = len(log.read_text())
    assert run(bootstrap, prefix, log, *flags) == 0, log.read_text()[before:][-3000:]
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")


def test_a_killed_worker_s_store_is_not_reseeded(topic_prefix, bootstrap, tmp_path):
    """kill -9 mid-run: the store's last checkpoint is not a clean stop's (it
    may be a transaction behind the committed offsets), so with the
    changelog deleted the reseed refuses and says why; outputs unchanged."""
    import signal

    from recurrence_ledger.catalogue import OUTPUT_TOPICS
    from tests.e2e.test_changelog_loss import SLOW

    prefix, log, state_dir = topic_prefix, tmp_path / "worker.log", tmp_path / "state"
    journal, _, _ = harness.halved_journal(WORKLOAD, tmp_path)
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journal, prefix)
    worker = harness.start_worker(bootstrap, prefix, log, idle_exit=None, extra=(*SLOW, "--state-dir", str(state_dir)))
    try:
        harness.wait_changelog_written(bootstrap, prefix)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
    harness.delete_changelog(bootstrap, prefix)
    counts = {name: harness.count_records(bootstrap, harness.physical(prefix, name)) for name in OUTPUT_TOPICS}
    before = len(log.read_text())
    code = run(bootstrap, prefix, log, "--state-dir", str(state_dir), "--reseed-changelog")
    text = log.read_text()[before:]
    assert code == CHANGELOG_LOST_EXIT, text[-4000:]
    assert "reseeded" not in text and "not written by a clean stop" in text, text[-4000:]
    assert output_counts(bootstrap, prefix) == counts


def test_a_changelog_deleted_while_the_worker_runs_is_refused_with_the_ways_out(topic_prefix, bootstrap, tmp_path):
    """The changelog topic deleted under a running worker: its transaction
    times out and it rewinds — then it must refuse like at a start (exit 5,
    one error line with the ways out), not exit 1 on a raw
    UNKNOWN_TOPIC_OR_PART from the watermarks."""
    import signal

    from recurrence_ledger.runtime.checkpoint import RESTART_EXIT
    from tests.e2e.test_changelog_loss import SLOW, assert_refused

    prefix, log = topic_prefix, tmp_path / "worker.log"
    _, first, second = harness.halved_journal(WORKLOAD, tmp_path)
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, first, prefix)
    worker = harness.start_worker(bootstrap, prefix, log, idle_exit=None, extra=SLOW)

    try:
        harness.wait_changelog_written(bootstrap, prefix)
        harness.delete_changelog(bootstrap, prefix)
        harness.publish(bootstrap, second, prefix)
        code = harness.wait_exit(worker, 240, log)
        if code == RESTART_EXIT:
            # On a loaded machine the timed-out transaction's producer can be fenced before the rewind reads the
            # changelog: that worker exits for a restart, and its supervisor's restart must refuse as a start does.
            log = tmp_path / "restarted.log"
            worker = harness.start_worker(bootstrap, prefix, log, idle_exit=None, extra=SLOW)
            code = harness.wait_exit(worker, 240, log)
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGKILL)
            worker.wait(30)
    # A transaction open while the topic was deleted may still commit what it
    # read of the first half; nothing read after the deletion — the second
    # half, published after it — reaches an output.
    assert_refused(log, 0, code, bootstrap, prefix, None)
    later = {(record["value"]["scope_id"], record["value"]["source_ref"]["source_id"])
             for record in map(json.loads, second.read_text().splitlines()) if record["topic"] == "task-outcomes"}
    outputs = harness.exported(bootstrap, prefix, tmp_path / "outputs")
    judged = {(row["scope_id"], row["task_outcome_ref"]["source_id"]) for topic in ("recurrence-matches", "recurrence-observations")
              for row in harness.lines(outputs[topic])}
    assert later and judged and not judged & later
