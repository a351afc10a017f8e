"""Record validation for RecurrenceMatch and RecurrenceObservation
(contract §13), on plain dicts: a record that violates the validation matrix
never reaches a topic.

One rule, one place: the core checks every record it emits with these
functions, and the pydantic models in ``recurrence_ledger.ledger.models`` call the same
functions from their validators.
"""

from __future__ import annotations

from recurrence_ledger.errors import RecurrenceLedgerError

from collections.abc import Container

#: event → fields that must be present; the other matrix fields must be absent.
OBSERVATION_MATRIX: dict[str, frozenset[str]] = {
    "selected": frozenset(),
    "avoided": frozenset({"condition_ref", "check_ref"}),
    "recurred": frozenset({"failure_ref", "recurrence_match_digest"}),
}
_MATRIX_FIELDS = ("condition_ref", "check_ref", "failure_ref", "recurrence_match_digest")
#: Per event, which of _MATRIX_FIELDS must be present (the matrix as one tuple to compare).
_MATRIX_PRESENT = {event: tuple(name in required for name in _MATRIX_FIELDS) for event, required in OBSERVATION_MATRIX.items()}


class LedgerInvariantError(RecurrenceLedgerError, ValueError):
    """A ledger record broke the validation matrix (contract §13). Raised by the core
    before the record leaves it; it means a bug, never bad input."""


def match_violations(match: dict, candidates: Container | None = None) -> list[str]:
    """Violations of the RecurrenceMatch rules in ``match`` (a record dict):
    failure_ref belongs to task_outcome_ref; candidate_refs is null only for
    a scope_heads set, and then candidate_set_digest names it (contract §6:
    the set is a CandidateSet on candidate-sets); matched requires
    artifact_ref and signature_key with the target inside the frozen set;
    unmatched and ambiguous require both absent. [] when valid.
    ``candidates``: a container equivalent to the frozen set with fast
    membership (the core passes its CandidateSet); without it, a set stored
    by reference is not looked up."""
    problems = []
    if match["failure_ref"]["task_outcome_ref"] != match["task_outcome_ref"]:
        problems.append("failure_ref.task_outcome_ref must equal task_outcome_ref")
    refs = match["candidate_refs"]
    if refs is None and match["candidate_set_mode"] != "scope_heads":
        problems.append("candidate_refs may be null only for a scope_heads candidate set")
    if refs is None and not match["candidate_set_digest"]:
        problems.append("a candidate set stored by reference needs its candidate_set_digest")
    target = match["artifact_ref"]
    if match["result"] == "matched":
        if target is None or not match["signature_key"]:
            problems.append("a matched result requires artifact_ref and signature_key")
        elif candidates is None and refs is None:
            pass  # the set is on candidate-sets: not at hand here
        elif target not in (refs if candidates is None else candidates):
            problems.append("matched target is absent from the frozen candidate set")
    elif target is not None or match["signature_key"] is not None:
        problems.append(f"a {match['result']} result must not carry a target")
    return problems


def observation_violations(observation: dict) -> list[str]:
    """Violations of the RecurrenceObservation validation matrix in
    ``observation`` (a record dict). [] when valid.

    ============  =========================  ==================================
    event         required                   forbidden
    ============  =========================  ==================================
    selected      handoff_receipt_ref,       condition_ref, check_ref,
                  handoff_ref                failure_ref, recurrence_match_digest
    avoided       handoff_receipt_ref,       failure_ref, recurrence_match_digest
                  handoff_ref, condition_ref
                  (observation), check_ref
                  (check)
    recurred      failure_ref,               condition_ref, check_ref
                  recurrence_match_digest
    ============  =========================  ==================================

    Also: artifact_ref is an Experience revision, handoff_ref a Handoff
    revision, receipt and Handoff refs go together, and every item ref points
    into task_outcome_ref.
    """
    problems = []
    event = observation["event"]
    present = (
        observation["condition_ref"] is not None, observation["check_ref"] is not None,
        observation["failure_ref"] is not None, observation["recurrence_match_digest"] is not None,
    )
    if present != _MATRIX_PRESENT[event]:
        required = OBSERVATION_MATRIX[event]
        wrong = [name for name in _MATRIX_FIELDS if (observation[name] is not None) != (name in required)]
        problems.append(f"{event} event: fields {wrong} break the validation matrix")
    if observation["artifact_ref"]["family"] != "experience":
        problems.append("artifact_ref must be an Experience revision")
    receipt, handoff = observation["handoff_receipt_ref"], observation["handoff_ref"]
    if (receipt is None) != (handoff is None):
        problems.append("handoff_receipt_ref and handoff_ref go together")
    if handoff is not None and handoff["family"] != "handoff":
        problems.append("handoff_ref must be a Handoff revision")
    if event in ("selected", "avoided") and handoff is None:
        problems.append(f"{event} requires handoff_receipt_ref and handoff_ref")
    condition, check = observation["condition_ref"], observation["check_ref"]
    if condition is not None and condition["item_kind"] != "observation":
        problems.append("condition_ref.item_kind must be 'observation'")
    if check is not None and check["item_kind"] != "check":
        problems.append("check_ref.item_kind must be 'check'")
    for ref in (condition, check, observation["failure_ref"]):
        if ref is not None and ref["task_outcome_ref"] != observation["task_outcome_ref"]:
            problems.append("item refs must resolve inside task_outcome_ref")
    return problems


def check_record(topic_kind: str, record: dict, candidates: Container | None = None) -> None:
    """Raise LedgerInvariantError if ``record`` breaks its rules;
    ``topic_kind`` is "match" or "observation"."""
    problems = match_violations(record, candidates) if topic_kind == "match" else observation_violations(record)
    if problems:
        raise LedgerInvariantError("; ".join(problems))
