"""Revision 3 evolves the view schemas compatibly: the new fields
(``forward_references``, ``unknown_reasons``, …, contract §16–§17) are
appended at the end of their records with defaults, so a reader with the
new schema reads every record written with the previous one (BACKWARD).

``tests/schemas/previous/`` holds the self-contained schema texts of every
topic record as revision 2 registered them (``avro.schema_json`` at the
commit this revision started from; see its README). The broker-free tests
check the evolution with fastavro and the fixed-id codec; the last one
registers the new schemas over the old ones on the real Schema Registry
(the ``schema_registry_url`` fixture; it fails, never skips, without one).
"""

from __future__ import annotations

import json
from pathlib import Path
from uuid import uuid4

import pytest

from recurrence_ledger import catalogue
from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.records import RevisionStatistics, ScopeStatistics
from recurrence_ledger.serde import avro, codec
from tests.conftest import case, read_outputs

PREVIOUS = Path(__file__).resolve().parent / "previous"
#: Record schemas that changed in revision 3, with their revision-2 files
#: and ids (contract §1: the record gets a new fixed id).
CHANGED = {"ScopeStatistics": ("ScopeStatistics.rev2", 9), "RevisionStatistics": ("RevisionStatistics.rev2", 13)}


def previous_text(name: str) -> str:
    """The exact schema text revision 2 registered for ``name``."""
    return (PREVIOUS / f"{name}.json").read_text(encoding="utf-8").strip()


def previous(name: str) -> dict:
    return json.loads(previous_text(name))


def _records(avro_type, found: dict) -> dict:
    """Every record definition inside an expanded schema, by name."""
    if isinstance(avro_type, list):
        for branch in avro_type:
            _records(branch, found)
    elif isinstance(avro_type, dict):
        if avro_type.get("type") == "record":
            found[avro_type["name"].rsplit(".", 1)[-1]] = avro_type
            for field in avro_type["fields"]:
                _records(field["type"], found)
        elif avro_type.get("type") in ("array", "map"):
            _records(avro_type.get("items", avro_type.get("values")), found)
    return found


@pytest.mark.parametrize("name", avro.TOPIC_RECORDS)
def test_every_record_keeps_its_fields_in_order_and_appends_new_ones_with_defaults(name):
    old = _records(previous(name), {})
    new = _records(json.loads(avro.schema_json(name)), {})
    for record, definition in old.items():
        old_fields = [field["name"] for field in definition["fields"]]
        new_fields = new[record]["fields"]
        assert [field["name"] for field in new_fields[: len(old_fields)]] == old_fields, record
        for field in new_fields[len(old_fields):]:
            assert "default" in field, f"{record}.{field['name']} has no default"
    unchanged = json.loads(avro.schema_json(name)) == previous(name)
    assert unchanged == (name not in CHANGED), name


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_the_revision_2_schema_file_is_the_schema_revision_2_registered(name):
    file, schema_id = CHANGED[name]
    expanded, registered = json.loads(avro.schema_json(file)), previous(name)
    assert {**expanded, "doc": None} == {**registered, "doc": None}
    assert catalogue.PREVIOUS_SCHEMA_IDS[schema_id] == (name, file)
    assert catalogue.SCHEMA_IDS[name] not in (schema_id, *catalogue.PREVIOUS_SCHEMA_IDS)


def test_a_view_row_written_under_its_revision_2_id_reads_with_the_new_fields_defaulted(tmp_path):
    journal, _ = case("unknown_reasons")
    run_journal(journal, tmp_path, show_progress=False)
    outputs = read_outputs(tmp_path)
    for topic, name, model in (("recurrence-statistics", "ScopeStatistics", ScopeStatistics),
                               ("revision-statistics", "RevisionStatistics", RevisionStatistics)):
        current = outputs[topic][-1]
        file, schema_id = CHANGED[name]
        old_fields = {field["name"] for field in previous(name)["fields"]}
        old_value = {key: value for key, value in current.items() if key in old_fields}
        if "top_revisions" in old_value:
            streak_fields = {field["name"] for field in _records(previous(name), {})["RecurrenceStreak"]["fields"]}
            old_value["top_revisions"] = [{k: v for k, v in row.items() if k in streak_fields} for row in old_value["top_revisions"]]
        frame = codec.frame_id(schema_id, avro.encode(file, old_value))
        decoded = codec.decode_value(frame, (name,))
        defaults = model.model_validate(old_value).model_dump(mode="json", by_alias=True)
        assert decoded == defaults
        assert decoded["unknown_reasons"] == dict.fromkeys(decoded["unknown_reasons"], 0)
        # what is written now carries the new id and every figure
        written = codec.encode(name, current)
        assert written[1:5] == catalogue.SCHEMA_IDS[name].to_bytes(4, "big")
        assert codec.decode_value(written, (name,)) == current


def test_the_registry_accepts_the_new_schemas_over_the_old_ones_as_backward_compatible(schema_registry_url):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    client = SchemaRegistryClient({"url": schema_registry_url})
    prefix = f"evolution-{uuid4().hex[:8]}."
    subjects = []
    try:
        for name in avro.TOPIC_RECORDS:
            subject = f"{prefix}{name}-value"
            subjects.append(subject)
            old_id = client.register_schema(subject, Schema(previous_text(name), "AVRO"))
            client.set_compatibility(subject, "BACKWARD")
            new = Schema(avro.schema_json(name), "AVRO")
            assert client.test_compatibility(subject, new) is True, name
            new_id = client.register_schema(subject, new)  # a refused schema raises (409)
            assert (new_id == old_id) == (name not in CHANGED), name
            versions = client.get_versions(subject)
            assert len(versions) == (2 if name in CHANGED else 1), name
        # and the registry does refuse a change that is not backward compatible
        broken = json.loads(avro.schema_json("ScopeStatistics"))
        broken["fields"].append({"name": "no_default", "type": "long"})
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema(f"{prefix}ScopeStatistics-value", Schema(json.dumps(broken), "AVRO"))
        assert refused.value.http_status_code == 409
    finally:
        for subject in subjects:
            for permanent in (False, True):
                try:
                    client.delete_subject(subject, permanent=permanent)
                except SchemaRegistryError:
                    pass
