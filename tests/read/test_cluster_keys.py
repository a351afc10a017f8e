"""The key layout's hash tags and the Redis Cluster URL, without a Redis
(processors/recurrence_ledger/read/keys.py, connect.py): every key of a
scope is of the scope's slot, every cross-scope key of the namespace's,
whatever characters the scope id holds; ``redis+cluster://`` and
``rediss+cluster://`` URLs make a cluster client as ``redis://`` and
``rediss://`` make a single one, never connecting, and print without their
password."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from recurrence_ledger.read.connect import ClusterClient, is_cluster, redis_client
from recurrence_ledger.read.keys import REVIEW_FILTERS, SCOPE_SORTS, Keys, escape_scope
from recurrence_ledger.redact import redact_url

SCOPES = ("payments", "a:b", "x{y}z", "}{", "{", "100%", "a%3Ab", "ü-scope")


def scope_keys(keys: Keys, scope_id: str) -> list[str]:
    return [
        keys.scope(scope_id), keys.top(scope_id), keys.review(scope_id), keys.revisions(scope_id),
        keys.history(scope_id, "P{1}", 2), keys.history_meta(scope_id, "P:1", 2), keys.avoided(scope_id, "P1", 2),
        keys.trend(scope_id), keys.trend_meta(scope_id), keys.review_state(scope_id), keys.scope_applied(scope_id),
        *(keys.scope_queue(scope_id, name) for name in REVIEW_FILTERS),
    ]


def global_keys(keys: Keys) -> list[str]:
    return [
        keys.scopes, keys.scopes_at, keys.layout_marker, keys.queue_items, keys.review_status, keys.review_repairs, keys.applied,
        *keys.scope_index_keys(), *(keys.queue(name) for name in REVIEW_FILTERS),
    ]


@pytest.mark.parametrize("namespace", ["rl", "rl:prod."])
def test_every_key_of_a_scope_is_of_its_slot_and_every_cross_scope_key_of_the_namespace_s(namespace):
    keys = Keys(namespace)
    for scope_id in SCOPES:
        # The hash tag is the escaped scope id, whole (no brace or colon left in it).
        assert {key_slot(key.encode()) for key in scope_keys(keys, scope_id)} == {key_slot(escape_scope(scope_id).encode())}, scope_id
        assert all(keys.layout_pattern().fullmatch(key) for key in scope_keys(keys, scope_id))
    assert {key_slot(key.encode()) for key in global_keys(keys)} == {key_slot(namespace.encode())}
    assert all(keys.layout_pattern().fullmatch(key) for key in global_keys(keys))
    assert len(SCOPE_SORTS) == 4 and keys.scope("a:b{c}") == f"{namespace}:scope:{{a%3Ab%7Bc%7D}}"


def test_layout_1_keys_are_matched_for_clear_and_a_namespace_with_a_brace_is_refused():
    keys = Keys("rl")
    for key in ("rl:scopes", "rl:scope:payments", "rl:scope:payments:top", "rl:scopes:by:recurred", "rl:trend-totals",
                "rl:follow-applied", "rl:review-queue:open", "rl:scope:payments:history:P1:1"):
        assert keys.layout_pattern().fullmatch(key), key
    assert not keys.layout_pattern().fullmatch("rl:prod.:scope:{payments}")
    assert keys.legacy_scopes == "rl:scopes" != keys.scopes == "rl:{rl}:scopes"
    with pytest.raises(ValueError, match="brace|must not contain"):
        Keys("rl{x}")


def test_a_cluster_url_makes_a_cluster_client_without_connecting(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not read before connecting")
    client = redis_client("rediss+cluster://ledger:s3cret@10.0.0.1:7001,10.0.0.2:7002,[::1]:7003/0", ca_file=ca, socket_timeout=1)
    assert isinstance(client, ClusterClient) and is_cluster(client) and client._client is None
    assert client.first_url == "rediss://ledger:s3cret@10.0.0.1:7001/0"
    assert [(node.host, node.port) for node in client.startup_nodes] == [("10.0.0.2", 7002), ("::1", 7003)]
    assert client.options == {"ssl_ca_certs": str(ca), "ssl_check_hostname": True, "socket_timeout": 1}
    plain = redis_client("redis+cluster://127.0.0.1:7001?ssl_ca_certs=/nowhere", ca_file=ca)
    assert plain.first_url == "redis://127.0.0.1:7001?ssl_ca_certs=/nowhere" and plain.options == {}
    assert not is_cluster(redis_client("redis://127.0.0.1:6379/0"))
    assert redact_url("rediss+cluster://ledger:s3cret@h1:7001,h2:7002/0") == "rediss+cluster://ledger:***@h1:7001,h2:7002/0"


@pytest.mark.parametrize("url, message", [
    ("redis+cluster://h:7001/1", "database other than 0"),
    ("redis+cluster://", "names no node"),
    ("redis+cluster://h:7001,,h2:7002", "an empty node"),
    ("redis+cluster://h:7001,", "an empty node"),
    ("redis+cluster://h:port", "not host:port"),
    ("redis+cluster://u:pa/ss@h:7001", "percent-encoded|database"),
    ("rediss+cluster://h:7001?ssl_ca_certs=/no/such/ca.pem", "does not exist"),
    ("cluster://h:7001", "must start with"),
])
def test_a_cluster_url_redis_py_cannot_use_is_refused_without_its_password(url, message):
    with pytest.raises(ValueError, match=message) as raised:
        redis_client(url)
    assert "pa/ss" not in str(raised.value)


def test_the_empty_scope_of_a_readers_filter_keeps_one_hash_tag():
    """A reader may ask for scope "" (no scope has that id): its keys still
    carry one non-empty hash tag, "%", which no scope id escapes to (a bare
    "%" only ever appears as "%25", "%3A", "%7B" or "%7D")."""
    assert escape_scope("") == "%"
    assert {escape_scope(text) for text in ("%", "%25", ":", "{}", "")} == {"%25", "%2525", "%3A", "%7B%7D", "%"}
    keys = Keys("rl")
    assert keys.scope("") == "rl:scope:{%}"
