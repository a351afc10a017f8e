"""``POST /advisories`` reads its body without FastAPI's generic body
path (``recurrence_ledger.api.params.model_body``, the route's
``AdvisoryRoute``): every body, well formed or not, under every content
type, answers what FastAPI's own body parameter of a ``StrictJsonRoute``
answers — the same status and the same 400 detail; a body that is no JSON
by contract §9 (a repeated key, not UTF-8, nested too deeply, an integer
of thousands of digits) is a 400 that says why, never a 500; an unknown
query parameter is still a 400; with Redis down (single or cluster) the
advisory answers 503."""

from __future__ import annotations

import httpx
import orjson
import pytest
from fastapi import APIRouter, FastAPI, Request
from fastapi.testclient import TestClient

from recurrence_ledger.api.app import ApiSettings, create_app
from recurrence_ledger.api.params import StrictJsonRoute, model_body
from recurrence_ledger.api.schemas import AdvisoryRequest
from tests.e2e.api_server import running_api

REF = {"family": "experience", "artifact_id": "E1", "revision": 1}

BODIES: list[bytes] = [
    orjson.dumps({"scope_id": "s", "artifact_refs": [REF, {**REF, "family": "handoff"}]}),
    orjson.dumps({"scope_id": "s", "artifact_refs": []}),
    orjson.dumps({"scope_id": "s", "artifact_refs": [REF], "extra": 1}),
    orjson.dumps({"scope_id": "", "artifact_refs": []}),
    orjson.dumps({"scope_id": 5, "artifact_refs": []}),
    orjson.dumps({"scope_id": "s", "artifact_refs": [{**REF, "family": "skill"}]}),
    orjson.dumps({"scope_id": "s", "artifact_refs": [{**REF, "revision": "1"}]}),
    orjson.dumps({"scope_id": "s", "artifact_refs": [{**REF, "revision": 1.0}]}),
    orjson.dumps({"scope_id": "s", "artifact_refs": [{**REF, "revision": 0}]}),
    orjson.dumps({"scope_id": "s", "artifact_refs": [{"family": "experience", "artifact_id": "E1"}]}),
    orjson.dumps({"scope_id": "s", "artifact_refs": {"a": 1}}),
    b'{"scope_id": "s", "scope_id": "t", "artifact_refs": []}',
    "{\"scope_id\": \"s\u00e9\", \"artifact_refs\": []}".encode("utf-16"),
    b"not json",
    b"{",
    b"",
    b"[]",
    b"null",
    b'{"scope_id": "\xff", "artifact_refs": []}',
    b"[" * 100_000,
    b'{"scope_id": "s", "artifact_refs": [{"family": "experience", "artifact_id": "E1", "revision": 1' + b"0" * 5_000 + b"}]}",
]
CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "application/vnd.api+json", "text/plain", None]


def answers(route: str, client: TestClient) -> list[tuple[int, object]]:
    out = []
    for body in BODIES:
        for content_type in CONTENT_TYPES:
            headers = {"Content-Type": content_type} if content_type else {}
            response = client.post(route, content=body, headers=headers)
            out.append((response.status_code, response.json()))
    return out


def test_the_advisory_body_is_read_as_fastapi_reads_it():
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    app = FastAPI()
    strict = APIRouter(route_class=StrictJsonRoute)

    @strict.post("/generic")
    def generic(body: AdvisoryRequest) -> dict:
        return body.model_dump()

    app.include_router(strict)

    @app.post("/direct")
    async def direct(request: Request) -> dict:
        return (await model_body(request, AdvisoryRequest)).model_dump()

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, error: RequestValidationError) -> JSONResponse:  # as the API's own handler
        return JSONResponse({"detail": [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()]}, status_code=400)

    with TestClient(app) as client:
        generic_answers = answers("/generic", client)
        assert answers("/direct", client) == generic_answers
    statuses = {status for status, _ in generic_answers}
    assert statuses == {200, 400}  # both kinds of answer were compared


@pytest.mark.parametrize(("body", "said"), [
    (b'{"scope_id": "s", "scope_id": "t", "artifact_refs": []}', "object repeats the key 'scope_id' (malformed_json, contract §9)"),
    (b'{"scope_id": "\xff", "artifact_refs": []}', "not UTF-8"),
    (b"[" * 100_000, "JSON nested too deeply"),
    (b'{"scope_id": "s", "artifact_refs": [], "n": 1' + b"0" * 5_000 + b"}", "outside the signed 64-bit range (invalid_value, contract §9)"),
])
def test_a_body_that_is_no_json_by_contract_9_is_a_400_that_says_why(body, said):
    client = TestClient(create_app(ApiSettings(redis_url="redis://127.0.0.1:1/0")))
    response = client.post("/advisories", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    [error] = response.json()["detail"]
    assert error["type"] == "json_invalid" and error["msg"].startswith("JSON decode error: ") and said in error["msg"]


def test_an_advisory_with_an_unknown_query_parameter_answers_400():
    client = TestClient(create_app(ApiSettings(redis_url="redis://127.0.0.1:1/0")))
    response = client.post("/advisories?fast=1", json={"scope_id": "s", "artifact_refs": [REF]})
    assert response.status_code == 400
    assert response.json()["detail"][0]["loc"] == ["query", "fast"]


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "redis+cluster://127.0.0.1:1"])
def test_an_advisory_with_redis_down_answers_503(url):
    with running_api(ApiSettings(redis_url=url, namespace="rl:unreachable.")) as base_url:
        response = httpx.post(f"{base_url}/advisories", json={"scope_id": "s", "artifact_refs": [REF]})
        assert response.status_code == 503
        assert response.json()["detail"].startswith("Redis unavailable")
