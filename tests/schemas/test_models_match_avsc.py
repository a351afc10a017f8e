"""Every Avro schema states its record as the pydantic model does: the same
fields in the same order, of the same types, with the same defaults. The
models (``recurrence_ledger.ledger.records`` for the published records,
``recurrence_ledger.ledger.models`` for the value types and the inputs) are
the one statement of each record; this test keeps each ``.avsc`` in step
with its model field by field, so a figure added to a model and forgotten
in its schema (or the other way round) fails here, not on the wire."""

from __future__ import annotations

import json
import types
import typing
from typing import Annotated, Any, Literal, Union

import pytest
from pydantic import BaseModel

from recurrence_ledger.ledger import models, records
from recurrence_ledger.serde import avro


def model_named(name: str) -> type[BaseModel] | None:
    found = getattr(records, name, None) or getattr(models, name, None)
    return found if isinstance(found, type) and issubclass(found, BaseModel) else None


def avro_records(avro_type: Any, found: dict[str, dict]) -> dict[str, dict]:
    """Every record definition inside an expanded schema, by short name."""
    if isinstance(avro_type, list):
        for branch in avro_type:
            avro_records(branch, found)
    elif isinstance(avro_type, dict):
        if avro_type.get("type") == "record":
            found.setdefault(avro_type["name"].rsplit(".", 1)[-1], avro_type)
            for field in avro_type["fields"]:
                avro_records(field["type"], found)
        elif avro_type.get("type") in ("array", "map"):
            avro_records(avro_type.get("items", avro_type.get("values")), found)
    return found


def strip(annotation: Any) -> Any:
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def named_enums(avro_type: Any, found: dict[str, tuple]) -> dict[str, tuple]:
    """Every enum defined inside an expanded schema: short name → ("enum", symbols)."""
    if isinstance(avro_type, list):
        for branch in avro_type:
            named_enums(branch, found)
    elif isinstance(avro_type, dict):
        if avro_type.get("type") == "enum":
            found[avro_type["name"].rsplit(".", 1)[-1]] = ("enum", tuple(avro_type["symbols"]))
        for field in avro_type.get("fields", []):
            named_enums(field["type"], found)
        for key in ("items", "values"):
            if key in avro_type:
                named_enums(avro_type[key], found)
    return found


ENUMS: dict[str, tuple] = {}


def avro_name(avro_type: Any) -> Any:
    """An Avro type reduced to what the model can say: a primitive name, a
    named type's short name, ``("enum", symbols)``, ``("array", item)``,
    ``("map", value)`` or a list of branches."""
    if isinstance(avro_type, list):
        return [avro_name(branch) for branch in avro_type]
    if isinstance(avro_type, dict):
        kind = avro_type["type"]
        if kind == "array":
            return ("array", avro_name(avro_type["items"]))
        if kind == "map":
            return ("map", avro_name(avro_type["values"]))
        if kind == "enum":
            return ("enum", tuple(avro_type["symbols"]))
        if kind == "record":
            return avro_type["name"].rsplit(".", 1)[-1]
        return avro_name(kind)
    short = avro_type.rsplit(".", 1)[-1]
    return ENUMS.get(short, short)


def model_type(annotation: Any) -> Any:
    """The Avro type (as :func:`avro_name` reduces it) a model annotation stands for."""
    annotation = strip(annotation)
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        branches = [strip(arg) for arg in typing.get_args(annotation)]
        rest = [model_type(arg) for arg in branches if arg is not type(None)]
        return ["null", *rest] if type(None) in branches else rest
    if origin is Literal:
        return ("literal", tuple(typing.get_args(annotation)))
    if origin is list:
        return ("array", model_type(typing.get_args(annotation)[0]))
    if origin is dict:
        return ("map", model_type(typing.get_args(annotation)[1]))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__
    return {int: "long", float: "double", str: "string", bool: "boolean"}[annotation]


