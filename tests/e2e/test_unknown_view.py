"""Contract §16–§17 where people look, on the real Redis: the fixture case
tests/cases/unknown_reasons.jsonl (every one of the eleven unknown
reasons, one binding suspect, ambiguous and unmatched failures) run by
``recurrence-ledger run-journal --view-batch 1``, every view record
projected in publication order by the follower's writer (``FollowerView``),
then read through the API on uvicorn, ``rank`` / ``stats`` and the totals
the follower's gauges publish.

Every figure asserted is the hand-worked one of
tests/cases/unknown_reasons.expected.json, never one computed by the code
under test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis
from prometheus_client import generate_latest

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS
from recurrence_ledger.read.follower import FollowerMetrics
from recurrence_ledger.read.follower_view import FollowerView
from recurrence_ledger.read.keys import Keys, default_namespace
from recurrence_ledger.read.totals import view_totals
from tests.conftest import case, read_jsonl
from tests.e2e import harness
from tests.e2e.api_server import running_api
from tests.plugins.processes import run_cli

SCOPE = "bind-audit"
#: The §16–§17 counters of a ScopeStatistics record (and of a /scopes summary).
SCOPE_COUNTS = ("forward_references", "ambiguous_matches", "unmatched_failures", "binding_suspects")
#: The counts of a revision in the expected file.
REVISION_COUNTS = ("selected", "recurred", "avoided", "unknown", "ambiguous", "binding_suspect")


@dataclass(frozen=True)
class Fed:
    prefix: str
    namespace: str
    redis_url: str
    expected: dict  # the scope's entry of unknown_reasons.expected.json
    records: dict[str, list[dict]]  # view topic -> every record of run-journal, in publication order


def label(row: dict) -> str:
    """``B1r1``: how the expected file names a revision."""
    return f"{row['artifact_ref']['artifact_id']}r{row['artifact_ref']['revision']}"


def occurred(reasons: dict) -> dict:
    """The reasons that occurred (the expected file lists only those)."""
    return {reason: count for reason, count in reasons.items() if count}


def every_reason(occurring: dict) -> dict:
    """An ``unknown_reasons`` object as the records carry it: all eleven
    reasons, in the contract's order (a test of its own keeps the order)."""
    return {reason: occurring.get(reason, 0) for reason in UNKNOWN_REASONS}


