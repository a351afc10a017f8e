"""Revision 4 (contract §21) evolves five records BACKWARD-compatibly:
HandoffRevision gains ``withheld_citations`` (default ``[]``), so does the
HandoffRevision inside the SourceEvent envelope, and the view rows gain the
effect figures (RevisionStatistics ``effect``, ScopeStatistics
``withheld``/``holdout_conflicts``/``effects``, ReviewStatus
``repair.effect``). Each gets a new fixed id from §21's range; the forms
written before keep their ids as ``[[previous_schema]]`` and read with the
new fields defaulted. The real Schema Registry accepts every new form over
the old one; HoldoutObservation is new."""

from __future__ import annotations

import json

import pytest

from recurrence_ledger import catalogue
from recurrence_ledger.serde import avro, codec
from tests.schemas.test_schema_evolution import assert_appended_with_defaults

#: record → (its revision-3 file, the id that file keeps, the new id)
EVOLVED_IN_4 = {
    "HandoffRevision": ("HandoffRevision.rev3", 3, 24),
    "SourceEvent": ("SourceEvent.rev3", 1, 42),
    "RevisionStatistics": ("RevisionStatistics.id17", 17, 26),
    "ScopeStatistics": ("ScopeStatistics.id20", 20, 27),
    "ReviewStatus": ("ReviewStatus.rev3", 19, 28),
}


@pytest.mark.parametrize("name", sorted(EVOLVED_IN_4))
def test_each_evolved_record_appends_with_defaults_under_a_new_id(name):
    file, old_id, new_id = EVOLVED_IN_4[name]
    assert catalogue.SCHEMA_IDS[name] == new_id
    assert catalogue.PREVIOUS_SCHEMA_IDS[old_id] == (name, file)
    assert_appended_with_defaults(json.loads(avro.schema_json(file)), json.loads(avro.schema_json(name)))


def test_holdout_observations_have_a_topic_and_an_id_of_their_own():
    assert catalogue.SCHEMA_IDS["HoldoutObservation"] == 25
    spec = next(spec for spec in catalogue.CATALOGUE if spec.name == catalogue.HOLDOUT_OBSERVATIONS)
    assert (spec.direction, spec.role, spec.key, spec.cleanup_policy) == ("out", "fact", "scope_id", "delete")


def test_a_handoff_written_before_revision_4_reads_with_no_withheld_entries():
    old = {"scope_id": "s", "journal_position": 2, "artifact_ref": {"family": "handoff", "artifact_id": "H1", "revision": 1},
           "artifact_citations": [{"artifact_ref": {"family": "experience", "artifact_id": "E1", "revision": 1}}], "memory_citations": []}
    assert codec.decode_value(codec.frame_id(3, avro.encode("HandoffRevision.rev3", old)), ("HandoffRevision",)) == {**old, "withheld_citations": []}
    envelope = {"topic": "handoff-revisions", "value": old}
    decoded = codec.decode_value(codec.frame_id(1, avro.encode("SourceEvent.rev3", envelope)), ("SourceEvent",))
    assert decoded == {"topic": "handoff-revisions", "value": {**old, "withheld_citations": []}}
    new = {**old, "withheld_citations": [{"artifact_ref": {"family": "experience", "artifact_id": "E2", "revision": 1}}]}
    written = codec.encode("HandoffRevision", new)
    assert written[1:5] == (24).to_bytes(4, "big")
    assert codec.decode_value(written, ("HandoffRevision",)) == new


def test_the_registry_accepts_revision_4_over_revision_3_as_backward_compatible(registry_subjects):
    from confluent_kafka.schema_registry import Schema

    client = registry_subjects.client
    for name, (file, _, _) in sorted(EVOLVED_IN_4.items()):
        subject = registry_subjects.subject(name)
        old_id = client.register_schema(subject, Schema(avro.schema_json(file), "AVRO"))
        client.set_compatibility(subject, "BACKWARD")
        new = Schema(avro.schema_json(name), "AVRO")
        assert client.test_compatibility(subject, new) is True, name
        assert client.register_schema(subject, new) != old_id, name
        assert len(client.get_versions(subject)) == 2, name
    client.register_schema(registry_subjects.subject("HoldoutObservation"), Schema(avro.schema_json("HoldoutObservation"), "AVRO"))
    # and a new field without a default would be refused
    broken = json.loads(avro.schema_json("HandoffRevision"))
    broken["fields"].append({"name": "no_default", "type": "long"})
    assert client.test_compatibility(registry_subjects.subject("HandoffRevision"), Schema(json.dumps(broken), "AVRO")) is False
