"""The API's JSON bodies are in their response models' shapes, byte for byte
(``recurrence_ledger.api.bodies``): each body of every read endpoint,
parsed by its response model and written again by it, gives the same
bytes — the fields in the model's order, its defaults, aliases and float
forms — over a view filled by the product's projection (a generated journal
with review candidates through the embedded core, submitted as the view
follower does: ``benchmarks/api_benchmark.py``'s ``fill``)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from benchmarks.api_benchmark import fill
from recurrence_ledger.api.app import create_app
from recurrence_ledger.api.schemas import (
    ReviewCandidateBody,
    ReviewList,
    ReviewQueue,
    RevisionHistoryBody,
    RevisionList,
    ScopeList,
    ScopeTrend,
)
from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.ledger.records import ScopeStatistics
from recurrence_ledger.workload import Workload


@pytest.fixture(scope="module")
def filled(redis_url):
    data, view, models = fill(redis_url, Workload(scopes=4, outcomes_per_scope=300, candidates=0.1))
    try:
        with TestClient(create_app(ApiSettings(redis_url=redis_url, topic_prefix=data.prefix))) as client:
            yield data, client
    finally:
        models.clear()
        view.clear()
        view.close()


def same_through(model: type[BaseModel], body: bytes) -> None:
    assert model.model_validate_json(body).model_dump_json().encode() == body


def test_every_read_body_is_its_models_json(filled):
    data, client = filled
    assert data.scopes and data.revisions and data.candidates
    checked: dict[str, int] = {}

    def check(path: str, model: type[BaseModel]) -> dict:
        response = client.get(path)
        assert response.status_code == 200, (path, response.text)
        if model is ScopeStatistics:
            model.model_validate_json(response.content)  # the view's canonical record as stored (sorted keys), not the model's order
        else:
            same_through(model, response.content)
        checked[model.__name__] = checked.get(model.__name__, 0) + 1
        return response.json()

    for sort in ("scope_id", "needing_review", "recurred", "repeat_failure_rate"):
        check(f"/scopes?sort={sort}", ScopeList)
    check("/scopes?needs_review=true&limit=2&offset=1", ScopeList)
    rows = 0
    for scope in data.scopes:
        base = f"/scopes/{quote(scope, safe='')}"
        check(f"{base}/statistics", ScopeStatistics)
        for query in ("sort=streak&limit=100", "sort=unknown&limit=100", "sort=yield&limit=100", "binding_suspect=true&sort=unknown&limit=100",
                      "needs_review=true", "low_yield=false&offset=3&limit=5"):
            rows += len(check(f"{base}/revisions?{query}", RevisionList)["revisions"])
        check(f"{base}/review-candidates", ReviewList)
        check(f"{base}/trend", ScopeTrend)
        check(f"{base}/trend?from_position=5&limit=3", ScopeTrend)
    assert rows > 0
    verdicts = 0
    for scope, artifact_id, revision in data.revisions[::3]:
        for order in ("newest", "oldest"):
            body = check(f"/scopes/{quote(scope, safe='')}/revisions/{quote(artifact_id, safe='')}/{revision}/history?order={order}&limit=1000",
                         RevisionHistoryBody)
            verdicts += len(body["verdicts"])
    assert verdicts > 0
    statuses = set()
    for status in ("open", "superseded", "approved", "rejected", "decided", "all"):
        for item in check(f"/review-queue?status={status}&limit=200", ReviewQueue)["candidates"]:
            statuses.add(item["status"])
    check(f"/review-queue?scope={quote(data.scopes[0], safe='')}&surface=experience_content", ReviewQueue)
    assert statuses >= {"open"}
    for candidate in data.candidates:
        check(f"/review-candidates/{quote(candidate, safe='')}", ReviewCandidateBody)
    assert set(checked) == {"ScopeList", "ScopeStatistics", "RevisionList", "ReviewList", "ScopeTrend", "RevisionHistoryBody", "ReviewQueue",
                            "ReviewCandidateBody"}


def test_a_rejected_candidate_shows_its_reason_code(redis_url):
    """contract §24: the ReviewStatus row's reason_code reaches the inbox's
    reads — the candidate and the queue — and an open one has none."""
    from recurrence_ledger.read.history import ReadModels
    from recurrence_ledger.read.keys import default_namespace
    from tests.e2e import harness
    from tests.e2e.review_fixtures import applied, candidate, located_candidate, located_status, status
    from tests.plugins.services import read_client

    prefix = harness.new_prefix()
    models = ReadModels(read_client(redis_url), default_namespace(prefix))
    rejected, waiting = candidate("s1", "P1"), candidate("s1", "P2")
    row = {**status(rejected, "rejected", decision=applied("rejected", "bob", "1970-01-01T00:00:02Z", 3, reason="not a cause")),
           "reason_code": "false_cause"}
    try:
        models.apply([located_candidate(rejected, 0, 0, 1000), located_candidate(waiting, 0, 1, 2000), located_status(row, 0, 0)])
        with TestClient(create_app(ApiSettings(redis_url=redis_url, topic_prefix=prefix))) as client:
            one = client.get(f"/review-candidates/{quote(rejected['candidate_id'], safe='')}")
            assert one.status_code == 200 and one.json()["reason_code"] == "false_cause"
            same_through(ReviewCandidateBody, one.content)
            queue = client.get("/review-queue?status=all").json()["candidates"]
            assert {item["candidate_id"]: item["reason_code"] for item in queue} == {
                rejected["candidate_id"]: "false_cause", waiting["candidate_id"]: None}
    finally:
        models.clear()
