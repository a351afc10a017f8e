"""The six input kinds an upstream platform sends (contract §3, §12, §18),
built and checked before anything is sent.

Each constructor takes the event's fields as keyword arguments (nested
values as dicts or as the model instances of
``recurrence_ledger.ledger.models``) and returns the validated model — the
same pydantic model the ledger's core validates every record with
(``recurrence_ledger.ledger.intake.parse``), so the client and the worker
accept and refuse exactly the same events, for the same reason. Nothing here
restates a field or a rule: the models are the one statement of each shape.

An event the core would dead-letter is refused with :class:`EventRefused`,
which names the contract section of the event kind, the dead-letter reason
code (contract §9) the worker would give it, and the field. What only the
ledger's state can tell — a journal position already used in the scope, an
identity sent before with other content, a review decision for an unknown
candidate — cannot be checked here; those still reach dead-letter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recurrence_ledger.catalogue import (
    BY_NAME,
    EXPERIENCE_CANDIDATES,
    EXPERIENCE_REVISIONS,
    HANDOFF_RECEIPTS,
    HANDOFF_REVISIONS,
    REVIEW_DECISIONS,
    TASK_OUTCOMES,
)
from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.ledger.intake import BadRecord, parse
from recurrence_ledger.ledger.models import (
    SOURCE_KINDS,
    ExperienceCandidate,
    ExperienceRevision,
    HandoffReceipt,
    HandoffRevision,
    ReviewDecision,
    TaskOutcome,
    Value,
)

#: The contract section of the dead-letter reason codes.
DEAD_LETTER_SECTION = "§9"
#: Event model class → its input topic (the inverse of ``models.SOURCE_KINDS``).
KIND_OF_MODEL: dict[type[Value], str] = {model: kind for kind, model in SOURCE_KINDS.items()}


class EventRefused(RecurrenceLedgerError, ValueError):
    """An event the client refuses to send because the ledger would
    dead-letter it (contract §9).

    ``kind``: the input topic (e.g. ``"task-outcomes"``); ``rule``: the
    contract section that states the event's shape (``"§3"``, ``"§12"`` or
    ``"§18"``); ``reason``: the dead-letter reason code the worker would
    give it (``missing_field``, ``unexpected_field``, ``wrong_type``,
    ``too_long``, ``invalid_value``, ``unknown_topic``); ``detail``: the
    field and what is wrong with it (``TaskOutcome.scope_id: Field
    required``)."""

    def __init__(self, kind: str, rule: str, reason: str, detail: str):
        super().__init__(f"{kind} event refused before sending: contract {rule} "
                         f"(dead-letter reason {reason}, contract {DEAD_LETTER_SECTION}): {detail}")
        self.kind, self.rule, self.reason, self.detail = kind, rule, reason, detail


def rule_of(kind: str) -> str:
    """The contract section that states the shape of input ``kind``'s
    events (the catalogue's ``contract`` of the topic); ``§1`` for a name
    that is no input topic (contract §1 lists the topics)."""
    spec = BY_NAME.get(kind)
    if spec is None or kind not in SOURCE_KINDS:
        return "§1"
    return spec.contract or "§3"


def event(kind: str, value: Mapping[str, Any] | Value) -> Value:
    """The validated event of input topic ``kind`` (one of the six kinds of
    ``models.SOURCE_KINDS``) from a mapping of its fields (or a model
    instance, checked again). Raises :class:`EventRefused`."""
    if isinstance(value, Value):
        value = value.model_dump(mode="json")
    try:
        return parse(kind, value)
    except BadRecord as bad:
        raise EventRefused(kind, rule_of(kind), bad.reason, bad.message) from None


def kind_of(value: Value) -> str:
    """The input topic of an event built here (``"task-outcomes"`` for a
    TaskOutcome, …). Raises TypeError for anything that is not one of the
    six event models."""
    kind = KIND_OF_MODEL.get(type(value))
    if kind is None:
        names = ", ".join(model.__name__ for model in SOURCE_KINDS.values())
        raise TypeError(f"not an input event ({names}): {type(value).__name__}")
    return kind


def task_outcome(**fields: Any) -> TaskOutcome:
    """A Task Outcome (contract §3, topic ``task-outcomes``): how a task
    ended, with its observations and checks. Raises :class:`EventRefused`."""
    return event(TASK_OUTCOMES, fields)  # type: ignore[return-value]


def handoff_receipt(**fields: Any) -> HandoffReceipt:
    """A Handoff Receipt (contract §3, topic ``handoff-receipts``): which
    Handoff revision a successor agent received. Raises :class:`EventRefused`."""
    return event(HANDOFF_RECEIPTS, fields)  # type: ignore[return-value]


def handoff_revision(**fields: Any) -> HandoffRevision:
    """A Handoff revision (contract §3, topic ``handoff-revisions``): a
    published handoff and the Experience revisions it cites. Raises
    :class:`EventRefused`."""
    return event(HANDOFF_REVISIONS, fields)  # type: ignore[return-value]


def experience_revision(**fields: Any) -> ExperienceRevision:
    """An Experience revision (contract §3, topic ``experience-revisions``):
    a published, immutable lesson with its failure record. Raises
    :class:`EventRefused`."""
    return event(EXPERIENCE_REVISIONS, fields)  # type: ignore[return-value]


def experience_candidate(**fields: Any) -> ExperienceCandidate:
    """An admission candidate (contract §12, topic
    ``experience-candidates``): a proposed lesson the ledger admits or
    refuses. Raises :class:`EventRefused`."""
    return event(EXPERIENCE_CANDIDATES, fields)  # type: ignore[return-value]


def review_decision(**fields: Any) -> ReviewDecision:
    """A reviewer's decision on a review candidate (contract §18, topic
    ``review-decisions``). Raises :class:`EventRefused`."""
    return event(REVIEW_DECISIONS, fields)  # type: ignore[return-value]
