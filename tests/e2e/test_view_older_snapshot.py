"""A Redis that comes back from an older snapshot (an RDB or AOF written
before its crash) against the real broker and Redis: the view follower,
whose offsets are committed past what that Redis holds, reads again from
the view's recorded ``follow-position`` (recurrence_ledger.read.positions),
so the view ends equal to a fresh follower's — also when nothing new
arrives after the restart; and a Redis that comes back empty under a
running follower is read again from the beginning.

The restart is played on the namespace's keys: DUMP of every key after the
first half of the journal, the second half followed, then every key
deleted and the dumps RESTOREd (what Redis loads from that older snapshot).
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from confluent_kafka import TopicPartition

from recurrence_ledger.kafka.kafka_admin import group_members
from recurrence_ledger.read.follower import LOST_MIDWAY, FollowerConfig, ViewFollower, view_group
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.read.projection import RedisView
from tests.conftest import CASES
from tests.e2e import harness
from tests.e2e.harness import REPO
from tests.e2e.history_fixtures import namespace_keys, run_follower, snapshot
from tests.e2e.test_history import is_view_key
from tests.plugins.processes import cli_command, cli_env


@pytest.fixture
def client(redis_url) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


def dumped(client: redis.Redis, namespace: str) -> dict[bytes, bytes]:
    """Every key of ``namespace`` as DUMP bytes (none of them expires)."""
    return {key: client.dump(key) for key in namespace_keys(client, namespace)}


def restored(client: redis.Redis, namespace: str, dumps: dict[bytes, bytes]) -> None:
    """The namespace as Redis loads it from the snapshot ``dumps``."""
    for key in namespace_keys(client, namespace):
        client.delete(key)
    for key, value in dumps.items():
        client.restore(key, 0, value, replace=True)  # a running follower may write its position meanwhile


@pytest.mark.parametrize("split", ["half", "before the first outcome"])
def test_a_redis_back_from_an_older_snapshot_is_followed_again_from_where_it_is(split, bootstrap, redis_url, client, tmp_path):
    """``before the first outcome``: when the snapshot was taken, most
    followed partitions had no record yet (no observation, no candidate):
    their positions were recorded all the same, where they stood."""
    lines = (CASES / "review_loop.jsonl").read_bytes().splitlines(keepends=True)
    cut = len(lines) // 2 if split == "half" else next(number for number, line in enumerate(lines) if b'"task-outcomes"' in line)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(lines[:cut]))
    second.write_bytes(b"".join(lines[cut:]))
    prefix = harness.new_prefix()
    namespace = default_namespace(prefix)
    log = tmp_path / "follower.log"
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        harness.publish(bootstrap, first, prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        run_follower(bootstrap, redis_url, prefix, log)
        older = dumped(client, namespace)
        assert older

        harness.publish(bootstrap, second, prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        run_follower(bootstrap, redis_url, prefix, log)
        complete = snapshot(client, namespace_keys(client, namespace))
        restored(client, namespace, older)
        assert snapshot(client, namespace_keys(client, namespace)) != complete  # the second half is gone from Redis

        # Nothing new arrives: the follower, its offsets committed at the end, finds the view behind and reads again.
        run_follower(bootstrap, redis_url, prefix, log)
        assert snapshot(client, namespace_keys(client, namespace)) == complete
        assert "up to offset" in log.read_text() and "reading it again from there" in log.read_text()

        # The same view as a follower of its own group writes from nothing.
        RedisView(redis_url, namespace=namespace).clear()
        run_follower(bootstrap, redis_url, prefix, tmp_path / "alone.log", app_id="alone")
        assert snapshot(client, namespace_keys(client, namespace)) == complete
    finally:
        harness.remove_prefix(bootstrap, prefix, redis_url)


def settled(client: redis.Redis, namespace: str, group: str, bootstrap: str) -> dict:
    """The namespace's contents once they and the followers' committed
    offsets stayed the same for three polls a second apart."""
    from confluent_kafka import Consumer

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        partitions = [TopicPartition(topic, partition) for topic, metadata in reader.list_topics(timeout=10).topics.items()
                      if topic.startswith(namespace.removeprefix("rl:")) for partition in metadata.partitions]
        seen, same = None, 0
        deadline = time.monotonic() + 90
        while same < 3:
            assert time.monotonic() < deadline, "the followers did not settle"
            now = ([(tp.topic, tp.partition, tp.offset) for tp in reader.committed(partitions, timeout=10)], snapshot(client, namespace_keys(client, namespace)))
            same = same + 1 if now == seen else 0
            seen = now
            time.sleep(1)
        return seen[1]
    finally:
        reader.close()


def started_follower(bootstrap: str, redis_url: str, prefix: str, log_path) -> subprocess.Popen:
    """A ``view follow`` process of the app id "ledger", running until stopped."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(cli_command("view", "follow", "--bootstrap", bootstrap, "--redis-url", redis_url, "--topic-prefix", prefix,
                                            "--app-id", "ledger"), cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=cli_env())


