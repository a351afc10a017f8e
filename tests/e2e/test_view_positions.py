"""The view followers' recorded positions (recurrence_ledger.read.positions)
against a real Redis and Redis Cluster: what a follower reads again, and
when a batch's positions are not recorded."""

from __future__ import annotations

import uuid

from recurrence_ledger.read.keys import Keys
from recurrence_ledger.read.positions import ViewPositions
from tests.plugins.services import read_client

OBSERVATIONS, STATISTICS = ("recurrence-observations", 0), ("recurrence-statistics", 1)


def positions(url: str) -> tuple[ViewPositions, object]:
    client = read_client(url)
    return ViewPositions(client, Keys(f"rl:pos{uuid.uuid4().hex[:10]}.")), client


def test_a_partition_without_a_recorded_position_is_read_again_from_the_beginning(read_redis_url):
    """Checked one partition at a time, as batches come (the first of them
    one with nothing read yet): each partition the group read past the
    beginning, without a position in Redis, is read again from 0 — whether
    or not another one was recorded before it."""
    view, client = positions(read_redis_url)
    try:
        view.expected.update({STATISTICS: 0, OBSERVATIONS: 50})
        assert view.lost([STATISTICS]) == {}
        assert view.lost([OBSERVATIONS]) == {OBSERVATIONS: (0, 50)}
        assert view.expected == {STATISTICS: 0, OBSERVATIONS: 0}
        assert client.hgetall(view.keys.position) == {b"recurrence-statistics:1": b"0", b"recurrence-observations:0": b"0"}
        assert view.lost([OBSERVATIONS, STATISTICS]) == {}  # recorded now: nothing to read again
    finally:
        client.delete(view.keys.position)
        client.close()


def test_a_batch_is_recorded_only_where_redis_still_holds_what_was_found_before_it(read_redis_url):
    view, client = positions(read_redis_url)
    try:
        view.expected.update({OBSERVATIONS: 0})
        assert view.lost([OBSERVATIONS]) == {}
        assert view.record({OBSERVATIONS: 40}) is True
        assert view.expected[OBSERVATIONS] == 40
        assert client.hget(view.keys.position, "recurrence-observations:0") == b"40"
        client.delete(view.keys.position)  # Redis came back empty while the next batch was written
        assert view.record({OBSERVATIONS: 90}) is False
        assert client.hgetall(view.keys.position) == {}  # nothing recorded over the lost view
        assert view.lost([OBSERVATIONS]) == {OBSERVATIONS: (0, 40)}
        client.hset(view.keys.position, "recurrence-observations:0", 10)  # lowered by a snapshot: held to what was found
        view.expected[OBSERVATIONS] = 40
        assert view.record({OBSERVATIONS: 90}) is False
        assert view.record({STATISTICS: 7}) is True  # a partition it never looked at (its committed offset unknown) is held to nothing
    finally:
        client.delete(view.keys.position)
        client.close()
