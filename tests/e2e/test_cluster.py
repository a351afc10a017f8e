"""The read side on a real 3-master Redis Cluster (deploy/redis-cluster.sh;
processors/recurrence_ledger/read/keys.py, records.py, scripts.py,
layout.py): no command or script spans slots, an ACL user works as on a
single Redis, and the key layout's version is checked.

No call spans slots, shown two ways: every key each script call of a batch
gets (as KEYS or inside ARGV) has one CLUSTER KEYSLOT, the scope's or the
namespace's, as the cluster itself answers it; and the cluster refuses a
script that touches a key of another slot than its KEYS (the scripts start
with ``#!lua``), so the read models applied on the cluster — equal to the
single Redis's in tests/e2e/test_review_queue.py and test_history.py — were
written by calls that each stayed in one slot."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import orjson
import pytest
import redis

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.catalogue import OBSERVATIONS, STATISTICS
from recurrence_ledger.read.follower_view import FollowerView
from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.read.keys import REVIEW_FILTERS, Keys, default_namespace
from recurrence_ledger.read.layout import LayoutError, check_layout
from recurrence_ledger.read.projection import RedisView
from recurrence_ledger.read.records import Located, script_calls
from recurrence_ledger.read.scripts import run_calls, scripts
from tests.e2e import harness
from tests.e2e.api_server import running_api
from tests.e2e.review_fixtures import candidate, located_candidate, located_status, ref, repair, statistics, status
from tests.plugins.services import read_client

SCOPES = ("s1", "s:2", "s{3}")


def observation(scope_id: str, offset: int, position: int, event: str) -> Located:
    value = {
        "observation_id": "sha256:" + f"{position:064x}", "scope_id": scope_id, "artifact_ref": {"family": "experience", "artifact_id": "P1", "revision": 1},
        "signature_key": "p1 fails", "event": event, "task_outcome_ref": {"source_type": "task_outcome", "source_id": f"o{position}"},
        "task_outcome_position": position, "failure_ref": None,
    }
    return Located(OBSERVATIONS, 0, offset, 1_700_000_000_000 + offset, value)


def batch() -> dict[str, list[Located]]:
    """One partition's records per topic, over the three scopes."""
    candidates = [candidate(scope_id, "P1") for scope_id in SCOPES]
    return {
        "observations": [observation(scope_id, n, n + 1, "selected" if n % 2 else "avoided") for n, scope_id in enumerate(SCOPES * 2)],
        "candidates": [located_candidate(value, 0, n, 1000 * (n + 1)) for n, value in enumerate(candidates)],
        "statuses": [located_status(status(value, "superseded", fix=ref("P1", 2), repair=repair("pending")), 0, n) for n, value in enumerate(candidates)],
        "trend": [Located(STATISTICS, 0, n, 1000 + n, statistics(scope_id, n + 1)) for n, scope_id in enumerate(SCOPES)],
    }


@pytest.fixture
def cluster(redis_cluster_url) -> Iterator[tuple[redis.RedisCluster, Keys]]:
    client = read_client(redis_cluster_url)
    keys = Keys(default_namespace(harness.new_prefix()))
    try:
        yield client, keys
    finally:
        RedisView(redis_cluster_url, namespace=keys.namespace).clear()
        client.close()


def keys_of(call) -> list[str]:  # noqa: ANN001 - a scripts.Call
    """Every key a script call gets: its KEYS, and the keys and key prefixes inside its ARGV."""
    _, keys, args = call
    found = list(keys)
    prefixes = [arg for arg in args if isinstance(arg, str) and ":review-queue:" in arg]
    found += [prefix + name for prefix in prefixes for name in REVIEW_FILTERS]
    entries = orjson.loads(args[-1])
    found += [entry[name] for entry in entries for name in ("h", "m", "a") if name in entry]
    return found


def test_every_key_of_every_script_call_is_of_one_slot(cluster):
    client, keys = cluster
    registered = scripts(client)
    by_topic = batch()
    calls = []
    for name, records in by_topic.items():
        calls += script_calls(keys, records[0].topic, keys.applied_field(records[0].topic, 0), records, registered, 1000, 1000)
    assert len(calls) == 3 + (1 + 3) + (1 + 3) + 3  # one per scope, and one of the namespace per review topic
    scope_slots = {scope_id: client.cluster_keyslot(keys.scope(scope_id)) for scope_id in SCOPES}
    namespace_slot = client.cluster_keyslot(keys.scopes)
    assert len({*scope_slots.values(), namespace_slot}) == 4
    for counted, call in calls:
        slots = {client.cluster_keyslot(key) for key in keys_of(call)}  # CLUSTER KEYSLOT, asked of the cluster
        assert len(slots) == 1, (counted, call[0], keys_of(call))
        assert slots <= {*scope_slots.values(), namespace_slot}
    # The scopes' keys live on more than one node of the three.
    assert len({client.get_node_from_key(keys.scope(scope_id)).name for scope_id in SCOPES} | {client.get_node_from_key(keys.scopes).name}) >= 2
    # And applied through the product's path (each call's keys checked by the cluster): the counts are the records'.
    counts = ReadModels(client, keys.namespace).apply([record for records in by_topic.values() for record in records])
    assert (counts.observations, counts.candidates, counts.review_statuses, counts.trend_points) == (6, 3, 3, 3)
    again = ReadModels(client, keys.namespace).apply([record for records in by_topic.values() for record in records])
    assert (again.observations, again.candidates, again.review_statuses, again.trend_points) == (0, 0, 0, 0)
    assert client.zcard(keys.queue("superseded")) == 3 and all(client.zcard(keys.scope_queue(s, "superseded")) == 1 for s in SCOPES)
    assert int(client.hget(keys.trend_meta("s{3}"), "total")) == 1


