"""Recovery in the main loop on the real broker: a kill during a long
restore, a rebalance while restoring, then scaling back."""

from __future__ import annotations

import orjson
import pytest

from recurrence_ledger.store.base import encode_key
from tests.e2e.test_parked_records import _replay_written, _start, broker_journal  # noqa: F401 - broker_journal is a fixture


def _fill_changelog(bootstrap, prefix, partitions, per_partition):
    """Pad every changelog partition with state records the core never
    reads, so that a restore takes seconds."""
    from confluent_kafka import Producer

    from recurrence_ledger.kafka.kafka_admin import create_topics
    from tests.e2e import harness

    create_topics(bootstrap, partitions, prefix, extra=[("ledger-ledger-state-changelog", {"cleanup.policy": "compact"})])
    topic = harness.physical(prefix, "ledger-ledger-state-changelog")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000})
    pad = orjson.dumps({"pad": "x" * 40})
    for partition in range(partitions):
        for number in range(per_partition):
            producer.produce(topic, key=encode_key(("padding", partition, number)), value=pad, partition=partition)
            if number % 20_000 == 0:
                producer.poll(0)
    assert producer.flush(120) == 0


@pytest.mark.slow
def test_kill_during_a_long_restore_then_a_rebalance_while_restoring_then_scale_back(topic_prefix, bootstrap, broker_journal, tmp_path):
    from tests.e2e import harness

    harness.prepare(bootstrap, topic_prefix, partitions=3)
    _fill_changelog(bootstrap, topic_prefix, 3, 150_000)
    harness.publish(bootstrap, broker_journal, topic_prefix)
    first_log, second_log = tmp_path / "w1.log", tmp_path / "w2.log"
    crashed = _start(bootstrap, topic_prefix, first_log, fault="restoring:200000", idle_exit=None)
    assert crashed.wait(timeout=60) == -9
    first = _start(bootstrap, topic_prefix, first_log, idle_exit=6)
    harness.wait_until(lambda: first_log.read_text().count("assigned partitions") >= 2, 30, "the first worker's second assignment")
    second = _start(bootstrap, topic_prefix, second_log, instance="w2", idle_exit=None)
    harness.wait_until(lambda: "restored:" in second_log.read_text(), 40, "the second worker's restore")
    second.terminate()  # leaves mid-run: the first takes its partitions back (static member: after the session timeout)
    assert second.wait(timeout=30) == 0, second_log.read_text()[-3000:]
    assert harness.wait_exit(first, 90, first_log) == 0
    print(first_log.read_text()[-2500:])
    reference = harness.embedded(broker_journal, tmp_path / "reference")
    harness.assert_exactly_once(bootstrap, topic_prefix, reference, tmp_path / "kafka")
    assert _replay_written(bootstrap, topic_prefix) == {}
