"""contract §7: selected, recurred and avoided RecurrenceObservations.

"unknown" is never written: it is derived as selected minus the selected
(E, O) pairs that acquired a terminal verdict (contract §7: unknown is a
derived verdict, never an event). Each such pair has exactly one reason
(contract §17, rev. 3): ``unknown_reason`` over ``bind``.
"""

from __future__ import annotations

from typing import NamedTuple

from recurrence_ledger.ledger.matching import OutcomeItems, item_ref
from recurrence_ledger.ledger.normalize import digest


def observation(
    event: str,
    scope_id: str,
    outcome: dict,
    artifact_ref: dict,
    signature_key: str,
    *,
    receipt_ref: dict | None = None,
    handoff_ref: dict | None = None,
    condition_ref: dict | None = None,
    check_ref: dict | None = None,
    failure_ref: dict | None = None,
    match_digest: str | None = None,
) -> dict:
    """A RecurrenceObservation record.

    ``observation_id`` = digest of the record without ``observation_id``:
    the event type, scope, task_outcome_ref and task_outcome_position,
    receipt and Handoff refs, artifact_ref, signature_key, match_basis, the
    RecurrenceMatch digest when present, and every item ref with its
    item_digest (contract §7). Two chains for one revision therefore stay two
    observations, and a replay of one chain reproduces the same id.
    """
    record = {
        "scope_id": scope_id,
        "artifact_ref": artifact_ref,
        "signature_key": signature_key,
        "event": event,
        "match_basis": "exact",
        "task_outcome_ref": outcome["source_ref"],
        "task_outcome_position": outcome["journal_position"],
        "handoff_receipt_ref": receipt_ref,
        "handoff_ref": handoff_ref,
        "condition_ref": condition_ref,
        "check_ref": check_ref,
        "failure_ref": failure_ref,
        "recurrence_match_digest": match_digest,
    }
    return {"observation_id": digest(record), **record}


def matched_items_by_target(matches: list[tuple[dict, dict]]) -> dict[tuple[str, int], list[tuple[dict, dict]]]:
    """Group (failure_ref, remembered match) pairs whose result is matched by
    their target revision ``(artifact_id, revision)``."""
    by_target: dict[tuple[str, int], list[tuple[dict, dict]]] = {}
    for failure_ref, match in matches:
        if match["result"] == "matched":
            target = match["artifact_ref"]
            by_target.setdefault((target["artifact_id"], target["revision"]), []).append((failure_ref, match))
    return by_target


#: The reasons an unknown selection can have (contract §17, rev. 3), in the
#: contract's order: each selected (E, O) without a terminal verdict gets the
#: first that holds.
UNKNOWN_REASONS: tuple[str, ...] = (
    "multiple_matches",
    "ambiguous",
    "condition_empty",
    "condition_not_observed",
    "condition_unverified",
    "condition_duplicated",
    "check_missing",
    "check_unverified",
    "check_duplicated",
    "check_not_run",
    "check_failed",
)
#: The reasons that say the verification binding proves nothing (contract
#: §17 ``binding_suspect``): an empty condition or any ``check_…`` reason.
SUSPECT_REASONS: frozenset[str] = frozenset(
    reason for reason in UNKNOWN_REASONS if reason == "condition_empty" or reason.startswith("check_")
)
#: Check statuses of a check that did not run (``check_not_run``).
NOT_RUN_CHECK_STATUSES = frozenset({"skipped", "cancelled", "unknown"})


class Binding(NamedTuple):
    """How E's verification binding fares on one Task Outcome (contract §7
    avoided conditions 2–3, §17 reasons 3–11), immutable.

    ``reason`` is None when both hold — exactly one verified observation of
    the condition and exactly one verified bound check, which passed — else
    the first §17 reason among ``condition_empty`` … ``check_failed``.
    ``observations`` and ``checks`` are the indexes of the items that
    decided it: the condition's observations (the one bound observation, or
    those that only name it, or the duplicates) and the bound check(s).
    """

    reason: str | None
    observations: tuple[int, ...] = ()
    checks: tuple[int, ...] = ()


def bind(items: OutcomeItems, failure: dict) -> Binding:
    """E's binding on the outcome of ``items`` (``failure``: E's failure
    keys as the state keeps them, ``condition_key`` and
    ``check_subject_key``). A binding that normalizes to "" matches
    nothing."""
    condition_key = failure["condition_key"]
    if not condition_key:
        return Binding("condition_empty")
    named = tuple(index for index, (_, text) in enumerate(items.observations) if text == condition_key)
    if not named:
        return Binding("condition_not_observed")
    conditions = tuple(items.verified_observations(condition_key))
    if not conditions:
        return Binding("condition_unverified", named)
    if len(conditions) > 1:
        return Binding("condition_duplicated", conditions)
    subject_key = failure["check_subject_key"]
    bound = tuple(index for index, (_, name) in enumerate(items.checks) if subject_key and name == subject_key)
    if not bound:
        return Binding("check_missing", conditions)
    checks = tuple(items.verified_checks(subject_key))
    if not checks:
        return Binding("check_unverified", conditions, bound)
    if len(checks) > 1:
        return Binding("check_duplicated", conditions, checks)
    status = items.outcome["checks"][checks[0]]["status"]
    if status in NOT_RUN_CHECK_STATUSES:
        return Binding("check_not_run", conditions, checks)
    if status != "passed":
        return Binding("check_failed", conditions, checks)
    return Binding(None, conditions, checks)


def avoided_refs(items: OutcomeItems, binding: Binding) -> tuple[dict, dict]:
    """``(condition_ref, check_ref)`` of a binding that holds (its reason is
    None): the items an ``avoided`` verdict carries."""
    outcome = items.outcome
    return item_ref(outcome, "observation", binding.observations[0]), item_ref(outcome, "check", binding.checks[0])


def unknown_reason(matched_items: int, ambiguous: bool, binding: Binding | None) -> str:
    """The one reason of a selected (E, O) without a terminal verdict
    (contract §17): ``multiple_matches`` when two or more failure items of O
    matched E, else ``ambiguous`` when an ``ambiguous`` item of O had E
    among its eligible candidates, else the binding's reason. ``binding``
    may be None only with two or more matched items. Raises ValueError when
    no reason holds: then the pair has a terminal verdict."""
    if matched_items >= 2:
        return "multiple_matches"
    if ambiguous:
        return "ambiguous"
    if matched_items or binding is None or binding.reason is None:
        raise ValueError("a selection with a recurred or avoided verdict has no unknown reason")
    return binding.reason
