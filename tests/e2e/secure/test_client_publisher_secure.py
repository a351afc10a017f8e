"""The client library's Publisher on the secured broker (SASL_SSL,
SCRAM-SHA-512, ACLs enforced): configured with upstream's
``client.properties`` exactly like ``recurrence-ledger publish``, it
delivers every event kind with only the ACLs the product prints for the
upstream role; a wrong password in the ``KAFKA_*`` overrides is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recurrence_ledger import client
from recurrence_ledger.kafka.client_config import KafkaConnectionError
from tests.plugins.processes import run_cli

REPO = Path(__file__).resolve().parents[3]
JOURNAL = REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"


def ok(result):
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_upstream_publishes_every_event_kind_through_client_properties(secure, secure_prefix):
    admin = secure.files["admin"]
    ok(run_cli("topics", "create", "--kafka-config", admin, "--topic-prefix", secure_prefix, "--partitions", "2"))
    ok(run_cli("topics", "acls", "--principal", "User:upstream", "--role", "upstream", "--topic-prefix", secure_prefix,
               "--apply", "--kafka-config", admin))
    records = [json.loads(line) for line in JOURNAL.read_text(encoding="utf-8").splitlines() if line.strip()]
    events = [client.event(record["topic"], record["value"]) for record in records]
    with client.Publisher(kafka_config=secure.files["upstream"], topic_prefix=secure_prefix) as publisher:
        assert publisher.connection.settings["security.protocol"] == "SASL_SSL"
        assert "***" in repr(publisher) and secure.passwords["upstream"] not in repr(publisher)
        for event in events:
            publisher.publish(event)
    assert publisher.delivered == len(events)


def test_a_wrong_password_override_is_refused_when_the_publisher_opens(secure, secure_prefix):
    publisher = client.Publisher(kafka_config=secure.files["upstream"], environ={"KAFKA_SASL_PASSWORD": "not-the-password"},
                                 topic_prefix=secure_prefix)
    with pytest.raises(KafkaConnectionError) as refused:
        publisher.open()
    assert "not-the-password" not in str(refused.value)
