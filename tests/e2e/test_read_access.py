"""Who may read the view over HTTP, against real uvicorn and the test Redis:
the API token (401 without it, with ``WWW-Authenticate: Bearer``; 200 with
it; /healthz and the page shell open; a wrong token 401; the comparison
through ``hmac.compare_digest``), CORS only for configured origins, the
loopback Host rule, the bounds of every endpoint, and ``recurrence-ledger
serve`` itself with ``--token-file`` (its output never shows the token).
The view is the worked example's, written straight into Redis
(tests.e2e.api_server.embedded_view)."""

from __future__ import annotations

import hmac
import uuid

import httpx
import pytest

from recurrence_ledger.api import auth as api
from recurrence_ledger.api.params import MAX_LIMIT, MAX_OFFSET, MAX_SCOPES_LIMIT
from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.ledger.models import MAX_ID_LENGTH
from recurrence_ledger.read.projection import RedisView
from tests.api.test_without_redis import api_routes, concrete
from tests.e2e.api_server import embedded_view, running_api, serve_cli, stop_process

SCOPE = "dns-mirror"
TOKEN = f"read-{uuid.uuid4().hex}"
ORIGIN = "https://dashboards.example.com"
DATA_PATHS = ("/scopes", f"/scopes/{SCOPE}/statistics", f"/scopes/{SCOPE}/revisions", f"/scopes/{SCOPE}/review-candidates", "/patterns?group=teamA")
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def view(redis_url, tmp_path_factory):
    with embedded_view(redis_url, tmp_path_factory.mktemp("read")) as fed:
        yield fed


@pytest.fixture(scope="module")
def api_url(view):
    with running_api(ApiSettings(redis_url=view.redis_url, topic_prefix=view.prefix, api_token=TOKEN)) as base_url:
        yield base_url


# ----------------------------------------------------------------- the token


@pytest.mark.parametrize("path", [*DATA_PATHS, "/scopes?limit=0", "/scopes?bogus=1", f"/scopes/{SCOPE}/revisions?sort=nonsense", "/no-such-path", "/scopes/"])
def test_without_the_token_every_data_path_answers_401_with_a_bearer_challenge(api_url, path):
    response = httpx.get(api_url + path)
    assert response.status_code == 401, path
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json() == {"detail": "missing or wrong API token: send Authorization: Bearer <token>"}


@pytest.mark.parametrize(
    "authorization", [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN.upper()}"],
    ids=["one-more-character", "one-less", "no-token", "basic-scheme", "no-scheme", "upper-case"],  # the token is random: ids are not
)
def test_a_wrong_token_answers_401(api_url, authorization):
    response = httpx.get(f"{api_url}/scopes", headers={"Authorization": authorization})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_token_in_the_query_string_is_not_a_token(api_url):
    response = httpx.get(f"{api_url}/scopes", params={"token": TOKEN, "access_token": TOKEN})
    assert response.status_code == 401


def test_with_the_token_every_data_path_answers_200_with_the_view(api_url, view):
    record = view.expected[SCOPE]
    for path in DATA_PATHS:
        response = httpx.get(api_url + path, headers=BEARER)
        assert response.status_code == 200, path
    assert httpx.get(f"{api_url}/scopes/{SCOPE}/statistics", headers=BEARER).json() == record
    assert httpx.get(f"{api_url}/scopes", headers={"authorization": f"bearer {TOKEN}"}).json()["total"] == len(view.expected)


def test_the_token_is_compared_with_compare_digest(api_url, monkeypatch):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(api.hmac, "compare_digest", spy)
    assert httpx.get(f"{api_url}/scopes", headers=BEARER).status_code == 200
    assert httpx.get(f"{api_url}/scopes", headers={"Authorization": "Bearer short"}).status_code == 401
    # SHA-256 digests on both sides: the same length whatever the client sent.
    assert calls == [(32, 32), (32, 32)]


