"""A review decision sent again with its ``Idempotency-Key``
(processors/recurrence_ledger/api/idempotency.py) is answered, not published
again — on a real uvicorn server, the test Redis and the test broker: two
concurrent requests with one key publish one decision and both answer it;
a retry minutes later (within the key's time) answers it too; the key with
another body is refused; a key is the reviewer's own."""

from __future__ import annotations

import threading

import httpx
import pytest

from recurrence_ledger.api.idempotency import REPLAYED_HEADER
from recurrence_ledger.catalogue import REVIEW_DECISIONS
from recurrence_ledger.kafka.kafka_io import read_topic
from tests.e2e.review_fixtures import candidate, decision_api

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"
OPEN, OTHER = candidate("s1", "P1", revision=2), candidate("s1", "P2")


@pytest.fixture(scope="module")
def api(bootstrap, redis_url):
    with decision_api(bootstrap, redis_url, (("alice", ALICE), ("bob", BOB)), [OPEN, OTHER]) as found:
        yield found


def post(base_url: str, of: dict, body: dict, key: str | None, token: str = ALICE) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} | ({"Idempotency-Key": key} if key else {})
    return httpx.post(f"{base_url}/review-candidates/{of['candidate_id']}/decision", json=body, headers=headers, timeout=60)


def published_ids(bootstrap: str, prefix: str) -> list[str]:
    return [value["decision_id"] for _, _, _, value in read_topic(bootstrap, REVIEW_DECISIONS, topic_prefix=prefix)]


def test_concurrent_requests_with_one_key_publish_one_decision_and_answer_it(api, bootstrap):
    prefix, base_url = api
    body = {"decision": "rejected", "reason": "a flaky mirror"}
    start = threading.Barrier(4)
    answers: list[httpx.Response] = [None] * 4

    def send(index: int) -> None:
        start.wait()
        answers[index] = post(base_url, OPEN, body, "7d2c1f0e-double-click")

    threads = [threading.Thread(target=send, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [answer.status_code for answer in answers] == [202] * 4, [answer.text for answer in answers]
    assert len({answer.json()["decision_id"] for answer in answers}) == 1
    assert sorted(answer.headers.get(REPLAYED_HEADER, "") for answer in answers) == ["", "true", "true", "true"]
    [decision_id] = published_ids(bootstrap, prefix)
    assert decision_id == answers[0].json()["decision_id"]

    # A retry later: the same answer, byte for byte, and nothing published.
    again = post(base_url, OPEN, body, "7d2c1f0e-double-click")
    assert (again.status_code, again.content, again.headers[REPLAYED_HEADER]) == (202, answers[0].content, "true")
    # The key with another request is refused; a key of bob's is bob's (he decides the other candidate with it).
    reused = post(base_url, OTHER, body, "7d2c1f0e-double-click")
    assert reused.status_code == 400 and "another request" in reused.json()["detail"]
    bobs = post(base_url, OTHER, body, "7d2c1f0e-double-click", token=BOB)
    assert bobs.status_code == 202 and REPLAYED_HEADER not in bobs.headers and bobs.json()["decision"]["reviewer"] == "bob"
    assert published_ids(bootstrap, prefix) == [decision_id, bobs.json()["decision_id"]]
    # A bad key is refused before anything is published.
    assert post(base_url, OTHER, body, "with space").status_code == 400
    assert published_ids(bootstrap, prefix) == [decision_id, bobs.json()["decision_id"]]
