"""The Schema Registry codec (recurrence_ledger.serde.registry) on
confluent-kafka's in-process mock registry: framing with the registry's
ids, schema resolution of other writers' schemas, the reason codes of what
does not resolve, and the client settings. The same behaviours against a
real registry server are in tests/e2e/test_schema_registry.py."""

from __future__ import annotations

import json
import struct
from types import SimpleNamespace
from uuid import uuid4

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from recurrence_ledger.ledger.intake import BadRecord
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.kafka.records import process_message
from recurrence_ledger.serde import avro, codec
from recurrence_ledger.serde.codec import FIXED, RegistryError, make_codec
from recurrence_ledger.serde.registry import RegistryCodec, RegistrySettings, configure_subjects, delete_subjects, registry_settings, subject
from recurrence_ledger import catalogue
from tests.conftest import case

TASK_OUTCOMES = "p.task-outcomes"


def outcome() -> dict:
    """The first Task Outcome of the minimum case, as the core sees it."""
    journal, _ = case("minimum_case")
    for line in journal.read_text().splitlines():
        record = json.loads(line)
        if record["topic"] == "task-outcomes":
            return FIXED.decode_value(FIXED.encode("TaskOutcome", record["value"]), ("TaskOutcome",))
    raise AssertionError("the minimum case has no Task Outcome")


@pytest.fixture
def client() -> SchemaRegistryClient:
    """confluent-kafka's in-process mock registry (a fresh one per test)."""
    return SchemaRegistryClient.new_client({"url": f"mock://registry-{uuid4().hex}"})


def registry_codec(client, auto_register: bool = True) -> RegistryCodec:
    return RegistryCodec(RegistrySettings("mock://registry", auto_register), client)


def producer_bytes(client, schema_text: str, topic: str, value: dict) -> bytes:
    """What a plain AvroSerializer producer writes for ``value``."""
    serializer = AvroSerializer(client, schema_text, conf={"subject.name.strategy.type": "TOPIC"})
    return serializer(value, SerializationContext(topic, MessageField.VALUE))


def evolved(change) -> str:
    """Our TaskOutcome schema with ``change`` applied to its JSON."""
    schema = json.loads(avro.schema_json("TaskOutcome"))
    change(schema)
    return json.dumps(schema)


def test_outputs_carry_the_registry_id_and_our_avro_body(client):
    value = outcome()
    wire = registry_codec(client)
    client.register_schema("unrelated-value", Schema('{"type": "string"}', "AVRO"))  # ids are the registry's, not ours
    framed = wire.encode("TaskOutcome", value, topic=TASK_OUTCOMES)
    registered = client.get_latest_version(subject(TASK_OUTCOMES))
    assert framed[0] == 0 and struct.unpack(">I", framed[1:5])[0] == registered.schema_id != catalogue.SCHEMA_IDS["TaskOutcome"]
    assert framed[5:] == avro.encode("TaskOutcome", value)
    assert json.loads(registered.schema.schema_str) == json.loads(avro.schema_json("TaskOutcome"))
    assert wire.decode_value(framed, ("TaskOutcome",)) == value


def test_json_values_are_the_same_under_both_codecs(client):
    value = outcome()
    wire = registry_codec(client)
    assert wire.encode("TaskOutcome", value, codec.JSON, topic=TASK_OUTCOMES) == FIXED.encode("TaskOutcome", value, codec.JSON)
    assert wire.decode_value(FIXED.encode("TaskOutcome", value, codec.JSON), ("TaskOutcome",)) == value


def test_a_writer_schema_with_an_extra_optional_field_resolves_to_ours(client):
    value = outcome()
    schema = evolved(lambda s: s["fields"].append({"name": "agent_note", "type": ["null", "string"], "default": None}))
    raw = producer_bytes(client, schema, TASK_OUTCOMES, {**avro.with_branches("TaskOutcome", value), "agent_note": "retried twice"})
    assert registry_codec(client).decode_value(raw, ("TaskOutcome",)) == value


