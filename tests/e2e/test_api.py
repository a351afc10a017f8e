"""The operator API (processors/api.py) and the `rank` / `stats` commands
(processors/cli_ops.py) against a Redis view written by a real worker fed with
tests/cases/worked_example.jsonl: status codes, shapes, ETag round trips,
and values equal to the last statistics record of the embedded runner on the
same journal (contract §8, §10) — never hand-written numbers."""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import httpx
import pytest

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.read.projection import COUNTER_FIELDS, RedisView
from recurrence_ledger.read.keys import default_namespace
from tests.e2e.api_server import fed_view, running_api
from tests.plugins.processes import run_cli

SCOPE = "dns-mirror"


@pytest.fixture(scope="module")
def view(bootstrap, redis_url, tmp_path_factory):
    """The worked example projected into Redis by a real worker (once per module)."""
    with fed_view(bootstrap, redis_url, tmp_path_factory.mktemp("api")) as fed:
        yield fed


@pytest.fixture(scope="module")
def api(view):
    """An httpx client on the API (uvicorn, loopback) reading that view."""
    with running_api(ApiSettings(redis_url=view.redis_url, topic_prefix=view.prefix)) as base_url, httpx.Client(base_url=base_url, timeout=10) as client:
        yield client


@pytest.fixture
def record(view):
    """The scope's last statistics record from run_journal."""
    return view.expected[SCOPE]


FIGURES = ("repair_surface", "selected", "recurred", "avoided", "yield", "low_yield")


def figures(row: dict) -> dict:
    return {name: row[name] for name in FIGURES}


def top_rows(record: dict) -> list[dict]:
    return [
        {"artifact_ref": row["artifact_ref"], "signature_key": row["signature_key"], "terminal_recurred_streak": row["terminal_recurred_streak"]}
        for row in record["top_revisions"]
    ]


# ----------------------------------------------------------------- 200 and shapes


def test_scopes_lists_each_scope_with_the_counters_of_its_last_record(api, view):
    response = api.get("/scopes")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "total": len(view.expected), "limit": 1000, "offset": 0, "sort": "scope_id", "filter": None, "needs_review": None, "available": len(view.expected),
        "scopes": [{"scope_id": scope_id, **{name: rec[name] for name in COUNTER_FIELDS}} for scope_id, rec in sorted(view.expected.items())],
    }
    assert response.headers["etag"].startswith('"')


def test_scopes_are_paged_and_each_page_has_its_own_etag(api, view):
    everything = api.get("/scopes")
    first = api.get("/scopes", params={"limit": 1})
    assert first.json()["total"] == len(view.expected) and len(first.json()["scopes"]) == 1
    assert first.json()["scopes"] == everything.json()["scopes"][:1]
    rest = api.get("/scopes", params={"limit": 1, "offset": 1}).json()
    assert rest["scopes"] == everything.json()["scopes"][1:2]
    assert first.headers["etag"] != everything.headers["etag"] or len(view.expected) == 1


def test_statistics_is_the_last_statistics_record_with_position_header(api, record):
    response = api.get(f"/scopes/{SCOPE}/statistics")
    assert response.status_code == 200
    assert response.json() == record
    assert response.content == canonical_json(record)  # the stored canonical JSON (contract §4), as is
    assert response.headers["x-as-of-position"] == str(record["as_of_position"])
    # The worked example: its two recurring revisions on top.
    assert [(r["artifact_ref"]["artifact_id"], r["terminal_recurred_streak"]) for r in response.json()["top_revisions"]] == [("D2", 4), ("K5", 3)]


def test_revisions_are_every_revision_in_contract_order_flagged_for_review(api, record):
    body = api.get(f"/scopes/{SCOPE}/revisions", params={"sort": "streak", "limit": 10}).json()
    assert body["scope_id"] == SCOPE
    assert body["as_of_position"] == record["as_of_position"]
    # The worked example's two revisions both have a streak, so every revision is also in top_revisions.
    assert (body["sort"], body["limit"], body["available"], body["total"], body["complete"]) == ("streak", 10, 2, 2, True)
    assert len(record["top_revisions"]) == 2
    assert [{k: row[k] for k in ("artifact_ref", "signature_key", "terminal_recurred_streak")} for row in body["revisions"]] == top_rows(record)
    assert [row["rank"] for row in body["revisions"]] == list(range(1, len(record["top_revisions"]) + 1))
    assert [row["needs_review"] for row in body["revisions"]] == [row["terminal_recurred_streak"] >= 3 for row in record["top_revisions"]]
    # Each row carries its revision's figures, as the record's top_revisions row does.
    assert [figures(row) for row in body["revisions"]] == [figures(row) for row in record["top_revisions"]]
    assert [row["repair_surface"] for row in body["revisions"]] == ["experience_content", "recall_policy"]  # worked example: D2 r1, K5 r1

    first = api.get(f"/scopes/{SCOPE}/revisions", params={"limit": 1}).json()
    assert [row["artifact_ref"] for row in first["revisions"]] == [record["top_revisions"][0]["artifact_ref"]]
    assert first["available"] == len(record["top_revisions"])


