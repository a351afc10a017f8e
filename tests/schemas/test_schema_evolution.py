"""Schema evolution, revision by revision (contract §1: a record that
changes gets a new fixed id; its earlier forms stay readable under theirs).

``tests/schemas/previous/`` holds the self-contained schema text of every
topic record as revision 2 registered it, ``previous/rev3/`` as revision 3
registered it (``avro.schema_json`` at the commit each next revision
started from; see the README), and ``previous/<file>.json`` the text each
other earlier fixed id names. Revision 3 appended the view fields of
§16–§18 and widened the SourceEvent union by ReviewDecision (a record of
its own, with ReviewStatus); revision 4 (§22, §24) appended ``severity``,
``reason_code`` and the view figures. For every revision the checks are the
same, parametrized: each current schema keeps the revision's fields in
order and appends new ones with defaults (BACKWARD), exactly the records
that changed differ, every earlier form is the text it registered, and the
real Schema Registry accepts the current schemas over the revision's (the
``schema_registry_url`` fixture; it fails, never skips, without one).
"""

from __future__ import annotations

import io
import json
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import fastavro
import pytest

from recurrence_ledger import catalogue
from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.intake import validate
from recurrence_ledger.ledger.records import RevisionStatistics, ScopeStatistics
from recurrence_ledger.serde import avro, codec
from tests.conftest import case, read_outputs

PREVIOUS = Path(__file__).resolve().parent / "previous"
#: Records revision 4 changed (contract §22, §24), each with a new id.
REVISION_4 = ("SourceEvent", "ExperienceRevision", "ExperienceCandidate", "ReviewDecision", "ScopeStatistics", "RevisionStatistics")


@dataclass(frozen=True)
class Revision:
    """A contract revision's registered schemas: their folder, the records
    whose current form differs from them, the records the revision did not
    have, and the forms registered after it and before the current one
    (record -> files under previous/)."""

    folder: Path
    changed: frozenset[str]
    new: tuple[str, ...] = ()
    forms: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def text(self, name: str) -> str:
        """The exact schema text the revision registered for ``name``."""
        return (self.folder / f"{name}.json").read_text(encoding="utf-8").strip()


REVISIONS = {
    # Revision 3 changed ScopeStatistics and RevisionStatistics (§16–§18) and widened SourceEvent's union.
    "revision 2": Revision(PREVIOUS, frozenset({"ScopeStatistics", "RevisionStatistics", "SourceEvent", *REVISION_4}),
                           new=("ReviewDecision", "ReviewStatus"), forms={"ScopeStatistics": ("ScopeStatistics.id16",)}),
    "revision 3": Revision(PREVIOUS / "rev3", frozenset(REVISION_4)),
}
#: The records of each revision, as (revision, record) pairs.
REVISION_RECORDS = [(revision, name) for revision, spec in REVISIONS.items() for name in avro.TOPIC_RECORDS if name not in spec.new]
#: Every earlier fixed id with a registered text: the file under previous/
#: holding it, and the top-level fields the current form appends to it
#: (None: not only at the top level). Id 6 (RecurrenceMatch, revision 1) predates the kept texts.
EARLIER_FORMS = {
    9: ("ScopeStatistics.json", None),
    13: ("RevisionStatistics.json", None),
    16: ("ScopeStatistics.id16.json", ["reviews", "repairs", "review_threshold", "recurred_by_severity"]),
    20: ("ScopeStatistics.id20.json", ["review_threshold", "recurred_by_severity"]),
    17: ("RevisionStatistics.id17.json", ["severity", "version", "runs_reaching_threshold"]),
    22: ("RevisionStatistics.id22.json", ["runs_reaching_threshold"]),
    1: ("rev3/SourceEvent.json", None),
    2: ("rev3/ExperienceRevision.json", None),
    11: ("rev3/ExperienceCandidate.json", None),
    18: ("rev3/ReviewDecision.json", ["reason_code"]),
}
#: The fields revision 4 appends, per record (nested records by name).
APPENDED_IN_REVISION_4 = {
    "FailureRecord": ["severity"],
    "CandidateFailure": ["severity"],
    "ReviewDecision": ["reason_code"],
    "RevisionStatistics": ["severity", "version", "runs_reaching_threshold"],
    "RecurrenceStreak": ["needs_review", "severity"],
    "ReviewCounts": ["rejected_by_reason", "promotion_rate"],
    "ScopeStatistics": ["review_threshold", "recurred_by_severity"],
}
#: Records whose union gained a branch at its end (contract §18: the
#: ReviewDecision event kind): a body written with the old schema reads the
#: same with the new one.
WIDENED = {"SourceEvent": "value"}