@pytest.fixture(scope="module")
def fed(redis_url, tmp_path_factory) -> Iterator[Fed]:
    workdir = tmp_path_factory.mktemp("unknown-view")
    journal, expected = case("unknown_reasons")
    result = run_cli("run-journal", journal, "--out", workdir / "out", "--view-batch", "1", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    records = {topic: read_jsonl(workdir / "out" / f"{topic}.jsonl") for topic in ("recurrence-statistics", "revision-statistics")}
    prefix = harness.new_prefix()
    view = FollowerView(redis_url, namespace=default_namespace(prefix))
    try:
        # One record per call, in publication order, as a follower applying
        # batches of one; then every record again in reverse (a replay of
        # older rows): the guard keeps the newest row of every key.
        for record in records["revision-statistics"]:
            view.submit([], revisions=[record])
        for record in records["recurrence-statistics"]:
            view.submit([record])
        for record in reversed(records["revision-statistics"]):
            view.submit([], revisions=[record])
        for record in reversed(records["recurrence-statistics"][:-1]):
            view.submit([record])
        assert view.pending == 0
        yield Fed(prefix, default_namespace(prefix), redis_url, expected["scopes"][SCOPE], records)
    finally:
        view.clear()
        view.close()


@pytest.fixture(scope="module")
def api(fed) -> Iterator[httpx.Client]:
    with running_api(ApiSettings(redis_url=fed.redis_url, topic_prefix=fed.prefix)) as base_url, httpx.Client(base_url=base_url, timeout=10) as client:
        yield client


def test_the_journal_is_a_real_test_of_the_guard(fed):
    # A1 r1 has two rows equal in selected + recurred + avoided that differ
    # only in ambiguous: the reverse replay above would put back the older one
    # if the guard did not count ambiguous matches.
    rows = [row for row in fed.records["revision-statistics"] if label(row) == "A1r1"]
    assert [(row["selected"] + row["recurred"] + row["avoided"], row["ambiguous"]) for row in rows][-2:] == [(1, 1), (1, 2)]


# ----------------------------------------------------------------- the API


def test_statistics_carry_the_expected_figures(api, fed):
    body = api.get(f"/scopes/{SCOPE}/statistics").json()
    statistics = fed.expected["statistics"]
    for name in ("selected", "recurred", "avoided", "unknown", "unlinked_handoff_citations", "needing_review", *SCOPE_COUNTS):
        assert body[name] == statistics[name], name
    assert body["unknown_reasons"] == every_reason(statistics["unknown_reasons"])
    assert sum(body["unknown_reasons"].values()) == body["unknown"] == 14
    assert [(label(row), row["terminal_recurred_streak"]) for row in body["top_revisions"]] == [
        (f"{row['artifact_id']}r{row['revision']}", row["terminal_recurred_streak"]) for row in statistics["top_revisions"]
    ]
    # The top_revisions row carries the revision's §17 figures (B2 r1: condition_empty × 3).
    [top] = body["top_revisions"]
    b2 = fed.expected["revisions"]["B2r1"]
    assert {name: top[name] for name in REVISION_COUNTS} == {name: b2[name] for name in REVISION_COUNTS}
    assert occurred(top["unknown_reasons"]) == b2["unknown_reasons"]


def test_the_scope_list_carries_the_new_counters(api, fed):
    [summary] = api.get("/scopes").json()["scopes"]
    assert {name: summary[name] for name in SCOPE_COUNTS} == {name: fed.expected["statistics"][name] for name in SCOPE_COUNTS}
    assert summary["unknown"] == fed.expected["statistics"]["unknown"]


def test_every_revision_row_carries_unknown_by_reason(api, fed):
    body = api.get(f"/scopes/{SCOPE}/revisions", params={"limit": 100}).json()
    rows = {label(row): row for row in body["revisions"]}
    assert sorted(rows) == sorted(fed.expected["revisions"]) and body["total"] == 4
    for name, expected in fed.expected["revisions"].items():
        row = rows[name]
        assert {count: row[count] for count in REVISION_COUNTS} == {count: expected[count] for count in REVISION_COUNTS}, name
        # All eleven reasons, in the contract's order, the ones that occurred with the expected counts.
        assert list(row["unknown_reasons"]) == list(UNKNOWN_REASONS)
        assert row["unknown_reasons"] == every_reason(expected["unknown_reasons"]), name


def test_binding_suspect_filter(api, fed):
    suspects = api.get(f"/scopes/{SCOPE}/revisions", params={"binding_suspect": "true"}).json()
    assert [label(row) for row in suspects["revisions"]] == ["B1r1"]
    assert suspects["binding_suspect"] is True and suspects["available"] == fed.expected["statistics"]["binding_suspects"] == 1
    assert suspects["revisions"][0]["unknown_reasons"] == every_reason(fed.expected["revisions"]["B1r1"]["unknown_reasons"])
    others = api.get(f"/scopes/{SCOPE}/revisions", params={"binding_suspect": "false", "sort": "unknown"}).json()
    assert [label(row) for row in others["revisions"]] == ["B2r1", "A1r1", "A2r1"]
    assert api.get(f"/scopes/{SCOPE}/revisions").json()["binding_suspect"] is None


def test_sort_by_unknown_puts_the_most_unknown_first(api, fed):
    body = api.get(f"/scopes/{SCOPE}/revisions", params={"sort": "unknown"}).json()
    # unknown 9, 3, 1, 1 (the expected file); A1 and A2 tie and keep contract §8 order (streak 0 both, A1 before A2).
    assert [(label(row), row["unknown"]) for row in body["revisions"]] == [("B1r1", 9), ("B2r1", 3), ("A1r1", 1), ("A2r1", 1)]
    assert body["sort"] == "unknown" and [row["rank"] for row in body["revisions"]] == [1, 2, 3, 4]
    page = api.get(f"/scopes/{SCOPE}/revisions", params={"sort": "unknown", "limit": 1, "offset": 1}).json()
    assert [(label(row), row["rank"]) for row in page["revisions"]] == [("B2r1", 2)]


@pytest.mark.parametrize("query", ["binding_suspect=perhaps", "sort=unknowns", "binding_suspects=true", "unknown=9"])
def test_bad_or_unknown_parameters_answer_400(api, query):
    response = api.get(f"/scopes/{SCOPE}/revisions?{query}")
    assert response.status_code == 400, query
    assert response.json()["detail"][0]["loc"][0] == "query"


def test_openapi_documents_the_new_fields_and_parameters(api):
    document = api.get("/openapi.json").json()
    operation = document["paths"]["/scopes/{scope}/revisions"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["binding_suspect"]["in"] == "query"
    assert "unknown" in parameters["sort"]["schema"]["enum"]
    schemas = document["components"]["schemas"]
    assert {"unknown", "unknown_reasons", "ambiguous", "binding_suspect"} <= set(schemas["RevisionRow"]["properties"])
    assert {"unknown", "unknown_reasons", "ambiguous", "binding_suspect"} <= set(schemas["ReviewRow"]["properties"])
    assert "binding_suspect" in schemas["RevisionList"]["properties"]
    assert set(SCOPE_COUNTS) <= set(schemas["ScopeSummary"]["properties"])
    assert set(SCOPE_COUNTS) | {"unknown_reasons"} <= set(schemas["ScopeStatistics"]["properties"])
    assert list(schemas["UnknownReasons"]["properties"]) == list(UNKNOWN_REASONS)


def test_a_view_written_before_revision_3_reads_with_zeros(redis_url, fed):
    # Rows and records of a revision-2 writer lack the new fields: the API
    # answers with the defaults, sorts and filters them, and the totals count 0.
    prefix = harness.new_prefix()
    old_record = {k: v for k, v in fed.records["recurrence-statistics"][-1].items() if k not in (*SCOPE_COUNTS, "unknown_reasons")}
    old_record["top_revisions"] = []
    old_rows = [
        {k: v for k, v in row.items() if k not in ("unknown", "unknown_reasons", "ambiguous", "binding_suspect")}
        for row in {label(row): row for row in fed.records["revision-statistics"]}.values()
    ]
    view = FollowerView(redis_url, namespace=default_namespace(prefix))
    try:
        view.submit([old_record], revisions=old_rows)
        assert view.pending == 0
        with running_api(ApiSettings(redis_url=redis_url, topic_prefix=prefix)) as base_url:
            [summary] = httpx.get(f"{base_url}/scopes").json()["scopes"]
            assert {name: summary[name] for name in SCOPE_COUNTS} == dict.fromkeys(SCOPE_COUNTS, 0)
            body = httpx.get(f"{base_url}/scopes/{SCOPE}/revisions", params={"sort": "unknown"}).json()
            assert [row["unknown"] for row in body["revisions"]] == [0, 0, 0, 0]
            assert all(row["unknown_reasons"] == every_reason({}) and row["binding_suspect"] is False for row in body["revisions"])
            assert httpx.get(f"{base_url}/scopes/{SCOPE}/revisions", params={"binding_suspect": "true"}).json()["revisions"] == []
        totals = view_totals(view._client, Keys(default_namespace(prefix)))
        assert (totals.scopes, totals.sums["binding_suspects"], totals.unknown_reasons) == (1, 0, every_reason({}))
    finally:
        view.clear()
        view.close()


# ----------------------------------------------------------------- the totals behind the follower's gauges


def test_view_totals_and_the_gauges_they_set(fed):
    client = redis.Redis.from_url(fed.redis_url)  # bytes, as the API's reader reads
    try:
        totals = view_totals(client, Keys(fed.namespace))
    finally:
        client.close()
    statistics = fed.expected["statistics"]
    assert totals.scopes == 1
    assert totals.unknown_reasons == every_reason(statistics["unknown_reasons"])
    # and contract §21.3's totals: this case withholds no lesson
    assert dict(totals.sums) == {**{name: statistics[name] for name in SCOPE_COUNTS}, "withheld": 0, "holdout_conflicts": 0}
    metrics = FollowerMetrics()
    metrics.set_totals(totals)
    text = generate_latest(metrics.registry).decode()
    for reason in UNKNOWN_REASONS:
        assert f'recurrence_ledger_view_unknown_selections{{reason="{reason}"}} {float(statistics["unknown_reasons"].get(reason, 0))}' in text
    assert "recurrence_ledger_view_binding_suspects 1.0" in text
    assert "recurrence_ledger_view_ambiguous_matches 2.0" in text
    assert "recurrence_ledger_view_unmatched_failures 2.0" in text
    assert "recurrence_ledger_view_forward_references 0.0" in text


# ----------------------------------------------------------------- rank and stats


def cli(fed: Fed, *args: str, columns: int = 200):
    return run_cli(*args, "--redis-url", fed.redis_url, "--topic-prefix", fed.prefix, columns=columns)


def test_rank_shows_unknown_and_lists_binding_suspects(fed):
    rows = json.loads(cli(fed, "rank", "--json").stdout)
    by_label = {label(row): row for row in rows}
    for name, expected in fed.expected["revisions"].items():
        assert {count: by_label[name][count] for count in REVISION_COUNTS} == {count: expected[count] for count in REVISION_COUNTS}
        assert by_label[name]["unknown_reasons"] == every_reason(expected["unknown_reasons"])
    suspects = json.loads(cli(fed, "rank", "--json", "--binding-suspect").stdout)
    assert [(label(row), row["rank"], row["unknown"]) for row in suspects] == [("B1r1", 1, 9)]
    for columns in (200, 100, 80):
        table = cli(fed, "rank", columns=columns)
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert max(map(len, lines)) <= columns
        b1 = next(line.split() for line in lines if line.split()[1:3] == ["B1", "r1"])
        assert b1[-1] == "suspect"
        if columns == 200:  # the unknown column: B1 r1's 9, B2 r1's 3
            assert "9" in b1 and "3" in next(line.split() for line in lines if line.split()[1:3] == ["B2", "r1"])


def test_stats_names_binding_suspects_and_the_reasons(fed):
    result = cli(fed, "stats")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    reasons = ", ".join(f"{reason} {count}" for reason, count in every_reason(fed.expected["statistics"]["unknown_reasons"]).items() if count)
    assert f"{SCOPE}: 1 binding suspect; unknown 14 ({reasons}); ambiguous matches 2; unmatched failures 2" in text
    assert json.loads(cli(fed, "stats", "--json").stdout)[0]["binding_suspects"] == 1
