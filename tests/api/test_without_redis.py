"""The API with no Redis behind it, on a real uvicorn server over loopback
(tests.e2e.api_server.running_api): its routes are the documented ones, and
with Redis unreachable /healthz and the data paths answer 503 — telling why
only to a client with the API token. The same API on the test Redis is
tests/e2e/test_api.py and tests/e2e/test_read_access.py."""

from __future__ import annotations

import httpx
from fastapi.routing import APIRoute

from recurrence_ledger.api.app import ApiSettings, create_app
from tests.e2e.api_server import running_api

SCOPE = "dns-mirror"
TOKEN = "routes-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
#: A Redis URL nothing answers.
UNREACHABLE = "redis://127.0.0.1:1/0"


def api_routes() -> list[APIRoute]:
    """The app's GET routes (FastAPI's, not the fixed documents)."""
    app = create_app(ApiSettings(redis_url=UNREACHABLE, api_token=TOKEN))
    return [route for route in app.routes if isinstance(route, APIRoute) and "GET" in route.methods]


def concrete(path: str) -> str:
    """A route's path with SCOPE for its scope parameter."""
    return path.replace("{scope:path}", SCOPE)


def test_the_routes_are_the_documented_ones():
    # A new endpoint gets the checks of tests/e2e/test_read_access.py by itself; its bounds go into docs/results.md.
    # (/openapi.json and the static files are fixed documents outside FastAPI's routes.)
    assert sorted(route.path for route in api_routes()) == sorted([
        "/", "/docs", "/docs/oauth2-redirect", "/redoc", "/healthz", "/holdout/assign", "/field-catalogue", "/patterns", "/team-patterns",
        "/scopes", "/scopes/{scope:path}/review-candidates", "/scopes/{scope:path}/revisions", "/scopes/{scope:path}/statistics",
    ])


def test_healthz_tells_why_redis_is_down_only_with_the_token():
    settings = ApiSettings(redis_url=UNREACHABLE, namespace="rl:unreachable.", api_token=TOKEN)
    with running_api(settings) as base_url:
        anonymous = httpx.get(f"{base_url}/healthz")
        assert anonymous.status_code == 503 and anonymous.json()["detail"] is None
        told = httpx.get(f"{base_url}/healthz", headers=BEARER)
        assert told.status_code == 503 and "Connection refused" in told.json()["detail"]


def test_redis_down_answers_503():
    with running_api(ApiSettings(redis_url=UNREACHABLE, namespace="rl:unreachable.")) as base_url:
        health = httpx.get(f"{base_url}/healthz")
        assert health.status_code == 503 and health.json()["redis"] == "down"
        for path in ("/scopes", f"/scopes/{SCOPE}/statistics"):
            response = httpx.get(base_url + path)
            assert response.status_code == 503
            assert response.json()["detail"].startswith("Redis unavailable")


def test_serve_says_once_at_start_that_redis_does_not_answer(tmp_path):
    from tests.e2e.api_server import serve_cli, stop_process

    log = tmp_path / "serve.log"
    process, url = serve_cli([], {"REDIS_URL": UNREACHABLE}, log)
    try:
        assert httpx.get(f"{url}/healthz").status_code == 503
        assert httpx.get(f"{url}/scopes").status_code == 503
    finally:
        stop_process(process)
    said = [line for line in log.read_text().splitlines() if "Redis does not answer" in line]
    assert said == ["warning: Redis does not answer (ConnectionError: Error 111 connecting to 127.0.0.1:1. Connection refused.): "
                    "/healthz and every data path answer 503 until it does"], log.read_text()


