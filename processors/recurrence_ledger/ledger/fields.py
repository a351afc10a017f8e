"""The field catalogue: the read side's field lists, derived from the
published records of :mod:`recurrence_ledger.ledger.records` (their
titles, descriptions and ``total`` marks) instead of restated — so a new
figure is one field of its record (with its title and description), its
Avro schema, the core that computes it and the docs (contract §8, §14)."""

from __future__ import annotations

from recurrence_ledger.ledger.models import Value
from recurrence_ledger.ledger.records import RevisionFigures


def field_name(model: type[Value], name: str) -> str:
    """The published name of a model field (its alias: ``yield_`` → ``yield``)."""
    return model.model_fields[name].alias or name


def integer_fields(model: type[Value]) -> tuple[str, ...]:
    """The published names of the fields of ``model`` that are plain
    integers (counts and positions), in the record's order: what the Redis
    projection keeps as integer strings in a scope's hash."""
    return tuple(field_name(model, name) for name, info in model.model_fields.items() if info.annotation is int)


def total_fields(model: type[Value]) -> tuple[str, ...]:
    """The fields of ``model`` marked ``total`` (``json_schema_extra``):
    the figures the view follower sums over the scopes and publishes as
    gauges."""
    return tuple(
        field_name(model, name) for name, info in model.model_fields.items() if (info.json_schema_extra or {}).get("total")
    )


#: The identity of a revision row (which revision it is), as opposed to its figures.
REVISION_IDENTITY: tuple[str, ...] = ("scope_id", "artifact_ref", "signature_key", "terminal_recurred_streak")


def figure_fields() -> tuple[str, ...]:
    """The published names of a revision's figures (:class:`RevisionFigures`
    without its identity), in the record's order: what a row of the API
    takes from the ledger's row of the same revision."""
    return tuple(field_name(RevisionFigures, name) for name in RevisionFigures.model_fields if name not in REVISION_IDENTITY)


def field_catalogue(model: type[Value]) -> dict[str, dict]:
    """``{published name: {"title", "description", …extras}}`` of every field
    of ``model`` that has a title: the labels a dashboard or a CLI table
    shows, from the one statement of the record."""
    return {
        field_name(model, name): {"title": info.title, "description": info.description, **(info.json_schema_extra or {})}
        for name, info in model.model_fields.items()
        if info.title
    }
