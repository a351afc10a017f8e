"""Revision 4 (contract §21, §22, §24) evolves eight records BACKWARD: §21's
HandoffRevision ``withheld_citations`` (and so the SourceEvent envelope),
ReviewStatus ``repair.effect`` and the views' ``withheld``,
``holdout_conflicts``, ``effects`` and ``effect``; the failure
block's ``severity`` (ExperienceRevision, ExperienceCandidate and so the
SourceEvent envelope), ReviewDecision's ``reason_code``, the views'
``severity``, ``recurred_by_severity``, ``rejected_by_reason`` and
``promotion_rate`` — new fields at the end of their records, with defaults.

``tests/schemas/previous/rev3/`` holds the self-contained schema text of
every topic record as revision 3 registered it (``avro.schema_json`` at the
commit revision 4 started from). Each changed record gets a new fixed id
and its revision-3 form stays readable under the old one
(``[[previous_schema]]``). That every record appends to its revision-3
form, and the real Schema Registry accepts the new schemas over the
revision-3 ones, is checked with revision 2's in test_schema_evolution.py
(parametrized over the kept revisions). (ScopeStatistics and
RevisionStatistics also gain the record-shape fields of this release,
``review_threshold``, ``needs_review``, ``version`` and
``runs_reaching_threshold``; their intermediate forms keep ids 21, 22 and
23, tests/schemas/test_schema_evolution.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pytest

from recurrence_ledger import catalogue
from recurrence_ledger.ledger.intake import validate
from recurrence_ledger.serde import avro, codec
from tests.schemas.test_schema_evolution import REVISION_4, _records

REV3 = Path(__file__).resolve().parent / "previous" / "rev3"
#: Record → (its revision-3 fixed id, its revision-4 id).
CHANGED = {
    "SourceEvent": (1, 42),
    "HandoffRevision": (3, 24),
    "ReviewStatus": (19, 28),
    "ExperienceRevision": (2, 30),
    "ExperienceCandidate": (11, 31),
    "ReviewDecision": (18, 32),
    "ScopeStatistics": (20, 27),
    "RevisionStatistics": (17, 26),
}
#: The file of each record's revision-3 form (ScopeStatistics and
#: RevisionStatistics: the record-shape change of this release named them).
FILES = {"ScopeStatistics": "ScopeStatistics.id20", "RevisionStatistics": "RevisionStatistics.id17"}
#: The fields revision 4 appends, per record (nested records by name).
APPENDED = {
    "FailureRecord": ["severity"],
    "CandidateFailure": ["severity"],
    "ReviewDecision": ["reason_code"],
    "HandoffRevision": ["withheld_citations"],
    "Repair": ["effect"],
    "ReviewStatus": ["reason_code"],
    "RevisionStatistics": ["severity", "version", "runs_reaching_threshold", "effect"],
    "RecurrenceStreak": ["needs_review", "severity"],
    "ReviewCounts": ["rejected_by_reason", "promotion_rate"],
    "ScopeStatistics": ["review_threshold", "recurred_by_severity", "withheld", "holdout_conflicts", "effects"],
}


def rev3_text(name: str) -> str:
    return (REV3 / f"{name}.json").read_text(encoding="utf-8").strip()


def test_the_eight_records_are_the_ones_revision_4_changed():
    # Each appends with defaults to its revision-3 form, and no other record changed:
    # test_schema_evolution.py, parametrized over the kept revisions.
    assert set(CHANGED) == set(REVISION_4)


def test_the_appended_fields_are_the_contract_s():
    appended = {}
    for name in CHANGED:
        old, new = _records(json.loads(rev3_text(name)), {}), _records(json.loads(avro.schema_json(name)), {})
        for record, definition in old.items():
            extra = [field["name"] for field in new[record]["fields"][len(definition["fields"]):]]
            if extra:
                appended[record] = extra
    assert appended == APPENDED


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_each_changed_record_has_a_new_id_and_its_revision_3_form_keeps_the_old_one(name):
    old_id, new_id = CHANGED[name]
    assert catalogue.SCHEMA_IDS[name] == new_id
    file = FILES.get(name, f"{name}.rev3")
    assert catalogue.PREVIOUS_SCHEMA_IDS[old_id] == (name, file)
    assert {**json.loads(avro.schema_json(file)), "doc": None} == {**json.loads(rev3_text(name)), "doc": None}


def _experience(failure_extra: dict | None = None) -> dict:
    failure = {"signature": {"recall_cue": "Disk full", "symptom": None}, "repair_surface": "experience_content",
               "verification": {"condition": "Disk checked", "check_subject": "Disk check"}}
    return {"scope_id": "s", "journal_position": 1, "artifact_ref": {"family": "experience", "artifact_id": "E", "revision": 1},
            "content": {"situation": "a", "action": "b", "outcome": "c", "lesson": "d", "failure": {**failure, **(failure_extra or {})}}}


def test_an_event_written_under_the_revision_3_id_reads_as_unrated_and_keeps_its_identity():
    from recurrence_ledger.ledger.models import identity_content

    old = _experience()
    import io

    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(json.loads(rev3_text("ExperienceRevision"))), old)
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
    import io

    decision = {"scope_id": "s", "decision_id": "D", "candidate_id": "sha256:" + "0" * 64, "journal_position": 3,
                "decision": "rejected", "reason": "no", "reviewer": "r", "decided_at": "2026-12-02T00:00:00Z", "fix_revision": None}
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(json.loads(rev3_text("ReviewDecision"))), decision)
    decoded = codec.decode_value(codec.frame_id(18, buffer.getvalue()), ("ReviewDecision",))
    assert decoded == {**decision, "reason_code": None}
    coded = {**decision, "reason_code": "weak_evidence"}
    assert codec.decode_value(codec.encode("ReviewDecision", coded), ("ReviewDecision",)) == coded
