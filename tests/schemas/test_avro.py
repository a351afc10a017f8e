"""The .avsc files are the wire contract: fastavro parses them, every example
event round-trips through Avro to an equal pydantic model, and the Avro
records have exactly the pydantic models' fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic import BaseModel

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.workload import Workload, generate_journal
from recurrence_ledger.ledger import models
from recurrence_ledger.ledger.holdout_records import HoldoutObservation
from recurrence_ledger.ledger.records import (
    AdmissionDecision,
    CandidateSet,
    DeadLetter,
    RecurrenceMatch,
    RecurrenceObservation,
    ReviewCandidate,
    ReviewStatus,
    RevisionStatistics,
    ScopeStatistics,
)
from recurrence_ledger.serde import avro
from tests.conftest import CASE_NAMES, case, read_outputs

OUTPUT_MODELS = {
    "recurrence-matches": ("RecurrenceMatch", RecurrenceMatch),
    "recurrence-observations": ("RecurrenceObservation", RecurrenceObservation),
    "review-candidates": ("ReviewCandidate", ReviewCandidate),
    "recurrence-statistics": ("ScopeStatistics", ScopeStatistics),
    "revision-statistics": ("RevisionStatistics", RevisionStatistics),
    "admission-decisions": ("AdmissionDecision", AdmissionDecision),
    "candidate-sets": ("CandidateSet", CandidateSet),
    "review-status": ("ReviewStatus", ReviewStatus),
    "holdout-observations": ("HoldoutObservation", HoldoutObservation),
}
#: The model of every record that travels on a topic, by its name (the Avro record's).
TOPIC_MODELS = {model.__name__: model for model in [*models.SOURCE_KINDS.values(), *(model for _, model in OUTPUT_MODELS.values()), DeadLetter]}
#: The packaged example journal: it has admission candidates.
EXAMPLE = Path(__file__).resolve().parents[2] / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"


def example_records() -> list[dict]:
    records = []
    for name in CASE_NAMES:
        journal, _ = case(name)
        records += [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    records += [json.loads(line) for line in EXAMPLE.read_text().splitlines() if line.strip()]
    records += list(generate_journal(Workload(scopes=1, outcomes_per_scope=30, heads_per_scope=4, handoffs=2)))
    return [record for record in records if _valid(record)]


def _valid(record: dict) -> bool:
    """Whether a journal line is a valid event (the fixture cases hold bad
    input on purpose, such as critical_runs' unknown severity)."""
    try:
        models.SOURCE_KINDS[record["topic"]].model_validate(record["value"])
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("name", avro.TOPIC_RECORDS)
def test_schema_parses(name):
    assert avro.parsed_schema(name)["name"] == f"recurrence_ledger.{name}"


def test_every_example_source_event_round_trips():
    records = example_records()
    kinds = set()
    for record in records:
        model = models.SOURCE_KINDS[record["topic"]]
        event = model.model_validate(record["value"])
        name = model.__name__
        decoded = avro.decode(name, avro.encode(name, event.model_dump(mode="json")))
        assert model.model_validate(decoded) == event
        envelope = avro.decode("SourceEvent", avro.encode("SourceEvent", {"topic": record["topic"], "value": event.model_dump(mode="json")}))
        assert envelope["topic"] == record["topic"]
        assert model.model_validate(envelope["value"]) == event
        kinds.add(record["topic"])
    assert kinds == set(models.SOURCE_KINDS)


@pytest.mark.parametrize("name", [*CASE_NAMES, "example"])
def test_every_output_record_round_trips(name, tmp_path):
    journal = EXAMPLE if name == "example" else case(name)[0]
    run_journal(journal, tmp_path, show_progress=False, validate_outputs=True)
    outputs = read_outputs(tmp_path)
    assert outputs["revision-statistics"] or name == "holdout_waiting"  # its one outcome waits, then is decided unlinked without a failure
    if name in ("minimum_case", "worked_example"):  # unlinked failing outcomes: scope_heads sets by reference
        assert outputs["candidate-sets"]
        assert any(m["candidate_refs"] is None for m in outputs["recurrence-matches"])
    if name == "example":
        assert [value["decision"] for value in outputs["admission-decisions"]] == ["accepted", "rejected"]
    if name in ("review_loop", "example"):  # contract §18: every status and repair status
        assert {row["status"] for row in outputs["review-status"]} >= {"approved", "rejected"}
    for topic, (schema, model) in OUTPUT_MODELS.items():
        for value in outputs[topic]:
            decoded = avro.decode(schema, avro.encode(schema, value))
            assert decoded == value
            assert model.model_validate(decoded) == model.model_validate(value)


def test_a_revision_1_match_under_schema_id_6_still_decodes(tmp_path):
    """Matches written before rev. 2 (candidate_refs always a list, schema id
    6) stay readable: the codec decodes id 6 with the revision-1 schema; the
    current schema is written under its own id."""
    from recurrence_ledger.serde import codec
    from recurrence_ledger.catalogue import PREVIOUS_SCHEMA_IDS, SCHEMA_IDS

    journal, _ = case("minimum_case")
    run_journal(journal, tmp_path, show_progress=False)
    match = read_outputs(tmp_path)["recurrence-matches"][-1]
    assert match["candidate_set_mode"] == "scope_heads" and match["candidate_refs"] is None
    legacy = {**match, "candidate_refs": [{"family": "experience", "artifact_id": "M4", "revision": 2}]}
    old_frame = b"\x00\x00\x00\x00\x06" + avro.encode("RecurrenceMatch.rev1", legacy)
    assert PREVIOUS_SCHEMA_IDS[6] == ("RecurrenceMatch", "RecurrenceMatch.rev1") and SCHEMA_IDS["RecurrenceMatch"] != 6
    assert codec.decode_value(old_frame, ("RecurrenceMatch",)) == legacy
    RecurrenceMatch.model_validate(legacy)  # an inline scope_heads set stays valid
    new_frame = codec.encode("RecurrenceMatch", match)
    assert new_frame[1:5] == SCHEMA_IDS["RecurrenceMatch"].to_bytes(4, "big")
    assert codec.decode_value(new_frame, ("RecurrenceMatch",)) == match
    with pytest.raises((TypeError, ValueError)):  # the revision-1 schema has no null candidate_refs
        avro.encode("RecurrenceMatch.rev1", match)


def test_dead_letter_round_trips():
    value = {"topic": "source-journal", "partition": 3, "offset": 17, "key": "s1", "raw": "e30=", "reason": "malformed_json", "message": "m"}
    assert avro.decode("DeadLetter", avro.encode("DeadLetter", value)) == value
    DeadLetter.model_validate(value)


def _avro_fields(schema) -> dict:
    return {field["name"]: field["type"] for field in schema["fields"]}


def _assert_same_fields(model: type[BaseModel], schema: dict, path: str) -> None:
    fields = _avro_fields(schema)
    assert set(fields) == {info.alias or name for name, info in model.model_fields.items()}, path
    for name, info in model.model_fields.items():
        nested = _nested_model(info.annotation)
        if nested is None:
            continue
        avro_type = fields[info.alias or name]
        record = _nested_record(avro_type)
        assert record is not None, f"{path}.{name}"
        _assert_same_fields(nested, record, f"{path}.{name}")


def _nested_model(annotation):
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _nested_record(avro_type):
    if isinstance(avro_type, dict):
        if avro_type.get("type") == "record":
            return avro_type
        if avro_type.get("type") == "array":
            return _nested_record(avro_type["items"])
        if avro_type.get("type") == "map":
            return _nested_record(avro_type["values"])
    if isinstance(avro_type, list):
        for branch in avro_type:
            found = _nested_record(branch)
            if found is not None:
                return found
    return None


@pytest.mark.parametrize(
    ("schema", "model"),
    [(name, TOPIC_MODELS[name]) for name in avro.TOPIC_RECORDS if name != "SourceEvent"],
)
def test_avro_fields_equal_model_fields(schema, model):
    from fastavro.schema import expand_schema

    _assert_same_fields(model, expand_schema(avro.parsed_schema(schema)), schema)
