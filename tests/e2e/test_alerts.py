"""The Prometheus rules of deploy/prometheus/ (docs/operating.md):

- ``promtool check rules`` accepts rules.yml and ``promtool test rules``
  passes rules.test.yml (every alert fires on the series it is for, and
  stays quiet otherwise);
- end to end, against the real Prometheus that deploy/prometheus.sh runs
  (``PROMETHEUS_URL``, targets folder ``RL_PROMETHEUS_TARGETS``; deploy/test.sh
  and deploy/services.sh start it and export both): a real worker serving
  ``--metrics-port`` is registered as a target, poison records are
  published, and Prometheus's own HTTP API (``/api/v1/alerts``) shows
  ``RecurrenceLedgerDeadLetters`` for their reason go pending, then firing;
  a real view follower's lag and Redis gauges are scraped too, and, once the
  fixture case tests/cases/unknown_reasons.jsonl went through the worker,
  its totals of the view (contract §17: unknown selections by reason,
  binding suspects, ambiguous matches) with the figures of the case's
  expected file — what ``RecurrenceLedgerBindingSuspect`` reads (that rule
  is tested by promtool: the shared Prometheus runs the rules it was
  started with).

Fails — never skips — when promtool, PROMETHEUS_URL or the targets folder is
missing (the ``promtool`` and ``prometheus`` fixtures, tests/plugins/services.py).
"""

from __future__ import annotations

import json
import subprocess
import time

import httpx
import pytest

from recurrence_ledger.kafka.kafka_io import publish_raw
from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS
from tests.conftest import case
from tests.e2e import harness
from tests.e2e.harness import REPO
from tests.plugins.processes import cli_command, cli_env, free_port

RULES_DIR = REPO / "deploy" / "prometheus"
ALERT = "RecurrenceLedgerDeadLetters"


def test_promtool_checks_and_unit_tests_the_rules(promtool):
    checked = subprocess.run([promtool, "check", "rules", str(RULES_DIR / "rules.yml")], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", "rules.test.yml"], cwd=RULES_DIR, capture_output=True, text=True, timeout=120)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def alerts(url: str, name: str, **labels: str) -> list[dict]:
    body = httpx.get(f"{url}/api/v1/alerts", timeout=5).json()
    return [a for a in body["data"]["alerts"] if a["labels"].get("alertname") == name and all(a["labels"].get(k) == v for k, v in labels.items())]


def query(url: str, expr: str) -> list[dict]:
    return httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=5).json()["data"]["result"]


@pytest.mark.slow
def test_dead_letter_alert_goes_pending_then_firing_in_prometheus(bootstrap, redis_url, prometheus, tmp_path):
    url, targets = prometheus
    groups = httpx.get(f"{url}/api/v1/rules", timeout=5).json()["data"]["groups"]
    assert {"recurrence-ledger-recording", "recurrence-ledger-alerts"} <= {group["name"] for group in groups}

    prefix = harness.new_prefix()
    worker = follower = None
    port, view_port = free_port(), free_port()
    target = targets / f"worker-{prefix.rstrip('.')}.json"
    view_target = targets / f"view-{prefix.rstrip('.')}.json"
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        worker = harness.start_worker(bootstrap, prefix, tmp_path / "worker.log", idle_exit=None, extra=("--metrics-port", str(port)))
        follower = subprocess.Popen(
            cli_command("view", "follow", "--bootstrap", bootstrap, "--redis-url", redis_url,
                        "--topic-prefix", prefix, "--app-id", "ledger", "--metrics-port", view_port),
            cwd=REPO, stdout=open(tmp_path / "follower.log", "wb"), stderr=subprocess.STDOUT, env=cli_env(), start_new_session=True,
        )
        target.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": {"deployment": prefix}}]))
        view_target.write_text(json.dumps([{"targets": [f"127.0.0.1:{view_port}"], "labels": {"deployment": prefix}}]))
        selector = f'recurrence_ledger_dead_letters_total{{deployment="{prefix}",reason="bad_magic_byte"}}'
        # Prometheus scrapes the worker (its dead-letter counters exist from 0) before any poison arrives.
        harness.wait_until(lambda: query(url, selector) and query(url, selector)[0]["value"][1] == "0", 60, "Prometheus to scrape the worker")
        harness.wait_until(lambda: query(url, f'recurrence_ledger_view_redis_up{{deployment="{prefix}"}} == 1'), 60, "Prometheus to scrape the follower")
        assert alerts(url, ALERT, deployment=prefix) == []

        for index in range(3):
            publish_raw(bootstrap, harness.physical(prefix, "task-outcomes"), f"scope-{index}".encode(), b"garbage, not a record")
        harness.wait_until(lambda: query(url, selector) and query(url, selector)[0]["value"][1] == "3", 60, "the three dead letters in Prometheus")

        states = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "firing" not in states:
            found = alerts(url, ALERT, deployment=prefix, reason="bad_magic_byte")
            if found and (not states or states[-1] != found[0]["state"]):
                states.append(found[0]["state"])
            time.sleep(0.5)
        assert states == ["pending", "firing"], states
        firing = alerts(url, ALERT, deployment=prefix, reason="bad_magic_byte")[0]
        assert firing["labels"]["severity"] == "warning" and firing["labels"]["job"] == "recurrence-ledger-worker"
        assert firing["annotations"]["summary"].startswith("records dead-lettered as bad_magic_byte")
        # Only that reason: no alert for reasons without dead letters.
        assert {a["labels"]["reason"] for a in alerts(url, ALERT, deployment=prefix)} == {"bad_magic_byte"}
        # The follower's lag is scraped (the view topics are empty: 0).
        assert query(url, 'recurrence_ledger:view_lag:sum{job="recurrence-ledger-view"}') is not None

        # The view's §17 totals: 0 before any record, then the unknown_reasons case's figures.
        suspects = f'recurrence_ledger_view_binding_suspects{{deployment="{prefix}"}}'
        assert [sample["value"][1] for sample in query(url, suspects)] == ["0"]
        journal, expected = case("unknown_reasons")
        harness.publish(bootstrap, journal, prefix)
        statistics = expected["scopes"]["bind-audit"]["statistics"]
        names = ("ambiguous_matches", "unmatched_failures", "forward_references")

        def scraped() -> tuple:
            """The scraped §17 figures: the suspects, unknown selections by reason, the named totals."""
            by_reason = {s["metric"]["reason"]: int(s["value"][1]) for s in query(url, f'recurrence_ledger_view_unknown_selections{{deployment="{prefix}"}}')}
            totals = {name: [s["value"][1] for s in query(url, f'recurrence_ledger_view_{name}{{deployment="{prefix}"}}')] for name in names}
            return [s["value"][1] for s in query(url, suspects)], by_reason, totals

        # The case's scope statistics grow record by record: wait for the scrape of its last one.
        wanted = (["1"], {reason: statistics["unknown_reasons"].get(reason, 0) for reason in UNKNOWN_REASONS},
                  {name: [str(statistics[name])] for name in names})
        harness.wait_until(lambda: scraped() == wanted, 90, "Prometheus to scrape the case's last statistics")
        assert scraped() == wanted and len(wanted[1]) == 11
    finally:
        for path in (target, view_target):
            path.unlink(missing_ok=True)
        for process in (worker, follower):
            if process is not None and process.poll() is None:
                harness.kill(process)
        harness.remove_prefix(bootstrap, prefix, redis_url)
