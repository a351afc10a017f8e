"""Schema Registry support against a real registry server (Apicurio
Registry's Confluent-compatible API, started by deploy/registry.sh through
deploy/services.sh) and the real broker:

- ``topics create --schema-registry-url`` registers our schema under every
  ``<topic>-value`` subject and sets it to BACKWARD, which the registry then
  enforces;
- interoperability: a plain confluent-kafka Producer with ``AvroSerializer``
  (as an agent platform publishes, with our schema) feeds the worker, and a
  plain Consumer with ``AvroDeserializer`` reads every output topic; the
  values carry the registry's ids, registered under ``<topic>-value``, and
  the ledger facts equal run-journal's;
- a producer whose schema adds an optional field with a default still
  decodes; a writer schema that does not resolve to ours is dead-lettered as
  ``schema_mismatch`` naming its id, an id the registry does not know as
  ``unknown_schema_id``.

These tests fail, never skip, without SCHEMA_REGISTRY_URL.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import struct
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from uuid import uuid4

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.kafka.kafka_admin import create_topics
from recurrence_ledger.serde import avro
from recurrence_ledger.serde.registry import RegistryCodec, RegistrySettings, subject
from recurrence_ledger import catalogue
from tests.conftest import case, facts
from tests.e2e import harness
from tests.plugins.processes import run_cli

#: An id no registry of these tests hands out.
UNKNOWN_ID = 2**31 - 7


@pytest.fixture
def registry(schema_registry_url: str, topic_prefix: str) -> Iterable[SchemaRegistryClient]:
    """A client on the test registry; the prefix's subjects are deleted
    afterwards (best effort; the registry keeps everything in memory)."""
    client = SchemaRegistryClient({"url": schema_registry_url})
    yield client
    for name in client.get_subjects():
        if name.startswith(topic_prefix):
            for permanent in (False, True):
                try:
                    client.delete_subject(name, permanent=permanent)
                except SchemaRegistryError:
                    pass


cli = functools.partial(run_cli, columns=250)


def journal_records(journal: Path) -> list[dict]:
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def source_event_schema(change: Callable[[dict], None] | None = None) -> str:
    """Our self-contained SourceEvent schema, with ``change`` applied to the
    TaskOutcome record inside it (a producer's own version of it)."""
    schema = json.loads(avro.schema_json("SourceEvent"))
    if change is not None:
        def visit(node: object) -> None:
            if isinstance(node, dict):
                if node.get("type") == "record" and node.get("name") in ("TaskOutcome", "recurrence_ledger.TaskOutcome"):
                    change(node)
                for child in node.values():
                    visit(child)
            elif isinstance(node, list):
                for child in node:
                    visit(child)

        visit(schema)
    return json.dumps(schema)


def add_agent_note(record: dict) -> None:
    record["fields"].append({"name": "agent_note", "type": ["null", "string"], "default": None})


def position_as_string(record: dict) -> None:
    next(f for f in record["fields"] if f["name"] == "journal_position")["type"] = "string"


def envelope(record: dict, outcome_extra: dict | None = None) -> dict:
    """A journal record as a SourceEvent value for a plain AvroSerializer:
    the kind's union branch named with fastavro's tuple notation, as the
    serializer's documentation advises for unions of records."""
    value = dict(record["value"])
    if record["topic"] == catalogue.TASK_OUTCOMES and outcome_extra:
        value.update(outcome_extra)
    branch = f"recurrence_ledger.{catalogue.BY_NAME[record['topic']].schema}"
    return {"topic": record["topic"], "value": (branch, value)}


def plain_producer(bootstrap: str) -> Producer:
    """A producer as any application would configure it (Java-compatible
    partitioner, idempotent)."""
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "partitioner": "murmur2_random"})


def produce(producer: Producer, topic: str, items: Iterable[tuple[bytes, bytes]]) -> None:
    errors = []
    for key, value in items:
        producer.produce(topic, key=key, value=value, on_delivery=lambda error, _: errors.append(error) if error else None)
    assert producer.flush(60) == 0 and not errors, errors