@pytest.mark.parametrize("path", ["/healthz", "/", "/team-patterns", "/static/patterns.js", "/static/dashboard.js", "/static/vendor/chart.umd.min.js", "/docs", "/redoc", "/openapi.json"])
def test_health_page_shell_and_docs_answer_without_the_token(api_url, path):
    assert httpx.get(api_url + path).status_code == 200


def test_the_page_is_served_with_a_content_security_policy(api_url):
    headers = httpx.get(f"{api_url}/").headers
    assert "script-src 'self'" in headers["content-security-policy"] and "connect-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"


def test_openapi_declares_the_bearer_scheme_on_the_data_paths(api_url):
    schema = httpx.get(f"{api_url}/openapi.json").json()
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": "The API token (serve: RL_API_TOKEN or --token-file).",
    }
    for path, operations in schema["paths"].items():
        secured = path != "/healthz"
        for operation in operations.values():
            assert ("security" in operation) is secured, path
            assert ("401" in operation["responses"]) is secured, path


# ----------------------------------------------------------------- CORS and Host


def test_no_cors_headers_by_default(api_url):
    simple = httpx.get(f"{api_url}/scopes", headers={**BEARER, "Origin": ORIGIN})
    assert simple.status_code == 200 and "access-control-allow-origin" not in simple.headers
    preflight = httpx.options(f"{api_url}/scopes", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "GET"})
    assert not any(name.startswith("access-control-") for name in preflight.headers)
    assert "access-control-allow-origin" not in httpx.get(f"{api_url}/healthz", headers={"Origin": ORIGIN}).headers


def test_cors_headers_only_for_a_configured_origin(view):
    settings = ApiSettings(redis_url=view.redis_url, topic_prefix=view.prefix, api_token=TOKEN, cors_origins=(ORIGIN,))
    with running_api(settings) as base_url:
        allowed = httpx.get(f"{base_url}/scopes", headers={**BEARER, "Origin": ORIGIN})
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == ORIGIN
        assert "etag" in allowed.headers["access-control-expose-headers"].lower()
        assert "access-control-allow-credentials" not in allowed.headers
        # A page of that origin can read the 401 too (and so ask for the token).
        refused = httpx.get(f"{base_url}/scopes", headers={"Origin": ORIGIN})
        assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ORIGIN
        preflight = httpx.options(
            f"{base_url}/scopes", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization, if-none-match"}
        )
        assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == ORIGIN
        assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
        other = httpx.get(f"{base_url}/scopes", headers={**BEARER, "Origin": "https://elsewhere.example"})
        assert other.status_code == 200 and "access-control-allow-origin" not in other.headers


def test_allowed_hosts_refuse_other_host_names(view):
    settings = ApiSettings(redis_url=view.redis_url, topic_prefix=view.prefix, allowed_hosts=("127.0.0.1", "localhost", "::1"))
    with running_api(settings) as base_url:
        port = base_url.rsplit(":", 1)[1]
        assert httpx.get(f"{base_url}/scopes").status_code == 200
        assert httpx.get(f"{base_url}/scopes", headers={"Host": f"localhost:{port}"}).status_code == 200
        rebound = httpx.get(f"{base_url}/scopes", headers={"Host": f"attacker.example:{port}"})
        assert rebound.status_code == 400 and "unexpected Host header" in rebound.json()["detail"]


# ----------------------------------------------------------------- bounds, on every endpoint


# The routes: tests/api/test_without_redis.py checks they are the documented ones.


@pytest.mark.parametrize("path", [concrete(route.path) for route in api_routes()])
def test_every_endpoint_answers_400_for_an_unknown_parameter(api_url, path):
    response = httpx.get(f"{api_url}{path}", params={"bogus": "1"}, headers=BEARER)
    assert response.status_code == 400, path
    assert response.json()["detail"][0]["loc"] == ["query", "bogus"]


