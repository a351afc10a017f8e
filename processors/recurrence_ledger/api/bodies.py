"""Response bodies as plain dicts in the shape of their response models
(``recurrence_ledger.api.schemas``), written by ``orjson`` without building
the pydantic models (``recurrence_ledger.api.responses.answer``).

Why: building the models of a page took most of a request's CPU (a
revision history of 100 verdicts: about 670 µs through ``Verdict`` and
``ItemRef`` objects, 480 µs through one ``model_validate``, 30 µs as a dict
through orjson; BENCHMARKS.md, api-benchmark). The values come from the
view and the read models, which hold records the ledger validated before it
published them (contract §8), so validating them again per request proves
nothing new; what must hold is the shape, byte for byte the model's JSON.
:func:`shaper` gives it: the model's fields in the model's order under
their serialization names (aliases: ``yield``), the model's defaults for
absent fields, nested models (and optional ones) shaped the same way, ints
in float fields as floats — what ``Model(**values).model_dump_json()``
writes for the flat JSON values the read side holds. Fields the model does
not declare are dropped, as the models (``extra`` ignored) did. A missing
required field raises KeyError (a 500, as the model's ValidationError was).

tests/api/test_bodies.py checks every body the API writes against its
model: parsed by the model and written again, it is the same bytes.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable

from pydantic import BaseModel

#: Marks a field without a default.
_REQUIRED = object()


def _nested(annotation: object) -> type[BaseModel] | None:
    """The model class of a field typed ``Model`` or ``Model | None``, else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [arg for arg in typing.get_args(annotation) if isinstance(arg, type) and issubclass(arg, BaseModel)]
        return models[0] if len(models) == 1 else None
    return None


def _is_float(annotation: object) -> bool:
    """Whether a field is typed ``float`` or ``float | None``."""
    return annotation is float or (typing.get_origin(annotation) in (typing.Union, types.UnionType) and float in typing.get_args(annotation))


@functools.cache
def shaper(model: type[BaseModel]) -> Callable[[dict], dict]:
    """A function taking a dict of ``model``'s values (keyed by the fields'
    serialization names) to the dict ``model`` would write (module
    docstring). Lists of models are not shaped: the caller shapes their
    items."""
    fields = []
    for name, info in model.model_fields.items():
        key = info.serialization_alias or info.alias or name
        default = _REQUIRED if info.is_required() else info.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            default = default.model_dump(mode="json", by_alias=True)
        nested = _nested(info.annotation)
        fields.append((key, default, shaper(nested) if nested is not None else None, _is_float(info.annotation)))
    fields = tuple(fields)

    def shape(values: dict) -> dict:
        body = {}
        for key, default, nested, as_float in fields:
            if key in values:
                value = values[key]
                if value is not None:
                    if nested is not None:
                        value = nested(value)
                    elif as_float and type(value) is int:
                        value = float(value)
            elif default is _REQUIRED:
                raise KeyError(f"{model.__name__}.{key}")
            else:
                value = default
            body[key] = value
        return body

    return shape
