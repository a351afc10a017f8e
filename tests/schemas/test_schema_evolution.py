"""Revision 3 evolves the view schemas compatibly: the new fields
(``forward_references``, ``unknown_reasons``, …, contract §16–§17; then
ScopeStatistics' ``reviews`` and ``repairs``, §18) are appended at the end
of their records with defaults, so a reader with the new schema reads every
record written with the previous one (BACKWARD). The SourceEvent envelope's
union of event kinds gains ReviewDecision as its last branch (§18), and two
records are new: ReviewDecision and ReviewStatus.

``tests/schemas/previous/`` holds the self-contained schema texts of every
topic record as revision 2 registered them (``avro.schema_json`` at the
commit this revision started from; see its README), and the text of the
ScopeStatistics form that fixed id 16 names (before §18). The broker-free
tests check the evolution with fastavro and the fixed-id codec; the last
one registers the new schemas over the old ones on the real Schema
Registry (the ``schema_registry_url`` fixture; it fails, never skips,
without one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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
#: The earlier forms of revision 3 itself, with their files and ids: the
#: ScopeStatistics of §16–§17, before §18's reviews and repairs (the text of
#: previous/<file>.json).
REVISION_3_FORMS = {"ScopeStatistics": ("ScopeStatistics.id16", 16)}
#: Records whose union gained a branch at its end (contract §18: the
#: ReviewDecision event kind): a body written with the old schema reads the
#: same with the new one, so the record keeps its fixed id.
WIDENED = {"SourceEvent": "value"}
#: Records revision 2 did not have (contract §18; §21's HoldoutObservation).
NEW = ("ReviewDecision", "ReviewStatus", "HoldoutObservation")
#: Records revision 4 changed again (contract §21, §22, §24; their own tests
#: are tests/schemas/test_revision_4_schemas.py and
#: tests/schemas/test_schema_evolution_rev4.py): they differ from their
#: revision-2 text for that reason too.
REVISION_4 = (
    "SourceEvent", "HandoffRevision", "ExperienceRevision", "ExperienceCandidate", "ReviewDecision", "ScopeStatistics", "RevisionStatistics",
    "ReviewStatus",
)
@dataclass(frozen=True)
class Revision:
    """The schemas a contract revision registered: their folder (one
    ``<record>.json`` each), the records whose current form differs from
    them, the records it did not have, and the forms registered after it
    and before the current one (record -> files under previous/)."""

    folder: Path
    changed: frozenset[str]
    new: tuple[str, ...]
    forms: dict[str, tuple[str, ...]]

    def text(self, name: str) -> str:
        """The exact schema text the revision registered for ``name``."""
        return (self.folder / f"{name}.json").read_text(encoding="utf-8").strip()


#: The revisions whose registered schemas are kept (previous/ and
#: previous/rev3/, their README): every current schema appends to theirs.
REVISIONS = {
    "revision 2": Revision(PREVIOUS, frozenset({*CHANGED, *WIDENED, *REVISION_4}), NEW,
                           {name: (file,) for name, (file, _) in REVISION_3_FORMS.items()}),
    "revision 3": Revision(PREVIOUS / "rev3", frozenset(REVISION_4), ("HoldoutObservation",), {}),
}


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


@pytest.mark.parametrize(("revision", "name"), [(revision, name) for revision, spec in REVISIONS.items()
                                                 for name in avro.TOPIC_RECORDS if name not in spec.new])
def test_every_record_keeps_a_revision_s_fields_in_order_and_appends_new_ones_with_defaults(revision, name):
    spec = REVISIONS[revision]
    old, new = json.loads(spec.text(name)), json.loads(avro.schema_json(name))
    assert_appended_with_defaults(old, new)
    assert (old != new) == (name in spec.changed), name


@pytest.mark.parametrize("name", sorted(REVISION_3_FORMS))
def test_the_form_of_id_16_is_what_it_registered_and_the_current_form_appends_to_it(name):
    file, schema_id = REVISION_3_FORMS[name]
    registered = previous(file)
    assert {**json.loads(avro.schema_json(file)), "doc": None} == {**registered, "doc": None}
    assert catalogue.PREVIOUS_SCHEMA_IDS[schema_id] == (name, file)
    assert_appended_with_defaults(registered, json.loads(avro.schema_json(name)))
    assert [field["name"] for field in json.loads(avro.schema_json(name))["fields"][len(registered["fields"]):]] == [
        "reviews", "repairs", "review_threshold", "recurred_by_severity", "withheld", "holdout_conflicts", "effects",
    ]


#: The forms of record revision 3 that record revision 4 evolved (the
#: read side copies the ledger's decisions: ScopeStatistics'
#: review_threshold and its rows' needs_review, RevisionStatistics'
#: version), with their files and ids, and the fields appended.
REVISION_4_FORMS = {
    "ScopeStatistics": ("ScopeStatistics.id20", 20, ["review_threshold", "recurred_by_severity", "withheld", "holdout_conflicts", "effects"]),
    "RevisionStatistics": ("RevisionStatistics.id17", 17, ["severity", "version", "runs_reaching_threshold", "effect"]),
}


def test_the_form_before_record_revision_5_is_what_it_registered_and_the_current_form_appends_the_runs_to_it():
    """Record revision 5: RevisionStatistics names the runs reaching the
    review threshold (the review page marks them as the ledger decided);
    the form before keeps id 22."""
    registered = previous("RevisionStatistics.id22")
    assert {**json.loads(avro.schema_json("RevisionStatistics.id22")), "doc": None} == {**registered, "doc": None}
    assert catalogue.PREVIOUS_SCHEMA_IDS[22] == ("RevisionStatistics", "RevisionStatistics.id22")
    current = json.loads(avro.schema_json("RevisionStatistics"))
    assert_appended_with_defaults(registered, current)
    assert [field["name"] for field in current["fields"][len(registered["fields"]):]] == ["runs_reaching_threshold", "effect"]
    row = {**RevisionStatistics.model_validate({
        "scope_id": "s", "artifact_ref": {"family": "experience", "artifact_id": "a", "revision": 1}, "signature_key": "k",
        "terminal_recurred_streak": 3, "needs_review": True, "recurred": 4, "avoided": 1, "version": 5,
    }).model_dump(mode="json", by_alias=True)}
    old = {key: value for key, value in row.items() if key not in ("runs_reaching_threshold", "effect")}
    frame = codec.frame_id(22, avro.encode("RevisionStatistics.id22", old))
    assert codec.decode_value(frame, ("RevisionStatistics",)) == {**old, "runs_reaching_threshold": [], "effect": None}
    written = codec.encode("RevisionStatistics", {**row, "runs_reaching_threshold": [None, 7]})
    assert written[1:5] == (26).to_bytes(4, "big")
    assert codec.decode_value(written, ("RevisionStatistics",))["runs_reaching_threshold"] == [None, 7]


#: Record revision 6 (contract §21.4): the forms before the effect figures,
#: with their files, ids, the appended fields and their defaults, and the
#: new ids.
REVISION_6_FORMS = {
    "RevisionStatistics": ("RevisionStatistics.id23", 23, {"effect": None}, 26),
    "ScopeStatistics": (
        "ScopeStatistics.id21", 21, {"withheld": 0, "holdout_conflicts": 0, "effects": {"helps": 0, "harms": 0, "undecided": 0, "insufficient": 0}}, 27,
    ),
}


@pytest.mark.parametrize("name", sorted(REVISION_6_FORMS))
def test_the_form_before_record_revision_6_is_what_it_registered_and_reads_with_the_effect_figures_defaulted(name, tmp_path):
    """Record revision 6: the §21 effect figures are appended under a new
    id; a row written under the form before decodes with them at their
    defaults."""
    file, old_id, defaults, new_id = REVISION_6_FORMS[name]
    registered = previous(file)
    assert {**json.loads(avro.schema_json(file)), "doc": None} == {**registered, "doc": None}
    assert catalogue.PREVIOUS_SCHEMA_IDS[old_id] == (name, file)
    assert catalogue.SCHEMA_IDS[name] == new_id
    current = json.loads(avro.schema_json(name))
    assert_appended_with_defaults(registered, current)
    assert [field["name"] for field in current["fields"][len(registered["fields"]):]] == list(defaults)
    model = {"RevisionStatistics": RevisionStatistics, "ScopeStatistics": ScopeStatistics}[name]
    run_journal(case("holdout_effects")[0], tmp_path, show_progress=False)
    topic = {"RevisionStatistics": "revision-statistics", "ScopeStatistics": "recurrence-statistics"}[name]
    row = next(row for row in reversed(read_outputs(tmp_path)[topic]) if row.get("effect") or row.get("withheld"))
    row = model.model_validate(row).model_dump(mode="json", by_alias=True)
    old = {key: value for key, value in row.items() if key not in defaults}
    assert codec.decode_value(codec.frame_id(old_id, avro.encode(file, old)), (name,)) == {**old, **defaults}
    written = codec.encode(name, row)
    assert written[1:5] == new_id.to_bytes(4, "big")
    assert codec.decode_value(written, (name,)) == row


@pytest.mark.parametrize("name", sorted(REVISION_4_FORMS))
def test_the_forms_before_record_revision_4_are_what_they_registered_and_the_current_form_appends_to_them(name):
    file, schema_id, appended = REVISION_4_FORMS[name]
    registered = previous(file)
    assert {**json.loads(avro.schema_json(file)), "doc": None} == {**registered, "doc": None}
    assert catalogue.PREVIOUS_SCHEMA_IDS[schema_id] == (name, file)
    assert_appended_with_defaults(registered, json.loads(avro.schema_json(name)))
    assert [field["name"] for field in json.loads(avro.schema_json(name))["fields"][len(registered["fields"]):]] == appended


@pytest.mark.parametrize("name", sorted(WIDENED))
def test_a_widened_union_keeps_its_branches_in_order_and_its_id(name):
    field = WIDENED[name]
    old = next(f for f in previous(name)["fields"] if f["name"] == field)["type"]
    new = next(f for f in json.loads(avro.schema_json(name))["fields"] if f["name"] == field)["type"]
    names = [branch["name"] if isinstance(branch, dict) else branch for branch in new]
    assert names[: len(old)] == [branch["name"] if isinstance(branch, dict) else branch for branch in old]
    assert names[len(old):] == ["recurrence_ledger.ReviewDecision"]
    assert catalogue.SCHEMA_IDS[name] == 1 or catalogue.PREVIOUS_SCHEMA_IDS[1] == (name, f"{name}.rev3")  # revision 4 gave it a new id
    # an envelope written with the revision-2 schema decodes as the same value today
    import fastavro
    from io import BytesIO

    value = {"topic": "task-outcomes", "value": {
        "scope_id": "s", "journal_position": 1, "source_ref": {"source_type": "task_outcome", "source_id": "O1"},
        "status": "completed", "handoff_receipt_ref": None, "observations": [], "checks": []}}
    buffer = BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(previous(name)), value)
    assert codec.decode_value(codec.frame_id(1, buffer.getvalue()), (name,)) == value


def test_the_new_records_have_new_ids_and_no_earlier_form():
    assert {name: catalogue.SCHEMA_IDS[name] for name in NEW} == {
        "ReviewDecision": catalogue.SCHEMA_IDS["ReviewDecision"], "ReviewStatus": 28, "HoldoutObservation": 25,
    }
    assert 18 in (catalogue.SCHEMA_IDS["ReviewDecision"], *catalogue.PREVIOUS_SCHEMA_IDS)  # contract revision 4 gave it a new id
    assert catalogue.PREVIOUS_SCHEMA_IDS[19] == ("ReviewStatus", "ReviewStatus.rev3")
    assert catalogue.SCHEMA_IDS["ScopeStatistics"] == 27
    assert catalogue.SCHEMA_IDS["RevisionStatistics"] == 26
    assert not any((PREVIOUS / f"{name}.json").exists() for name in NEW)


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_the_revision_2_schema_file_is_the_schema_revision_2_registered(name):
    file, schema_id = CHANGED[name]
    expanded, registered = json.loads(avro.schema_json(file)), previous(name)
    assert {**expanded, "doc": None} == {**registered, "doc": None}
    assert catalogue.PREVIOUS_SCHEMA_IDS[schema_id] == (name, file)
    assert catalogue.SCHEMA_IDS[name] not in (schema_id, *catalogue.PREVIOUS_SCHEMA_IDS)


@pytest.mark.parametrize("form", ["revision 2", "id 16"])
def test_a_view_row_written_under_an_earlier_id_reads_with_the_new_fields_defaulted(tmp_path, form):
    journal, _ = case("unknown_reasons" if form == "revision 2" else "review_loop")
    run_journal(journal, tmp_path, show_progress=False)
    outputs = read_outputs(tmp_path)
    pairs = (("recurrence-statistics", "ScopeStatistics", ScopeStatistics), ("revision-statistics", "RevisionStatistics", RevisionStatistics))
    for topic, name, model in pairs if form == "revision 2" else pairs[:1]:
        current = outputs[topic][-1]
        file, schema_id = CHANGED[name] if form == "revision 2" else REVISION_3_FORMS[name]
        earlier = previous(name if form == "revision 2" else file)
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


@pytest.mark.parametrize("revision", sorted(REVISIONS))
def test_the_registry_accepts_the_current_schemas_over_a_revision_s_as_backward_compatible(revision, registry_subjects):
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    spec, client = REVISIONS[revision], registry_subjects.client
    for name in avro.TOPIC_RECORDS:
        subject = registry_subjects.subject(name)
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
        client.register_schema(registry_subjects.subject("ScopeStatistics"), Schema(json.dumps(broken), "AVRO"))
    assert refused.value.http_status_code == 409
