"""The plain-valid fast path of input validation (``ledger.intake_check``)
against the pydantic models it restates (contract §3, §9).

The fast path may only be narrower than the models: on every record of the
bad-input corpus, the valid journals of tests/cases and the benchmark
workload, a value it accepts is one the model accepts with the same JSON
dump (equal, and in the same key order), and it accepts no value the model
rejects.
"""

from __future__ import annotations

import json

import orjson
import pytest
from pydantic import ValidationError

from recurrence_ledger.ledger import models
from recurrence_ledger.ledger.intake import BadRecord, decode_journal_line
from recurrence_ledger.ledger.intake_check import ALL_PLANS, PLANS, REQUIRED, plainly_valid
from recurrence_ledger.serde import codec
from recurrence_ledger.workload import Workload, generate_journal
from tests.badinput import corpus
from tests.conftest import CASES


@pytest.mark.parametrize("plan", ALL_PLANS, ids=lambda plan: plan.model)
def test_plan_restates_the_model(plan):
    """Same fields in the same order, same required fields and defaults,
    and every field validator of the model restated (a validator added to
    a model fails here until its plan has it)."""
    model = getattr(models, plan.model)
    fields = model.model_fields
    assert [name for name, _, _ in plan.fields] == list(fields)
    for name, _, default in plan.fields:
        if default is REQUIRED:
            assert fields[name].is_required(), name
        else:
            assert not fields[name].is_required() and default() == fields[name].default, name
    decorators = model.__pydantic_decorators__
    assert set(plan.validators) == set(decorators.field_validators)
    assert not decorators.model_validators


def test_every_planned_kind_is_its_topics_model():
    assert {topic: models.SOURCE_KINDS[topic].__name__ for topic in PLANS} == {topic: plan.model for topic, plan in PLANS.items()}


def _pydantic(topic: str, value):
    try:
        return models.SOURCE_KINDS[topic].model_validate(value).model_dump(mode="json")
    except ValidationError:
        return None


def _values():
    """(topic, decoded value) of the corpus records that decode, the cases'
    journals and a small workload."""
    for entry in corpus.CORPUS:
        try:
            if entry.target == corpus.JOURNAL:
                yield decode_journal_line(entry.value)
            else:
                yield codec.decode_source(entry.target, entry.value)
        except BadRecord:
            continue
    for path in sorted(CASES.glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            if line.strip():
                try:
                    yield decode_journal_line(line)
                except BadRecord:
                    continue
    for record in generate_journal(Workload(scopes=2, outcomes_per_scope=60, heads_per_scope=4, handoffs=2)):
        yield decode_journal_line(orjson.dumps(record))


def test_fast_path_is_never_wider_than_the_models():
    accepted = declined = 0
    for topic, value in _values():
        fast = plainly_valid(topic, value)
        if fast is None:
            declined += 1
            continue
        accepted += 1
        expected = _pydantic(topic, value)
        assert expected is not None, (topic, json.dumps(value)[:300])
        assert fast == expected and json.dumps(fast) == json.dumps(expected), topic
    assert accepted > 100 and declined > 50  # both paths were exercised


@pytest.mark.parametrize("value", [
    {"scope_id": "s", "journal_position": True, "source_ref": {"source_type": "task_outcome", "source_id": "O1"}, "status": "failed"},
    {"scope_id": "s", "journal_position": 2**63, "source_ref": {"source_type": "task_outcome", "source_id": "O1"}, "status": "failed"},
    {"scope_id": "s\x85", "journal_position": 1, "source_ref": {"source_type": "task_outcome", "source_id": "O1"}, "status": "failed"},
    {"scope_id": "s", "journal_position": 1, "source_ref": {"source_type": "handoff_receipt", "source_id": "O1"}, "status": "failed"},
    {"scope_id": "s", "journal_position": 1, "source_ref": {"source_type": "task_outcome", "source_id": "O1"}, "status": "failed",
     "checks": [{"name": "x" * (models.MAX_TEXT_LENGTH + 1), "status": "failed", "basis": "verified"}]},
    {"scope_id": "s", "journal_position": 1, "source_ref": {"source_type": "task_outcome", "source_id": "O1"}, "status": "failed",
     "extra": 1},
])
def test_invalid_outcomes_go_to_pydantic(value):
    """Values pydantic rejects (a bool position, one past the Avro long, a C1
    control, the wrong source type, a check name over its limit, an unknown
    field)
    are never plainly valid."""
    assert plainly_valid("task-outcomes", value) is None
    assert _pydantic("task-outcomes", value) is None