def test_review_candidates_are_the_review_set(api, record):
    response = api.get(f"/scopes/{SCOPE}/review-candidates")
    assert response.status_code == 200
    body = response.json()
    needing = [row for row in top_rows(record) if row["terminal_recurred_streak"] >= 3]
    assert [{k: row[k] for k in ("artifact_ref", "signature_key", "terminal_recurred_streak")} for row in body["revisions"]] == needing
    assert [figures(row) for row in body["revisions"]] == [figures(row) for row in record["top_revisions"] if row["terminal_recurred_streak"] >= 3]
    assert body["needing_review"] == record["needing_review"] == len(needing)
    assert body["complete"] is True
    assert body["review_threshold"] == 3  # the worker's --review-threshold, which it stored in the view
    assert response.headers["x-as-of-position"] == str(record["as_of_position"])


# ----------------------------------------------------------------- conditional requests


@pytest.mark.parametrize("path", ["/scopes", f"/scopes/{SCOPE}/statistics", f"/scopes/{SCOPE}/revisions?limit=5", f"/scopes/{SCOPE}/review-candidates"])
def test_etag_round_trip_answers_304_without_a_body(api, record, path):
    first = api.get(path)
    etag = first.headers["etag"]
    for tag in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = api.get(path, headers={"If-None-Match": tag})
        assert again.status_code == 304, tag
        assert again.content == b""
        assert again.headers["etag"] == etag
        if path != "/scopes":
            assert again.headers["x-as-of-position"] == str(record["as_of_position"])
    assert api.get(path, headers={"If-None-Match": '"stale"'}).status_code == 200


def test_a_new_statistics_record_changes_the_etag_and_the_body(api, view, record):
    before = api.get(f"/scopes/{SCOPE}/statistics")
    before_list = api.get("/scopes")
    writer = RedisView(view.redis_url, namespace=view.namespace)
    newer = {**record, "as_of_position": record["as_of_position"] + 1, "pending_outcomes": record["pending_outcomes"] + 2}
    try:
        writer.submit([newer])
        assert writer.pending == 0
        after = api.get(f"/scopes/{SCOPE}/statistics", headers={"If-None-Match": before.headers["etag"]})
        assert after.status_code == 200
        assert after.json() == newer
        assert after.headers["etag"] != before.headers["etag"]
        assert after.headers["x-as-of-position"] == str(newer["as_of_position"])
        assert api.get("/scopes", headers={"If-None-Match": before_list.headers["etag"]}).status_code == 200
    finally:
        writer.submit([record])  # the worker's record again, for the other tests
        writer.close()
    assert api.get(f"/scopes/{SCOPE}/statistics", headers={"If-None-Match": before.headers["etag"]}).status_code == 304


