"""``POST /review-candidates/{id}/decision`` (processors/recurrence_ledger/api/routes/review.py,
contract §18) on a real uvicorn server over the test Redis and the test
broker: the read models hold candidates written by hand
(tests/e2e/review_fixtures.py); the API publishes each accepted decision to
``review-decisions`` and writes nothing in Redis.

Every bad input of the issue answers its own error and publishes nothing,
leaving the other decisions intact: a decision for an unknown candidate
(404), a second decision (409), a fix_revision of another artifact or not
above the candidate's (400), a blank rejection reason (400), an oversized
reason (400), a forged reviewer in the body (400), a POST without the
reviewer token (401) or with the read token or an unknown token (403).
The accepted ones are read back from Kafka: one record each, the reviewer
of its token, the scope's as_of_position, the deterministic id."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis

from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.catalogue import REVIEW_DECISIONS
from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.read.projection import RedisView
from recurrence_ledger.kafka.kafka_io import read_raw, read_topic
from tests.e2e import harness
from tests.e2e.api_server import running_api
from tests.e2e.review_fixtures import applied, candidate, located_candidate, located_status, ref, repair, statistics, status

READ_TOKEN = "read-token-0123456789"
ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"
REVIEWERS = (("alice", ALICE), ("bob@example.com", BOB))
#: Candidates: OPEN and SECOND in scope s1 (as_of_position 41), DECIDED (approved already) in s2 (as_of_position 7).
OPEN, SECOND, DECIDED = candidate("s1", "P1", revision=2), candidate("s1", "P2"), candidate("s2", "Q1")


@dataclass(frozen=True)
class Review:
    prefix: str
    base_url: str
    client: redis.Redis

    def post(self, of: dict | str, body: dict, token: str | None = ALICE, **kwargs) -> httpx.Response:
        candidate_id = of if isinstance(of, str) else of["candidate_id"]
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(f"{self.base_url}/review-candidates/{candidate_id}/decision", json=body, headers=headers, timeout=30, **kwargs)

    def published(self, bootstrap: str) -> list[tuple[bytes | None, dict]]:
        return [(key, value) for _, _, key, value in read_topic(bootstrap, REVIEW_DECISIONS, topic_prefix=self.prefix)]

    def snapshot(self) -> dict[str, object]:
        """Every key of the namespace with its content (the API must change none)."""
        found = {}
        for key in sorted(self.client.scan_iter(match=f"{default_namespace(self.prefix)}:*")):
            kind = self.client.type(key)
            found[key] = {
                b"hash": self.client.hgetall, b"zset": lambda k: self.client.zrange(k, 0, -1, withscores=True), b"set": self.client.smembers,
            }[kind](key)
        return found


@pytest.fixture(scope="module")
def review(bootstrap, redis_url) -> Iterator[Review]:
    prefix = harness.new_prefix()
    client = redis.Redis.from_url(redis_url)
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        view = RedisView(redis_url, namespace=default_namespace(prefix))
        view.submit([statistics("s1", 41), statistics("s2", 7)])
        assert not view.pending
        view.close()
        done = applied("approved", "carol", "2025-03-01T10:00:00Z", 7, decision_id="sha256:" + "d" * 64)
        ReadModels(client, default_namespace(prefix)).apply([
            located_candidate(OPEN, 0, 0, 1_700_000_000_000), located_candidate(SECOND, 0, 1, 1_700_000_001_000),
            located_candidate(DECIDED, 1, 0, 1_700_000_002_000),
            located_status(status(DECIDED, "approved", decision=done, fix=ref("Q1", 2), repair=repair("held", 1, 0, 1)), 1, 0),
        ])
        settings = ApiSettings(redis_url=redis_url, topic_prefix=prefix, api_token=READ_TOKEN, reviewer_tokens=REVIEWERS, kafka=bootstrap)
        with running_api(settings) as base_url:
            yield Review(prefix, base_url, client)
    finally:
        harness.remove_prefix(bootstrap, prefix, redis_url)
        client.close()


def detail(response: httpx.Response) -> str:
    body = response.json()["detail"]
    return body if isinstance(body, str) else " ".join(f"{error['loc']} {error['msg']}" for error in body)


def test_bad_decisions_get_their_error_and_publish_nothing(review, bootstrap):
    before = review.snapshot()
    approve = {"decision": "approved"}
    # Who: no token, the read token, a token no reviewer has.
    none = review.post(OPEN, approve, token=None)
    assert none.status_code == 401 and none.headers["WWW-Authenticate"].startswith("Bearer") and "reviewer token" in detail(none)
    read = review.post(OPEN, approve, token=READ_TOKEN)
    assert read.status_code == 403 and "the read token may not decide" in detail(read)
    unknown = review.post(OPEN, approve, token="someone-else-0123456789")
    assert unknown.status_code == 403 and "not a reviewer token" in detail(unknown)
    # A refused token is refused before the body is read: a bad body without a token is still a 401.
    assert review.post(OPEN, {"nonsense": True}, token=None).status_code == 401
    # The body: a forged reviewer, an unknown field, a bad decision.
    forged = review.post(OPEN, {"decision": "approved", "reviewer": "mallory"})
    assert forged.status_code == 400 and "reviewer is not taken from the body" in detail(forged)
    assert review.post(OPEN, {"decision": "approved", "journal_position": 3}).status_code == 400
    assert review.post(OPEN, {"decision": "maybe"}).status_code == 400
    # What: an unknown candidate, a second decision, a rejection without a reason or with only blanks, an oversized reason.
    missing = review.post("sha256:" + "0" * 64, approve)
    assert missing.status_code == 404 and "unknown_candidate" in detail(missing)
    second = review.post(DECIDED, {"decision": "rejected", "reason": "too late"})
    assert second.status_code == 409 and "already decided: approved by carol at 2025-03-01T10:00:00Z" in detail(second)
    for reason in (None, "", "  \t\u200b\u2060"):
        blank = review.post(OPEN, {"decision": "rejected", "reason": reason})
        assert blank.status_code == 400 and "a rejection needs a reason that is not blank" in detail(blank), reason
    oversized = review.post(OPEN, {"decision": "rejected", "reason": "x" * 16_385})
    assert oversized.status_code == 400 and "reason: String should have at most 16384 characters" in detail(oversized)
    # fix_revision: of another artifact, not above the candidate's r2, with a rejection.
    other = review.post(OPEN, {"decision": "approved", "fix_revision": ref("P2", 3)})
    assert other.status_code == 400 and "is not the candidate's artifact experience:P1" in detail(other)
    for revision in (1, 2):
        lower = review.post(OPEN, {"decision": "approved", "fix_revision": ref("P1", revision)})
        assert lower.status_code == 400 and f"fix_revision r{revision} is not a revision above the candidate's r2" in detail(lower)
    with_fix = review.post(OPEN, {"decision": "rejected", "reason": "no", "fix_revision": ref("P1", 3)})
    assert with_fix.status_code == 400 and "names no fix_revision" in detail(with_fix)
    # contract §24: a reason code only with a rejection, and one of the six
    coded = review.post(OPEN, {"decision": "approved", "reason_code": "duplicate"})
    assert coded.status_code == 400 and "reason_code is only given with a rejection" in detail(coded)
    assert review.post(OPEN, {"decision": "rejected", "reason": "no", "reason_code": "Duplicate"}).status_code == 400
    big = httpx.post(f"{review.base_url}/review-candidates/{OPEN['candidate_id']}/decision", content=b" " * (200 * 1024),
                     headers={"Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"}, timeout=30)
    assert big.status_code == 413
    # JSON read as contract §9 reads it: an ambiguous decision (a repeated key) is refused, not read one way.
    for raw, said in ((b'{"decision": "approved", "decision": "rejected", "reason": "x"}', "object repeats the key 'decision'"),
                      (b'{"decision": "rejected", "reason": "\xff"}', "not UTF-8"), (b"[" * 50_000, "JSON nested too deeply"),
                      (b'{"decision": "rejected", "reason": "x", "reason_code": 1' + b"0" * 5_000 + b"}", "outside the signed 64-bit range")):
        refused = httpx.post(f"{review.base_url}/review-candidates/{OPEN['candidate_id']}/decision", content=raw,
                             headers={"Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"}, timeout=30)
        assert refused.status_code == 400 and said in str(refused.json()["detail"]), (raw[:60], refused.text[:300])
    # Nothing was published, nothing written.
    assert review.published(bootstrap) == []
    assert review.snapshot() == before


def test_accepted_decisions_are_published_as_their_reviewer_s(review, bootstrap):
    before = review.snapshot()
    approved = review.post(OPEN, {"decision": "approved", "reason": "the new lesson names the lock", "fix_revision": ref("P1", 3)})
    assert approved.status_code == 202, approved.text
    body = approved.json()
    decision = body["decision"]
    assert decision == {
        "scope_id": "s1", "decision_id": body["decision_id"], "candidate_id": OPEN["candidate_id"], "journal_position": 41,
        "decision": "approved", "reason": "the new lesson names the lock", "reviewer": "alice", "decided_at": decision["decided_at"],
        "fix_revision": ref("P1", 3), "reason_code": None,
    }
    assert body["decision_id"] == digest({"candidate_id": OPEN["candidate_id"], "reviewer": "alice", "decided_at": decision["decided_at"]})
    assert body["status_url"] == f"/review-candidates/{OPEN['candidate_id']}"
    assert body["topic"] == f"{review.prefix}review-decisions"

    rejected = review.post(SECOND, {"decision": "rejected", "reason": "a flaky network, not a lesson", "reason_code": "not_reproducible"}, token=BOB)
    assert rejected.status_code == 202, rejected.text
    assert (rejected.json()["decision"]["reviewer"], rejected.json()["decision"]["fix_revision"], rejected.json()["decision"]["reason_code"]) == (
        "bob@example.com", None, "not_reproducible")

    # On Kafka: the two decisions, keyed by their scope, nothing else.
    assert review.published(bootstrap) == [(b"s1", decision), (b"s1", rejected.json()["decision"])]
    raw = read_raw(bootstrap, f"{review.prefix}review-decisions")
    assert sorted(record.offset for record in raw) == sorted([body["offset"], rejected.json()["offset"]])
    assert {record.partition for record in raw} == {body["partition"]}  # one scope, one partition
    # The view is the worker's to change: the candidate is still open there, and the API wrote nothing.
    assert review.snapshot() == before
    shown = httpx.get(f"{review.base_url}/review-candidates/{OPEN['candidate_id']}", headers={"Authorization": f"Bearer {READ_TOKEN}"}).json()
    assert (shown["status"], shown["decision"], shown["as_of_position"]) == ("open", None, 41)


def test_the_read_side_needs_the_read_token_and_no_reviewer_tokens_means_no_decisions(review, redis_url):
    base = review.base_url
    assert httpx.get(f"{base}/review-candidates/{OPEN['candidate_id']}").status_code == 401
    assert httpx.get(f"{base}/review-candidates/{OPEN['candidate_id']}", headers={"Authorization": f"Bearer {ALICE}"}).status_code == 401
    queue = httpx.get(f"{base}/review-queue", params={"status": "decided"}, headers={"Authorization": f"Bearer {READ_TOKEN}"}).json()
    assert [(item["candidate_id"], item["status"], item["decision"]["reviewer"], item["repair"]["status"]) for item in queue["candidates"]] == [
        (DECIDED["candidate_id"], "approved", "carol", "held")]
    assert queue["counts"] == {"open": 2, "superseded": 0, "approved": 1, "rejected": 0}
    with running_api(ApiSettings(redis_url=redis_url, topic_prefix=review.prefix)) as readonly:
        refused = httpx.post(f"{readonly}/review-candidates/{OPEN['candidate_id']}/decision", json={"decision": "approved"},
                             headers={"Authorization": f"Bearer {ALICE}"})
        assert refused.status_code == 403 and "takes no review decisions" in refused.json()["detail"]
