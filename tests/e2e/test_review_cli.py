"""``recurrence-ledger review list|show|approve|reject`` against the test
broker (processors/recurrence_ledger/cli/review.py, contract §18): the
review topics hold candidates, statuses and statistics records written by
hand (tests/e2e/review_fixtures.py); ``list`` and ``show`` read them back,
``approve`` and ``reject`` publish one ReviewDecision each at the scope's
as_of_position, and every refusal publishes nothing."""

from __future__ import annotations

import json

import pytest

from recurrence_ledger.catalogue import REVIEW_CANDIDATES, REVIEW_DECISIONS, REVIEW_STATUS, STATISTICS
from recurrence_ledger.ledger.normalize import canonical_json, digest
from recurrence_ledger.kafka.kafka_io import publish_raw, read_topic
from recurrence_ledger.serde.codec import encode
from tests.e2e import harness
from tests.e2e.review_fixtures import applied, candidate, ref, repair, statistics, status
from tests.plugins.processes import run_cli

OPEN, SUPERSEDED, DECIDED = candidate("s1", "P1"), candidate("s1", "P2"), candidate("s2", "Q1", streak=4, run_start=5)
DONE = applied("rejected", "carol", "2025-03-01T10:00:00.250Z", 7, reason="a flaky mirror", decision_id="sha256:" + "e" * 64)


@pytest.fixture(scope="module")
def prefix(bootstrap):
    prefix = harness.new_prefix()
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        for value in (OPEN, SUPERSEDED, DECIDED):
            publish_raw(bootstrap, prefix + REVIEW_CANDIDATES, value["scope_id"].encode(), encode("ReviewCandidate", value))
        rows = [status(SUPERSEDED, "superseded", fix=ref("P2", 2), repair=repair("recurring", 2, 1, 0, 1, 1)), status(DECIDED, "rejected", decision=DONE, reason_code="weak_evidence")]
        for value in rows:
            key = canonical_json({"candidate_id": value["candidate_id"], "scope_id": value["scope_id"]})
            publish_raw(bootstrap, prefix + REVIEW_STATUS, key, encode("ReviewStatus", value))
        for value in (statistics("s1", 12), statistics("s1", 41), statistics("s2", 7)):
            publish_raw(bootstrap, prefix + STATISTICS, value["scope_id"].encode(), encode("ScopeStatistics", value))
        yield prefix
    finally:
        harness.remove_prefix(bootstrap, prefix)


def review(bootstrap: str, prefix: str, *args: str):
    return run_cli("review", *args, "--bootstrap", bootstrap, "--topic-prefix", prefix, columns=200)


def decisions(bootstrap: str, prefix: str) -> list[dict]:
    return [value for _, _, _, value in read_topic(bootstrap, REVIEW_DECISIONS, topic_prefix=prefix)]


def test_list_and_show_read_the_topics(bootstrap, prefix):
    listed = review(bootstrap, prefix, "list", "--status", "all", "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["candidate_id"], r["status"]) for r in rows] == [
        (OPEN["candidate_id"], "open"), (SUPERSEDED["candidate_id"], "superseded"), (DECIDED["candidate_id"], "rejected")]
    assert rows[1]["fix_revision"] == ref("P2", 2) and rows[1]["repair"]["status"] == "recurring" and rows[2]["decision"] == DONE
    assert [r["candidate_id"] for r in json.loads(review(bootstrap, prefix, "list", "--json").stdout)] == [OPEN["candidate_id"]]
    assert [r["candidate_id"] for r in json.loads(review(bootstrap, prefix, "list", "--status", "decided", "--scope", "s2", "--json").stdout)] == [
        DECIDED["candidate_id"]]
    table = review(bootstrap, prefix, "list", "--status", "all").stdout
    assert OPEN["candidate_id"][7:19] in table and "recurring" in table and "carol" in table
    assert review(bootstrap, prefix, "list", "--status", "pending").returncode == 2

    hex_start = DECIDED["candidate_id"][7:15]
    shown = review(bootstrap, prefix, "show", hex_start)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"{DECIDED['candidate_id']} (rejected)" in shown.stdout
    assert "streak 4 from journal position 5: 4 recurred verdicts in a row" in shown.stdout
    assert "failures: Q1-o1 check[0], Q1-o2 check[0], Q1-o3 check[0], Q1-o4 check[0]" in shown.stdout
    assert "rejected by carol at 2025-03-01T10:00:00.250Z (position 7): a flaky mirror (reason code weak_evidence)" in shown.stdout
    shown_json = json.loads(review(bootstrap, prefix, "show", DECIDED["candidate_id"], "--json").stdout)
    assert (shown_json["decision"], shown_json["reason_code"]) == (DONE, "weak_evidence")
    assert rows[2]["reason_code"] == "weak_evidence" and rows[1]["reason_code"] is None