def test_review_threshold_and_review_set_come_from_the_record_each_policy_published(redis_url, record):
    # The same scope as published by two workers with different
    # --review-threshold: each record carries its threshold and each row its
    # needs_review; the API shows them as published, and neither answers 304
    # to the other's review ETag.
    def published_at(threshold: int) -> dict:
        return {**record, "review_threshold": threshold,
                "top_revisions": [{**row, "needs_review": row["terminal_recurred_streak"] >= threshold} for row in record["top_revisions"]]}

    bodies, etags = {}, {}
    for threshold in (3, 4):
        namespace = f"rl:t{uuid.uuid4().hex[:8]}."
        writer = RedisView(redis_url, namespace=namespace)
        try:
            writer.submit([published_at(threshold)])
            assert writer.pending == 0
            with running_api(ApiSettings(redis_url=redis_url, namespace=namespace)) as base_url:
                response = httpx.get(f"{base_url}/scopes/{SCOPE}/review-candidates")
                bodies[threshold], etags[threshold] = response.json(), response.headers["etag"]
                other = 3 if threshold == 4 else None
                if other:
                    assert httpx.get(f"{base_url}/scopes/{SCOPE}/review-candidates", headers={"If-None-Match": etags[other]}).status_code == 200
                # A record written before record revision 4 has no threshold: the API says so (null), it does not guess.
                old = {key: value for key, value in record.items() if key != "review_threshold"}
                writer.submit([{**old, "top_revisions": [{k: v for k, v in row.items() if k != "needs_review"} for row in old["top_revisions"]]}])
                again = httpx.get(f"{base_url}/scopes/{SCOPE}/review-candidates", headers={"If-None-Match": etags[threshold]})
                assert again.status_code == 200 and again.json()["review_threshold"] is None
        finally:
            writer.clear()
            writer.close()
    assert (bodies[3]["review_threshold"], bodies[4]["review_threshold"]) == (3, 4)
    assert [row["terminal_recurred_streak"] for row in bodies[3]["revisions"]] == [4, 3]
    assert [row["terminal_recurred_streak"] for row in bodies[4]["revisions"]] == [4]
    assert etags[3] != etags[4]


# ----------------------------------------------------------------- 400 and 404


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=101", "limit=abc", "sort=recurrences", "sort=", "surface=nonsense", "low_yield=maybe", "needs_review=2", "offset=-1",
              "offset=1000001", "offset=99999999999999999999"],
)
def test_bad_parameters_answer_400_not_422(api, query):
    response = api.get(f"/scopes/{SCOPE}/revisions?{query}")
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail and detail[0]["loc"][0] == "query"


@pytest.mark.parametrize("query", ["limit=0", "limit=1001", "offset=-1", "offset=1000001"])
def test_bad_scopes_paging_answers_400(api, query):
    response = api.get(f"/scopes?{query}")
    assert response.status_code == 400
    assert response.json()["detail"][0]["loc"][:2] == ["query", query.split("=")[0]]


def test_offset_up_to_the_bound_is_an_empty_page(api):
    body = api.get(f"/scopes/{SCOPE}/revisions", params={"offset": 1_000_000}).json()
    assert body["revisions"] == [] and body["offset"] == 1_000_000
    assert api.get("/scopes", params={"offset": 1_000_000}).json()["scopes"] == []


@pytest.mark.parametrize("path", [
    "/scopes", f"/scopes/{SCOPE}/statistics", f"/scopes/{SCOPE}/revisions?sort=streak", f"/scopes/{SCOPE}/review-candidates",
    "/healthz", "/field-catalogue", "/", "/docs", "/redoc",
])
def test_unknown_query_parameters_answer_400_naming_them(api, path):
    separator = "&" if "?" in path else "?"
    response = api.get(f"{path}{separator}sortt=streak&limit_=5")
    assert response.status_code == 400, path
    detail = response.json()["detail"]
    assert [entry["loc"] for entry in detail] == [["query", "sortt"], ["query", "limit_"]]
    assert all("unknown query parameter" in entry["msg"] for entry in detail)


def test_the_dashboard_takes_its_own_parameters(api):
    assert api.get("/?refresh=400&limit=5").status_code == 200


@pytest.mark.parametrize("suffix", ["statistics", "revisions", "review-candidates"])
def test_unknown_scope_answers_404(api, suffix):
    response = api.get(f"/scopes/no-such-scope/{suffix}")
    assert response.status_code == 404
    assert "no-such-scope" in response.json()["detail"]


def test_scope_ids_with_slash_colon_and_percent_reach_their_own_keys(redis_url, record):
    # A scope id may hold any character but controls (contract §3); the view
    # escapes ':' and '%' in keys, and the API takes '/' in the path.
    namespace = f"rl:t{uuid.uuid4().hex[:8]}."
    odd = {**record, "scope_id": "team/a:b %25"}
    writer = RedisView(redis_url, namespace=namespace)
    try:
        writer.submit([odd, {**record, "scope_id": "team"}])
        with running_api(ApiSettings(redis_url=redis_url, namespace=namespace)) as base_url:
            scopes = httpx.get(f"{base_url}/scopes").json()["scopes"]
            assert [s["scope_id"] for s in scopes] == ["team", "team/a:b %25"]
            response = httpx.get(f"{base_url}/scopes/team%2Fa%3Ab%20%2525/statistics")
            assert response.status_code == 200
            assert response.json() == odd
            revisions = httpx.get(f"{base_url}/scopes/team%2Fa%3Ab%20%2525/revisions").json()
            assert revisions["scope_id"] == "team/a:b %25"
    finally:
        writer.clear()
        writer.close()


