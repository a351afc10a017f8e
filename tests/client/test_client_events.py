"""The client library's constructors (recurrence_ledger.client): each of
the six input kinds is built on the core's own model and comes out as the
core reads it; an event the worker would dead-letter is refused before
anything is sent, naming the contract rule and the same reason code the
worker gives (recurrence_ledger.ledger.intake)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recurrence_ledger import client
from recurrence_ledger.catalogue import INPUT_TOPICS, SOURCE_JOURNAL
from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.ledger.intake import BadRecord, validate
from recurrence_ledger.ledger.models import SOURCE_KINDS

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_JOURNAL = REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"
EXAMPLE_SCRIPT = REPO / "docs" / "examples" / "platform_outbox.py"

CONSTRUCTORS = {
    "task-outcomes": client.task_outcome,
    "handoff-receipts": client.handoff_receipt,
    "handoff-revisions": client.handoff_revision,
    "experience-revisions": client.experience_revision,
    "experience-candidates": client.experience_candidate,
    "review-decisions": client.review_decision,
}


def first_of_each_kind() -> dict[str, dict]:
    found: dict[str, dict] = {}
    for line in EXAMPLE_JOURNAL.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        found.setdefault(record["topic"], record["value"])
    return found


def test_there_is_one_constructor_per_input_kind():
    assert set(CONSTRUCTORS) == set(SOURCE_KINDS) == set(INPUT_TOPICS) - {SOURCE_JOURNAL}


@pytest.mark.parametrize("kind", sorted(CONSTRUCTORS))
def test_each_constructor_returns_the_core_model_as_the_core_reads_it(kind):
    value = first_of_each_kind()[kind]
    built = CONSTRUCTORS[kind](**value)
    assert type(built) is SOURCE_KINDS[kind]
    assert client.kind_of(built) == kind
    assert built.model_dump(mode="json") == validate(kind, value)
    assert client.event(kind, value) == built


def test_nested_values_may_be_the_core_value_types():
    value = first_of_each_kind()["handoff-receipts"]
    ref = client.ArtifactRef(family="handoff", artifact_id="HO-billing-1", revision=1)
    built = client.handoff_receipt(**{**value, "selected_revision": ref, "source_ref": client.SourceRef(**value["source_ref"])})
    assert built.selected_revision == ref
    assert built.model_dump(mode="json") == validate("handoff-receipts", value)


# (kind, change to the valid event, reason, rule, field named in the detail)
REFUSALS = [
    ("task-outcomes", lambda v: v.pop("scope_id"), "missing_field", "§3", "TaskOutcome.scope_id"),
    ("task-outcomes", lambda v: v.update(agent_note="x"), "unexpected_field", "§3", "TaskOutcome.agent_note"),
    ("task-outcomes", lambda v: v.update(journal_position="4"), "wrong_type", "§3", "TaskOutcome.journal_position"),
    ("task-outcomes", lambda v: v.update(status="exploded"), "invalid_value", "§3", "TaskOutcome.status"),
    ("task-outcomes", lambda v: v.update(journal_position=-1), "invalid_value", "§3", "TaskOutcome.journal_position"),
    # a lone surrogate (a JSON \udc80 escape) has no UTF-8 form, in free text as in an id
    ("task-outcomes", lambda v: v["observations"][0].update(text="bad \udc80 text"), "invalid_value", "§3", "TaskOutcome.observations.0.text"),
    ("task-outcomes", lambda v: v["checks"][0].update(name="port \ud800 bound"), "invalid_value", "§3", "TaskOutcome.checks.0.name"),
    ("handoff-receipts", lambda v: v.update(scope_id="x" * 513), "too_long", "§3", "HandoffReceipt.scope_id"),
    ("handoff-receipts", lambda v: v["source_ref"].update(source_type="task_outcome"), "invalid_value", "§3", "HandoffReceipt.source_ref"),
    ("handoff-revisions", lambda v: v.update(artifact_citations=v["artifact_citations"] * 65), "too_long", "§3",
     "HandoffRevision.artifact_citations"),
    ("experience-revisions", lambda v: v["content"]["failure"]["signature"].update(recall_cue="  "), "invalid_value", "§3",
     "ExperienceRevision.content.failure.signature.recall_cue"),
    ("experience-candidates", lambda v: v.pop("candidate_id"), "missing_field", "§12", "ExperienceCandidate.candidate_id"),
    ("review-decisions", lambda v: v.update(decided_at="yesterday"), "invalid_value", "§18", "ReviewDecision.decided_at"),
    ("review-decisions", lambda v: v.update(decision="maybe"), "invalid_value", "§18", "ReviewDecision.decision"),
]


@pytest.mark.parametrize(("kind", "change", "reason", "rule", "field"), REFUSALS,
                         ids=[f"{kind}-{reason}-{field.split('.', 1)[1]}" for kind, _, reason, _, field in REFUSALS])
def test_an_invalid_event_is_refused_naming_the_rule_and_the_workers_reason(kind, change, reason, rule, field):
    value = json.loads(json.dumps(first_of_each_kind()[kind]))
    change(value)
    with pytest.raises(client.EventRefused) as refused:
        CONSTRUCTORS[kind](**value)
    error = refused.value
    assert isinstance(error, RecurrenceLedgerError) and isinstance(error, ValueError)
    assert (error.kind, error.rule, error.reason) == (kind, rule, reason)
    assert error.detail.startswith(field + ":"), error.detail
    assert f"contract {rule}" in str(error) and f"dead-letter reason {reason}" in str(error)
    with pytest.raises(BadRecord) as worker:  # the worker dead-letters it with the same reason and message
        validate(kind, value)
    assert (worker.value.reason, worker.value.message) == (reason, error.detail)


def test_an_unknown_kind_is_refused_under_the_topic_list():
    with pytest.raises(client.EventRefused) as refused:
        client.event("lessons", {"scope_id": "s"})
    assert (refused.value.rule, refused.value.reason) == ("§1", "unknown_topic")


def test_kind_of_refuses_what_is_not_an_input_event():
    with pytest.raises(TypeError, match="not an input event"):
        client.kind_of(client.ArtifactRef(family="handoff", artifact_id="h", revision=1))


def test_importing_the_client_connects_to_nothing():
    """A fresh interpreter imports the library with no broker address at
    all, and no librdkafka client exists until a Publisher is opened."""
    code = ("import gc, confluent_kafka, recurrence_ledger.client as c;"
            "p = c.Publisher('127.0.0.1:1');"
            "print(sum(isinstance(o, confluent_kafka.Producer) for o in gc.get_objects()))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_publish_before_open_is_refused():
    publisher = client.Publisher("127.0.0.1:1")
    with pytest.raises(RuntimeError, match="not open"):
        publisher.publish(client.task_outcome(**first_of_each_kind()["task-outcomes"]))


def test_the_publisher_targets_source_journal_or_the_per_kind_topics_under_the_prefix():
    assert client.Publisher("127.0.0.1:1", topic_prefix="dev.").topics == ("dev.source-journal",)
    assert set(client.Publisher("127.0.0.1:1", per_kind=True).topics) == set(SOURCE_KINDS)
    assert client.Publisher("127.0.0.1:1").registry is None  # fixed ids without a registry
    assert client.Publisher("127.0.0.1:1", schema_registry_url="http://r:8081").registry.url == "http://r:8081"


def test_the_example_script_builds_every_event_without_kafka(tmp_path):
    journal = tmp_path / "events.jsonl"
    result = subprocess.run([sys.executable, str(EXAMPLE_SCRIPT), "--dry-run", "--journal-out", str(journal),
                             "--candidate-id", "sha256:" + "a" * 64], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert journal.read_text(encoding="utf-8") == result.stdout
    assert {record["topic"] for record in records} == set(SOURCE_KINDS)
    assert [record["value"]["journal_position"] for record in records] == list(range(1, len(records) + 1))
    for record in records:
        assert validate(record["topic"], record["value"]) == record["value"]
