"""recurrence_ledger.kafka.kafka_admin and recurrence_ledger.kafka.kafka_io against the real broker
(contract §1 topics, §9 dead letters, §11 file format).

Every test works under its own topic prefix (``topic_prefix`` fixture), so
tests and concurrent runs on the same broker never share a topic.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import time
from uuid import uuid4

import fastavro
import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import NewTopic

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.kafka.kafka_admin import CoPartitionError, check_copartitioned, create_topics, wait_for_topics
from recurrence_ledger.kafka.kafka_io import (
    READER_GROUP_ID,
    PublishError,
    PublishSummary,
    UndecodableRecord,
    export_topic,
    publish_journal,
    publish_raw,
    read_raw,
    read_topic,
)
from recurrence_ledger.ledger.intake import MAX_RECORD_BYTES, BadRecord, Coordinates, ingest, validate
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.serde.avro import SCHEMA_DIR
from recurrence_ledger.serde.codec import decode_source
from tests.conftest import case, read_jsonl
from tests.e2e.harness import topic_configs, topic_names
from tests.partitioner import java_partition
from tests.plugins.processes import run_cli
from tests.journal import check, experience, handoff, outcome, receipt, write_journal
from recurrence_ledger.catalogue import CATALOGUE, INPUT_TOPICS, SCHEMA_IDS, SOURCE_JOURNAL

KINDS = ("experience-revisions", "handoff-revisions", "handoff-receipts", "task-outcomes")
#: The one scope of tests/cases/worked_example.jsonl.
WORKED_SCOPE = b"dns-mirror"


def validated(record: dict) -> dict:
    """A journal record as the worker sees it after validation."""
    return {"topic": record["topic"], "value": validate(record["topic"], record["value"])}





# --------------------------------------------------------------------- kafka_admin


def test_create_topics_is_idempotent_and_sets_the_catalogue_configs(bootstrap, admin, topic_prefix):
    extra = [("state-changelog", {"cleanup.policy": "compact"})]
    physical = [topic_prefix + spec.name for spec in CATALOGUE] + [topic_prefix + "state-changelog"]

    first = create_topics(bootstrap, 3, topic_prefix, extra=extra)
    assert first == {name: "created" for name in physical}
    assert list(first) == physical  # catalogue order, then extra

    second = create_topics(bootstrap, 3, topic_prefix, extra=extra)
    assert second == {name: "exists" for name in physical}

    other_count = create_topics(bootstrap, 5, topic_prefix, extra=extra)
    assert other_count == {name: "exists (3 partitions)" for name in physical}

    metadata = admin.list_topics(timeout=10)
    assert {name: len(metadata.topics[name].partitions) for name in physical} == {name: 3 for name in physical}
    for spec in CATALOGUE:
        configs = topic_configs(admin, topic_prefix + spec.name)
        assert configs["cleanup.policy"] == spec.cleanup_policy, spec.name
        if spec.cleanup_policy == "delete":
            assert configs["retention.ms"] == str(spec.retention_ms), spec.name
        else:
            assert configs["min.cleanable.dirty.ratio"] == "0.1"
    assert topic_configs(admin, topic_prefix + "recurrence-statistics")["cleanup.policy"] == "compact"
    assert topic_configs(admin, topic_prefix + "recurrence-observations")["retention.ms"] == "-1"
    assert topic_configs(admin, topic_prefix + "state-changelog")["cleanup.policy"] == "compact"


def test_create_topics_rejects_an_impossible_replication_factor(bootstrap, topic_prefix):
    with pytest.raises(KafkaException, match="(?i)replication"):
        create_topics(bootstrap, 1, topic_prefix, replication=3)


def test_check_copartitioned_returns_the_common_count(bootstrap, topic_prefix, catalogue_topics):
    catalogue_topics(partitions=4)
    assert check_copartitioned(bootstrap, [topic_prefix + name for name in INPUT_TOPICS]) == 4


def test_check_copartitioned_names_every_topic_when_counts_differ_or_one_is_missing(bootstrap, admin, topic_prefix, catalogue_topics):
    catalogue_topics(partitions=3)
    odd = topic_prefix + "odd-input"
    admin.create_topics([NewTopic(odd, num_partitions=2, replication_factor=1)])[odd].result(timeout=30)
    wait_for_topics(admin, [odd])
    journal = topic_prefix + SOURCE_JOURNAL

    with pytest.raises(CoPartitionError) as raised:
        check_copartitioned(bootstrap, [journal, odd])
    assert isinstance(raised.value, ValueError)
    assert str(raised.value) == (
        f"input topics are not co-partitioned (different partition counts): {journal}: 3 partitions, {odd}: 2 partitions"
    )
    assert raised.value.counts == {journal: 3, odd: 2}

    ghost = topic_prefix + "never-created"
    with pytest.raises(CoPartitionError, match=f"{ghost}: missing") as raised:
        check_copartitioned(bootstrap, [journal, ghost])
    assert raised.value.counts == {journal: 3, ghost: None}
    # The broker auto-creates topics on a metadata request naming them; the
    # check must not have done that.
    time.sleep(0.5)
    assert ghost not in topic_names(admin)


# --------------------------------------------------------------------- publish + export


def test_publish_then_export_round_trip_of_the_worked_example(bootstrap, admin, topic_prefix, catalogue_topics, tmp_path):
    catalogue_topics(partitions=3)
    journal, _ = case("worked_example")
    records = read_jsonl(journal)

    summary = publish_journal(bootstrap, journal, topic_prefix=topic_prefix, show_progress=False)
    assert isinstance(summary, PublishSummary)
    assert (summary.records, summary.raw, summary.topics) == (12, 0, {SOURCE_JOURNAL: 12})
    assert summary.seconds > 0

    read = read_topic(bootstrap, SOURCE_JOURNAL, topic_prefix=topic_prefix)
    # One scope: one partition, the one a Java/aiokafka producer would pick
    # (so the worker's outputs for the scope land on the same partition number).
    assert [(partition, offset, key) for partition, offset, key, _ in read] == [
        (java_partition(WORKED_SCOPE, 3), offset, WORKED_SCOPE) for offset in range(12)
    ]
    assert [value for _, _, _, value in read] == [validated(record) for record in records]
    first = read[0][3]
    assert first["topic"] == "experience-revisions"
    assert first["value"]["artifact_ref"] == {"family": "experience", "artifact_id": "D2", "revision": 1}
    assert first["value"]["content"]["failure"]["signature"] == {"recall_cue": "DNS lookup for package mirror timed out", "symptom": None}
    last = read[-1][3]["value"]
    assert (last["source_ref"]["source_id"], last["journal_position"]) == ("run-10", 12)

    out = tmp_path / "export" / "source-journal.jsonl"
    assert export_topic(bootstrap, SOURCE_JOURNAL, out, topic_prefix=topic_prefix) == 12
    assert out.read_bytes() == b"".join(canonical_json(validated(record)) + b"\n" for record in records)
    # Readers assign partitions and never commit: no consumer group exists.
    groups = admin.list_consumer_groups().result(timeout=10)
    assert READER_GROUP_ID not in {group.group_id for group in groups.valid}


def small_journal() -> list[dict]:
    """Two scopes, every event kind, an avoided and a recurred verdict."""
    records = []
    for scope in ("scope-a", "scope-b"):
        records += [
            experience(scope, 1, "E1", cue="port already bound", condition="ports freed", subject="ports free"),
            handoff(scope, 2, "H1", [("E1", 1)]),
            receipt(scope, 3, "R1", "H1"),
            outcome(scope, 4, "O1", status="failed", receipt_id="R1", checks=[check("Port already bound")]),
        ]
    return records


def test_per_kind_publishing_with_json_values(bootstrap, topic_prefix, catalogue_topics, tmp_path):
    catalogue_topics(partitions=4)
    records = small_journal()
    journal = write_journal(tmp_path / "small.jsonl", records)

    summary = publish_journal(bootstrap, journal, fmt="json", per_kind=True, topic_prefix=topic_prefix, show_progress=False)
    assert (summary.records, summary.raw) == (8, 0)
    assert summary.topics == {SOURCE_JOURNAL: 0, **{kind: 2 for kind in KINDS}, "experience-candidates": 0, "review-decisions": 0}
    assert read_raw(bootstrap, topic_prefix + SOURCE_JOURNAL) == []

    partition_of_scope: dict[bytes, set[int]] = {b"scope-a": set(), b"scope-b": set()}
    for kind in KINDS:
        raw = read_raw(bootstrap, topic_prefix + kind)
        expected = [validate(kind, record["value"]) for record in records if record["topic"] == kind]
        # Per-kind values are the events themselves, as canonical JSON.
        assert sorted(record.value for record in raw) == sorted(canonical_json(value) for value in expected)
        for record in raw:
            assert record.key == json.loads(record.value)["scope_id"].encode()
            partition_of_scope[record.key].add(record.partition)
        assert sorted(value["journal_position"] for *_, value in read_topic(bootstrap, kind, topic_prefix=topic_prefix)) == [
            value["journal_position"] for value in expected
        ]
    # Co-partitioning: each scope's events of all four kinds share one partition number.
    assert partition_of_scope == {b"scope-a": {java_partition(b"scope-a", 4)}, b"scope-b": {java_partition(b"scope-b", 4)}}


POISON_LINES = [
    b"not json at all",
    b'{"topic": "task-outcomes", "value": {"scope_id": "poison-scope", "journal_position": "seven"}}',
    b'{"topic": "no-such-kind", "value": {"scope_id": "poison-scope"}}',
    b'{"topic": "task-outcomes", "value": {"scope_id": 5, "journal_position": 9}}',
]


def test_raw_poison_lines_are_published_as_is_and_dead_letter_like_the_embedded_runner(bootstrap, topic_prefix, catalogue_topics, tmp_path):
    catalogue_topics(partitions=3)
    good = experience("poison-scope", 1, "E1")
    journal = write_journal(tmp_path / "poison.jsonl", [good, POISON_LINES[0], b"   ", *POISON_LINES[1:]])

    # per_kind: the valid event goes to its kind topic, raw lines to source-journal.
    summary = publish_journal(bootstrap, journal, per_kind=True, topic_prefix=topic_prefix, show_progress=False)
    assert (summary.records, summary.raw) == (5, 4)
    assert summary.topics == {SOURCE_JOURNAL: 4, "experience-revisions": 1, "handoff-revisions": 0, "handoff-receipts": 0, "task-outcomes": 0,
                              "experience-candidates": 0, "review-decisions": 0}

    raw = {record.value: record for record in read_raw(bootstrap, topic_prefix + SOURCE_JOURNAL)}
    assert sorted(raw) == sorted(POISON_LINES)
    assert [raw[line].key for line in POISON_LINES] == [None, b"poison-scope", b"poison-scope", None]
    assert {raw[line].partition for line in POISON_LINES[1:3]} == {java_partition(b"poison-scope", 3)}

    # The embedded runner's dead letters for the same file…
    out = tmp_path / "embedded"
    run_journal(journal, out, show_progress=False)
    embedded = {base64.b64decode(letter["raw"]): letter["reason"] for letter in read_jsonl(out / "dead-letter.jsonl")}
    assert sorted(embedded) == sorted(POISON_LINES)

    # …and what the shared codec + intake make of the Kafka records.
    def kafka_reason(line: bytes) -> str:
        record = raw[line]
        key = None if record.key is None else record.key.decode()
        try:
            kind, value = decode_source(SOURCE_JOURNAL, record.value)
        except BadRecord as bad:
            return bad.reason
        (letter,) = ingest(LedgerProcessor(), kind, value, record.value, Coordinates(SOURCE_JOURNAL, record.partition, record.offset, key))
        assert base64.b64decode(letter.value["raw"]) == line
        return letter.value["reason"]

    # "not json at all" starts like JSON null: the worker reads it as JSON
    # too (contract §9 rev. 3: classified by the first non-whitespace byte).
    for line in POISON_LINES:
        assert kafka_reason(line) == embedded[line], line
    assert embedded[POISON_LINES[0]] == "malformed_json"

    with pytest.raises(UndecodableRecord) as raised:
        read_topic(bootstrap, SOURCE_JOURNAL, topic_prefix=topic_prefix)
    assert raised.value.reason == "malformed_json"  # "not json at all", the one value that is no JSON object


def test_lines_over_the_record_limit_are_not_sent_and_fail_the_publish_with_their_size(bootstrap, topic_prefix, catalogue_topics, tmp_path):
    """A 3 MiB line without a line end (read in pieces, never whole) and a
    line 2 bytes over the limit (read whole) are not sent: the publish fails
    naming each line (from 1, as an editor counts), its reason and true
    size, after delivering every other line; the command says so in one
    line, exit code 1, no traceback."""
    catalogue_topics(partitions=3)
    blob, just_over = b"\x1f\x8b" * (3 << 19), b"{" * (MAX_RECORD_BYTES + 2)
    journal = write_journal(tmp_path / "blob.jsonl", [experience("blob-scope", 1, "E1"), blob, experience("blob-scope", 2, "E2"), just_over,
                                                      experience("blob-scope", 3, "E3")])
    with pytest.raises(PublishError) as failed:
        publish_journal(bootstrap, journal, topic_prefix=topic_prefix, show_progress=False)
    source = topic_prefix + SOURCE_JOURNAL
    assert failed.value.failures == [
        (1, source, f"oversized_record: record is {len(blob)} bytes; the limit is {MAX_RECORD_BYTES}"),
        (3, source, f"oversized_record: record is {len(just_over)} bytes; the limit is {MAX_RECORD_BYTES}"),
    ]
    assert str(failed.value) == (
        f"2 records of {journal} were not delivered (line 2: {source}: oversized_record: record is {len(blob)} bytes; the limit is "
        f"{MAX_RECORD_BYTES}; line 4: {source}: oversized_record: record is {len(just_over)} bytes; the limit is {MAX_RECORD_BYTES})"
    )
    read = read_topic(bootstrap, SOURCE_JOURNAL, topic_prefix=topic_prefix)
    assert [value["value"]["artifact_ref"]["artifact_id"] for _, _, _, value in read] == ["E1", "E2", "E3"]

    result = run_cli("publish", journal, "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, columns=2000)
    assert (result.returncode, result.stdout.strip()) == (1, f"error: {failed.value}"), result.stderr[-2000:]
    assert "Traceback" not in result.stdout + result.stderr


def test_publish_raw_keeps_exact_bytes_and_tombstones(bootstrap, topic_prefix, catalogue_topics):
    catalogue_topics(partitions=2)
    topic = topic_prefix + "task-outcomes"
    poison = b"\x00\x00\x00\x00\x63garbage"
    assert publish_raw(bootstrap, topic, b"s1", poison)[0] == java_partition(b"s1", 2)
    publish_raw(bootstrap, topic, None, None)
    records = read_raw(bootstrap, topic)
    assert sorted((record.key or b"", record.value or b"") for record in records) == [(b"", b""), (b"s1", poison)]
    with pytest.raises(LookupError, match="does-not-exist"):
        publish_raw(bootstrap, topic_prefix + "does-not-exist", None, b"x")


def test_publishing_to_missing_topics_fails_and_creates_nothing(bootstrap, admin, topic_prefix):
    journal, _ = case("minimum_case")
    with pytest.raises(LookupError, match=f"{topic_prefix}source-journal"):
        publish_journal(bootstrap, journal, topic_prefix=topic_prefix, show_progress=False)
    time.sleep(0.5)
    assert not [name for name in topic_names(admin) if name.startswith(topic_prefix)]


def test_avro_values_are_confluent_framed_for_a_plain_consumer(bootstrap, topic_prefix, catalogue_topics):
    catalogue_topics(partitions=1)
    journal, _ = case("worked_example")
    records = read_jsonl(journal)
    publish_journal(bootstrap, journal, topic_prefix=topic_prefix, show_progress=False)

    # A consumer that knows nothing of recurrence_ledger.serde.codec: magic byte, schema id,
    # then a schemaless Avro body readable with the .avsc file.
    schema = fastavro.schema.load_schema(str(SCHEMA_DIR / "recurrence_ledger.SourceEvent.avsc"))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"plain-{uuid4().hex[:8]}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic_prefix + SOURCE_JOURNAL])
    values = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < len(records) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    assert len(values) == len(records)
    for value, record in zip(values, records, strict=True):
        magic, schema_id = struct.unpack(">bI", value[:5])
        assert (magic, schema_id) == (0, 42) == (0, SCHEMA_IDS["SourceEvent"])  # revision 4's SourceEvent
        assert fastavro.schemaless_reader(io.BytesIO(value[5:]), schema) == validated(record)


def test_per_kind_avro_values_carry_each_kinds_schema_id(bootstrap, topic_prefix, catalogue_topics, tmp_path):
    catalogue_topics(partitions=2)
    journal = write_journal(tmp_path / "small.jsonl", small_journal())
    publish_journal(bootstrap, journal, per_kind=True, topic_prefix=topic_prefix, show_progress=False)
    ids = {kind: {struct.unpack(">bI", record.value[:5]) for record in read_raw(bootstrap, topic_prefix + kind)} for kind in KINDS}
    assert ids == {
        "experience-revisions": {(0, 30)},  # revision 4's ExperienceRevision (severity)
        "handoff-revisions": {(0, 24)},  # revision 4's HandoffRevision (withheld_citations, contract §21.1)
        "handoff-receipts": {(0, 4)},
        "task-outcomes": {(0, 5)},
    }


# --------------------------------------------------------------------- transactions


def test_export_reads_committed_records_only_and_ends_past_transaction_markers(bootstrap, topic_prefix, catalogue_topics, tmp_path):
    """The worker publishes outputs in transactions: markers take offsets,
    aborted records must not be exported, and an open transaction must not
    make the export hang or leak its records."""
    catalogue_topics(partitions=2)
    topic = topic_prefix + "recurrence-statistics"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic_prefix}txn", "partitioner": "murmur2_random"})
    producer.init_transactions(30)

    def transaction(values: list[dict], commit: bool) -> None:
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, key=value["scope_id"].encode(), value=canonical_json(value))
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)

    committed = [{"scope_id": "a", "n": 1}, {"scope_id": "b", "n": 2}, {"scope_id": "a", "n": 3}]
    transaction(committed[:2], commit=True)
    transaction([{"scope_id": "a", "n": -1}, {"scope_id": "b", "n": -2}], commit=False)
    transaction(committed[2:], commit=True)
    transaction([{"scope_id": "a", "n": -3}], commit=False)  # an aborted tail: the last offset is a marker

    started = time.monotonic()
    out = tmp_path / "statistics.jsonl"
    assert export_topic(bootstrap, "recurrence-statistics", out, topic_prefix=topic_prefix, timeout=20) == 3
    assert time.monotonic() - started < 10
    by_partition = sorted(committed, key=lambda value: java_partition(value["scope_id"].encode(), 2))
    assert out.read_bytes() == b"".join(canonical_json(value) + b"\n" for value in by_partition)

    # An open transaction: the read stops at the last stable offset, without its records.
    producer.begin_transaction()
    producer.produce(topic, key=b"a", value=canonical_json({"scope_id": "a", "n": -4}))
    producer.flush(30)
    try:
        values = [value for *_, value in read_topic(bootstrap, "recurrence-statistics", topic_prefix=topic_prefix, timeout=20)]
        assert sorted(values, key=lambda value: value["n"]) == committed
    finally:
        producer.abort_transaction(30)
