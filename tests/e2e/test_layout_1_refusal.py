"""Key layout 1 found by a follower: it refuses and writes nothing beside
it (docs/upgrading.md, "key layout 2")."""

from __future__ import annotations


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
