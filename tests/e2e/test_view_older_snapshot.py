"""A Redis that comes back from an older snapshot (an RDB or AOF written
before its crash) against the real broker and Redis: the view follower,
whose offsets are committed past what that Redis holds, reads again from
the view's recorded ``follow-position`` (recurrence_ledger.read.positions),
so the view ends equal to a fresh follower's — also when nothing new
arrives after the restart.

The restart is played on the namespace's keys: DUMP of every key after the
first half of the journal, the second half followed, then every key
deleted and the dumps RESTOREd (what Redis loads from that older snapshot).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.read.projection import RedisView
from tests.conftest import CASES
from tests.e2e import harness
from tests.e2e.history_fixtures import namespace_keys, run_follower, snapshot


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
        client.restore(key, 0, value)


def test_a_redis_back_from_an_older_snapshot_is_followed_again_from_where_it_is(bootstrap, redis_url, client, tmp_path):
    lines = (CASES / "review_loop.jsonl").read_bytes().splitlines(keepends=True)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(lines[: len(lines) // 2]))
    second.write_bytes(b"".join(lines[len(lines) // 2 :]))
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
