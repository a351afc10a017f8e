"""A what-if report's comparison (contract §20): baseline against an
alternative policy on the same inputs, per scope, as JSON-ready dicts.

Per scope: the review candidates added and removed (by candidate_id, with
the revision, streak and run) and those both publish with other content
(the same run reaching another threshold is the same candidate_id, with
another streak and failure refs); the revisions needing review at the end
added and removed; the admission decisions that change (decision, reasons,
near-duplicate list); the outcomes the provenance horizon decided unlinked,
added and removed; the revisions whose effect verdict (§21.4) changes
(contract §21.6); and the statistics of both. A scope appears only when
something in it differs; ``differs`` is False exactly when no scope does.

:func:`sweep_rows` gives one row per policy of a sweep, and
:func:`rejected_avoided` brings in the review decisions (contract §18) of
the inputs: how many candidates that reviewers rejected a policy would not
have raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recurrence_ledger.whatif.results import FIGURES, PolicyResult


def candidate_row(candidate: dict) -> dict:
    """A ReviewCandidate as a report row."""
    ref = candidate["artifact_ref"]
    return {
        "candidate_id": candidate["candidate_id"],
        "artifact_id": ref["artifact_id"],
        "revision": ref["revision"],
        "signature_key": candidate["signature_key"],
        "streak": candidate["streak"],
        "run_start_position": candidate["run_start_position"],
        "failure_refs": len(candidate["failure_refs"]),
    }


def decision_row(decision: dict | None) -> dict | None:
    """An AdmissionDecision as a report row (None: not decided, e.g. dead-lettered)."""
    if decision is None:
        return None
    return {
        "decision": decision["decision"],
        "reasons": decision["reasons"],
        "near_duplicates": [
            {"artifact_id": near["artifact_ref"]["artifact_id"], "revision": near["artifact_ref"]["revision"], "score": near["score"]}
            for near in decision["near_duplicates"]
        ],
        "near_duplicates_total": decision["near_duplicates_total"],
    }


def _statistics_row(record: dict | None) -> dict | None:
    if record is None:
        return None
    row = {name: record[name] for name in FIGURES}
    row["top_revisions"] = [f"{r['artifact_ref']['artifact_id']} r{r['artifact_ref']['revision']}" for r in record["top_revisions"]]
    return row


def _outcomes(found: Mapping[str, int], ids: Sequence[str]) -> list[dict]:
    return [{"task_outcome_id": outcome_id, "journal_position": found[outcome_id]} for outcome_id in sorted(ids, key=lambda i: (found[i], i))]


def _added_removed(base: Mapping, alt: Mapping) -> tuple[list, list]:
    return [key for key in alt if key not in base], [key for key in base if key not in alt]


def compare_scope(base: PolicyResult, alt: PolicyResult, scope_id: str) -> dict | None:
    """The differences of one scope, or None when there are none."""
    entry: dict[str, Any] = {}
    b, a = base.candidates.get(scope_id, {}), alt.candidates.get(scope_id, {})
    added, removed = _added_removed(b, a)
    changed = [
        {"candidate_id": key, "baseline": candidate_row(b[key]), "alternative": candidate_row(a[key])}
        for key in a
        if key in b and (a[key]["streak"], a[key]["failure_refs"]) != (b[key]["streak"], b[key]["failure_refs"])
    ]
    if added or removed or changed:
        entry["review_candidates"] = {
            "added": [candidate_row(a[key]) for key in added], "removed": [candidate_row(b[key]) for key in removed], "changed": changed,
        }
    b, a = base.needing_review.get(scope_id, {}), alt.needing_review.get(scope_id, {})
    added, removed = _added_removed(b, a)
    if added or removed:
        entry["revisions_needing_review"] = {
            "added": [{"artifact_id": key[0], "revision": key[1], **a[key]} for key in sorted(added)],
            "removed": [{"artifact_id": key[0], "revision": key[1], **b[key]} for key in sorted(removed)],
        }
    b, a = base.decisions.get(scope_id, {}), alt.decisions.get(scope_id, {})
    changes = [
        {"candidate_id": key, "baseline": decision_row(b.get(key)), "alternative": decision_row(a.get(key))}
        for key in dict.fromkeys([*b, *a])
        if (b.get(key) or {}).get("decision_digest") != (a.get(key) or {}).get("decision_digest")
    ]
    if changes:
        entry["admission_decisions_changed"] = changes
    for name in ("horizon_unlinked", "end_unlinked"):
        b, a = getattr(base, name).get(scope_id, {}), getattr(alt, name).get(scope_id, {})
        added, removed = _added_removed(b, a)
        if added or removed:
            entry[name] = {"added": _outcomes(a, added), "removed": _outcomes(b, removed)}
    effects = effect_changes(base, alt, scope_id)
    if effects:
        entry["effect_verdicts_changed"] = effects
    statistics = {"baseline": _statistics_row(base.statistics.get(scope_id)), "alternative": _statistics_row(alt.statistics.get(scope_id))}
    if entry or statistics["baseline"] != statistics["alternative"]:
        entry["statistics"] = statistics
        return entry
    return None


def effect_changes(base: PolicyResult, alt: PolicyResult, scope_id: str) -> list[dict]:
    """The revisions of one scope whose effect verdict (§21.4) differs
    between ``base`` and ``alt`` (contract §21.6), in (artifact_id,
    revision) order: ``{artifact_ref, baseline, alternative}``, each side
    ``{verdict, probability_helps}`` or None when that policy gives the
    revision no effect (another holdout policy can leave a revision with
    only mismatches, or none)."""
    b, a = base.effects.get(scope_id, {}), alt.effects.get(scope_id, {})
    return [
        {"artifact_ref": {"artifact_id": key[0], "revision": key[1]}, "baseline": b.get(key), "alternative": a.get(key)}
        for key in sorted({*b, *a})
        if (b.get(key) or {}).get("verdict") != (a.get(key) or {}).get("verdict")
    ]


def scope_ids(*results: PolicyResult) -> list[str]:
    """Every scope any of ``results`` knows, sorted."""
    found: set[str] = set()
    for result in results:
        for part in (result.statistics, result.candidates, result.decisions, result.effects):
            found.update(part)
    return sorted(found)


def pattern_candidate_row(candidate: dict) -> dict:
    """A PatternCandidate as a report row (contract §23)."""
    return {name: candidate[name] for name in ("candidate_id", "group", "signature_key", "threshold")}


def compare_patterns(base: PolicyResult, alt: PolicyResult) -> dict:
    """The pattern candidates (contract §23) ``alt`` adds and removes, in
    (group, signature_key) order; patterns span scopes, so they are compared
    over the whole input, not per scope."""
    added, removed = _added_removed(base.pattern_candidates, alt.pattern_candidates)
    order = lambda row: (row["group"], row["signature_key"], row["threshold"])  # noqa: E731
    return {
        "added": sorted((pattern_candidate_row(alt.pattern_candidates[key]) for key in added), key=order),
        "removed": sorted((pattern_candidate_row(base.pattern_candidates[key]) for key in removed), key=order),
    }


def compare(base: PolicyResult, alt: PolicyResult) -> dict:
    """The comparison of baseline ``base`` and alternative ``alt``:
    ``{policy, changed_settings, differs, totals, scopes,
    pattern_candidates}``; ``totals`` has
    both policies' :meth:`PolicyResult.totals` and the counts of every kind
    of difference; ``scopes`` maps each scope that differs to its
    :func:`compare_scope` entry."""
    scopes = {}
    for scope_id in scope_ids(base, alt):
        entry = compare_scope(base, alt, scope_id)
        if entry is not None:
            scopes[scope_id] = entry

    def count(part: str, kind: str) -> int:
        return sum(len(entry.get(part, {}).get(kind, [])) for entry in scopes.values())

    totals = {
        "baseline": base.totals(),
        "alternative": alt.totals(),
        "review_candidates_added": count("review_candidates", "added"),
        "review_candidates_removed": count("review_candidates", "removed"),
        "review_candidates_changed": count("review_candidates", "changed"),
        "revisions_needing_review_added": count("revisions_needing_review", "added"),
        "revisions_needing_review_removed": count("revisions_needing_review", "removed"),
        "admission_decisions_changed": sum(len(entry.get("admission_decisions_changed", [])) for entry in scopes.values()),
        "horizon_unlinked_added": count("horizon_unlinked", "added"),
        "horizon_unlinked_removed": count("horizon_unlinked", "removed"),
        "effect_verdicts_changed": sum(len(entry.get("effect_verdicts_changed", [])) for entry in scopes.values()),
        "scopes_with_differences": len(scopes),
    }
    patterns = compare_patterns(base, alt)
    totals["pattern_candidates_added"] = len(patterns["added"])
    totals["pattern_candidates_removed"] = len(patterns["removed"])
    return {
        "policy": alt.policy.as_json(),
        "changed_settings": alt.policy.differences(base.policy),
        "differs": bool(scopes) or bool(patterns["added"] or patterns["removed"]),
        "totals": totals,
        "scopes": scopes,
        "pattern_candidates": patterns,
    }


def rejected_avoided(base: PolicyResult, alt: PolicyResult, decisions: Mapping[tuple[str, str], str] | None) -> int | None:
    """How many review candidates the baseline raised that reviewers
    rejected and ``alt`` would not have raised. ``decisions`` maps a
    (scope_id, candidate_id) to its review decision ("approved" / "rejected", contract
    §18: what the replay read, ``ReplayOutcome.review_decisions``); None —
    no decisions known — gives None, and the report and chart leave the
    figure out rather than show zeros."""
    if decisions is None:
        return None
    return sum(
        1
        for scope_id, raised in base.candidates.items()
        for candidate_id in raised
        if decisions.get((scope_id, candidate_id)) == "rejected" and candidate_id not in alt.candidates.get(scope_id, {})
    )


def sweep_rows(base: PolicyResult, results: Sequence[PolicyResult], comparisons: Sequence[dict], value_of,
               decisions: Mapping[tuple[str, str], str] | None = None) -> list[dict]:
    """One row per swept policy: its value (``value_of(policy)``), its review
    load (candidates, revisions needing review), its near-duplicate and
    horizon figures, what changes against the baseline, and the rejected
    candidates it would have avoided (None without review decisions)."""
    rows = []
    for result, comparison in zip(results, comparisons, strict=True):
        totals, changes = result.totals(), comparison["totals"]
        rows.append({
            "value": value_of(result.policy),
            "review_candidates": totals["review_candidates"],
            "revisions_needing_review": totals["revisions_needing_review"],
            "decisions_with_near_duplicates": totals["decisions_with_near_duplicates"],
            "horizon_unlinked": totals["horizon_unlinked"],
            "review_candidates_added": changes["review_candidates_added"],
            "review_candidates_removed": changes["review_candidates_removed"],
            "admission_decisions_changed": changes["admission_decisions_changed"],
            "effect_verdicts_changed": changes["effect_verdicts_changed"],
            "rejected_candidates_avoided": rejected_avoided(base, result, decisions),
        })
    return rows