def test_the_cluster_refuses_a_script_that_touches_another_slot(cluster):
    """Scope s1's applied hash as KEYS, another scope's history keys inside
    ARGV: refused when that scope is on another node, and — what the
    ``#!lua`` shebang adds — also when it is on the same node."""
    client, keys = cluster
    registered = scripts(client)
    home = client.get_node_from_key(keys.scope("s1")).name
    others = [f"other-{n}" for n in range(200)]
    same_node = next(s for s in others if client.get_node_from_key(keys.scope(s)).name == home and client.keyslot(keys.scope(s)) != client.keyslot(keys.scope("s1")))
    other_node = next(s for s in others if client.get_node_from_key(keys.scope(s)).name != home)
    for scope_id, refusal in ((same_node, "do not hash to the same slot"), (other_node, "non local key")):
        entry = {"offset": 0, "history_key": keys.history(scope_id, "P1", 1), "history_meta_key": keys.history_meta(scope_id, "P1", 1),
                 "avoided_key": keys.avoided(scope_id, "P1", 1), "task_outcome_position": 1, "padded_position": "0" * 18 + "1",
                 "member": "[1]", "event": "selected", "signature_key": "x"}
        assert client.cluster_keyslot(keys.scope_applied("s1")) != client.cluster_keyslot(entry["history_key"])
        with pytest.raises(redis.exceptions.ResponseError, match=refusal):
            run_calls(client, [(registered.apply_observations, [keys.scope_applied("s1")], ["observations:0", 10, orjson.dumps([entry])])])
        assert client.exists(entry["history_key"]) == 0 and client.exists(entry["history_meta_key"]) == 0


def test_an_acl_user_of_the_cluster_applies_and_reads(redis_cluster_url, cluster):
    """A user limited to the ledger's commands (deploy/redis.sh's LEDGER_ACL,
    and the cluster commands a cluster client sends) on every node, in the URL."""
    client, keys = cluster
    user, password = f"rl-test-{secrets.token_hex(4)}", secrets.token_hex(16)
    rules = ("on", f">{password}", "resetkeys", "~rl:*", "resetchannels", "-@all", "+ping", "+multi", "+exec", "+exists", "+unlink", "+get", "+set",
             "+hset", "+hget", "+hmget", "+hgetall", "+hincrby", "+hdel", "+zadd", "+zrem", "+zremrangebyrank", "+zcard", "+zcount", "+zrange",
             "+zrevrange", "+zrangebyscore", "+sadd", "+smembers", "+scard", "+scan", "+evalsha", "+script|load", "+script|exists",
             "+cluster|slots", "+cluster|shards", "+command", "+readonly")
    for node in client.get_primaries():
        client.execute_command("ACL", "SETUSER", user, *rules, target_nodes=node)
    try:
        url = redis_cluster_url.replace("redis+cluster://", f"redis+cluster://{user}:{password}@")
        limited = read_client(url)
        counts = ReadModels(limited, keys.namespace).apply(batch()["candidates"])
        assert counts.candidates == 3
        assert limited.zcard(keys.queue("open")) == 3
        limited.close()
        wrong = read_client(url.replace(password, "wrong"))
        with pytest.raises(redis.exceptions.RedisError):
            wrong.ping()
    finally:
        for node in client.get_primaries():
            client.execute_command("ACL", "DELUSER", user, target_nodes=node)


def test_the_key_layout_is_checked_and_layout_1_is_cleared(read_redis_url):
    client = read_client(read_redis_url)
    keys = Keys(default_namespace(harness.new_prefix()))
    view = RedisView(read_redis_url, namespace=keys.namespace)
    try:
        check_layout(client, keys)  # an empty namespace: marked
        assert client.get(keys.layout_marker) == b"2"
        client.sadd(keys.legacy_scopes, "payments")  # what a version before layout 2 wrote
        client.hset(f"{keys.namespace}:scope:payments", "record", "{}")
        with pytest.raises(LayoutError, match="layout 1.*view rebuild"):
            check_layout(client, keys)
        assert view.clear() == 3  # layout 1's keys and the marker: what `view rebuild` clears first
        check_layout(client, keys)
        client.set(keys.layout_marker, "3")
        with pytest.raises(LayoutError, match="layout 3"):
            check_layout(client, keys)
    finally:
        view.clear()
        view.close()
        client.close()


