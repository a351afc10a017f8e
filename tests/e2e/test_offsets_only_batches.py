"""Offsets-only batches on the real broker: a batch of duplicates produces
nothing, yet commits its offsets, and a batch run exits once caught up."""

from __future__ import annotations

import time

from tests.e2e.test_parked_records import SLOW, broker_journal  # noqa: F401 - broker_journal is a fixture


def test_a_batch_of_duplicates_commits_its_offsets_and_the_batch_run_exits(topic_prefix, bootstrap, broker_journal, tmp_path):
    """The whole journal published twice: the second copy produces nothing
    (duplicates), yet its offsets must be committed (offsets-only
    transactions) and a batch run must exit 0 once caught up."""
    from confluent_kafka import Consumer, TopicPartition

    from tests.e2e import harness

    harness.prepare(bootstrap, topic_prefix, partitions=3)
    harness.publish(bootstrap, broker_journal, topic_prefix)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "first.log", extra=SLOW)
    before = harness.exported(bootstrap, topic_prefix, tmp_path / "before")
    harness.publish(bootstrap, broker_journal, topic_prefix)  # every record again: duplicates
    started = time.monotonic()
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "second.log", extra=SLOW)
    assert time.monotonic() - started < 40
    after = harness.exported(bootstrap, topic_prefix, tmp_path / "after")
    assert after == before
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": harness.physical(topic_prefix, "ledger")})
    try:
        source = harness.physical(topic_prefix, "source-journal")
        for tp in consumer.committed([TopicPartition(source, p) for p in range(3)], timeout=10):
            _, high = consumer.get_watermark_offsets(TopicPartition(source, tp.partition), timeout=10)
            assert high - 1 <= tp.offset <= high, (tp.partition, tp.offset, high)  # at its end (a commit marker may follow)
    finally:
        consumer.close()
    # A third run over nothing new exits at once.
    started = time.monotonic()
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "third.log", extra=SLOW)
    assert time.monotonic() - started < 30
