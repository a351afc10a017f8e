"""The Redis projection of the signature patterns (contract §23.3,
processors/recurrence_ledger/read/patterns.py) in a real Redis, single and
Cluster: one hash per pattern group, so a group's read holds its own
patterns only (§23.1); a pattern is never replaced by one with fewer
recurred verdicts (a replay or a late follower puts back nothing older);
``clear`` — and so ``view rebuild`` — removes the groups' keys with the
view's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.read.patterns import PatternView
from recurrence_ledger.read.projection import RedisView
from tests.e2e import harness
from tests.plugins.services import read_client


def pattern(group: str, key: str, scopes: list[str], recurred: int) -> dict:
    return {"group": group, "signature_key": key, "scope_count": len(scopes), "scopes": scopes, "recurred": recurred}


@pytest.fixture
def patterns(read_redis_url) -> Iterator[PatternView]:
    client = read_client(read_redis_url)
    namespace = default_namespace(harness.new_prefix())
    view = RedisView(read_redis_url, namespace=namespace)
    try:
        yield PatternView(client, namespace)
    finally:
        view.clear()
        view.close()
        client.close()


def test_each_group_reads_its_own_patterns_most_scopes_first(patterns):
    written = patterns.apply([
        pattern("teamA", "lock timeout", ["teamA/svc1"], 1),
        pattern("teamB", "lock timeout", ["teamB/svc1", "teamB/svc2"], 2),
        pattern("teamA", "lock timeout", ["teamA/svc1", "teamA/svc2", "teamA/svc3"], 4),  # the later record of the key
        pattern("teamA", "dns mirror", ["teamA/svc1"], 2),
        pattern("", "dns mirror", ["solo"], 1),
    ])
    assert written == 4  # the last record per (group, signature_key)
    team_a = patterns.group("teamA")
    assert (team_a.total, team_a.available) == (2, 2)
    assert team_a.rows == [pattern("teamA", "lock timeout", ["teamA/svc1", "teamA/svc2", "teamA/svc3"], 4),
                           pattern("teamA", "dns mirror", ["teamA/svc1"], 2)]
    assert patterns.group("teamB").rows == [pattern("teamB", "lock timeout", ["teamB/svc1", "teamB/svc2"], 2)]
    assert patterns.group("").rows == [pattern("", "dns mirror", ["solo"], 1)]
    # A group the view does not hold (a scope id, a prefix of a group) has none.
    for other in ("teamA/svc1", "team", "%", "unknown"):
        assert (patterns.group(other).total, patterns.group(other).rows) == (0, [])
    # Filter and page: min scopes, offset, limit; the tag follows what the page shows.
    wide = patterns.group("teamA", min_scopes=2)
    assert (wide.total, wide.available, [row["signature_key"] for row in wide.rows]) == (2, 1, ["lock timeout"])
    assert patterns.group("teamA", offset=1, limit=1).rows == [pattern("teamA", "dns mirror", ["teamA/svc1"], 2)]
    assert len({team_a.etag, wide.etag, patterns.group("teamA", offset=1, limit=1).etag}) == 3
    assert patterns.group("teamA").etag == team_a.etag


def test_a_pattern_is_never_replaced_by_one_with_fewer_recurred_verdicts(patterns):
    newer = pattern("teamA", "lock timeout", ["teamA/svc1", "teamA/svc2"], 3)
    patterns.apply([newer])
    before = patterns.group("teamA").etag
    assert patterns.apply([pattern("teamA", "lock timeout", ["teamA/svc1"], 1)]) == 0  # a replayed older record
    assert patterns.group("teamA").rows == [newer] and patterns.group("teamA").etag == before
    assert patterns.apply([newer]) == 1  # the same record again: written, nothing changes
    grown = pattern("teamA", "lock timeout", ["teamA/svc1", "teamA/svc2", "teamA/svc3"], 5)
    assert patterns.apply([grown]) == 1 and patterns.group("teamA").rows == [grown]
    assert patterns.group("teamA").etag != before


def test_an_invalid_pattern_writes_nothing(patterns):
    with pytest.raises(ValueError):
        patterns.apply([pattern("teamA", "ok", ["teamA/svc1"], 1), {**pattern("teamA", "bad", ["teamA/svc1"], 1), "scope_count": 2}])
    assert patterns.group("teamA").rows == []


def test_clear_removes_every_group_s_patterns(read_redis_url):
    namespace = default_namespace(harness.new_prefix())
    client = read_client(read_redis_url)
    view = RedisView(read_redis_url, namespace=namespace)
    try:
        PatternView(client, namespace).apply([pattern("teamA", "k", ["teamA/x"], 1), pattern("", "k", ["solo"], 1)])
        assert sorted(view.keys()) == sorted([f"{namespace}:group:{{teamA}}:patterns", f"{namespace}:group:{{%}}:patterns"])
        assert view.clear() == 2
        assert PatternView(client, namespace).group("teamA").rows == []
    finally:
        view.close()
        client.close()