def consume_all(bootstrap: str, topic: str, timeout: float = 60.0) -> list[bytes]:
    """Every committed value of ``topic`` with a plain read_committed
    Consumer, partitions in order."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"interop-{uuid4().hex[:8]}", "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    try:
        partitions = len(consumer.list_topics(timeout=10).topics[topic].partitions)
        ends = {}
        for number in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, number), timeout=10)
            if high > low:
                ends[number] = high
        values: dict[int, list[bytes]] = {number: [] for number in ends}
        consumer.assign([TopicPartition(topic, number, OFFSET_BEGINNING) for number in ends])
        deadline = time.monotonic() + timeout
        while ends:
            assert time.monotonic() < deadline, f"{topic}: end not reached"
            message = consumer.poll(0.2)
            if message is not None:
                if message.error():
                    raise KafkaException(message.error())
                values[message.partition()].append(message.value())
            for tp in consumer.position([TopicPartition(topic, number) for number in ends]):
                if tp.offset >= ends[tp.partition]:
                    del ends[tp.partition]
        return [value for number in sorted(values) for value in values[number]]
    finally:
        consumer.close()


def frame_id(raw: bytes) -> int:
    assert raw[0] == 0, raw[:8]
    return struct.unpack(">I", raw[1:5])[0]


def run_worker(bootstrap: str, prefix: str, log: Path, *options: str) -> None:
    harness.run_to_idle(bootstrap, prefix, log, extra=options)


def test_processes_registering_a_new_subject_at_once_all_get_its_id(topic_prefix, registry, schema_registry_url):
    """The worker processes of a deployment start together and each
    registers its schemas; this registry answers all but one of them 409
    ("already exists") — each then looks the schema up instead."""
    topic = f"{topic_prefix}{catalogue.MATCHES}"
    start = threading.Barrier(4)
    ids: list[int] = []
    errors: list[Exception] = []

    def register() -> None:
        codec = RegistryCodec(RegistrySettings(schema_registry_url, True))
        start.wait()
        try:
            ids.append(codec.register(topic, "RecurrenceMatch"))
        except Exception as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    threads = [threading.Thread(target=register) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(ids) == 4 and len(set(ids)) == 1, (errors, ids)
    assert registry.get_latest_version(subject(topic)).schema_id == ids[0]


def test_topics_create_registers_every_subject_with_backward_compatibility(topic_prefix, bootstrap, registry, schema_registry_url):
    result = cli("topics", "create", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--partitions", "1",
                 "--schema-registry-url", schema_registry_url)
    assert result.returncode == 0, result.stdout + result.stderr
    for spec in catalogue.CATALOGUE:
        name = subject(catalogue.physical(spec.name, topic_prefix))
        latest = registry.get_latest_version(name)
        assert json.loads(latest.schema.schema_str) == json.loads(avro.schema_json(spec.schema)), name
        assert registry.get_compatibility(name) == "BACKWARD", name
        assert f"id {latest.schema_id}, BACKWARD" in " ".join(result.stdout.split()), name
    again = cli("topics", "create", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--partitions", "1",
                "--schema-registry-url", schema_registry_url)
    assert again.returncode == 0, again.stdout + again.stderr  # idempotent: the same schema is the same version

    # The registry now enforces BACKWARD on our subjects: a producer schema
    # with an optional field more is accepted, a changed field type refused.
    journal_subject = subject(catalogue.physical(catalogue.SOURCE_JOURNAL, topic_prefix))
    assert registry.register_schema(journal_subject, Schema(source_event_schema(add_agent_note), "AVRO")) > 0
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema(journal_subject, Schema(source_event_schema(position_as_string), "AVRO"))
    assert refused.value.http_status_code == 409


def test_topics_delete_deletes_the_deployment_subjects_and_no_other(topic_prefix, bootstrap, registry, schema_registry_url):
    other = f"o{uuid4().hex[:8]}."
    theirs = {subject(catalogue.physical(spec.name, other)) for spec in catalogue.CATALOGUE}
    try:
        for prefix in (topic_prefix, other):
            created = cli("topics", "create", "--bootstrap", bootstrap, "--topic-prefix", prefix, "--partitions", "1",
                          "--schema-registry-url", schema_registry_url)
            assert created.returncode == 0, created.stdout + created.stderr
        journal_subject = subject(catalogue.physical(catalogue.SOURCE_JOURNAL, topic_prefix))
        assert registry.register_schema(journal_subject, Schema(source_event_schema(add_agent_note), "AVRO")) > 0  # a version 2
        mine = {subject(catalogue.physical(spec.name, topic_prefix)) for spec in catalogue.CATALOGUE}
        assert mine | theirs <= set(registry.get_subjects())

        deleted = cli("topics", "delete", "--yes", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix,
                      "--schema-registry-url", schema_registry_url)
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        printed = dict(line.strip().rsplit(": ", 1) for line in deleted.stdout.splitlines() if line.strip().endswith(")") and "-value: " in line)
        assert printed == {name: "deleted (versions 1, 2)" if name == journal_subject else "deleted (versions 1)" for name in mine}
        assert f"schema registry subjects at {schema_registry_url}:" in deleted.stdout
        # Gone for good (not even soft-deleted), and the other deployment's subjects are all there.
        assert not mine & set(registry.get_subjects(deleted=True))
        assert theirs <= set(registry.get_subjects())

        without = cli("topics", "delete", "--yes", "--bootstrap", bootstrap, "--topic-prefix", other)
        assert without.returncode == 0, without.stdout + without.stderr
        assert "schema registry subjects: left alone, no Schema Registry configured" in without.stdout
        assert theirs <= set(registry.get_subjects())
    finally:
        harness.remove_prefix(bootstrap, other)
        for name in theirs:
            for permanent in (False, True):
                with contextlib.suppress(SchemaRegistryError):
                    registry.delete_subject(name, permanent=permanent)


def test_a_plain_confluent_producer_and_consumer_interoperate_with_the_worker(topic_prefix, bootstrap, registry, schema_registry_url, tmp_path):
    journal, expected = case("worked_example")
    prefix = topic_prefix
    create_topics(bootstrap, 1, prefix)
    source_journal = catalogue.physical(catalogue.SOURCE_JOURNAL, prefix)
    # An agent platform's producer: AvroSerializer with its defaults and our schema.
    serializer = AvroSerializer(registry, source_event_schema())
    context = SerializationContext(source_journal, MessageField.VALUE)
    produce(plain_producer(bootstrap), source_journal, (
        (record["value"]["scope_id"].encode(), serializer(envelope(record), context)) for record in journal_records(journal)
    ))
    run_worker(bootstrap, prefix, tmp_path / "worker.log", "--schema-registry-url", schema_registry_url)

    reference = harness.embedded(journal, tmp_path / "embedded")
    deserializer = AvroDeserializer(registry)  # a downstream consumer's: the writer's schema, no reader schema of ours
    records: dict[str, list[dict]] = {}
    for topic in catalogue.OUTPUT_TOPICS:
        physical = catalogue.physical(topic, prefix)
        raws = consume_all(bootstrap, physical)
        if raws:
            registered = registry.get_latest_version(subject(physical))
            assert {frame_id(raw) for raw in raws} == {registered.schema_id}, topic
            assert json.loads(registered.schema.schema_str) == json.loads(avro.schema_json(catalogue.BY_NAME[topic].schema))
        records[topic] = [deserializer(raw, SerializationContext(physical, MessageField.VALUE)) for raw in raws]
    consumed = {topic: b"".join(canonical_json(value) + b"\n" for value in values) for topic, values in records.items()}
    for topic in harness.LEDGER_TOPICS:  # contract §10: the ledger facts byte for byte
        assert consumed[topic] == reference[topic], topic
    assert harness.last_statistics(consumed[catalogue.STATISTICS]) == harness.last_statistics(reference[catalogue.STATISTICS])
    assert facts(records) == expected
    assert records[catalogue.MATCHES] and records[catalogue.OBSERVATIONS] and not records[catalogue.DEAD_LETTER]

    # The ledger's own reader (export) takes the registry's ids too.
    codec = RegistryCodec(RegistrySettings(schema_registry_url))
    assert harness.exported(bootstrap, prefix, tmp_path / "export", codec) == consumed


def test_evolved_writer_schemas_decode_and_unresolvable_ones_are_dead_lettered(topic_prefix, bootstrap, registry, schema_registry_url, tmp_path):
    journal, expected = case("minimum_case")
    prefix = topic_prefix
    created = cli("topics", "create", "--bootstrap", bootstrap, "--topic-prefix", prefix, "--partitions", "1",
                  "--schema-registry-url", schema_registry_url)
    assert created.returncode == 0, created.stdout + created.stderr
    source_journal = catalogue.physical(catalogue.SOURCE_JOURNAL, prefix)
    records = journal_records(journal)
    scope = records[0]["value"]["scope_id"].encode()

    # A producer a version ahead: its TaskOutcome has an optional field more.
    evolved = AvroSerializer(registry, source_event_schema(add_agent_note), conf={"subject.name.strategy.type": "TOPIC"})
    context = SerializationContext(source_journal, MessageField.VALUE)
    good = [(r["value"]["scope_id"].encode(), evolved(envelope(r, {"agent_note": "retried once"}), context)) for r in records]
    assert len({frame_id(raw) for _, raw in good}) == 1
    # A producer whose schema does not resolve to ours: refused under our
    # subject (BACKWARD), so its id comes from a subject of its own.
    outcome = next(r for r in records if r["topic"] == catalogue.TASK_OUTCOMES)
    foreign = AvroSerializer(registry, source_event_schema(position_as_string), conf={"subject.name.strategy.type": "TOPIC"})
    mismatched = foreign(envelope(outcome, {"journal_position": "seven"}), SerializationContext(f"{prefix}scratch", MessageField.VALUE))
    unknown = struct.pack(">bI", 0, UNKNOWN_ID) + mismatched[5:]
    produce(plain_producer(bootstrap), source_journal, [*good, (scope, mismatched), (scope, unknown)])

    run_worker(bootstrap, prefix, tmp_path / "worker.log", "--schema-registry-url", schema_registry_url, "--no-auto-register")

    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka", RegistryCodec(RegistrySettings(schema_registry_url)))
    reference = harness.embedded(journal, tmp_path / "embedded")
    for topic in harness.LEDGER_TOPICS:
        assert kafka[topic] == reference[topic], topic
    outputs = {topic: harness.lines(data) for topic, data in kafka.items()}
    assert facts(outputs) == {**expected, "dead_letter": expected["dead_letter"] + 2,
                              "dead_letter_reasons": {**expected["dead_letter_reasons"], "schema_mismatch": 1, "unknown_schema_id": 1}}
    dead = {letter["reason"]: letter for letter in outputs[catalogue.DEAD_LETTER]}
    assert set(dead) == {"schema_mismatch", "unknown_schema_id"}
    assert f"schema id {frame_id(mismatched)}" in dead["schema_mismatch"]["message"]
    assert f"schema id {UNKNOWN_ID}" in dead["unknown_schema_id"]["message"]
    assert base64.b64decode(dead["schema_mismatch"]["raw"]) == mismatched
    assert (dead["unknown_schema_id"]["topic"], dead["unknown_schema_id"]["offset"]) == (source_journal, len(records) + 1)
    # With --no-auto-register the worker looked its output schemas up: the
    # ids are those topics create registered.
    statistics = catalogue.physical(catalogue.STATISTICS, prefix)
    assert {frame_id(raw) for raw in consume_all(bootstrap, statistics)} == {registry.get_latest_version(subject(statistics)).schema_id}
