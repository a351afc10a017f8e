"""Contract §22 (rev. 4) where people look, on the real Redis and API: the
fixture case tests/cases/critical_runs.jsonl through run-journal into the
Redis view, then

- the follower's ``recurrence_ledger_view_critical_recurrences{scope}``
  gauge (what ``RecurrenceLedgerCriticalRecurrence`` reads; the rule is
  promtool-tested in test_alerts.py) carries the scope's critical
  recurrences, and only scopes with one get a series;
- the API's revision rows and review set carry ``severity``, and the review
  set takes a critical revision at the critical review threshold (1), an
  unrated or medium one at the review threshold (3);
- the scope's statistics record has ``recurred_by_severity``.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import redis
from prometheus_client import generate_latest

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.read.follower import FollowerMetrics
from recurrence_ledger.read.follower_view import FollowerView
from recurrence_ledger.read.keys import Keys, default_namespace
from recurrence_ledger.read.totals import view_totals
from tests.conftest import case, read_jsonl
from tests.e2e import harness
from tests.e2e.api_server import running_api
from tests.plugins.processes import run_cli

SCOPE = "tenant-guard"


@pytest.fixture(scope="module")
def fed(redis_url, tmp_path_factory) -> Iterator[tuple[str, str]]:
    workdir = tmp_path_factory.mktemp("critical-view")
    journal, _ = case("critical_runs")
    result = run_cli("run-journal", journal, "--out", workdir / "out", "--quiet", "--allow-dead-letters")
    assert result.returncode == 0, result.stdout + result.stderr
    prefix = harness.new_prefix()
    view = FollowerView(redis_url, namespace=default_namespace(prefix))
    try:
        view.submit(read_jsonl(workdir / "out" / "recurrence-statistics.jsonl"),
                    revisions=read_jsonl(workdir / "out" / "revision-statistics.jsonl"))
        assert view.pending == 0
        yield prefix, redis_url
    finally:
        view.clear()
        view.close()


def test_the_critical_recurrences_gauge_has_the_scope_s_count(fed):
    prefix, redis_url = fed
    client = redis.Redis.from_url(redis_url)
    try:
        totals = view_totals(client, Keys(default_namespace(prefix)))
    finally:
        client.close()
    assert totals.critical_recurrences == {SCOPE: 3}
    metrics = FollowerMetrics()
    metrics.set_totals(totals)
    text = generate_latest(metrics.registry).decode()
    assert f'recurrence_ledger_view_critical_recurrences{{scope="{SCOPE}"}} 3.0' in text
    assert text.count("recurrence_ledger_view_critical_recurrences{") == 1


def test_the_api_shows_severity_and_reviews_critical_revisions_at_their_own_threshold(fed):
    prefix, redis_url = fed
    with running_api(ApiSettings(redis_url=redis_url, topic_prefix=prefix)) as base_url, httpx.Client(base_url=base_url, timeout=10) as api:
        statistics = api.get(f"/scopes/{SCOPE}/statistics").json()
        assert statistics["recurred_by_severity"] == {"critical": 3, "high": 1, "medium": 2, "low": 0, "unrated": 0}
        rows = {row["artifact_ref"]["artifact_id"]: row for row in api.get(f"/scopes/{SCOPE}/revisions").json()["revisions"]}
        assert {name: (row["severity"], row["needs_review"]) for name, row in rows.items()} == {
            "X1": ("critical", True), "P1": ("critical", True), "M1": ("medium", False), "X9": ("high", False)}
        review = api.get(f"/scopes/{SCOPE}/review-candidates").json()
        assert [(row["artifact_ref"]["artifact_id"], row["severity"]) for row in review["revisions"]] == [("P1", "critical"), ("X1", "critical")]
        assert review["needing_review"] == 2 and review["complete"] is True