def test_a_writer_schema_that_does_not_resolve_is_a_schema_mismatch_naming_its_id(client):
    value = outcome()

    def position_as_string(schema: dict) -> None:
        next(f for f in schema["fields"] if f["name"] == "journal_position")["type"] = "string"

    raw = producer_bytes(client, evolved(position_as_string), TASK_OUTCOMES,
                         {**avro.with_branches("TaskOutcome", value), "journal_position": "seven"})
    schema_id = struct.unpack(">I", raw[1:5])[0]
    with pytest.raises(BadRecord) as bad:
        registry_codec(client).decode_value(raw, ("TaskOutcome",))
    assert bad.value.reason == "schema_mismatch"
    assert f"schema id {schema_id}" in bad.value.message


def test_a_record_of_another_schema_is_a_schema_mismatch(client):
    receipt_schema = avro.schema_json("HandoffReceipt")
    journal, _ = case("minimum_case")
    receipt = next(json.loads(line)["value"] for line in journal.read_text().splitlines() if '"handoff-receipts"' in line)
    raw = producer_bytes(client, receipt_schema, "p.handoff-receipts", avro.with_branches("HandoffReceipt", receipt))
    with pytest.raises(BadRecord) as bad:
        registry_codec(client).decode_value(raw, ("TaskOutcome",))
    assert bad.value.reason == "schema_mismatch"


def test_a_non_avro_schema_is_a_schema_mismatch(client):
    schema_id = client.register_schema("p.task-outcomes-value", Schema('{"type": "object"}', "JSON"))
    with pytest.raises(BadRecord) as bad:
        registry_codec(client).decode_value(codec.frame_id(schema_id, b"\x02"), ("TaskOutcome",))
    assert (bad.value.reason, f"schema id {schema_id} is a JSON schema" in bad.value.message) == ("schema_mismatch", True)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (codec.frame_id(4242, b"\x00"), "unknown_schema_id"),
        (b"\x01\x00\x00\x00\x01\x00", "bad_magic_byte"),
        (b"\x00\x00\x00", "bad_magic_byte"),
        (b"{not json", "malformed_json"),
    ],
)
def test_frames_the_registry_cannot_read_have_their_reason(client, raw, reason):
    with pytest.raises(BadRecord) as bad:
        registry_codec(client).decode_value(raw, ("TaskOutcome",))
    assert bad.value.reason == reason


def test_a_truncated_body_under_a_known_id_is_undecodable(client):
    framed = registry_codec(client).encode("TaskOutcome", outcome(), topic=TASK_OUTCOMES)
    with pytest.raises(BadRecord) as bad:
        registry_codec(client).decode_value(framed[:12], ("TaskOutcome",))
    assert bad.value.reason == "undecodable_avro"


def test_a_body_with_bytes_after_the_record_is_undecodable_as_with_fixed_ids(client):
    """contract §9: the same bytes are judged alike by both codecs — the
    fixed-id codec refuses trailing bytes (serde.avro.decode), and so does
    the registry's, though confluent-kafka's deserializer ignores them."""
    framed = registry_codec(client).encode("TaskOutcome", outcome(), topic=TASK_OUTCOMES)
    assert registry_codec(client).decode_value(framed, ("TaskOutcome",)) == outcome()
    with pytest.raises(BadRecord) as bad:
        registry_codec(client).decode_value(framed + b"ZZ", ("TaskOutcome",))
    assert bad.value.reason == "undecodable_avro" and "2 trailing bytes" in str(bad.value)
    with pytest.raises(BadRecord) as fixed:
        codec.FIXED.decode_value(codec.frame_id(catalogue.SCHEMA_IDS["TaskOutcome"], framed[5:] + b"ZZ"), ("TaskOutcome",))
    assert fixed.value.reason == "undecodable_avro"


def test_source_journal_envelopes_decode_through_the_registry(client):
    value = outcome()
    wire = registry_codec(client)
    framed = wire.encode("SourceEvent", {"topic": "task-outcomes", "value": value}, topic="p.source-journal")
    assert wire.decode_source("source-journal", framed) == ("task-outcomes", value)