@pytest.mark.parametrize("route", [route for route in api_routes() if {"limit", "offset"} <= {p.alias for p in route.dependant.query_params}], ids=lambda r: r.path)
def test_every_paged_endpoint_answers_400_for_absurd_limits_and_offsets(api_url, route):
    largest = MAX_SCOPES_LIMIT if route.path == "/scopes" else MAX_LIMIT
    for query in ({"limit": 0}, {"limit": largest + 1}, {"limit": 10**12}, {"offset": -1}, {"offset": MAX_OFFSET + 1}, {"offset": "9" * 40}):
        response = httpx.get(f"{api_url}{concrete(route.path)}", params=query, headers=BEARER)
        assert response.status_code == 400, (route.path, query)
    assert httpx.get(f"{api_url}{concrete(route.path)}", params={"limit": largest, "offset": MAX_OFFSET}, headers=BEARER).status_code == 200


@pytest.mark.parametrize("suffix", ["statistics", "revisions", "review-candidates"])
def test_a_scope_id_longer_than_any_scope_id_answers_400(api_url, suffix):
    assert httpx.get(f"{api_url}/scopes/{'s' * (MAX_ID_LENGTH + 1)}/{suffix}", headers=BEARER).status_code == 400
    assert httpx.get(f"{api_url}/scopes/{'s' * MAX_ID_LENGTH}/{suffix}", headers=BEARER).status_code == 404


def test_responses_are_bounded_whatever_the_view_holds(api_url, view):
    # 150 revisions in one scope: /revisions never returns more than 100 rows.
    record = view.expected[SCOPE]
    rows = [
        {"scope_id": "wide", "artifact_ref": {"family": "experience", "artifact_id": f"W{n}", "revision": 1}, "signature_key": "wide failure",
         "terminal_recurred_streak": n % 5, "needs_review": n % 5 >= 3, "repair_surface": "working_state", "selected": 1, "recurred": n % 5,
         "avoided": 0, "yield": 0.0, "low_yield": False}
        for n in range(150)
    ]
    writer = RedisView(view.redis_url, namespace=view.namespace)
    try:
        writer.submit([{**record, "scope_id": "wide"}], revisions=rows)
        assert writer.pending == 0
        page = httpx.get(f"{api_url}/scopes/wide/revisions", params={"limit": MAX_LIMIT}, headers=BEARER).json()
        assert page["total"] == 150 and len(page["revisions"]) == MAX_LIMIT
        assert len(httpx.get(f"{api_url}/scopes/wide/revisions", headers=BEARER).json()["revisions"]) == 10
        review = httpx.get(f"{api_url}/scopes/wide/review-candidates", headers=BEARER).json()
        assert len(review["revisions"]) <= len(record["top_revisions"])
    finally:
        writer._client.delete(*(f"{writer.scope_key('wide')}{suffix}" for suffix in ("", ":top", ":review", ":revisions")))
        writer._client.srem(writer.layout.scopes, "wide")
        writer.close()


# ----------------------------------------------------------------- recurrence-ledger serve


def test_serve_with_a_token_file_asks_every_request_for_it_and_never_prints_it(view, tmp_path):
    token_file = tmp_path / "api-token"
    token_file.write_text(TOKEN + "\n")
    log = tmp_path / "serve.log"
    process, url = serve_cli(["--token-file", str(token_file), "--log-level", "debug"], {"REDIS_URL": view.redis_url, "RL_TOPIC_PREFIX": view.prefix}, log)
    try:
        assert httpx.get(f"{url}/scopes").status_code == 401
        assert httpx.get(f"{url}/scopes", headers=BEARER).json()["total"] == len(view.expected)
        assert httpx.get(f"{url}/healthz").status_code == 200
    finally:
        stop_process(process)
    output = log.read_text()
    assert "API token required" in output and "GET /scopes" in output
    assert TOKEN not in output


def test_serve_without_a_token_answers_only_loopback_host_names(view, tmp_path):
    process, url = serve_cli([], {"REDIS_URL": view.redis_url, "RL_TOPIC_PREFIX": view.prefix}, tmp_path / "serve.log")
    try:
        assert httpx.get(f"{url}/scopes").status_code == 200
        assert httpx.get(f"{url}/scopes", headers={"Host": "rebound.example"}).status_code == 400
    finally:
        stop_process(process)
    assert "no API token: loopback only" in (tmp_path / "serve.log").read_text()
