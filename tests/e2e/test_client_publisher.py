"""The client library's Publisher (recurrence_ledger.client) against the
real broker and Schema Registry: every input kind published through it,
with the registry's ids on source-journal and with fixed ids on the
per-kind topics, feeds a worker whose ledger facts (and final views) equal
run-journal's on the same events; the outbox example script does the same;
a topic that does not exist is refused on opening and a record the broker
refuses is raised by flush()."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from recurrence_ledger import catalogue, client
from recurrence_ledger.kafka.kafka_admin import wait_for_topics
from recurrence_ledger.serde.registry import RegistryCodec, RegistrySettings, delete_subjects, subject
from recurrence_ledger.serde.wire import SCHEMA_IDS
from tests.e2e import harness
from tests.e2e.test_schema_registry import consume_all
from tests.plugins.processes import cli_env

REPO = Path(__file__).resolve().parents[2]
JOURNAL = REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"
EXAMPLE_SCRIPT = REPO / "docs" / "examples" / "platform_outbox.py"


def journal_events(journal: Path) -> list[client.TaskOutcome]:
    """Every line of a journal built as its event with the client library."""
    records = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [client.event(record["topic"], record["value"]) for record in records]


def frame_id(raw: bytes) -> int:
    assert raw[0] == 0, raw[:8]
    return struct.unpack(">I", raw[1:5])[0]


def test_every_event_kind_published_through_the_registry_gives_run_journals_facts(bootstrap, topic_prefix, schema_registry_url, tmp_path):
    events = journal_events(JOURNAL)
    assert {client.kind_of(event) for event in events} == set(catalogue.INPUT_TOPICS) - {catalogue.SOURCE_JOURNAL}
    harness.prepare(bootstrap, topic_prefix, 1)
    registry = RegistrySettings(schema_registry_url)
    try:
        with client.Publisher(bootstrap, schema_registry_url=schema_registry_url, topic_prefix=topic_prefix) as publisher:
            for event in events:
                publisher.publish(event)
            assert publisher.flush() == len(events)
        source = harness.physical(topic_prefix, catalogue.SOURCE_JOURNAL)
        codec = RegistryCodec(registry)
        registered = codec.client.get_latest_version(subject(source)).schema_id
        values = consume_all(bootstrap, source)
        assert len(values) == len(events)
        assert {frame_id(raw) for raw in values} == {registered}  # the registry's id, not the fixed one
        assert [codec.decode_source(catalogue.SOURCE_JOURNAL, raw) for raw in values] == [
            (client.kind_of(event), event.model_dump(mode="json")) for event in events]

        harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log", extra=("--schema-registry-url", schema_registry_url))
        kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka", codec=codec)
        harness.assert_same_outputs(kafka, harness.embedded(JOURNAL, tmp_path / "embedded"))
        assert harness.lines(kafka[catalogue.DEAD_LETTER]) == harness.lines(harness.embedded(JOURNAL, tmp_path / "again")[catalogue.DEAD_LETTER])
    finally:
        delete_subjects(registry, [catalogue.physical(spec.name, topic_prefix) for spec in catalogue.CATALOGUE])


def test_fixed_ids_without_a_registry_give_run_journals_facts(bootstrap, topic_prefix, tmp_path):
    events = journal_events(JOURNAL)
    harness.prepare(bootstrap, topic_prefix, 1)
    with client.Publisher(bootstrap, topic_prefix=topic_prefix) as publisher:
        for event in events:
            publisher.publish(event)
    assert publisher.delivered == len(events)
    values = consume_all(bootstrap, harness.physical(topic_prefix, catalogue.SOURCE_JOURNAL))
    assert {frame_id(raw) for raw in values} == {SCHEMA_IDS["SourceEvent"]}

    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")
    harness.assert_same_outputs(harness.exported(bootstrap, topic_prefix, tmp_path / "kafka"),
                                harness.embedded(JOURNAL, tmp_path / "embedded"))


def test_per_kind_puts_each_event_on_its_kinds_topic_keyed_by_scope(bootstrap, topic_prefix):
    """(The order between two topics is the worker's arrival order, contract
    §1: a platform that needs one order across kinds publishes to
    source-journal, as the tests above do.)"""
    events = journal_events(JOURNAL)
    harness.prepare(bootstrap, topic_prefix, 2)
    with client.Publisher(bootstrap, per_kind=True, topic_prefix=topic_prefix) as publisher:
        for event in events:
            publisher.publish(event)
    for kind in set(catalogue.INPUT_TOPICS) - {catalogue.SOURCE_JOURNAL}:
        values = consume_all(bootstrap, harness.physical(topic_prefix, kind))
        mine = [event for event in events if client.kind_of(event) == kind]
        assert len(values) == len(mine), kind
        assert {frame_id(raw) for raw in values} == {SCHEMA_IDS[catalogue.BY_NAME[kind].schema]}, kind
        assert sorted(json.dumps(client.event(kind, publisher.codec.decode_value(raw, (catalogue.BY_NAME[kind].schema,))).model_dump(mode="json"), sort_keys=True)
                      for raw in values) == sorted(json.dumps(event.model_dump(mode="json"), sort_keys=True) for event in mine), kind
    assert consume_all(bootstrap, harness.physical(topic_prefix, catalogue.SOURCE_JOURNAL)) == []


def test_the_outbox_example_publishes_what_run_journal_reads(bootstrap, topic_prefix, tmp_path):
    harness.prepare(bootstrap, topic_prefix, 1)
    journal = tmp_path / "events.jsonl"
    result = subprocess.run([sys.executable, str(EXAMPLE_SCRIPT), "--bootstrap", bootstrap, "--topic-prefix", topic_prefix,
                             "--journal-out", str(journal), "--database", str(tmp_path / "platform.db")],
                            capture_output=True, text=True, timeout=120, env=cli_env(), cwd=REPO, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    sent = len(journal.read_text(encoding="utf-8").splitlines())
    assert result.stdout.strip() == f"published {sent} events to {topic_prefix}source-journal"
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")
    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    reference = harness.embedded(journal, tmp_path / "embedded")
    harness.assert_same_outputs(kafka, reference)
    assert harness.lines(kafka[catalogue.DEAD_LETTER]) == []
    assert len(harness.lines(kafka[catalogue.OBSERVATIONS])) > 0


def test_a_missing_topic_is_refused_when_the_publisher_opens(bootstrap, topic_prefix):
    with pytest.raises(LookupError, match=f"{topic_prefix}source-journal"):
        with client.Publisher(bootstrap, topic_prefix=topic_prefix):
            pass


def test_a_record_the_broker_refuses_is_raised_by_flush(bootstrap, topic_prefix):
    source = harness.physical(topic_prefix, catalogue.SOURCE_JOURNAL)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(source, 1, 1, config={"max.message.bytes": "600"})])[source].result(timeout=30)
    wait_for_topics(admin, [source])  # CreateTopics completes before the broker's metadata lists the topic
    outcome = journal_events(JOURNAL)[3]
    large = client.task_outcome(**{**outcome.model_dump(mode="json"), "checks": [
        {"name": f"check {number}", "status": "passed", "basis": "verified", "evidence": [], "details": "x" * 100}
        for number in range(10)]})
    publisher = client.Publisher(bootstrap, topic_prefix=topic_prefix, flush_timeout=60).open()
    publisher.publish(large)
    with pytest.raises(client.PublishError, match="MSG_SIZE_TOO_LARGE|too large|TOO_LARGE") as failed:
        publisher.flush()
    assert [topic for _, topic, _ in failed.value.failures] == [source]
    publisher.publish(outcome)  # a small record still goes through
    assert publisher.flush() == 1