def seed(url: str, namespace: str) -> None:
    """The batch's records into the view (FollowerView, as a follower) and the read models of ``namespace`` at ``url``."""
    records = batch()
    view = FollowerView(url, namespace=namespace)
    view.submit([record.value for record in records["trend"]])
    assert view.pending == 0
    ReadModels(view._client, namespace).apply([record for group in records.values() for record in group])
    view.close()


def test_the_api_reads_the_same_from_the_cluster_as_from_a_single_redis(redis_url, redis_cluster_url):
    """``serve`` on a cluster URL: every read route answers what it answers
    from a single Redis holding the same records (bodies and entity tags)."""
    namespace = default_namespace(harness.new_prefix())
    first = candidate("s1", "P1")["candidate_id"]
    paths = [
        "/scopes", "/scopes?sort=recurred&filter=s", "/review-queue?status=all", "/review-queue?status=superseded&scope=s%7B3%7D",
        f"/review-candidates/{first}", *(f"/scopes/{quote(scope_id, safe='')}/{what}" for scope_id in SCOPES for what in ("statistics", "trend", "revisions")),
        "/scopes/s1/revisions/P1/1/history",
    ]
    answers = {}
    try:
        for url in (redis_url, redis_cluster_url):
            seed(url, namespace)
            with running_api(ApiSettings(redis_url=url, namespace=namespace)) as base_url:
                answers[url] = {path: (response.status_code, response.json(), response.headers.get("etag"))
                                for path in paths for response in [httpx.get(base_url + path, timeout=30)]}
        assert answers[redis_cluster_url] == answers[redis_url]
        assert answers[redis_url]["/scopes"][1]["total"] == 3 and answers[redis_url]["/review-queue?status=all"][0] == 200
        assert [row[0] for row in answers[redis_url].values()].count(200) >= len(paths) - 1
    finally:
        for url in (redis_url, redis_cluster_url):
            RedisView(url, namespace=namespace).clear()


def test_a_batch_applied_in_part_then_again_holds_what_it_holds_applied_once(read_redis_url):
    """A follower that died halfway through a batch on Redis Cluster (some
    scripts ran, others not) reads it again: every script skips what it
    applied, so the read models equal those of the batch applied once."""
    client = read_client(read_redis_url, decode_responses=True)
    records = [record for group in batch().values() for record in group]
    once, halfway = (Keys(default_namespace(harness.new_prefix())) for _ in range(2))
    try:
        ReadModels(client, once.namespace).apply(records)
        registered = scripts(client)
        calls = []
        for group in batch().values():
            topic = group[0].topic
            calls += [call for _, call in script_calls(halfway, topic, halfway.applied_field(topic, 0), group, registered, 1000, 1000)]
        run_calls(client, calls[::2])  # every other script: a namespace one, some scopes' — the rest lost with the follower
        counts = ReadModels(client, halfway.namespace).apply(records)
        assert 0 < counts.observations < 6 and counts.trend_points < 3

        def contents(keys: Keys) -> dict:
            found = {}
            for key in client.scan_iter(match=f"{keys.namespace}:*"):
                kind = client.type(key)
                value = (client.hgetall(key) if kind == "hash" else client.zrange(key, 0, -1, withscores=True) if kind == "zset"
                         else sorted(client.smembers(key)) if kind == "set" else client.get(key))
                found[key.replace(keys.namespace, "NS")] = value
            return found

        assert contents(halfway) == contents(once)
    finally:
        for keys in (once, halfway):
            RedisView(read_redis_url, namespace=keys.namespace).clear()
        client.close()


def test_tls_to_the_cluster_as_to_a_single_redis(redis_cluster_tls_url):
    """``rediss+cluster://`` (deploy/redis-cluster.sh --tls: TLS only, for
    clients and the cluster bus): the CA in the URL, or given as
    RL_REDIS_CA_FILE is (``ca_file``), verifies every node; without it the
    handshake fails and says why, without the URL's secrets."""
    from recurrence_ledger.read.connect import describe_error

    base, _, query = redis_cluster_tls_url.partition("?")
    ca_file = dict(item.split("=", 1) for item in query.split("&"))["ssl_ca_certs"]
    keys = Keys(default_namespace(harness.new_prefix()))
    for client in (read_client(redis_cluster_tls_url), read_client(base, ca_file=ca_file)):
        try:
            counts = ReadModels(client, keys.namespace).apply(batch()["candidates"])
            assert counts.candidates in (3, 0) and client.zcard(keys.queue("open")) == 3
            assert len(client.get_primaries()) == 3
        finally:
            client.close()
    RedisView(redis_cluster_tls_url, namespace=keys.namespace).clear()
    untrusted = read_client(base.replace("rediss+cluster://", "rediss+cluster://user:s3cret@"), socket_timeout=2, socket_connect_timeout=2)
    with pytest.raises(redis.exceptions.RedisError) as raised:
        untrusted.ping()
    message = describe_error(raised.value, base)
    assert "s3cret" not in message and ("certificate" in message.lower() or "ssl" in message.lower()), message