def previous_text(file: str) -> str:
    """The exact schema text previous/<file>.json holds."""
    return (PREVIOUS / f"{file}.json").read_text(encoding="utf-8").strip()


def previous(file: str) -> dict:
    """The schema text previous/<file>.json holds, parsed."""
    return json.loads(previous_text(file))


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


def assert_appended_with_defaults(old_schema: dict, new_schema: dict) -> None:
    """Every record of ``old_schema`` keeps its fields in order in
    ``new_schema``, and the fields after them have defaults."""
    old = _records(old_schema, {})
    new = _records(new_schema, {})
    for record, definition in old.items():
        old_fields = [field["name"] for field in definition["fields"]]
        new_fields = new[record]["fields"]
        assert [field["name"] for field in new_fields[: len(old_fields)]] == old_fields, record
        for field in new_fields[len(old_fields):]:
            assert "default" in field, f"{record}.{field['name']} has no default"


@pytest.mark.parametrize(("revision", "name"), REVISION_RECORDS)
def test_every_record_keeps_a_revision_s_fields_in_order_and_appends_new_ones_with_defaults(revision, name):
    spec = REVISIONS[revision]
    old, new = json.loads(spec.text(name)), json.loads(avro.schema_json(name))
    assert_appended_with_defaults(old, new)
    assert (old != new) == (name in spec.changed), name


def test_the_fields_revision_4_appends_are_the_contract_s():
    appended = {}
    for name in REVISION_4:
        old, new = _records(json.loads(REVISIONS["revision 3"].text(name)), {}), _records(json.loads(avro.schema_json(name)), {})
        for record, definition in old.items():
            extra = [field["name"] for field in new[record]["fields"][len(definition["fields"]):]]
            if extra:
                appended[record] = extra
    assert appended == APPENDED_IN_REVISION_4


def test_every_earlier_id_has_its_registered_text_and_no_current_record_uses_one():
    assert set(EARLIER_FORMS) == set(catalogue.PREVIOUS_SCHEMA_IDS) - {6}
    assert not set(catalogue.SCHEMA_IDS.values()) & set(catalogue.PREVIOUS_SCHEMA_IDS)


@pytest.mark.parametrize("schema_id", sorted(EARLIER_FORMS))
def test_an_earlier_form_is_what_its_id_registered_and_the_current_form_appends_to_it(schema_id):
    name, file = catalogue.PREVIOUS_SCHEMA_IDS[schema_id]
    text, appended = EARLIER_FORMS[schema_id]
    registered = json.loads((PREVIOUS / text).read_text(encoding="utf-8"))
    assert {**json.loads(avro.schema_json(file)), "doc": None} == {**registered, "doc": None}
    current = json.loads(avro.schema_json(name))
    assert_appended_with_defaults(registered, current)
    if appended is not None:
        assert [field["name"] for field in current["fields"][len(registered["fields"]):]] == appended


def test_the_revision_4_records_have_their_new_ids():
    assert {name: catalogue.SCHEMA_IDS[name] for name in REVISION_4} == {
        "SourceEvent": 42, "ExperienceRevision": 30, "ExperienceCandidate": 31, "ReviewDecision": 32, "ScopeStatistics": 21,
        "RevisionStatistics": 23}


