"""contract §3, the common case first: a source event whose every field is
plainly valid, checked without pydantic.

``intake.validate`` validates every decoded record (Avro or JSON) once. For
the source events (:data:`PLANS`: Task Outcomes, Experience and Handoff
revisions, Handoff receipts) :func:`plainly_valid` first restates the rules
of their pydantic models (``recurrence_ledger.ledger.models``) for values
that keep them plainly — the exact types of strict mode, the known fields
with the required ones present, ASCII identifiers without control
characters, ASCII text within its length limit (``models.at_most``: ASCII
is its own NFC form), positions in range, enum strings, list bounds, the
models' field validators (families, source types, cues that do not
normalize to empty) — and returns what ``model_dump(mode="json")`` would:
a new dict per record in model field order, defaults filled in.

It never rejects: anything else (an invalid value, a non-ASCII string,
another event kind) gives None, and the value goes to its pydantic model,
which decides and names the dead-letter reason (contract §9). So the fast
path can only be *narrower* than the models, never wider: a value it
accepts is one the model accepts, with the same dump
(tests/ledger/test_intake_check.py checks the plans against the models'
fields, defaults and validators, and both paths on the bad-input corpus).

Pure functions; pydantic is not imported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recurrence_ledger.catalogue import EXPERIENCE_REVISIONS, HANDOFF_RECEIPTS, HANDOFF_REVISIONS, TASK_OUTCOMES
from recurrence_ledger.ledger.models import (
    MAX_EVIDENCE,
    MAX_FAILURE_CUE_LENGTH,
    MAX_HANDOFF_CITATIONS,
    MAX_ID_LENGTH,
    MAX_ITEMS,
    MAX_MEMORY_CITATIONS,
    MAX_POSITION,
    MAX_TEXT_LENGTH,
)
from recurrence_ledger.ledger.normalize import normalize


class _NotPlain(Exception):
    """The value is not plainly valid: pydantic decides."""


_NOT_PLAIN = _NotPlain()
Check = Callable[[Any], Any]
#: A field without a default.
REQUIRED = object()


def _ident(value: Any) -> str:
    """``models.Id``, for ASCII: 1–512 printable characters (no C0 or DEL;
    non-ASCII identifiers go to pydantic, which checks C1 and NFC length)."""
    if type(value) is not str or not value or len(value) > MAX_ID_LENGTH or not value.isascii() or not value.isprintable():
        raise _NOT_PLAIN
    return value


def _within(limit: int, min_length: int = 0) -> Check:
    """An ASCII string of ``min_length`` to ``limit`` characters (ASCII is
    its own NFC form: ``models.at_most``). Other text goes to pydantic,
    which also refuses strings that are not valid Unicode (lone
    surrogates, which a JSON escape can make)."""

    def check(value: Any) -> str:
        if type(value) is not str or not value.isascii() or not min_length <= len(value) <= limit:
            raise _NOT_PLAIN
        return value

    return check


_text = _within(MAX_TEXT_LENGTH)
_cue = _within(MAX_FAILURE_CUE_LENGTH, 1)


def _not_blank(check: Check) -> Check:
    """``check``, then the value must not normalize to "" (``models._reject_blank``)."""

    def not_blank(value: Any) -> str:
        value = check(value)
        if not normalize(value):
            raise _NOT_PLAIN
        return value

    return not_blank


def _int(low: int) -> Check:
    def check(value: Any) -> int:
        if type(value) is not int or not low <= value <= MAX_POSITION:
            raise _NOT_PLAIN
        return value

    return check


_position = _int(0)


def _literal(*symbols: str) -> Check:
    allowed = frozenset(symbols)

    def check(value: Any) -> str:
        if type(value) is not str or value not in allowed:
            raise _NOT_PLAIN
        return value

    return check


def _optional(check: Check) -> Check:
    check = getattr(check, "check", check)  # a Plan: its generated function

    def optional(value: Any) -> Any:
        return None if value is None else check(value)

    return optional


def _list(check: Check, max_length: int) -> Check:
    check = getattr(check, "check", check)  # a Plan: its generated function

    def items(value: Any) -> list:
        if type(value) is not list or len(value) > max_length:
            raise _NOT_PLAIN
        return [check(item) for item in value]

    return items


def _none() -> None:
    return None


class Plan:
    """The plain form of one model: ``fields`` as ``(name, check, default)``
    in model field order (``default``: :data:`REQUIRED`, or a factory of the
    model's default), ``validators``: the names of the model's pydantic
    field validators this plan restates (``rule`` checks them on the
    result). :attr:`check` is the plan as one function (its source made
    once from ``fields``: one dict display, no loop over the fields);
    calling the plan calls it."""

    def __init__(self, model: str, fields: list[tuple[str, Check, Any]], validators: tuple[str, ...] = (),
                 rule: Callable[[dict], bool] | None = None):
        self.model = model
        self.fields = tuple(fields)
        self.validators = validators
        self.rule = rule
        self.names = frozenset(name for name, _, _ in fields)
        namespace: dict[str, Any] = {"names": self.names, "rule": rule, "NOT_PLAIN": _NOT_PLAIN}
        items = []
        for number, (name, check, default) in enumerate(self.fields):
            namespace[f"c{number}"] = check.check if isinstance(check, Plan) else check
            if default is REQUIRED:  # absent: KeyError, which plainly_valid takes as "not plain"
                items.append(f"{name!r}: c{number}(value[{name!r}])")
            else:
                namespace[f"d{number}"] = default
                items.append(f"{name!r}: c{number}(value[{name!r}]) if {name!r} in value else d{number}()")
        lines = [
            "def check(value):",
            "    if type(value) is not dict or not names.issuperset(value): raise NOT_PLAIN",
            f"    out = {{{', '.join(items)}}}",
            *(["    if not rule(out): raise NOT_PLAIN"] if rule is not None else []),
            "    return out",
        ]
        exec(compile("\n".join(lines), f"<intake_check {model}>", "exec"), namespace)  # noqa: S102 - source made from the plan above
        self.check: Callable[[Any], dict] = namespace["check"]

    def __call__(self, value: Any) -> dict:
        return self.check(value)


_family = _literal("experience", "handoff")
_basis = _literal("verified", "declared")
ARTIFACT_REF = Plan("ArtifactRef", [("family", _family, REQUIRED), ("artifact_id", _ident, REQUIRED), ("revision", _int(1), REQUIRED)])
SOURCE_REF = Plan("SourceRef", [("source_type", _literal("task_outcome", "handoff_receipt"), REQUIRED), ("source_id", _ident, REQUIRED)])
EVIDENCE_REF = Plan("EvidenceRef", [("kind", _literal("exact", "summary"), REQUIRED), ("ref", _text, REQUIRED)])
_evidence = _list(EVIDENCE_REF, MAX_EVIDENCE)
WORK_CLAIM = Plan("WorkClaim", [("text", _text, REQUIRED), ("basis", _basis, REQUIRED), ("evidence", _evidence, list)])
TASK_CHECK = Plan("TaskCheck", [
    ("name", _text, REQUIRED),
    ("status", _literal("passed", "failed", "timed_out", "unavailable", "skipped", "cancelled", "unknown"), REQUIRED),
    ("basis", _basis, REQUIRED),
    ("evidence", _evidence, list),
    ("details", _optional(_text), _none),
])
TASK_OUTCOME = Plan("TaskOutcome", [
    ("scope_id", _ident, REQUIRED),
    ("journal_position", _position, REQUIRED),
    ("source_ref", SOURCE_REF, REQUIRED),
    ("status", _literal("completed", "failed", "blocked", "cancelled", "timed_out"), REQUIRED),
    ("handoff_receipt_ref", _optional(SOURCE_REF), _none),
    ("observations", _list(WORK_CLAIM, MAX_ITEMS), list),
    ("checks", _list(TASK_CHECK, MAX_ITEMS), list),
], ("_outcome_type", "_receipt_ref_type"), lambda out: out["source_ref"]["source_type"] == "task_outcome" and (
    out["handoff_receipt_ref"] is None or out["handoff_receipt_ref"]["source_type"] == "handoff_receipt"))
FAILURE_SIGNATURE = Plan("FailureSignature", [("recall_cue", _not_blank(_cue), REQUIRED), ("symptom", _optional(_text), _none)],
                         ("_cue_not_blank",))
FAILURE_VERIFICATION = Plan("FailureVerification", [("condition", _text, REQUIRED), ("check_subject", _not_blank(_cue), REQUIRED)],
                            ("_subject_not_blank",))
FAILURE_RECORD = Plan("FailureRecord", [
    ("signature", FAILURE_SIGNATURE, REQUIRED),
    ("repair_surface", _literal("experience_content", "working_state", "recall_policy", "acceptance_check"), REQUIRED),
    ("verification", FAILURE_VERIFICATION, REQUIRED),
])
EXPERIENCE_CONTENT = Plan("ExperienceContent", [
    ("situation", _text, REQUIRED), ("action", _text, REQUIRED), ("outcome", _text, REQUIRED), ("lesson", _text, REQUIRED),
    ("failure", _optional(FAILURE_RECORD), _none),
])
EXPERIENCE_REVISION = Plan("ExperienceRevision", [
    ("scope_id", _ident, REQUIRED), ("journal_position", _position, REQUIRED), ("artifact_ref", ARTIFACT_REF, REQUIRED),
    ("content", EXPERIENCE_CONTENT, REQUIRED),
], ("_experience_family",), lambda out: out["artifact_ref"]["family"] == "experience")
ARTIFACT_CITATION = Plan("ArtifactCitation", [("artifact_ref", ARTIFACT_REF, REQUIRED)])
MEMORY_CITATION = Plan("MemoryCitation", [("entry_id", _ident, REQUIRED), ("version_id", _ident, REQUIRED)])
HANDOFF_REVISION = Plan("HandoffRevision", [
    ("scope_id", _ident, REQUIRED), ("journal_position", _position, REQUIRED), ("artifact_ref", ARTIFACT_REF, REQUIRED),
    ("artifact_citations", _list(ARTIFACT_CITATION, MAX_HANDOFF_CITATIONS), REQUIRED),
    ("memory_citations", _list(MEMORY_CITATION, MAX_MEMORY_CITATIONS), list),
], ("_handoff_family",), lambda out: out["artifact_ref"]["family"] == "handoff")
HANDOFF_RECEIPT = Plan("HandoffReceipt", [
    ("scope_id", _ident, REQUIRED), ("journal_position", _position, REQUIRED), ("source_ref", SOURCE_REF, REQUIRED),
    ("status", _ident, REQUIRED), ("selection", _ident, REQUIRED),
    ("selected_revision", _optional(ARTIFACT_REF), _none), ("current_revision", _optional(ARTIFACT_REF), _none),
    ("evidence_status", _ident, REQUIRED),
], ("_receipt_type",), lambda out: out["source_ref"]["source_type"] == "handoff_receipt")

#: Input topic → the plan of its event kind (the other kinds always go to pydantic).
PLANS: dict[str, Plan] = {
    TASK_OUTCOMES: TASK_OUTCOME,
    EXPERIENCE_REVISIONS: EXPERIENCE_REVISION,
    HANDOFF_REVISIONS: HANDOFF_REVISION,
    HANDOFF_RECEIPTS: HANDOFF_RECEIPT,
}
#: Every plan, nested ones included (what the tests hold against the models).
ALL_PLANS = (ARTIFACT_REF, SOURCE_REF, EVIDENCE_REF, WORK_CLAIM, TASK_CHECK, TASK_OUTCOME, FAILURE_SIGNATURE,
             FAILURE_VERIFICATION, FAILURE_RECORD, EXPERIENCE_CONTENT, EXPERIENCE_REVISION, ARTIFACT_CITATION,
             MEMORY_CITATION, HANDOFF_REVISION, HANDOFF_RECEIPT)


def plainly_valid(topic: str, value: Any) -> dict | None:
    """The canonical form of ``value`` (``model_dump(mode="json")`` of the
    event kind of input ``topic``) when it is plainly valid (module
    docstring), else None — never an error: None says only "let the
    pydantic model decide"."""
    plan = PLANS.get(topic)
    if plan is None:
        return None
    try:
        return plan.check(value)
    except (_NotPlain, KeyError, RecursionError):  # KeyError: a required field is absent
        return None
