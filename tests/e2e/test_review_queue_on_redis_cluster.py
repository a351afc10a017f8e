"""The review queue on a Redis Cluster view: an empty scope filter is
answered (never a 500)."""

from __future__ import annotations

import secrets

from fastapi.testclient import TestClient

from recurrence_ledger.api.app import create_app
from recurrence_ledger.api.settings import ApiSettings


def test_an_empty_scope_filter_of_the_review_queue_is_answered_on_redis_cluster(redis_cluster_url):
    """GET /review-queue?scope= (an empty scope id) on a Redis Cluster view:
    the escaped scope is "", its hash tag ``{}`` is empty, so the scope's
    queue keys hash by their whole names onto different slots and the
    MULTI of ReadModels.review_queue raises CrossSlotTransactionError: a
    500. On a single Redis the same request answers 200 with an empty queue.
    It must answer 4xx (or 200 empty), never 500."""
    prefix = f"adv{secrets.token_hex(4)}."
    settings = ApiSettings(redis_url=redis_cluster_url, topic_prefix=prefix)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        response = client.get("/review-queue", params={"scope": ""})
    assert response.status_code < 500, response.text