@pytest.mark.parametrize("form", ["revision 2", "id 16"])
def test_a_view_row_written_under_an_earlier_id_reads_with_the_new_fields_defaulted(tmp_path, form):
    journal, _ = case("unknown_reasons" if form == "revision 2" else "review_loop")
    run_journal(journal, tmp_path, show_progress=False)
    outputs = read_outputs(tmp_path)
    pairs = (("recurrence-statistics", "ScopeStatistics", ScopeStatistics), ("revision-statistics", "RevisionStatistics", RevisionStatistics))
    for topic, name, model in pairs if form == "revision 2" else pairs[:1]:
        current = outputs[topic][-1]
        schema_id = {"ScopeStatistics": 9, "RevisionStatistics": 13}[name] if form == "revision 2" else 16
        file = catalogue.PREVIOUS_SCHEMA_IDS[schema_id][1]
        earlier = previous(EARLIER_FORMS[schema_id][0].removesuffix(".json"))
        old_fields = {field["name"] for field in earlier["fields"]}
        old_value = {key: value for key, value in current.items() if key in old_fields}
        if "top_revisions" in old_value:
            streak_fields = {field["name"] for field in _records(earlier, {})["RecurrenceStreak"]["fields"]}
            old_value["top_revisions"] = [{k: v for k, v in row.items() if k in streak_fields} for row in old_value["top_revisions"]]
        frame = codec.frame_id(schema_id, avro.encode(file, old_value))
        decoded = codec.decode_value(frame, (name,))
        defaults = model.model_validate(old_value).model_dump(mode="json", by_alias=True)
        assert decoded == defaults
        if form == "revision 2":
            assert decoded["unknown_reasons"] == dict.fromkeys(decoded["unknown_reasons"], 0)
        else:
            assert current["reviews"]["approved"] == 3 and current["repairs"]["failed"] == 1
            fresh = ScopeStatistics.model_validate({"scope_id": "s", "as_of_position": 0, "selected": 0, "recurred": 0, "avoided": 0, "unknown": 0,
                                                    "unlinked_handoff_citations": 0, "needing_review": 0, "top_revisions": [],
                                                    "pending_outcomes": 0, "late_revisions": 0}).model_dump(mode="json")
            assert decoded == {
                **current, "reviews": fresh["reviews"], "repairs": dict.fromkeys(current["repairs"], 0), "review_threshold": 0,
                "recurred_by_severity": fresh["recurred_by_severity"],
                "top_revisions": [{**row, "needs_review": False, "severity": None} for row in current["top_revisions"]],
            }
        # what is written now carries the new id and every figure
        written = codec.encode(name, current)
        assert written[1:5] == catalogue.SCHEMA_IDS[name].to_bytes(4, "big")
        assert codec.decode_value(written, (name,)) == current


def test_a_row_written_under_id_22_reads_without_the_runs_reaching_the_threshold():
    """Record revision 5: RevisionStatistics names the runs reaching the
    review threshold (the review page marks them as the ledger decided);
    the form before keeps id 22."""
    row = {**RevisionStatistics.model_validate({
        "scope_id": "s", "artifact_ref": {"family": "experience", "artifact_id": "a", "revision": 1}, "signature_key": "k",
        "terminal_recurred_streak": 3, "needs_review": True, "recurred": 4, "avoided": 1, "version": 5,
    }).model_dump(mode="json", by_alias=True)}
    old = {key: value for key, value in row.items() if key != "runs_reaching_threshold"}
    frame = codec.frame_id(22, avro.encode("RevisionStatistics.id22", old))
    assert codec.decode_value(frame, ("RevisionStatistics",)) == {**old, "runs_reaching_threshold": []}
    written = codec.encode("RevisionStatistics", {**row, "runs_reaching_threshold": [None, 7]})
    assert written[1:5] == (23).to_bytes(4, "big")
    assert codec.decode_value(written, ("RevisionStatistics",))["runs_reaching_threshold"] == [None, 7]


@pytest.mark.parametrize("name", sorted(WIDENED))
def test_a_widened_union_keeps_its_branches_in_order_and_its_id(name):
    field = WIDENED[name]
    old = next(f for f in previous(name)["fields"] if f["name"] == field)["type"]
    new = next(f for f in json.loads(avro.schema_json(name))["fields"] if f["name"] == field)["type"]
    names = [branch["name"] if isinstance(branch, dict) else branch for branch in new]
    assert names[: len(old)] == [branch["name"] if isinstance(branch, dict) else branch for branch in old]
    assert names[len(old):] == ["recurrence_ledger.ReviewDecision"]
    assert catalogue.SCHEMA_IDS[name] == 1 or catalogue.PREVIOUS_SCHEMA_IDS[1][0] == name  # revision 4 gave it a new id
    # an envelope written with the revision-2 schema decodes as the same value today
    value = {"topic": "task-outcomes", "value": {
        "scope_id": "s", "journal_position": 1, "source_ref": {"source_type": "task_outcome", "source_id": "O1"},
        "status": "completed", "handoff_receipt_ref": None, "observations": [], "checks": []}}
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(previous(name)), value)
    assert codec.decode_value(codec.frame_id(1, buffer.getvalue()), (name,)) == value


