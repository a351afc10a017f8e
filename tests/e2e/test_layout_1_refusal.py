"""Findings of the adversarial pass (hp-adv): each test states what should
hold and fails on main while the finding stands."""

from __future__ import annotations

import secrets

from fastapi.testclient import TestClient

from recurrence_ledger.api.app import create_app
from recurrence_ledger.api.settings import ApiSettings


def test_an_empty_scope_filter_of_the_review_queue_is_answered_on_redis_cluster(redis_cluster_url):
    """GET /review-queue?scope= (an empty scope id) on a Redis Cluster view:
    the escaped scope is "", its hash tag ``{}`` is empty, so the scope's
    queue keys hash by their whole names onto different slots and the
    MULTI of ReadModels.review_queue raises CrossSlotTransactionError: a
    500. On a single Redis the same request answers 200 with an empty queue.
    It must answer 4xx (or 200 empty), never 500."""
    prefix = f"adv{secrets.token_hex(4)}."
    settings = ApiSettings(redis_url=redis_cluster_url, topic_prefix=prefix)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        response = client.get("/review-queue", params={"scope": ""})
    assert response.status_code < 500, response.text


def test_a_cluster_url_naming_a_database_is_refused_cleanly_by_view_follow_and_worker(bootstrap, topic_prefix):
    """``redis+cluster://host:port/3`` names a database a cluster does not
    have. ``serve`` and ``view rebuild`` refuse it with one ``error:`` line
    (exit 2); ``view follow`` and ``worker --redis-url`` end instead in an
    unhandled ValueError traceback (exit 1). All four should refuse it the
    same clean way, before doing anything."""
    import subprocess

    from tests.e2e.harness import REPO
    from tests.plugins.processes import cli_command, cli_env

    url = "redis+cluster://127.0.0.1:7001/3"
    commands = {
        "view follow": ("view", "follow", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix,
                        "--redis-url", url, "--exit-when-idle", "1"),
        "worker": ("worker", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", "adv",
                   "--redis-url", url, "--exit-when-idle", "1"),
    }
    for name, args in commands.items():
        done = subprocess.run(cli_command(*args), cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=120)
        output = done.stdout + done.stderr
        assert "Traceback" not in output, (name, output[-2000:])
        assert done.returncode == 2 and "error:" in output, (name, done.returncode, output[-2000:])


def test_a_follower_that_refuses_layout_1_writes_nothing(bootstrap, topic_prefix, redis_cluster_url, tmp_path):
    """docs/upgrading.md ("key layout 2"): a follower that finds layout 1's
    keys refuses, saying "nothing was written". It does refuse (exit 1), but
    Follower._apply submits the batch's statistics to the view
    (``self.view.submit``) before ``check_layout`` runs, so the layout-2
    statistics keys (``{ns}:scope:{<scope>}``, ``…:top``, ``…:revisions``,
    ``{ns}:{<ns>}:scopes:by:…``, …) are written beside layout 1's. After
    the refusal the namespace must hold only what was there before."""
    import subprocess
    from pathlib import Path

    import redis

    from recurrence_ledger.read.keys import default_namespace
    from tests.e2e import harness
    from tests.plugins.processes import cli_command, cli_env

    journal = Path(harness.REPO) / "tests" / "cases" / "worked_example.jsonl"
    harness.prepare(bootstrap, topic_prefix, 1)
    harness.publish(bootstrap, journal, topic_prefix)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")
    namespace = default_namespace(topic_prefix)
    client = redis.RedisCluster.from_url(redis_cluster_url.replace("redis+cluster://", "redis://").split(",")[0])
    try:
        client.sadd(f"{namespace}:scopes", "dns-mirror")  # a layout-1 view
        done = subprocess.run(
            cli_command("view", "follow", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", "adv-layout",
                        "--redis-url", redis_cluster_url, "--exit-when-idle", "2"),
            cwd=harness.REPO, env=cli_env(), capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 1 and "layout 1" in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
        keys = sorted(key.decode() for key in client.scan_iter(match=f"{namespace}:*", target_nodes=redis.RedisCluster.ALL_NODES))
        assert keys == [f"{namespace}:scopes"], keys
    finally:
        for key in client.scan_iter(match=f"{namespace}:*", target_nodes=redis.RedisCluster.ALL_NODES):
            client.delete(key)
