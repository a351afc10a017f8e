"""A Redis URL the view cannot use is refused before anything starts, with
one ``error:`` line (exit 2), by every command that takes one."""

from __future__ import annotations


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