def test_a_redis_back_empty_is_followed_again_from_the_beginning(bootstrap, redis_url, client, tmp_path):
    """Redis restarted without persistence under a running follower: every
    key of the view is gone, its recorded positions too, so the follower
    reads every partition again from its beginning — also when nothing new
    arrives — and the view ends as it was."""
    prefix = harness.new_prefix()
    namespace = default_namespace(prefix)
    group = view_group("ledger", prefix)
    follower = None
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        harness.publish(bootstrap, CASES / "review_loop.jsonl", prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        follower = started_follower(bootstrap, redis_url, prefix, tmp_path / "follower.log")
        complete = settled(client, namespace, group, bootstrap)
        assert complete
        client.delete(*namespace_keys(client, namespace))  # at once, as a restart loses them
        harness.wait_until(lambda: "up to offset 0 only" in (tmp_path / "follower.log").read_text(), 60, "the follower reading again")
        assert settled(client, namespace, group, bootstrap) == complete
    finally:
        if follower is not None:
            follower.terminate()
            follower.wait(60)
        harness.remove_prefix(bootstrap, prefix, redis_url)


def test_a_follower_started_on_a_redis_back_empty_reads_everything_again(bootstrap, redis_url, client, tmp_path):
    """Redis and the follower both restarted: no partition has a recorded
    position while the group has read past the beginning — every
    partition is read again from the beginning."""
    prefix = harness.new_prefix()
    namespace = default_namespace(prefix)
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        harness.publish(bootstrap, CASES / "review_loop.jsonl", prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        run_follower(bootstrap, redis_url, prefix, tmp_path / "follower.log")
        complete = snapshot(client, namespace_keys(client, namespace))
        client.delete(*namespace_keys(client, namespace))
        run_follower(bootstrap, redis_url, prefix, tmp_path / "follower.log")
        assert snapshot(client, namespace_keys(client, namespace)) == complete
    finally:
        harness.remove_prefix(bootstrap, prefix, redis_url)


def test_a_redis_emptied_while_a_batch_is_written_is_followed_again_from_the_beginning(bootstrap, redis_url, client, tmp_path, caplog):
    """Redis restarted empty after the follower checked the positions and
    before it recorded the batch's: the batch's positions are not recorded
    over the empty view (``lua/record_position.lua``); the follower looks
    again and reads every partition from the beginning, so the view's rows
    end as a fresh follower writes them. The read models the batch wrote
    into the empty Redis moved their exactly-once offsets past what it lost:
    the follower says so, and what to run."""
    lines = (CASES / "review_loop.jsonl").read_bytes().splitlines(keepends=True)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(lines[: len(lines) // 2]))
    second.write_bytes(b"".join(lines[len(lines) // 2 :]))
    prefix = harness.new_prefix()
    namespace = default_namespace(prefix)
    follower = ViewFollower(FollowerConfig(bootstrap=bootstrap, redis_url=redis_url, app_id="ledger", topic_prefix=prefix, exit_when_idle_s=6))
    written, emptied = follower.models.apply, []

    def restarted_empty_midway(batch):  # the history's scripts run after the view's rows: Redis is lost between the two
        if not emptied and any(record.topic == "recurrence-observations" for record in batch):
            emptied.append(len(batch))
            client.delete(*namespace_keys(client, namespace))
            raise redis.exceptions.ConnectionError("Redis restarted")
        return written(batch)

    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        harness.publish(bootstrap, first, prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        run_follower(bootstrap, redis_url, prefix, tmp_path / "follower.log")  # the first half, positions recorded
        harness.publish(bootstrap, second, prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        follower.models.apply = restarted_empty_midway
        with caplog.at_level(logging.ERROR, logger="recurrence_ledger.follower"):
            follower.run()
        assert emptied
        assert [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR] == [LOST_MIDWAY]
        rows = lambda: snapshot(client, [key for key in namespace_keys(client, namespace) if is_view_key(key.decode(), namespace)])  # noqa: E731
        view = rows()
        RedisView(redis_url, namespace=namespace).clear()
        run_follower(bootstrap, redis_url, prefix, tmp_path / "alone.log", app_id="alone")
        assert view == rows() and len(view) > 10
    finally:
        harness.remove_prefix(bootstrap, prefix, redis_url)


def test_a_follower_given_back_a_partition_compares_it_with_where_the_group_is_now(bootstrap, redis_url, client, tmp_path):
    """Two followers in one group; the second leaves after writing past an
    older snapshot, and Redis comes back from that snapshot: the first,
    given its partitions back, compares them with the group's committed
    offsets, not with what it recorded before it handed them over."""
    lines = (CASES / "review_loop.jsonl").read_bytes().splitlines(keepends=True)
    parts = [tmp_path / f"part{index}.jsonl" for index in range(3)]
    for index, path in enumerate(parts):
        path.write_bytes(b"".join(lines[index * len(lines) // 3 : (index + 1) * len(lines) // 3]))
    prefix = harness.new_prefix()
    namespace = default_namespace(prefix)
    group = view_group("ledger", prefix)
    followers = []

    def follower(name: str) -> subprocess.Popen:
        followers.append(started_follower(bootstrap, redis_url, prefix, tmp_path / f"{name}.log"))
        return followers[-1]

    try:
        harness.prepare(bootstrap, prefix, partitions=4)
        harness.publish(bootstrap, parts[0], prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        follower("a")
        settled(client, namespace, group, bootstrap)
        second = follower("b")
        harness.wait_until(lambda: group_members(bootstrap, group) == 2, 60, "both followers in the group")
        harness.publish(bootstrap, parts[1], prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        settled(client, namespace, group, bootstrap)
        older = dumped(client, namespace)
        harness.publish(bootstrap, parts[2], prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        complete = settled(client, namespace, group, bootstrap)
        second.terminate()
        assert second.wait(60) == 0
        harness.wait_until(lambda: group_members(bootstrap, group) == 1, 60, "the second follower gone")
        time.sleep(3)  # the first follower holds every partition again
        restored(client, namespace, older)
        assert settled(client, namespace, group, bootstrap) == complete
    finally:
        for process in followers:
            process.terminate()
            process.wait(60)
        harness.remove_prefix(bootstrap, prefix, redis_url)


def test_decisions_read_again_are_not_observed_again(bootstrap, redis_url, client, tmp_path):
    """The time-to-decision histogram counts each decided candidate once:
    a partition read again after Redis came back empty files its decisions
    again, and neither the running follower nor one started later on the
    empty Redis observes them a second time."""
    prefix = harness.new_prefix()
    namespace = default_namespace(prefix)
    group = view_group("ledger", prefix)
    config = FollowerConfig(bootstrap=bootstrap, redis_url=redis_url, app_id="ledger", topic_prefix=prefix)
    decided = lambda follower: follower.metrics.registry.get_sample_value(  # noqa: E731
        "recurrence_ledger_review_decision_seconds_count", {"namespace": namespace})
    follower = ViewFollower(config)
    running = threading.Thread(target=follower.run)
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        harness.publish(bootstrap, CASES / "review_loop.jsonl", prefix)
        harness.run_to_idle(bootstrap, prefix, tmp_path / "worker.log")
        running.start()
        complete = settled(client, namespace, group, bootstrap)
        first = decided(follower)
        assert first == 4  # D-a1, D-b, D-c1 approve, D-d1 rejects (tests/cases/README.md, review_loop)
        client.delete(*namespace_keys(client, namespace))  # at once, as a restart loses them
        harness.wait_until(lambda: settled(client, namespace, group, bootstrap) == complete, 120, "the view read again")
        assert decided(follower) == first
        follower.stop()
        running.join(60)

        client.delete(*namespace_keys(client, namespace))
        again = ViewFollower(FollowerConfig(bootstrap=bootstrap, redis_url=redis_url, app_id="ledger", topic_prefix=prefix, exit_when_idle_s=6))
        again.run()
        assert snapshot(client, namespace_keys(client, namespace)) == complete
        assert decided(again) == 0
    finally:
        follower.stop()
        if running.is_alive():
            running.join(60)
        harness.remove_prefix(bootstrap, prefix, redis_url)