# ----------------------------------------------------------------- service


def test_openapi_documents_every_endpoint_and_400_instead_of_422(api):
    document = api.get("/openapi.json").json()
    assert set(document["paths"]) == {
        "/scopes", "/scopes/{scope}/statistics", "/scopes/{scope}/revisions", "/scopes/{scope}/review-candidates", "/healthz",
        "/field-catalogue",  # the published records' fields (ledger/records.py), for the dashboard's labels
        # the history endpoints (processors/api_history.py, tests/e2e/test_history_api.py)
        "/scopes/{scope}/revisions/{artifact_id}/{revision}/history", "/scopes/{scope}/trend",
        # the review endpoints (processors/recurrence_ledger/api/routes/review.py, tests/e2e/test_review_api.py)
        "/review-queue", "/review-candidates/{candidate_id}", "/review-candidates/{candidate_id}/decision",
        "/advisories",  # the recall-time advisory (tests/e2e/test_advisory.py)
        "/holdout/assign",  # contract §21.5: the verified holdout assignment (tests/api/test_holdout_assign.py)
        "/patterns",  # contract §23: one pattern group's signature patterns (tests/e2e/test_patterns_api.py)
        "/advisories",  # the recall-time advisory (processors/recurrence_ledger/api/routes/advisories.py, tests/e2e/test_advisory.py)
    }
    revisions = document["paths"]["/scopes/{scope}/revisions"]["get"]
    assert {"200", "304", "400", "404", "503"} <= set(revisions["responses"])
    # 400 for bad parameters and bodies everywhere; the one 422 is the advisory's, for more refs than it takes.
    assert [(name, method) for name, path in document["paths"].items() for method, op in path.items() if "422" in op["responses"]] == [
        ("/advisories", "post")]
    schemas = document["components"]["schemas"]
    assert {"ScopeStatistics", "RevisionList", "ReviewList", "ScopeList", "RecurrenceStreak"} <= set(schemas)
    assert set(schemas["ScopeStatistics"]["properties"]) == set(COUNTER_FIELDS) | {
        "scope_id", "top_revisions", "repeat_failure_rate", "stale_revision_selections", "by_repair_surface", "unknown_reasons",
        "reviews", "repairs",  # contract §18: review statuses and repairs of the scope
        "recurred_by_severity",  # contract §22
        "effects",  # contract §21.4 (withheld and holdout_conflicts are counters)
    }
    assert set(FIGURES) <= set(schemas["RecurrenceStreak"]["properties"])
    assert set(FIGURES) <= set(schemas["RevisionRow"]["properties"]) and set(FIGURES) <= set(schemas["ReviewRow"]["properties"])


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_documentation_pages_load_nothing_from_another_host(api, page):
    response = api.get(page)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert re.findall(r"https?://", response.text) == []  # no CDN, no fonts, no validator
    assets = re.findall(r'(?:src|href)="([^"]+)"', response.text)
    assert any(asset.endswith(".js") for asset in assets)
    for asset in assets:
        if asset.startswith("data:"):
            continue
        assert asset.startswith("/static-docs/"), asset
        served = api.get(asset)
        assert served.status_code == 200 and len(served.content) > 1000, asset


def test_health_and_dashboard_assets(api):
    assert api.get("/healthz").json()["status"] == "ok"
    page = api.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/static/vendor/chart.umd.min.js" in page.text
    vendor = api.get("/static/vendor/chart.umd.min.js")
    assert vendor.status_code == 200 and vendor.text.startswith("/*!\n * Chart.js v4.6.1")
    assert api.get("/static/dashboard.js").status_code == 200


# ----------------------------------------------------------------- CLI


def cli(view, *args: str) -> subprocess.CompletedProcess:
    """``recurrence-ledger ARGS`` on ``view``'s Redis and topic prefix."""
    return run_cli(*args, "--redis-url", view.redis_url, "--topic-prefix", view.prefix, columns=200)


def test_stats_json_is_the_statistics_record(view):
    result = cli(view, "stats", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [view.expected[scope_id] for scope_id in sorted(view.expected)]
    one = cli(view, "stats", "--scope", SCOPE, "--json")
    assert json.loads(one.stdout) == [view.expected[SCOPE]]


def test_stats_table_shows_the_counters(view, record):
    result = cli(view, "stats")
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.strip().startswith(SCOPE))
    assert row.split()[1:] == [str(record[name]) for name in ("as_of_position", "selected", "recurred", "avoided", "needing_review", "unknown", "unlinked_handoff_citations", "pending_outcomes", "late_revisions")]
    assert "evidence gaps" in result.stdout