def test_without_auto_registration_schemas_are_looked_up(client):
    wire = registry_codec(client, auto_register=False)
    with pytest.raises(RegistryError, match="auto-registration is off"):
        wire.prepare({TASK_OUTCOMES: "TaskOutcome"})
    schema_id = client.register_schema(subject(TASK_OUTCOMES), Schema(avro.schema_json("TaskOutcome"), "AVRO"))
    assert wire.prepare({TASK_OUTCOMES: "TaskOutcome"}) == {TASK_OUTCOMES: schema_id}
    assert struct.unpack(">I", wire.encode("TaskOutcome", outcome(), topic=TASK_OUTCOMES)[1:5])[0] == schema_id


def test_configure_subjects_registers_every_catalogue_subject(client):
    levels = {}
    client.set_compatibility = lambda subject_name, level: levels.__setitem__(subject_name, level)  # the mock has no configs
    result = configure_subjects(registry_codec(client), "p.")
    assert set(result) == set(levels) == {f"p.{spec.name}-value" for spec in catalogue.CATALOGUE}
    assert set(levels.values()) == {"BACKWARD"}
    assert all(outcome_text.endswith("BACKWARD") for outcome_text in result.values())
    for spec in catalogue.CATALOGUE:
        latest = client.get_latest_version(f"p.{spec.name}-value")
        assert json.loads(latest.schema.schema_str) == json.loads(avro.schema_json(spec.schema))


def test_an_unreachable_registry_raises_and_is_never_a_dead_letter():
    # Nothing listens on port 9 (discard) on loopback here: the connection is refused at once.
    wire = RegistryCodec(RegistrySettings("http://127.0.0.1:9", client={"max.retries": 0}))
    raw = codec.frame_id(7, b"\x00")
    with pytest.raises(RegistryError):
        wire.decode_value(raw, ("TaskOutcome",))
    message = SimpleNamespace(topic=lambda: TASK_OUTCOMES, value=lambda: raw, key=lambda: b"s", partition=lambda: 0, offset=lambda: 1)
    with pytest.raises(RegistryError):  # not CoreFailure (internal_error), not a dead letter
        process_message(LedgerProcessor(), message, "p.", wire)


def test_registry_settings_from_client_properties():
    assert registry_settings(None, {}) is None
    assert make_codec(None) is FIXED
    settings = registry_settings(None, {
        "bootstrap.servers": "b:9092",
        "schema.registry.url": "https://sr:8081",
        "basic.auth.credentials.source": "USER_INFO",
        "basic.auth.user.info": "ledger:secret",
        "schema.registry.ssl.ca.location": "/etc/ca.pem",
        "auto.register.schemas": "false",
    })
    assert settings == RegistrySettings("https://sr:8081", False, {"basic.auth.user.info": "ledger:secret", "ssl.ca.location": "/etc/ca.pem"})
    assert "secret" not in repr(settings)
    assert registry_settings("http://other:8081", {"schema.registry.url": "https://sr:8081"}, auto_register=True).url == "http://other:8081"
    assert registry_settings("http://sr", {"auto.register.schemas": "false"}, auto_register=True).auto_register is True
    with pytest.raises(ValueError, match="schema.registry.ssl.truststore.location"):
        registry_settings("http://sr", {"schema.registry.ssl.truststore.location": "/x.jks"})
    with pytest.raises(ValueError, match="SASL_INHERIT"):
        registry_settings("http://sr", {"basic.auth.credentials.source": "SASL_INHERIT"})


def test_the_registered_schema_text_is_the_same_in_every_process():
    """A registry compares schema texts: one that changed between processes
    would be a new version (or, looked up, not found)."""
    import os
    import subprocess
    import sys

    code = "from recurrence_ledger.serde import avro; import sys; sys.stdout.write(avro.schema_json('ScopeStatistics'))"
    path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}  # the code under test
    texts = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed, **path}).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert texts == {avro.schema_json("ScopeStatistics")}
    assert avro.schema_json("ScopeStatistics").isascii()


