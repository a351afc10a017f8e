"""``recurrence-ledger topics acls``: the exact bindings of each role,
printed as kafka-acls command lines (no broker; the secured-broker tests in
tests/e2e/secure apply them and run the worker under them)."""

from __future__ import annotations

import pytest

from recurrence_ledger.kafka.acls import role_acls
from tests.plugins.processes import run_cli  # no Kafka settings from the environment: the printed commands name BOOTSTRAP

ADD = "kafka-acls --bootstrap-server BOOTSTRAP --command-config admin.properties --add --allow-principal User:ledger"
WORKER = [
    *(f"{ADD} --operation Read --topic p.{name}" for name in (
        "source-journal", "experience-revisions", "handoff-revisions", "handoff-receipts", "task-outcomes", "experience-candidates",
        "review-decisions")),
    *(f"{ADD} --operation Write --topic p.{name}" for name in (
        "recurrence-matches", "recurrence-observations", "holdout-observations", "review-candidates", "recurrence-statistics",
        "revision-statistics", "review-status", "admission-decisions", "candidate-sets", "signature-patterns", "pattern-candidates", "dead-letter")),
    # contract §23.5: the repartition topic between the scope stage and the pattern stage
    f"{ADD} --operation Read --topic p.pattern-contributions-repartition",
    f"{ADD} --operation Write --topic p.pattern-contributions-repartition",
    *(f"{ADD} --operation {operation} --topic p.app-{stage}-state-changelog"
      for stage in ("ledger", "pattern") for operation in ("Read", "Write", "Create")),
    f"{ADD} --operation Read --group p.app",
    f"{ADD} --operation Describe --group p.app-restore",
    f"{ADD} --operation Write --transactional-id p.app- --resource-pattern-type prefixed",
    f"{ADD} --operation Describe --transactional-id p.app- --resource-pattern-type prefixed",
]


def test_worker_acls_are_printed_exactly():
    result = run_cli("topics", "acls", "--principal", "User:ledger", "--topic-prefix", "p.", "--app-id", "app")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == WORKER


def test_create_topics_adds_create_on_every_catalogue_topic():
    acls = role_acls("worker", "User:w", "p.", "app", create_topics=True)
    created = sorted(acl.name for acl in acls if acl.operation == "CREATE")
    assert len(created) == 22 and "p.source-journal" in created and "p.pattern-contributions-repartition" in created
    assert "p.app-ledger-state-changelog" in created and "p.app-pattern-state-changelog" in created


def test_other_roles():
    upstream = role_acls("upstream", "User:u", "p.")
    assert {(acl.operation, acl.resource_type) for acl in upstream} == {("WRITE", "TOPIC")}
    # Every input topic but review-decisions: human decisions are the reviewer's (contract §18).
    assert [acl.name for acl in upstream] == [f"p.{name}" for name in (
        "source-journal", "experience-revisions", "handoff-revisions", "handoff-receipts", "task-outcomes", "experience-candidates")]
    reader = role_acls("reader", "User:r", "p.")
    assert {acl.operation for acl in reader if acl.resource_type == "TOPIC"} == {"READ"}
    assert [acl.name for acl in reader if acl.resource_type == "GROUP"] == ["recurrence-ledger-export", "p.recurrence-ledger-view"]
    assert {acl.operation for acl in reader if acl.resource_type == "GROUP"} == {"DESCRIBE"}  # the view followers' members, nothing more
    replay = role_acls("replay", "User:r", "p.", "app")
    assert sorted(acl.name for acl in replay if acl.resource_type == "GROUP") == ["p.app", "p.app-replay", "recurrence-ledger-export"]
    assert {acl.operation for acl in replay if acl.resource_type == "GROUP"} == {"DESCRIBE"}
    assert not any(acl.operation == "WRITE" and acl.name.endswith(("source-journal", "task-outcomes")) for acl in replay)


@pytest.mark.parametrize(("role", "principal"), [("admin", "User:x"), ("worker", "ledger")])
def test_bad_role_or_principal_is_a_usage_error(role, principal):
    result = run_cli("topics", "acls", "--principal", principal, "--role", role)
    assert result.returncode == 2


FOLLOWER = [
    *(f"{ADD} --operation Read --topic p.{name}" for name in (
        "recurrence-statistics", "revision-statistics", "review-status", "signature-patterns", "recurrence-observations", "review-candidates")),
    f"{ADD} --operation Read --group p.app-view",
]


def test_follower_acls_are_printed_exactly():
    result = run_cli("topics", "acls", "--principal", "User:ledger", "--role", "follower", "--topic-prefix", "p.", "--app-id", "app")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == FOLLOWER


def test_follower_reads_exactly_what_a_view_follower_subscribes_to_in_its_group():
    from recurrence_ledger.read.follower import FollowerConfig, ViewFollower

    acls = role_acls("follower", "User:f", "p.", "app")
    assert {(acl.operation, acl.pattern, acl.principal) for acl in acls} == {("READ", "LITERAL", "User:f")}
    # A follower of the same deployment (nothing is contacted before run()).
    follower = ViewFollower(FollowerConfig(bootstrap="127.0.0.1:1", redis_url="redis://127.0.0.1:1/0", app_id="app", topic_prefix="p."))
    try:
        assert sorted(acl.name for acl in acls if acl.resource_type == "TOPIC") == sorted(follower.topics) == [
            "p.recurrence-observations", "p.recurrence-statistics", "p.review-candidates", "p.review-status", "p.revision-statistics",
            "p.signature-patterns"]
        assert [acl.name for acl in acls if acl.resource_type == "GROUP"] == [follower.config.group_id] == ["p.app-view"]
    finally:
        follower.consumer.close()


REVIEWER = [
    f"{ADD} --operation Write --topic p.review-decisions",
    *(f"{ADD} --operation Read --topic p.{name}" for name in ("review-candidates", "review-status", "recurrence-statistics")),
    f"{ADD} --operation Describe --group recurrence-ledger-export",
]


def test_reviewer_acls_are_printed_exactly_and_write_review_decisions_only():
    result = run_cli("topics", "acls", "--principal", "User:ledger", "--role", "reviewer", "--topic-prefix", "p.", "--app-id", "app")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == REVIEWER
    writes = [(acl.resource_type, acl.name) for acl in role_acls("reviewer", "User:r", "p.") if acl.operation != "READ" and acl.resource_type != "GROUP"]
    assert writes == [("TOPIC", "p.review-decisions")]
    # The worker reads the decisions (an input topic) and publishes the review status.
    worker = role_acls("worker", "User:w", "p.", "app")
    assert ("READ", "p.review-decisions") in {(acl.operation, acl.name) for acl in worker}
    assert ("WRITE", "p.review-status") in {(acl.operation, acl.name) for acl in worker}
