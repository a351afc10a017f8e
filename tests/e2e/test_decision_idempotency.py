"""A review decision sent again with its ``Idempotency-Key``
(processors/recurrence_ledger/api/idempotency.py) is answered, not published
again — on a real uvicorn server, the test Redis and the test broker: two
concurrent requests with one key publish one decision and both answer it;
a retry minutes later (within the key's time) answers it too; the key with
another body is refused; a key is the reviewer's own."""

from __future__ import annotations

import threading
from uuid import uuid4

import httpx
import orjson
import pytest
import redis

from recurrence_ledger.api.idempotency import CLAIM_S, IDEMPOTENCY_TTL_S, REPLAYED_HEADER, DecisionAnswers
from recurrence_ledger.catalogue import REVIEW_DECISIONS
from recurrence_ledger.kafka.kafka_io import read_topic
from recurrence_ledger.read.keys import Keys
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
    assert REPLAYED_HEADER not in reused.headers  # its own answer, not the first request's
    bobs = post(base_url, OTHER, body, "7d2c1f0e-double-click", token=BOB)
    assert bobs.status_code == 202 and REPLAYED_HEADER not in bobs.headers and bobs.json()["decision"]["reviewer"] == "bob"
    assert published_ids(bootstrap, prefix) == [decision_id, bobs.json()["decision_id"]]
    # A bad key is refused before anything is published.
    assert post(base_url, OTHER, body, "with space").status_code == 400
    assert published_ids(bootstrap, prefix) == [decision_id, bobs.json()["decision_id"]]


def test_a_claim_whose_answer_redis_refused_to_keep_holds_its_key_for_the_claim_s_time_only(redis_server):
    """Redis fails between the publish and keeping the answer (here: a
    real refusal, the server out of memory under ``noeviction``): the
    request still has its answer to give, and the key stays claimed for at
    most CLAIM_S seconds — a retry meanwhile gets 409, and after that is a
    new request — not for the answer's ten minutes. With Redis writable an
    answer is kept for IDEMPOTENCY_TTL_S."""
    server = redis_server()  # the test's own: its memory limit is changed
    server.start()
    client = redis.Redis.from_url(server.url)
    answers = DecisionAnswers(client, Keys(f"idem-{uuid4().hex[:8]}"), wait_s=0.2)
    name, body = answers.name("alice", "4f1e-retry"), {"decision_id": "D1"}
    assert answers.begin(name, "request") is None
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)  # every write refused from now on: OOM command not allowed
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.set(f"{name}:probe", b"x")
        assert answers.finish(name, "request", 202, body) is False
    finally:
        client.config_set("maxmemory", 0)
    assert orjson.loads(client.get(name))["status"] is None  # still the claim, not an answer
    assert 0 < client.ttl(name) <= CLAIM_S < IDEMPOTENCY_TTL_S
    assert answers.begin(name, "request")[::2] == (409, False)  # a retry meanwhile
    client.delete(name)  # as the claim expiring does: a retry after it is a new request
    assert answers.begin(name, "request") is None
    assert answers.finish(name, "request", 202, body) is True
    assert CLAIM_S < client.ttl(name) <= IDEMPOTENCY_TTL_S
    assert answers.begin(name, "request") == (202, body, True)
