"""contract §8: streaks by journal position, needing review, ReviewCandidates.

For each (scope_id, artifact_ref, signature_key) the terminal verdicts are
ordered by task_outcome_position; ``terminal_recurred_streak`` is the number
of recurred verdicts after the last avoided one. The state keeps only what the
streak needs — the position of the last avoided verdict and the recurred
verdicts after it — so a late verdict is inserted in position order, never
appended, and the record stays as small as the current run.

A *run* is named by the position of the avoided verdict that opens it, or
None for the start of the revision's history. One ReviewCandidate is
published per run, when its streak first reaches the threshold and the
revision's repair_surface is experience_content; it is never withdrawn.
"""

from __future__ import annotations

import bisect

from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.ledger.state import LedgerState


def review_candidate_id(scope_id: str, artifact_ref: dict, signature_key: str, run_start_position: int | None) -> str:
    """candidate_id = digest of ``{scope_id, artifact_ref, signature_key,
    run_start_position}`` (contract §8: deterministic from scope, revision,
    signature key and run)."""
    return digest(
        {
            "scope_id": scope_id,
            "artifact_ref": artifact_ref,
            "signature_key": signature_key,
            "run_start_position": run_start_position,
        }
    )


def revision_record(state: LedgerState, parts: tuple, signature_key: str, repair_surface: str) -> dict:
    """The per-revision record (streak run and counts), new if absent."""
    return state.get(*parts) or {
        "signature_key": signature_key,
        "repair_surface": repair_surface,
        "last_avoided": None,
        "run": [],
        "published": [],
        "selected": 0,
        "recurred": 0,
        "avoided": 0,
    }


def count_selected(state: LedgerState, scope_id: str, artifact_ref: dict, signature_key: str, repair_surface: str) -> None:
    """One more selected event for a revision (its yield figures, contract
    §14; the streak is unaffected)."""
    parts = ("streak", scope_id, artifact_ref["artifact_id"], artifact_ref["revision"])
    record = revision_record(state, parts, signature_key, repair_surface)
    record["selected"] = record.get("selected", 0) + 1
    state.put(record, *parts)
    state.forget_top(scope_id, artifact_ref)


def record_verdict(
    state: LedgerState,
    scope: dict,
    scope_id: str,
    artifact_ref: dict,
    signature_key: str,
    repair_surface: str,
    event: str,
    position: int,
    failure_ref: dict | None,
    threshold: int,
) -> list[dict]:
    """Apply one terminal verdict (``event`` is "recurred" or "avoided") at
    ``position`` to the revision's streak; update the ranking and the scope's
    ``needing_review`` count. Returns the ReviewCandidate records to publish
    (zero or one).
    """
    parts = ("streak", scope_id, artifact_ref["artifact_id"], artifact_ref["revision"])
    streak = revision_record(state, parts, signature_key, repair_surface)
    streak[event] = streak.get(event, 0) + 1
    state.forget_top(scope_id, artifact_ref)
    last_avoided = streak["last_avoided"]
    old = len(streak["run"])
    after_last_avoided = last_avoided is None or position > last_avoided
    if event == "avoided" and after_last_avoided:
        streak["last_avoided"] = position
        streak["run"] = [entry for entry in streak["run"] if entry[0] > position]
    elif event == "recurred" and after_last_avoided:
        bisect.insort(streak["run"], [position, failure_ref], key=lambda entry: entry[0])
    new = len(streak["run"])

    state.set_streak_rank(scope_id, artifact_ref, signature_key, old, new)
    if old < threshold <= new:
        scope["needing_review"] += 1
    elif new < threshold <= old:
        scope["needing_review"] -= 1

    candidates = []
    run_name = streak["last_avoided"]
    if new >= threshold and repair_surface == "experience_content" and run_name not in streak["published"]:
        streak["published"].append(run_name)
        candidates.append(
            {
                "candidate_id": review_candidate_id(scope_id, artifact_ref, signature_key, run_name),
                "scope_id": scope_id,
                "artifact_ref": artifact_ref,
                "signature_key": signature_key,
                "repair_surface": repair_surface,
                "streak": new,
                "run_start_position": run_name,
                "reason": (
                    f"recurred {new} times in a row with no avoided verdict in between "
                    f"(review threshold {threshold}) for signature '{signature_key}'"
                ),
                "failure_refs": [entry[1] for entry in streak["run"]],
            }
        )
    state.put(streak, *parts)
    return candidates
