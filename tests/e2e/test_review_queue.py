"""The review queue's read models in a real Redis (processors/recurrence_ledger/read/history.py,
lua/apply_candidates.lua, lua/apply_review_status.lua): ReviewCandidates and
ReviewStatus rows (contract §18) applied by hand in either order file every
candidate under its status, once per record; the filters, counts, gauges,
time to decision and repair counts are the ones worked out below; ``clear``
removes every key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recurrence_ledger.catalogue import REVIEW_CANDIDATES, REVIEW_STATUS
from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.read.records import Decision
from recurrence_ledger.read.keys import default_namespace
from tests.e2e import harness
from tests.plugins.services import read_client
from tests.e2e.review_fixtures import applied, candidate, located_candidate, located_status, ref, repair, status

# Four candidates: two in scope "s1", two in "s2"; Kafka timestamps 1,000 … 4,000 ms.
C1, C2 = candidate("s1", "P1"), candidate("s1", "P2")
C3, C4 = candidate("s2", "Q1"), candidate("s2", "Q2", streak=4)
ID = {name: value["candidate_id"] for name, value in (("C1", C1), ("C2", C2), ("C3", C3), ("C4", C4))}


@pytest.fixture
def models(read_redis_url) -> Iterator[ReadModels]:
    """The read models of a fresh namespace, on a single Redis and on Redis Cluster."""
    client = read_client(read_redis_url)
    read_models = ReadModels(client, default_namespace(harness.new_prefix()))
    try:
        yield read_models
    finally:
        read_models.clear()
        client.close()


def ids(models: ReadModels, review_filter: str, scope: str | None = None) -> list[str]:
    return [item["candidate"]["candidate_id"] for item in models.review_queue(scope, None, 0, 50, review_filter).items]


def names(*candidates: str) -> list[str]:
    return [ID[name] for name in candidates]


def test_candidates_are_filed_by_their_status_in_either_order_once(models):
    counts = models.apply([located_candidate(C1, 0, 0, 1000), located_candidate(C2, 0, 1, 2000), located_candidate(C3, 1, 0, 3000)])
    assert (counts.candidates, counts.decisions) == (3, [])
    # No status yet: every candidate is open, oldest first.
    assert ids(models, "open") == names("C1", "C2", "C3") and ids(models, "all") == names("C1", "C2", "C3")
    assert models.review_queue(None, None, 0, 50, "open").counts == {"open": 3, "superseded": 0, "approved": 0, "rejected": 0}

    decided_c2 = applied("approved", "alice", "1970-01-01T00:00:05.500Z", 7)
    rejected_c4 = applied("rejected", "bob", "1970-01-01T01:00:00Z", 9, reason="not a lesson")
    rows = [
        located_status(status(C1, "superseded", fix=ref("P1", 2), repair=repair("pending")), 0, 0),
        located_status(status(C2, "approved", decision=decided_c2, fix=ref("P2", 2), repair=repair("pending")), 0, 1),
        # C4's status comes before C4 itself: it waits for its candidate.
        located_status(status(C4, "rejected", decision=rejected_c4), 1, 0),
    ]
    counts = models.apply(rows)
    # Time to decision of C2 only (C4 not applied yet): from its record's 2,000 ms to 5.5 s.
    assert (counts.review_statuses, counts.decisions) == (3, [Decision(REVIEW_STATUS, 0, 1, 2000, "1970-01-01T00:00:05.500Z")])
    counts = models.apply([located_candidate(C4, 1, 1, 4000)])
    assert (counts.candidates, counts.decisions) == (1, [Decision(REVIEW_CANDIDATES, 1, 1, 4000, "1970-01-01T01:00:00Z")])

    # A later row of C2: the repair held; C2 was decided already, nothing measured again.
    counts = models.apply([located_status(status(C2, "approved", decision=decided_c2, fix=ref("P2", 2), repair=repair("held", 2, 0, 2)), 0, 2)])
    assert (counts.review_statuses, counts.decisions) == (1, [])

    assert ids(models, "open") == names("C3")
    assert ids(models, "superseded") == names("C1")
    assert ids(models, "approved") == names("C2") and ids(models, "rejected") == names("C4")
    assert ids(models, "decided") == names("C2", "C4")
    assert ids(models, "all") == names("C1", "C2", "C3", "C4")
    assert ids(models, "decided", "s1") == names("C2") and ids(models, "all", "s2") == names("C3", "C4")
    page = models.review_queue("s1", None, 0, 50, "all")
    assert (page.total, page.available, page.counts) == (4, 2, {"open": 0, "superseded": 1, "approved": 1, "rejected": 0})
    assert [item["status"]["status"] for item in page.items] == ["superseded", "approved"]
    assert page.items[1]["status"]["repair"] == repair("held", 2, 0, 2) and page.items[1]["timestamp"] == 2000
    assert models.review_queue(None, "working_state", 0, 50, "all").available == 0
    assert [i["candidate"]["candidate_id"] for i in models.review_queue(None, "experience_content", 1, 2, "all").items] == names("C2", "C3")

    gauges = models.review_gauges()
    assert gauges.statuses == {"open": 1, "superseded": 1, "approved": 1, "rejected": 1}
    assert gauges.oldest_open_ms == 3000
    assert gauges.repairs == {"pending": 1, "held": 1, "recurring": 0, "failed": 0}

    # Everything once more (at-least-once delivery): nothing is applied twice.
    again = models.apply([located_candidate(C1, 0, 0, 1000), located_candidate(C4, 1, 1, 4000), *rows])
    assert (again.candidates, again.review_statuses, again.decisions) == (0, 0, [])
    assert models.review_gauges() == gauges and ids(models, "all") == names("C1", "C2", "C3", "C4")


def test_one_candidate_with_its_status_and_its_scope_position(models):
    models.apply([located_candidate(C1, 0, 0, 1000)])
    entry = models.review_candidate(ID["C1"])
    assert (entry.item["candidate"], entry.item["timestamp"], entry.status, entry.as_of_position) == (C1, 1000, None, None)
    models.apply([located_status(status(C1, "rejected", decision=applied("rejected", "bob", "1970-01-01T00:00:02Z", 3, reason="no")), 0, 0)])
    later = models.review_candidate(ID["C1"])
    assert later.status["status"] == "rejected" and later.etag != entry.etag
    assert models.review_candidate("sha256:" + "0" * 64) is None
    assert models.review_gauges().oldest_open_ms is None


def test_clear_removes_every_review_key(models):
    models.apply([located_candidate(C1, 0, 0, 1000), located_status(status(C1, "superseded", fix=ref("P1", 2), repair=repair("recurring", 1, 1)), 0, 0)])
    namespace = models.keys.namespace
    stored = sorted(key.decode() for key in models.client.scan_iter(match=f"{namespace}:*"))
    keys = models.keys
    assert keys.review_status in stored and keys.review_repairs in stored and keys.review_state("s1") in stored
    assert f"{namespace}:scope:{{s1}}:review-queue:superseded" in stored and f"{namespace}:{{{namespace}}}:review-queue:all" in stored
    assert all(models.keys.read_model_kind(key) is not None for key in stored)
    assert models.clear() == len(stored)
    assert list(models.client.scan_iter(match=f"{namespace}:*")) == []


def test_the_follower_s_review_metrics(models):
    from recurrence_ledger.read.follower import FollowerMetrics, rfc3339_seconds

    metrics = FollowerMetrics(models.keys.namespace)
    ns = models.keys.namespace
    sample = metrics.registry.get_sample_value
    assert sample("recurrence_ledger_reviews", {"namespace": ns, "status": "open"}) == 0
    counts = models.apply([located_candidate(C1, 0, 0, 1000), located_candidate(C2, 0, 1, 2000),
                           located_status(status(C2, "approved", decision=applied("approved", "alice", "1970-01-01T00:01:02.5Z", 4),
                                                 fix=ref("P2", 2), repair=repair("failed", 3, 3, 0, 0, 3)), 0, 0)])
    metrics.show_reviews(models)
    metrics.decided(counts)
    assert [sample("recurrence_ledger_reviews", {"namespace": ns, "status": state}) for state in ("open", "superseded", "approved", "rejected")] == [1, 0, 1, 0]
    assert sample("recurrence_ledger_review_oldest_open_timestamp_seconds", {"namespace": ns}) == 1.0
    assert sample("recurrence_ledger_review_repairs", {"namespace": ns, "status": "failed"}) == 1
    # C2: published at 2 s, decided at 62.5 s: 60.5 s, in the first bucket (≤ 1 h).
    assert sample("recurrence_ledger_review_decision_seconds_sum", {"namespace": ns}) == 60.5
    assert sample("recurrence_ledger_review_decision_seconds_bucket", {"namespace": ns, "le": "3600.0"}) == 1
    assert rfc3339_seconds("1970-01-02T00:00:00.123456789Z") == 86400.123456789
    assert rfc3339_seconds("1970-01-02t00:00:01+00:00") == rfc3339_seconds("1970-01-02T00:00:01z") == 86401.0
    for bad in ("1970-01-02T00:00:00+01:00", "1970-01-02 00:00:00Z", "yesterday"):
        with pytest.raises(ValueError):
            rfc3339_seconds(bad)
    # A decided_at that does not parse is left out, never an error of the follower.
    counts.decisions.append(Decision(REVIEW_STATUS, 0, 1, 1000, "not a time"))
    metrics.decided(counts)
    assert sample("recurrence_ledger_review_decision_seconds_count", {"namespace": ns}) == 2
    # Decisions filed again by records below where their partition was read again from are not observed again.
    assert [decision[:3] for decision in counts.decisions] == [(REVIEW_STATUS, 0, 0), (REVIEW_STATUS, 0, 1)]
    metrics.decided(counts, {(REVIEW_STATUS, 0): 1})
    assert sample("recurrence_ledger_review_decision_seconds_count", {"namespace": ns}) == 2
    metrics.decided(counts, {(REVIEW_STATUS, 0): 0, (REVIEW_STATUS, 1): 5})
    assert sample("recurrence_ledger_review_decision_seconds_count", {"namespace": ns}) == 3



def test_a_severity_change_changes_the_queue_s_and_the_candidate_s_etag(models, read_redis_url):
    """Contract §22: an item's severity is its revision's, read from the
    revision's row in the view; a row whose severity changes (unrated, then
    high, then critical) changes what the queue and the candidate show, so
    their ETags change — a dashboard polling with If-None-Match sees it."""
    from recurrence_ledger.ledger.records import RevisionStatistics
    from recurrence_ledger.read.projection import RedisView

    def row(severity: str | None) -> dict:
        return RevisionStatistics.model_validate({
            "scope_id": "s1", "artifact_ref": C1["artifact_ref"], "signature_key": C1["signature_key"], "terminal_recurred_streak": 3,
            "selected": 3, "recurred": 3, "avoided": 0, "unknown": 0, "ambiguous": 0, "severity": severity,
        }).model_dump(mode="json", by_alias=True)

    models.apply([located_candidate(C1, 0, 0, 1000)])
    view = RedisView(read_redis_url, namespace=models.keys.namespace)
    tags = []
    try:
        for severity in (None, "high", "critical", "critical"):
            view.submit([], revisions=[row(severity)])
            assert not view.pending_revisions
            queue, entry = models.review_queue(None, None, 0, 50, "open"), models.review_candidate(ID["C1"])
            assert queue.items[0]["severity"] == entry.item["severity"] == severity
            tags.append((queue.etag, entry.etag))
    finally:
        view.close()
    assert len({queue for queue, _ in tags[:3]}) == 3 and len({entry for _, entry in tags[:3]}) == 3
    assert tags[3] == tags[2]  # the same severity again: the same tags