class ConfluentRules:
    """A registry client that deletes subjects as Confluent's Schema Registry
    does: a permanent delete only after a soft one (40405), a second soft
    delete is refused (40404), an unknown subject is 40401. Records calls."""

    def __init__(self, subjects: dict[str, list[int]], soft_deleted: tuple[str, ...] = ()):
        self.subjects = dict(subjects)
        self.soft_deleted = set(soft_deleted)
        self.calls: list[tuple[str, bool]] = []

    def delete_subject(self, name: str, permanent: bool = False) -> list[int]:
        self.calls.append((name, permanent))
        if name not in self.subjects:
            raise SchemaRegistryError(404, 40401, f"Subject '{name}' not found.")
        if not permanent:
            if name in self.soft_deleted:
                raise SchemaRegistryError(404, 40404, f"Subject '{name}' was soft deleted.")
            self.soft_deleted.add(name)
            return self.subjects[name]
        if name not in self.soft_deleted:
            raise SchemaRegistryError(404, 40405, f"Subject '{name}' was not deleted first before being permanently deleted")
        self.soft_deleted.discard(name)
        return self.subjects.pop(name)


def test_delete_subjects_deletes_the_topics_subjects_soft_then_permanently():
    registry = ConfluentRules(
        {"p.task-outcomes-value": [1], "p.dead-letter-value": [1, 2], "p.candidate-sets-value": [3], "q.task-outcomes-value": [1]},
        soft_deleted=("p.candidate-sets-value",),
    )
    result = delete_subjects(RegistrySettings("http://registry"), ["p.task-outcomes", "p.dead-letter", "p.candidate-sets", "p.source-journal"], registry)
    assert result == {
        "p.task-outcomes-value": "deleted (versions 1)",
        "p.dead-letter-value": "deleted (versions 1, 2)",
        "p.candidate-sets-value": "deleted (versions 3)",  # soft-deleted before: only the permanent delete was left
        "p.source-journal-value": "absent",
    }
    assert registry.subjects == {"q.task-outcomes-value": [1]}  # another deployment's subject is untouched
    assert registry.calls == [
        ("p.task-outcomes-value", False), ("p.task-outcomes-value", True),
        ("p.dead-letter-value", False), ("p.dead-letter-value", True),
        ("p.candidate-sets-value", False), ("p.candidate-sets-value", True),
        ("p.source-journal-value", False),
    ]


def test_delete_subjects_reports_a_refusal_and_raises_when_the_registry_does_not_answer():
    class Refusing(ConfluentRules):
        def delete_subject(self, name: str, permanent: bool = False) -> list[int]:
            raise SchemaRegistryError(403, 40301, "User is denied operation Delete on this server.")

    refused = delete_subjects(RegistrySettings("http://registry"), ["p.task-outcomes"], Refusing({}))
    assert refused == {"p.task-outcomes-value": "p.task-outcomes-value: delete: the Schema Registry answered HTTP 403 (error code 40301): "
                                                 "User is denied operation Delete on this server."}
    with pytest.raises(RegistryError, match="p.task-outcomes-value: delete: the Schema Registry did not answer"):
        delete_subjects(RegistrySettings("http://127.0.0.1:9", client={"max.retries": 0}), ["p.task-outcomes"])


def test_delete_subjects_on_the_mock_registry_leaves_other_subjects(client):
    for topic in ("p.task-outcomes", "q.task-outcomes"):
        client.register_schema(subject(topic), Schema(avro.schema_json("TaskOutcome"), "AVRO"))
    assert delete_subjects(RegistrySettings("mock://registry"), ["p.task-outcomes", "p.dead-letter"], client) == {
        "p.task-outcomes-value": "deleted (versions 1)", "p.dead-letter-value": "absent"}
    assert client.get_subjects() == ["q.task-outcomes-value"]
