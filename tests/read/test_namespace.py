"""The Redis view's namespace of a topic prefix and the escaping of scope
ids in its keys, without a Redis; the layout on a real Redis is
tests/e2e/test_view.py."""

from __future__ import annotations

from recurrence_ledger.read.keys import default_namespace, escape_scope


def test_default_namespace_and_scope_escaping():
    assert default_namespace("prod.") == "rl:prod."
    assert default_namespace("") == "rl"
    ids = ["a", "a:top", "a%3Atop", "a%", "%", ":", "%25", "x y/é"]
    escaped = [escape_scope(scope_id) for scope_id in ids]
    assert len(set(escaped)) == len(ids) and not any(":" in e for e in escaped)
    assert escape_scope("dns-mirror") == "dns-mirror"
