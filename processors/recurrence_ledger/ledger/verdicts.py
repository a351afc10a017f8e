"""contract §7: selected, recurred and avoided RecurrenceObservations.

"unknown" is never written: it is derived as selected minus the selected
(E, O) pairs that acquired a terminal verdict (contract §7: unknown is a
derived verdict, never an event).
"""

from __future__ import annotations

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


def avoided_binding(items: OutcomeItems, failure: dict) -> tuple[tuple[dict, dict] | None, str | None]:
    """Avoided conditions 2–3 (contract §7): ``((condition_ref, check_ref),
    None)`` when they hold, else ``(None, reason)`` with the exact reason.

    2. exactly one observation with basis verified, non-empty exact evidence
       and normalize(text) = normalize(verification.condition);
    3. exactly one check with basis verified, non-empty exact evidence and
       normalize(name) = normalize(verification.check_subject), and it passed.
    Condition 1 (linked, in the cited set) and 4 (no matched failure item on
    this revision) are the caller's. A binding that normalizes to "" matches
    nothing.
    """
    condition_key = failure["condition_key"]
    subject_key = failure["check_subject_key"]
    if not condition_key:
        return None, "verification.condition normalizes to the empty string"
    conditions = items.verified_observations(condition_key)
    if len(conditions) != 1:
        if conditions:
            return None, f"{len(conditions)} verified observations of the condition (exactly one needed)"
        if any(text == condition_key for _, text in items.observations):
            return None, "the condition is only declared or has no exact evidence"
        return None, "no verified observation of the condition"
    checks = items.verified_checks(subject_key)
    if len(checks) != 1:
        if checks:
            return None, f"{len(checks)} verified bound checks (exactly one needed)"
        if any(name == subject_key for _, name in items.checks):
            return None, "the bound check is only declared or has no exact evidence"
        return None, "the bound check did not run"
    outcome = items.outcome
    status = outcome["checks"][checks[0]]["status"]
    if status != "passed":
        return None, f"the bound check {status}"
    return (item_ref(outcome, "observation", conditions[0]), item_ref(outcome, "check", checks[0])), None