def test_the_field_catalogue_is_the_records_own_statement():
    # The dashboard's labels and the eleven unknown reasons come from ledger/records.py, not from the page.
    from fastapi.testclient import TestClient

    from recurrence_ledger.ledger.records import ScopeStatistics
    from recurrence_ledger.ledger.verdicts import SUSPECT_REASONS, UNKNOWN_REASONS

    client = TestClient(create_app(ApiSettings(redis_url=UNREACHABLE, api_token=TOKEN)))
    body = client.get("/field-catalogue", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert list(body["unknown_reasons"]) == list(UNKNOWN_REASONS)
    assert {name for name, label in body["unknown_reasons"].items() if label["suspect"]} == SUSPECT_REASONS
    assert {label["family"] for label in body["unknown_reasons"].values()} == {"matching", "condition", "check"}
    assert body["scope"]["binding_suspects"] == {
        "title": "binding suspects", "description": ScopeStatistics.model_fields["binding_suspects"].description,
        "family": None, "suspect": None, "total": True,
    }
    assert body["revision"]["yield"]["title"] == "yield" and "needs_review" in body["revision"]


def test_a_scope_or_id_query_parameter_longer_than_any_id_answers_400_before_redis_is_asked():
    """docs/results.md, bounds: a scope id longer than any scope id (512
    characters) is a 400 naming the parameter on every route, in the query
    as in the path — not a 200 (``/review-queue``) or an answer computed
    for an id no record can have (``/holdout/assign``)."""
    assignment = {"salt": "s", "rate": "1/4", "scope_id": "s", "handoff_artifact_id": "H", "experience_artifact_id": "E"}
    with running_api(ApiSettings(redis_url=UNREACHABLE, api_token=TOKEN)) as base_url:
        queue = httpx.get(f"{base_url}/review-queue", params={"scope": "s" * 513}, headers=BEARER)
        assert queue.status_code == 400 and queue.json()["detail"][0]["loc"] == ["query", "scope"]
        assert httpx.get(f"{base_url}/review-queue", params={"scope": "s" * 512}, headers=BEARER).status_code == 503  # valid: Redis is asked
        for name in ("scope_id", "handoff_artifact_id", "experience_artifact_id"):
            refused = httpx.get(f"{base_url}/holdout/assign", params={**assignment, name: "x" * 513}, headers=BEARER)
            assert refused.status_code == 400 and refused.json()["detail"][0]["loc"] == ["query", name]
        assert httpx.get(f"{base_url}/holdout/assign", params={**assignment, "scope_id": "x" * 512}, headers=BEARER).status_code == 200
        long = "s" * 513
        for path, where in ((f"/scopes/{long}/trend", ["path", "scope"]), (f"/scopes/{long}/revisions/E1/1/history", ["path", "scope"]),
                            (f"/scopes/s/revisions/{long}/1/history", ["path", "artifact_id"]), (f"/scopes/{long}/statistics", ["path", "scope"])):
            refused = httpx.get(f"{base_url}{path}", headers=BEARER)
            assert refused.status_code == 400 and refused.json()["detail"][0]["loc"] == where, (path, refused.text[:300])
        assert httpx.get(f"{base_url}/scopes/{'s' * 512}/trend", headers=BEARER).status_code == 503  # valid: Redis is asked


def test_head_is_answered_as_get_without_the_body():
    """A load balancer's HEAD probe: the GET's status and headers, no body
    (FastAPI alone answers 405 to HEAD on a GET route); the read token is
    asked for as for the GET."""
    with running_api(ApiSettings(redis_url=UNREACHABLE, api_token=TOKEN)) as base_url:
        for path, status in (("/healthz", 503), ("/", 200), ("/scopes", 503)):
            get, head = httpx.get(f"{base_url}{path}", headers=BEARER), httpx.head(f"{base_url}{path}", headers=BEARER)
            assert (get.status_code, head.status_code) == (status, status), path
            assert head.content == b"" and get.content
            assert head.headers["content-length"] == get.headers["content-length"] and head.headers["content-type"] == get.headers["content-type"]
        assert httpx.head(f"{base_url}/scopes").status_code == 401
        assert httpx.request("DELETE", f"{base_url}/scopes", headers=BEARER).status_code == 405


def test_a_repeated_query_parameter_is_a_400_naming_it():
    """No parameter of the API takes a list: ``?limit=1&limit=500`` was read
    as 500 (the last); it is refused, as a body with a repeated key is."""
    with running_api(ApiSettings(redis_url=UNREACHABLE, api_token=TOKEN)) as base_url:
        for path, name in (("/scopes?limit=1&limit=2", "limit"), ("/review-queue?status=open&status=rejected", "status"),
                           ("/holdout/assign?salt=s&rate=1/4&scope_id=s&handoff_artifact_id=H&experience_artifact_id=E&salt=t", "salt")):
            refused = httpx.get(f"{base_url}{path}", headers=BEARER)
            assert refused.status_code == 400, (path, refused.text[:300])
            [detail] = refused.json()["detail"]
            assert detail["loc"] == ["query", name] and detail["type"] == "repeated_parameter", detail
        assert httpx.get(f"{base_url}/holdout/assign?salt=s&rate=1/4&scope_id=s&handoff_artifact_id=H&experience_artifact_id=E",
                         headers=BEARER).status_code == 200