def test_rank_json_is_top_revisions_in_contract_order(view, record):
    result = cli(view, "rank", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [{k: row[k] for k in ("artifact_ref", "signature_key", "terminal_recurred_streak")} for row in rows] == top_rows(record)
    assert [figures(row) for row in rows] == [figures(row) for row in record["top_revisions"]]
    assert [(row["rank"], row["scope_id"], row["needs_review"]) for row in rows] == [
        (rank, SCOPE, row["terminal_recurred_streak"] >= 3) for rank, row in enumerate(record["top_revisions"], start=1)
    ]
    limited = json.loads(cli(view, "rank", "--scope", SCOPE, "--limit", "1", "--json").stdout)
    assert [row["artifact_ref"] for row in limited] == [record["top_revisions"][0]["artifact_ref"]]


def test_rank_table(view, record):
    result = cli(view, "rank")
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines()]
    for rank, row in enumerate(record["top_revisions"], start=1):
        ref = row["artifact_ref"]
        line = next(line for line in lines if line[:1] == [str(rank)])
        assert ref["artifact_id"] in line and f"r{ref['revision']}" in line
        assert str(row["terminal_recurred_streak"]) in line
        assert row["repair_surface"] in line
        assert ("-" if row["yield"] is None else f"{row['yield']:.2f}") in line
    assert "Ordered by streak, then ArtifactRef, then signature" in " ".join(result.stdout.split())


def test_rank_surface_keeps_the_rows_of_that_repair_surface(view, record):
    result = cli(view, "rank", "--surface", "recall_policy", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"], row["rank"]) for row in rows] == [("K5", 1, 1)]
    assert figures(rows[0]) == figures(next(row for row in record["top_revisions"] if row["repair_surface"] == "recall_policy"))
    assert json.loads(cli(view, "rank", "--surface", "acceptance_check", "--json").stdout) == []
    table = cli(view, "rank", "--surface", "recall_policy")
    assert table.returncode == 0, table.stderr
    assert "K5" in table.stdout and "D2" not in table.stdout


def test_rank_and_api_sort_streak_list_tied_revisions_in_the_same_order(redis_url, record):
    # Revisions tied on streak (with different recurrence counts, revision 10
    # against 2) in a view of their own: `rank` and GET
    # /revisions?sort=streak must agree row for row. (The revisions hash has
    # one field per ArtifactRef: of the fixture's A9 r1 under two signatures
    # the last row stays.)
    from tests.ledger.test_rank_order import TIES

    prefix = f"t{uuid.uuid4().hex[:8]}."
    writer = RedisView(redis_url, namespace=default_namespace(prefix))
    scope_id = "b-scope"
    rows = TIES[scope_id]
    try:
        writer.submit([{**record, "scope_id": scope_id}], revisions=rows)
        assert writer.pending == 0
        with running_api(ApiSettings(redis_url=redis_url, topic_prefix=prefix)) as base_url:
            body = httpx.get(f"{base_url}/scopes/{scope_id}/revisions", params={"sort": "streak", "limit": 100}).json()
        ranked = run_cli("rank", "--scope", scope_id, "--limit", "100", "--json", "--redis-url", redis_url, "--topic-prefix", prefix)
        assert ranked.returncode == 0, ranked.stderr
        ident = lambda r: (r["rank"], r["artifact_ref"], r["signature_key"], r["terminal_recurred_streak"])  # noqa: E731
        assert [ident(r) for r in json.loads(ranked.stdout)] == [ident(r) for r in body["revisions"]]
        assert len(body["revisions"]) == len({json.dumps(r["artifact_ref"], sort_keys=True) for r in rows}) == 6
    finally:
        writer.clear()
        writer.close()


def test_rank_and_stats_errors(view):
    unknown = cli(view, "stats", "--scope", "no-such-scope")
    assert unknown.returncode == 1 and "unknown scope" in unknown.stderr
    assert cli(view, "rank", "--surface", "nonsense").returncode == 2
    down = run_cli("stats", "--redis-url", "redis://127.0.0.1:1/0")
    assert down.returncode == 1 and "cannot read the Redis view" in down.stderr