def same_type(model: Any, schema: Any) -> bool:
    if isinstance(model, list) or isinstance(schema, list):
        return isinstance(model, list) and isinstance(schema, list) and len(model) == len(schema) and all(map(same_type, model, schema))
    if isinstance(model, tuple) and model[0] == "literal":
        # A Literal is an Avro enum of the same symbols, or a string.
        # (The model may allow fewer symbols than the enum: a ReviewCandidate's repair_surface is experience_content only.)
        return schema == "string" or (isinstance(schema, tuple) and schema[0] == "enum" and set(model[1]) <= set(schema[1]))
    if isinstance(model, tuple):
        return isinstance(schema, tuple) and model[0] == schema[0] and same_type(model[1], schema[1])
    if model == "long":
        return schema in ("long", "int")
    if isinstance(schema, tuple) and schema[0] == "enum":
        return False
    return model == schema or (schema not in ("long", "int", "double", "string", "boolean", "null") and model_named(schema) is None)


def model_default(info) -> Any:
    default = info.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        return default.model_dump(mode="json", by_alias=True)
    if isinstance(default, dict):
        return {key: value.model_dump(mode="json", by_alias=True) if isinstance(value, BaseModel) else value for key, value in default.items()}
    return default


#: Fields with a default on one side only, each for a reason that keeps the
#: wire form unchanged (these are ledger facts: their schemas stay as
#: deployments registered them).
DEFAULT_ONLY_ON_ONE_SIDE: dict[tuple[str, str], str] = {
    ("RecurrenceObservation", "match_basis"): "the model fills the one basis (exact); every record on the wire carries it",
    ("ReviewCandidate", "run_start_position"): "null for the run at the start of the history: the model makes the writer say so",
    ("DeadLetter", "partition"): "the embedded runner writes null: the model makes the writer say so",
    ("DeadLetter", "offset"): "as partition",
    ("DeadLetter", "key"): "a record without a key writes null: the model makes the writer say so",
}


def compared() -> list[tuple[str, str]]:
    """(topic record, record inside it) for every record with a model of its name."""
    pairs = []
    for name in avro.TOPIC_RECORDS:
        for inner in avro_records(json.loads(avro.schema_json(name)), {}):
            if model_named(inner) is not None and (name, inner) not in pairs:
                pairs.append((name, inner))
    return pairs


@pytest.mark.parametrize(("topic_record", "name"), compared(), ids=[f"{a}-{b}" for a, b in compared()])
def test_the_avro_schema_states_the_record_as_its_model_does(topic_record, name):
    expanded = json.loads(avro.schema_json(topic_record))
    ENUMS.clear()
    named_enums(expanded, ENUMS)
    schema = avro_records(expanded, {})[name]
    model = model_named(name)
    fields = [(info.alias or field, info) for field, info in model.model_fields.items()]
    assert [field for field, _ in fields] == [field["name"] for field in schema["fields"]], "names and order"
    problems = []
    for (field, info), avro_field in zip(fields, schema["fields"], strict=True):
        if not same_type(model_type(info.annotation), avro_name(avro_field["type"])):
            problems.append(f"{field}: type {info.annotation} vs {avro_field['type']}")
        model_has, avro_has = not info.is_required(), "default" in avro_field
        if (model_has, avro_has) != (True, True):
            if model_has != avro_has and (name, field) not in DEFAULT_ONLY_ON_ONE_SIDE:
                problems.append(f"{field}: a default on one side only")
        elif avro_field["default"] != model_default(info):
            problems.append(f"{field}: default {model_default(info)!r} vs {avro_field['default']!r}")
    assert problems == []


def test_the_published_view_records_are_compared():
    assert {("ScopeStatistics", "ScopeStatistics"), ("ScopeStatistics", "RecurrenceStreak"), ("ScopeStatistics", "UnknownReasons"),
            ("RevisionStatistics", "RevisionStatistics")} <= set(compared())
