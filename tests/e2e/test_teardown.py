"""Tearing a trial deployment down on the real broker and Redis: `topics
delete` removes the prefix's topics, its state changelog and consumer
groups and nothing else; `view clear --yes` removes the prefix's Redis keys
(both only list what they would delete without --yes)."""

from __future__ import annotations

import redis
from confluent_kafka.admin import AdminClient

from recurrence_ledger import catalogue
from recurrence_ledger.read.projection import RedisView
from recurrence_ledger.read.keys import Keys, default_namespace
from tests.e2e import harness
from tests.plugins.processes import run_cli


def groups(admin: AdminClient) -> set[str]:
    return {group.group_id for group in admin.list_consumer_groups(request_timeout=10).result().valid}


def test_topics_delete_removes_one_deployment_only(topic_prefix, bootstrap, admin, tmp_path):
    other = harness.new_prefix()
    harness.prepare(bootstrap, topic_prefix, partitions=1)
    harness.prepare(bootstrap, other, partitions=1)
    try:
        harness.publish(bootstrap, harness.REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl", topic_prefix)
        log = tmp_path / "worker.log"
        harness.run_to_idle(bootstrap, topic_prefix, log)  # creates the changelog and the group
        assert f"{topic_prefix}ledger" in groups(admin)

        dry = run_cli("topics", "delete", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", "ledger")
        assert dry.returncode == 0 and "would delete" in dry.stdout
        topics = len(catalogue.CATALOGUE) + 2  # the catalogue's topics and the two changelogs (scope and pattern stages)
        assert f"  topics ({topics}):" in dry.stdout and "  consumer groups (3):" in dry.stdout
        assert sum(name.startswith(topic_prefix) for name in admin.list_topics(timeout=10).topics) == topics

        result = run_cli("topics", "delete", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", "ledger", "--yes")
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"{topic_prefix}ledger-ledger-state-changelog: deleted" in result.stdout
        assert f"{topic_prefix}ledger: deleted" in result.stdout
        assert f"{topic_prefix}ledger-replay: absent" in result.stdout
        assert f"{topic_prefix}ledger-view: absent" in result.stdout  # run_to_idle starts no view follower
        lines = result.stdout.splitlines()
        assert lines.index("topics:") < lines.index(f"  {topic_prefix}ledger-ledger-state-changelog: deleted") < lines.index("consumer groups:")
        assert lines.index("consumer groups:") < lines.index(f"  {topic_prefix}ledger: deleted")
        harness.wait_until(lambda: not any(name.startswith(topic_prefix) for name in admin.list_topics(timeout=10).topics),
                           30, "the prefix's topics to go")
        assert f"{topic_prefix}ledger" not in groups(admin)
        assert sum(name.startswith(other) for name in admin.list_topics(timeout=10).topics) == len(catalogue.CATALOGUE)  # untouched

        again = run_cli("topics", "delete", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", "ledger", "--yes")
        assert again.returncode == 0 and "deleted" not in again.stdout
    finally:
        run_cli("topics", "delete", "--bootstrap", bootstrap, "--topic-prefix", other, "--yes")


def test_view_clear_removes_the_prefix_keys_only(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    mine, theirs = harness.new_prefix(), harness.new_prefix()
    record = {"scope_id": "s1", "as_of_position": 1, "selected": 0, "recurred": 0, "avoided": 0, "unknown": 0,
              "unlinked_handoff_citations": 0, "needing_review": 0, "top_revisions": [], "pending_outcomes": 0, "late_revisions": 0}
    for prefix in (mine, theirs):
        view = RedisView(redis_url, namespace=default_namespace(prefix))
        view.submit([record])
        view.flush()
        view.close()
    try:
        # Without --yes it lists what would go and deletes nothing.
        dry = run_cli("view", "clear", "--redis-url", redis_url, "--topic-prefix", mine)
        assert dry.returncode == 0, dry.stderr
        keys = sorted(client.keys(f"{default_namespace(mine)}:*"))
        assert len(keys) == 7  # the scopes set and its positions, the scope's hash and the 4 sorted sets of the scope index
        assert dry.stdout.splitlines() == [
            f"would delete 7 keys of the Redis view {default_namespace(mine)} at {redis_url} (run again with --yes):",
            "  scopes (1): s1", "  keys:", *(f"    {key}" for key in keys),
        ]
        result = run_cli("view", "clear", "--redis-url", redis_url, "--topic-prefix", mine, "--yes")
        assert result.returncode == 0, result.stderr
        assert "7 keys deleted" in result.stdout
        assert client.keys(f"{default_namespace(mine)}:*") == []
        assert client.exists(Keys(default_namespace(theirs)).scope("s1")) == 1
        nothing = run_cli("view", "clear", "--redis-url", redis_url, "--topic-prefix", mine)
        assert nothing.returncode == 0 and nothing.stdout.startswith("nothing to delete")
    finally:
        run_cli("view", "clear", "--redis-url", redis_url, "--topic-prefix", theirs, "--yes")