def test_refusals_publish_nothing(bootstrap, prefix):
    unknown = review(bootstrap, prefix, "approve", "0" * 12, "--reviewer", "alice")
    assert unknown.returncode == 1 and "no review candidate on the topics has an id beginning '000000000000'" in unknown.stdout
    second = review(bootstrap, prefix, "approve", DECIDED["candidate_id"], "--reviewer", "alice")
    assert second.returncode == 1 and "already decided: rejected by carol" in second.stdout and "already_decided" in second.stdout
    assert review(bootstrap, prefix, "reject", OPEN["candidate_id"], "--reviewer", "alice").returncode == 2  # --reason is required
    blank = review(bootstrap, prefix, "reject", OPEN["candidate_id"], "--reviewer", "alice", "--reason", " \u200b ")
    assert blank.returncode == 2 and "not blank" in blank.stdout + blank.stderr
    other = review(bootstrap, prefix, "approve", OPEN["candidate_id"], "--reviewer", "alice", "--fix-revision", "P9:2")
    assert other.returncode == 2 and "is not the candidate's artifact" in other.stdout + other.stderr
    for bad in ("P1", "P1:x", "P1:0", ":2"):
        assert review(bootstrap, prefix, "approve", OPEN["candidate_id"], "--reviewer", "alice", "--fix-revision", bad).returncode == 2, bad
    # contract §24: a reason code is one of the six
    unknown_code = review(bootstrap, prefix, "reject", OPEN["candidate_id"], "--reviewer", "alice", "--reason", "no", "--reason-code", "Broad_Scope")
    assert unknown_code.returncode == 2 and "--reason-code" in unknown_code.stdout + unknown_code.stderr
    forged = review(bootstrap, prefix, "approve", OPEN["candidate_id"], "--reviewer", "")
    assert forged.returncode == 2 and "reviewer" in forged.stdout + forged.stderr
    assert decisions(bootstrap, prefix) == []


def test_approve_and_reject_publish_one_decision_each(bootstrap, prefix):
    approved = review(bootstrap, prefix, "approve", OPEN["candidate_id"][7:20], "--reviewer", "alice", "--fix-revision", "P1:2",
                      "--reason", "the lesson now names the lock")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    rejected = review(bootstrap, prefix, "reject", SUPERSEDED["candidate_id"], "--reviewer", "bob", "--reason", "not a lesson",
                      "--reason-code", "broad_scope")
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    first, second = decisions(bootstrap, prefix)
    # Position 41: the scope's last statistics record, not its first (12).
    assert first == {
        "scope_id": "s1", "decision_id": digest({"candidate_id": OPEN["candidate_id"], "reviewer": "alice", "decided_at": first["decided_at"]}),
        "candidate_id": OPEN["candidate_id"], "journal_position": 41, "decision": "approved", "reason": "the lesson now names the lock",
        "reviewer": "alice", "decided_at": first["decided_at"], "fix_revision": ref("P1", 2), "reason_code": None,
    }
    assert (second["candidate_id"], second["decision"], second["reason"], second["reviewer"], second["fix_revision"], second["reason_code"]) == (
        SUPERSEDED["candidate_id"], "rejected", "not a lesson", "bob", None, "broad_scope")
    assert f"decision {first['decision_id']} published to {prefix}review-decisions[" in approved.stdout