def test_the_records_new_in_revision_3_have_no_revision_2_form():
    new = REVISIONS["revision 2"].new
    assert catalogue.SCHEMA_IDS["ReviewStatus"] == 19 and catalogue.PREVIOUS_SCHEMA_IDS[18][0] == "ReviewDecision"
    assert not any((PREVIOUS / f"{name}.json").exists() for name in new)


def _experience(failure_extra: dict | None = None) -> dict:
    failure = {"signature": {"recall_cue": "Disk full", "symptom": None}, "repair_surface": "experience_content",
               "verification": {"condition": "Disk checked", "check_subject": "Disk check"}}
    return {"scope_id": "s", "journal_position": 1, "artifact_ref": {"family": "experience", "artifact_id": "E", "revision": 1},
            "content": {"situation": "a", "action": "b", "outcome": "c", "lesson": "d", "failure": {**failure, **(failure_extra or {})}}}


def test_an_event_written_under_the_revision_3_id_reads_as_unrated_and_keeps_its_identity():
    from recurrence_ledger.ledger.models import identity_content

    old = _experience()
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(json.loads(REVISIONS["revision 3"].text("ExperienceRevision"))), old)
    decoded = codec.decode_value(codec.frame_id(2, buffer.getvalue()), ("ExperienceRevision",))
    assert decoded["content"]["failure"]["severity"] is None
    event = validate("experience-revisions", decoded)
    # the identity compares the event without the null revision-4 field: the content revision 3 compared
    stripped = identity_content("experience-revisions", event)
    assert stripped["content"]["failure"] == old["content"]["failure"]
    # and the new form carries a severity under the new id
    rated = validate("experience-revisions", _experience({"severity": "critical"}))
    frame = codec.encode("ExperienceRevision", rated)
    assert frame[1:5] == (30).to_bytes(4, "big")
    assert codec.decode_value(frame, ("ExperienceRevision",))["content"]["failure"]["severity"] == "critical"
    assert identity_content("experience-revisions", rated) == rated


def test_a_decision_written_under_the_revision_3_id_reads_without_a_reason_code():
    decision = {"scope_id": "s", "decision_id": "D", "candidate_id": "sha256:" + "0" * 64, "journal_position": 3,
                "decision": "rejected", "reason": "no", "reviewer": "r", "decided_at": "2026-12-02T00:00:00Z", "fix_revision": None}
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(json.loads(REVISIONS["revision 3"].text("ReviewDecision"))), decision)
    decoded = codec.decode_value(codec.frame_id(18, buffer.getvalue()), ("ReviewDecision",))
    assert decoded == {**decision, "reason_code": None}
    coded = {**decision, "reason_code": "weak_evidence"}
    assert codec.decode_value(codec.encode("ReviewDecision", coded), ("ReviewDecision",)) == coded


@pytest.mark.parametrize("revision", sorted(REVISIONS))
def test_the_registry_accepts_the_current_schemas_over_a_revision_s_as_backward_compatible(revision, schema_registry_url):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    spec = REVISIONS[revision]
    client = SchemaRegistryClient({"url": schema_registry_url})
    prefix = f"evolution-{revision[-1]}-{uuid4().hex[:8]}."
    subjects = []
    try:
        for name in avro.TOPIC_RECORDS:
            subject = f"{prefix}{name}-value"
            subjects.append(subject)
            if name in spec.new:  # a first version
                client.register_schema(subject, Schema(avro.schema_json(name), "AVRO"))
                client.set_compatibility(subject, "BACKWARD")
                assert len(client.get_versions(subject)) == 1, name
                continue
            old_id = client.register_schema(subject, Schema(spec.text(name), "AVRO"))
            client.set_compatibility(subject, "BACKWARD")
            forms = [previous_text(file) for file in spec.forms.get(name, ())]
            for text in [*forms, avro.schema_json(name)]:
                new = Schema(text, "AVRO")
                assert client.test_compatibility(subject, new) is True, name
                new_id = client.register_schema(subject, new)  # a refused schema raises (409)
            changed = name in spec.changed
            assert (new_id == old_id) == (not changed), name
            assert len(client.get_versions(subject)) == 1 + changed + len(forms), name
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
