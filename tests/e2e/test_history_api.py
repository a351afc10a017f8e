"""The history endpoints (processors/api_history.py) and ``GET /scopes``
with sort and filters (processors/api.py, the scope index of
processors/read_models.py) on a real uvicorn server, over read models a real
worker and the view follower wrote from the timeline journal
(tests/e2e/history_fixtures.py): shapes, order, paging, ETags, 400 and 404
answers; and the scope list over 120 scopes against the same order computed
here, with and without the index."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import httpx
import pytest
import redis

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.read.projection import RedisView, scope_index
from recurrence_ledger.read.keys import SCOPE_SORTS, Keys
from tests.e2e import harness
from tests.e2e.api_server import fed_view, running_api
from tests.e2e.history_fixtures import SCOPE, run_follower, timeline_journal

HISTORY = f"/scopes/{SCOPE}/revisions/T1/1/history"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("history-api")


@pytest.fixture(scope="module")
def view(bootstrap, redis_url, workdir):
    with fed_view(bootstrap, redis_url, workdir, journal=timeline_journal(workdir / "timeline.jsonl"), transactions=4) as fed:
        run_follower(bootstrap, redis_url, fed.prefix, workdir / "follower.log")
        yield fed


@pytest.fixture(scope="module")
def api(view) -> Iterator[httpx.Client]:
    with running_api(ApiSettings(redis_url=view.redis_url, topic_prefix=view.prefix)) as base_url, httpx.Client(base_url=base_url, timeout=10) as client:
        yield client


def test_revision_history_newest_first_with_runs_threshold_and_explain(api, view):
    response = api.get(HISTORY)
    assert response.status_code == 200, response.text
    body = response.json()
    assert response.headers["X-As-Of-Position"] == str(view.expected[SCOPE]["as_of_position"]) == str(body["as_of_position"])
    assert body["order"] == "newest" and body["review_threshold"] == 3 and body["terminal_recurred_streak"] == 3 and body["needs_review"] is True
    assert (body["total"], body["retained"], body["truncated"]) == (12, 12, False)
    positions = [row["task_outcome_position"] for row in body["verdicts"]]
    assert positions == sorted(positions, reverse=True)
    kinds = [(row["task_outcome_position"], row["event"], row["verdict"], row["run_start_position"]) for row in body["verdicts"] if row["event"] != "selected" or row["verdict"] is None]
    assert kinds == [(11, "recurred", "recurred", 7), (10, "recurred", "recurred", 7), (9, "recurred", "recurred", 7), (8, "selected", None, 7),
                     (7, "avoided", "avoided", 7), (6, "recurred", "recurred", None), (5, "recurred", "recurred", None), (4, "recurred", "recurred", None)]
    assert body["verdicts"][0]["explain"] == f"recurrence-ledger explain {SCOPE} build-11 --topic-prefix {view.prefix}"
    assert body["verdicts"][0]["failure_ref"]["task_outcome_ref"] == {"source_type": "task_outcome", "source_id": "build-11"}
    assert [(run["run_start_position"], run["recurred"], run["current"], run["review_candidate"] is not None) for run in body["runs"]] == [
        (None, 3, False, False), (7, 3, True, True)]

    oldest = api.get(HISTORY, params={"order": "oldest", "limit": 3, "offset": 1}).json()
    assert [row["task_outcome_position"] for row in oldest["verdicts"]] == [4, 5, 6]
    assert oldest["verdicts"][0]["event"] == "recurred"  # position 4: the selection first, then its verdict


def test_history_etag_404_and_400(api):
    first = api.get(HISTORY)
    again = api.get(HISTORY, headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and again.content == b""
    assert api.get("/scopes/no-such-scope/revisions/T1/1/history").status_code == 404
    assert api.get(f"/scopes/{SCOPE}/revisions/NOPE/1/history").status_code == 404
    for params in ({"order": "sideways"}, {"limit": 0}, {"limit": 1001}, {"offset": -1}, {"bogus": 1}):
        response = api.get(HISTORY, params=params)
        assert response.status_code == 400, (params, response.text)
    assert api.get(f"/scopes/{SCOPE}/revisions/T1/0/history").status_code == 400


def test_trend_points_and_paging(api, view):
    body = api.get(f"/scopes/{SCOPE}/trend").json()
    assert body["total"] == body["retained"] == len(body["points"]) >= 2 and body["next_from_position"] is None
    last = body["points"][-1]
    expected = view.expected[SCOPE]
    assert {name: last[name] for name in ("as_of_position", "selected", "recurred", "avoided", "unknown", "needing_review", "pending_outcomes")} == {
        name: expected[name] for name in ("as_of_position", "selected", "recurred", "avoided", "unknown", "needing_review", "pending_outcomes")}
    assert last["committed_at"].endswith("Z")
    page = api.get(f"/scopes/{SCOPE}/trend", params={"from_position": 0, "limit": 1}).json()
    rest = api.get(f"/scopes/{SCOPE}/trend", params={"from_position": page["next_from_position"], "limit": 1000}).json()
    assert page["points"] + rest["points"] == body["points"]
    assert api.get("/scopes/nope/trend").status_code == 404
    assert api.get(f"/scopes/{SCOPE}/trend", params={"limit": 5000}).status_code == 400
    etag = api.get(f"/scopes/{SCOPE}/trend").headers["ETag"]
    assert api.get(f"/scopes/{SCOPE}/trend", headers={"If-None-Match": etag}).status_code == 304


def test_review_queue(api, view, workdir):
    # Both candidates of T1 (runs None and 7) stay in the queue, under the status of their last
    # ReviewStatus row in the embedded runner's view (contract §18; open without one).
    rows = [json.loads(line) for line in (workdir / "embedded" / "review-status.jsonl").read_text().splitlines() if line]
    statuses = {row["candidate_id"]: row["status"] for row in rows}
    body = api.get("/review-queue", params={"status": "all"}).json()
    assert body["total"] == body["available"] == 2 and body["status"] == "all"
    assert sorted((item["scope_id"], item["artifact_ref"]["artifact_id"], item["run_start_position"] or 0, item["streak"], item["repair_surface"])
                  for item in body["candidates"]) == [(SCOPE, "T1", 0, 3, "experience_content"), (SCOPE, "T1", 7, 3, "experience_content")]
    assert [item["published_at"] for item in body["candidates"]] == sorted(item["published_at"] for item in body["candidates"])
    assert [item["status"] for item in body["candidates"]] == [statuses.get(item["candidate_id"], "open") for item in body["candidates"]]
    assert body["counts"] == {state: sum(item["status"] == state for item in body["candidates"]) for state in ("open", "superseded", "approved", "rejected")}
    item = next(item for item in body["candidates"] if item["run_start_position"] == 7)
    assert [ref["task_outcome_ref"]["source_id"] for ref in item["failure_refs"]] == ["build-09", "build-10", "build-11"]
    assert api.get("/review-queue").json()["available"] == body["counts"]["open"]  # open by default
    assert api.get("/review-queue", params={"scope": "other", "status": "all"}).json()["available"] == 0
    assert api.get("/review-queue", params={"surface": "working_state", "status": "all"}).json()["available"] == 0
    assert api.get("/review-queue", params={"scope": SCOPE, "surface": "experience_content", "status": "all"}).json()["available"] == 2
    assert api.get("/review-queue", params={"surface": "paint"}).status_code == 400
    assert api.get("/review-queue", params={"status": "pending"}).status_code == 400
    assert api.get("/review-queue", params={"limit": 201}).status_code == 400
    etag = api.get("/review-queue").headers["ETag"]
    assert api.get("/review-queue", headers={"If-None-Match": etag}).status_code == 304
    one = api.get(f"/review-candidates/{item['candidate_id']}").json()
    assert {name: one[name] for name in item} == item and one["as_of_position"] == view.expected[SCOPE]["as_of_position"]
    assert api.get("/review-candidates/sha256:nope").status_code == 404


def test_pages_are_served_and_documented_endpoints_listed(api):
    assert "timeline" in api.get("/timeline", params={"scope": SCOPE, "artifact_id": "T1", "revision": "1"}).text
    assert "review inbox" in api.get("/review").text.lower()
    paths = api.get("/openapi.json").json()["paths"]
    assert {"/scopes/{scope}/revisions/{artifact_id}/{revision}/history", "/scopes/{scope}/trend", "/review-queue", "/review-candidates/{candidate_id}",
            "/review-candidates/{candidate_id}/decision"} <= set(paths)
    # 400 for bad parameters everywhere; the one 422 is the advisory's, for more refs than it takes (tests/e2e/test_api.py).
    assert [(name, method) for name, path in paths.items() for method, operation in path.items() if "422" in operation["responses"]] == [
        ("/advisories", "post")]


# ----------------------------------------------------------------- the scope list


def synthetic_scopes(record: dict, count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    records = []
    for index in range(count):
        recurred = rng.randrange(0, 5)
        avoided = rng.randrange(0, 3)
        records.append({
            **record, "scope_id": f"team-{index % 7}/scope-{index:04d}", "recurred": recurred, "avoided": avoided,
            "recurred_by_severity": {**record["recurred_by_severity"], "critical": 0, "high": 0, "medium": 0, "low": 0, "unrated": recurred},
            "needing_review": rng.choice((0, 0, 1, 2)), "as_of_position": 100 + index,
            "repeat_failure_rate": None if recurred + avoided == 0 else round(recurred / (recurred + avoided), 4),
        })
    return records


def expected_page(records: list[dict], sort: str, text: str | None, needs_review: bool | None) -> list[str]:
    kept = [r for r in records if (text is None or text in r["scope_id"]) and (needs_review is None or (r["needing_review"] > 0) == needs_review)]
    return [r["scope_id"] for r in sorted(kept, key=lambda r: (scope_index(r)[sort], r["scope_id"]))]


def test_scope_list_sorts_filters_and_pages_through_the_index(bootstrap, redis_url, view):
    prefix = harness.new_prefix()
    writer = RedisView(redis_url, namespace=f"rl:{prefix}")
    records = synthetic_scopes(view.expected[SCOPE], 120)
    try:
        writer.submit(records)
        assert writer.pending == 0
        with running_api(ApiSettings(redis_url=redis_url, topic_prefix=prefix)) as base_url, httpx.Client(base_url=base_url, timeout=10) as client:
            for indexed in (True, False):
                for sort in SCOPE_SORTS:
                    for text, needs_review in ((None, None), ("team-3/", None), (None, True), ("scope-00", False)):
                        params = {"sort": sort, "limit": 25, "offset": 10}
                        if text is not None:
                            params["filter"] = text
                        if needs_review is not None:
                            params["needs_review"] = str(needs_review).lower()
                        body = client.get("/scopes", params=params).json()
                        want = expected_page(records, sort, text, needs_review)
                        assert body["total"] == 120 and body["available"] == len(want), (sort, text, needs_review, indexed)
                        assert [s["scope_id"] for s in body["scopes"]] == want[10:35], (sort, text, needs_review, indexed)
                # The same answers from a view written before the index existed (every record read).
                raw = redis.Redis.from_url(redis_url)
                raw.delete(*Keys(f"rl:{prefix}").scope_index_keys())
                raw.close()
            assert client.get("/scopes", params={"sort": "size"}).status_code == 400
            assert client.get("/scopes", params={"filter": ""}).status_code == 400
            default = client.get("/scopes").json()
            assert [s["scope_id"] for s in default["scopes"]] == sorted(r["scope_id"] for r in records)
    finally:
        writer.clear()
        writer.close()


def test_scope_index_follows_every_write(redis_url, view):
    """The worker's writing code keeps the index: a newer record of a scope moves it."""
    prefix = harness.new_prefix()
    writer = RedisView(redis_url, namespace=f"rl:{prefix}")
    try:
        first, second = synthetic_scopes(view.expected[SCOPE], 2)
        writer.submit([first, second])
        raw = redis.Redis.from_url(redis_url, decode_responses=True)
        assert raw.zscore(Keys(f"rl:{prefix}").scope_index("recurred"), first["scope_id"]) == -first["recurred"]
        more = 40 - first["recurred"]  # the new recurrences unrated: recurred_by_severity still sums to recurred (contract §22)
        by_severity = {**first["recurred_by_severity"], "unrated": first["recurred_by_severity"]["unrated"] + more}
        writer.submit([{**first, "recurred": 40, "recurred_by_severity": by_severity, "as_of_position": first["as_of_position"] + 1}])
        assert raw.zrange(Keys(f"rl:{prefix}").scope_index("recurred"), 0, 0) == [first["scope_id"]]
        raw.close()
    finally:
        writer.clear()
        writer.close()
