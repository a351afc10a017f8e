"""Where people look at a lesson's effect (contract §21.4), on the real
Redis: the view of tests/cases/holdout_effects (one lesson that helps, one
that harms, one undecided — the contract's three worked probabilities)
written from the embedded runner's records, then

- the API's ``/scopes/{scope}/revisions`` filtered by ``effect=`` and
  sorted by ``probability_helps``, each row with the effect the ledger
  published;
- ``rank --by effect`` and ``stats`` (the scope's effects by verdict).

Expected values are the last revision-statistics row of each revision of
the same run (contract §10), never hand-computed."""

from __future__ import annotations

import json

import httpx
import pytest

from recurrence_ledger.api.settings import ApiSettings
from tests.conftest import CASES, read_jsonl
from tests.e2e.api_server import embedded_view, running_api
from tests.plugins.processes import run_cli

SCOPE = "holdout-effects"


@pytest.fixture
def view(redis_url, tmp_path):
    with embedded_view(redis_url, tmp_path, CASES / "holdout_effects.jsonl") as fed:
        rows = {}
        for record in read_jsonl(tmp_path / "embedded" / "revision-statistics.jsonl"):
            ref = record["artifact_ref"]
            rows[f"{ref['artifact_id']} r{ref['revision']}"] = record
        yield fed, rows


def test_the_revisions_filter_by_effect_and_sort_by_probability_helps(view):
    fed, rows = view
    effects = {label: row["effect"] for label, row in rows.items() if row["effect"] is not None}
    assert {label: effect["verdict"] for label, effect in effects.items()} == {"EH r1": "helps", "EU r1": "undecided", "EX r1": "harms"}
    with running_api(ApiSettings(redis_url=fed.redis_url, topic_prefix=fed.prefix)) as base_url:
        url = f"{base_url}/scopes/{SCOPE}/revisions"
        harms = httpx.get(url, params={"effect": "harms"}).json()
        assert harms["effect"] == "harms" and harms["available"] == 1
        [row] = harms["revisions"]
        assert (row["artifact_ref"]["artifact_id"], row["effect"]) == ("EX", effects["EX r1"])
        assert row["effect"]["probability_helps"] == 0.0431  # 2531/58786 (contract §21.4)
        ranked = httpx.get(url, params={"sort": "probability_helps", "limit": 100}).json()
        labels = [f"{r['artifact_ref']['artifact_id']} r{r['artifact_ref']['revision']}" for r in ranked["revisions"]]
        assert labels[:3] == ["EH r1", "EU r1", "EX r1"]  # 0.9600, 0.5000, 0.0431
        assert [r["effect"] for r in ranked["revisions"][3:]] == [None] * (len(labels) - 3)
        assert len(labels) == ranked["total"] == len(rows)
        assert httpx.get(url, params={"effect": "helps"}).json()["revisions"][0]["effect"]["probability_helps"] == 0.96
        refused = httpx.get(url, params={"effect": "useless"})
        assert refused.status_code == 400


def test_rank_by_effect_and_the_effects_of_stats(view):
    fed, rows = view
    args = ("--redis-url", fed.redis_url, "--topic-prefix", fed.prefix)
    ranked = json.loads(run_cli("rank", "--by", "effect", "--json", *args).stdout)
    assert [(row["artifact_ref"]["artifact_id"], row["effect"]["verdict"]) for row in ranked] == [
        ("EH", "helps"), ("EU", "undecided"), ("EX", "harms")]  # probability_helps 0.9600, 0.5000, 0.0431
    assert [row["effect"] for row in ranked] == [rows[f"{a} r1"]["effect"] for a in ("EH", "EU", "EX")]
    harms = json.loads(run_cli("rank", "--effect", "harms", "--json", *args).stdout)
    assert [row["artifact_ref"]["artifact_id"] for row in harms] == ["EX"]
    table = run_cli("rank", "--by", "effect", *args, columns=200).stdout
    assert "revisions by effect" in table and "0.9600" in table and "0.0431" in table
    assert table.index("EH r1") < table.index("EU r1") < table.index("EX r1")
    assert "7/10 = 0.70" in table and "3/10 = 0.30" in table  # EX: treated and withheld arms
    assert run_cli("rank", "--by", "luck", *args).returncode == 2
    stats = run_cli("stats", *args, columns=200).stdout
    record = fed.expected[SCOPE]
    assert record["effects"] == {"helps": 1, "harms": 1, "undecided": 1, "insufficient": 0}
    assert "effects helps 1, harms 1, undecided 1, insufficient 0" in " ".join(stats.split())


def test_the_view_totals_count_the_lessons_by_effect_verdict(view):
    import redis

    from recurrence_ledger.read.keys import Keys
    from recurrence_ledger.read.totals import view_totals

    fed, _ = view
    client = redis.Redis.from_url(fed.redis_url)
    try:
        totals = view_totals(client, Keys(fed.namespace))
    finally:
        client.close()
    assert totals.effects == fed.expected[SCOPE]["effects"] == {"helps": 1, "harms": 1, "undecided": 1, "insufficient": 0}
    assert (totals.sums["withheld"], totals.sums["holdout_conflicts"]) == (fed.expected[SCOPE]["withheld"], 0) == (20, 0)
