"""Derived views from the ledger alone (contract §7–§8; "derived views are
rebuildable from it").

``rebuild_views`` replays RecurrenceObservation records — in any order,
each observation once: a record whose ``observation_id`` (its identity, the
digest of the record without it, contract §7) was already replayed is a
copy (a replay into a reset topic, a record produced twice) and is skipped —
through the same streak code the processor uses, and returns per scope the
ledger facts of ScopeStatistics: selected, recurred, avoided, unknown,
needing_review and top_revisions. The remaining figures are not ledger facts
(``unlinked_handoff_citations`` and ``as_of_position`` describe the inputs,
``pending_outcomes`` and ``late_revisions`` are operational gauges, and the
figures of revision 3 come from the inputs: ``forward_references``, the
reasons of unknown selections, ambiguous and unmatched matches, and the
``reviews`` and ``repairs`` of review decisions, §18); a rebuild takes them
from the latest statistics record. A revision's row carries
figures the observations cannot give either — its repair_surface (on the
Experience revision), ``unknown_reasons`` and ``ambiguous`` (contract §17:
from the outcomes' evidence and the matches' candidates): they are carried
over from the live rows (:func:`surfaces_from`), and ``binding_suspect`` is
decided again from them and the rebuilt verdicts. So is the ``effect`` of
revision 4 (contract §21.4: from the HoldoutObservations and the policy).
"""

from __future__ import annotations

from collections.abc import Iterable

from recurrence_ledger import policy
from recurrence_ledger.ledger.severity import count_recurred, severity_review_threshold
from recurrence_ledger.ledger.state import LedgerState, experience_ref, new_scope_record
from recurrence_ledger.ledger.statistics import revision_figures, revision_id, revision_statistics, top_revisions, unknown_figures, with_effect
from recurrence_ledger.ledger.streaks import count_selected, is_binding_suspect, record_verdict, revision_record

#: ScopeStatistics fields that rebuild_views derives from observations.
DERIVED_FIELDS = ("selected", "recurred", "avoided", "unknown", "needing_review", "top_revisions")


#: The figures of a revision's row that are not derived from observations:
#: carried over from the live rows.
CARRIED_FIELDS = ("signature_key", "repair_surface", "unknown_reasons", "ambiguous", "severity", "effect")


def surfaces_from(statistics: Iterable[dict], revision_rows: Iterable[dict] = ()) -> dict[tuple[str, str, int], dict]:
    """Per (scope, artifact_id, revision), the :data:`CARRIED_FIELDS` of
    its row — repair_surface (on the Experience revision, not on the
    observations), and the reasons of its unknown selections and its
    ambiguous matches (contract §17) — as the statistics records'
    top_revisions rows and the revision-statistics rows carry them (the
    latter win). Rows written before revision 3 carry no reasons."""
    rows = [(record["scope_id"], row) for record in statistics for row in record["top_revisions"]]
    rows += [(row["scope_id"], row) for row in revision_rows]
    return {
        (scope_id, row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"]): {
            name: row.get(name) for name in CARRIED_FIELDS
        }
        for scope_id, row in rows
    }


def rebuild_views(
    observations: Iterable[dict],
    review_threshold: int = policy.REVIEW_THRESHOLD.default,
    top_limit: int = policy.TOP_REVISIONS.default,
    surfaces: dict[tuple[str, str, int], str] | None = None,
    critical_review_threshold: int = policy.CRITICAL_REVIEW_THRESHOLD.default,
) -> dict[str, dict]:
    """Per scope, the DERIVED_FIELDS of ScopeStatistics from observation
    records (dicts as published; a repeated observation_id counts once).
    Streaks are ordered by
    task_outcome_position whatever the input order (contract §8), so a
    topic read partition by partition gives the live values. ``surfaces``
    (see :func:`surfaces_from`) fills the rows' repair_surface and
    severity; a critical revision needs review at
    ``critical_review_threshold`` (contract §22)."""
    state, scopes = _replay(observations, review_threshold, surfaces or {}, critical_review_threshold)
    return {
        scope_id: {
            "selected": scope["selected"],
            "recurred": scope["recurred"],
            "avoided": scope["avoided"],
            "unknown": scope["selected"] - scope["linked_verdicts"],
            "needing_review": scope["needing_review"],
            "top_revisions": top_revisions(state, scope_id, top_limit, review_threshold, critical_review_threshold),
        }
        for scope_id, scope in scopes.items()
    }


def rebuild_revisions(
    observations: Iterable[dict],
    review_threshold: int = policy.REVIEW_THRESHOLD.default,
    surfaces: dict[tuple[str, str, int], str] | None = None,
    critical_review_threshold: int = policy.CRITICAL_REVIEW_THRESHOLD.default,
) -> dict[tuple[str, str, int], dict]:
    """The ``revisions`` view from observation records alone: the
    RevisionStatistics row of every revision with an observation (a
    repeated observation_id counts once), by
    (scope_id, artifact_id, revision) — what the last revision-statistics
    record of each revision must be."""
    surfaces = surfaces or {}
    state, _ = _replay(observations, review_threshold, surfaces, critical_review_threshold)
    rows = {
        (key[1], key[2], key[3]): with_effect(
            revision_statistics(state, key[1], key[2], key[3], review_threshold, critical_review_threshold),
            (surfaces.get((key[1], key[2], key[3])) or {}).get("effect"),
        )
        for key in list(state.store)
        if key[0] == "streak"
    }
    # contract §21: a revision only ever withheld has a row with its effect and no observation
    for (scope_id, artifact_id, revision), carried in surfaces.items():
        if (scope_id, artifact_id, revision) not in rows and carried.get("effect") is not None and carried.get("signature_key"):
            rows[(scope_id, artifact_id, revision)] = {
                "scope_id": scope_id, "artifact_ref": experience_ref(artifact_id, revision), "signature_key": carried["signature_key"],
                "terminal_recurred_streak": 0, "needs_review": False, **revision_figures(None), **unknown_figures(None),
                "severity": carried.get("severity"), "repair_surface": carried.get("repair_surface"), "version": 0,
                "runs_reaching_threshold": [],
            }
            rows[(scope_id, artifact_id, revision)] = with_effect(rows[(scope_id, artifact_id, revision)], carried["effect"])
    return rows


def _replay(
    observations: Iterable[dict], review_threshold: int, surfaces: dict, critical_review_threshold: int = policy.CRITICAL_REVIEW_THRESHOLD.default,
) -> tuple[LedgerState, dict[str, dict]]:
    """Observations through the processor's streak code, each
    ``observation_id`` once, then the carried figures: (state, scope
    records)."""
    state = LedgerState()
    scopes: dict[str, dict] = {}
    replayed: set[str] = set()
    for record in observations:
        if record["observation_id"] in replayed:
            continue  # the same observation again: its digest covers all its content
        replayed.add(record["observation_id"])
        scope_id = record["scope_id"]
        scope = scopes.setdefault(scope_id, new_scope_record())
        event = record["event"]
        ref = record["artifact_ref"]
        carried = surfaces.get((scope_id, ref["artifact_id"], ref["revision"])) or {}
        surface, severity = carried.get("repair_surface") or "", carried.get("severity")
        scope[event] += 1
        if event == "selected":
            count_selected(state, scope_id, ref, record["signature_key"], surface, severity=severity)
            continue
        if event == "recurred":
            count_recurred(scope, severity)
        linked = record["handoff_ref"] is not None
        if linked:
            scope["linked_verdicts"] += 1
        # A rebuild publishes no review candidate (they are ledger records of
        # their own topic): the streak is recomputed with surface "" there.
        record_verdict(state, scope, scope_id, ref, record["signature_key"], "", event,
                       record["task_outcome_position"], record["failure_ref"], review_threshold, linked,
                       severity, severity_review_threshold(severity, review_threshold, critical_review_threshold))
        if surface:
            parts = ("streak", scope_id, ref["artifact_id"], ref["revision"])
            revision = state.get(*parts)
            revision["repair_surface"] = surface
            state.put(revision, *parts)
            state.forget_top(scope_id, ref)
    _carry(state, scopes, surfaces, review_threshold)
    return state, scopes


def _carry(state: LedgerState, scopes: dict[str, dict], carried: dict, review_threshold: int) -> None:
    """The carried figures into the rebuilt revision records (a revision
    with ambiguous matches has a row even without observations), and
    ``binding_suspect`` decided again."""
    for (scope_id, artifact_id, revision), figures in carried.items():
        parts = ("streak", scope_id, artifact_id, revision)
        record = state.get(*parts)
        if record is None:
            if not figures.get("ambiguous") or not figures.get("signature_key"):
                continue
            scopes.setdefault(scope_id, new_scope_record())
            record = revision_record(state, parts, figures["signature_key"], figures.get("repair_surface") or "")
        record["ambiguous"] = figures.get("ambiguous") or 0
        record["unknown_reasons"] = {reason: count for reason, count in (figures.get("unknown_reasons") or {}).items() if count}
        record["binding_suspect"] = is_binding_suspect(record, review_threshold)
        state.put(record, *parts)
        state.forget_top(scope_id, {"artifact_id": artifact_id, "revision": revision})


def compare(rebuilt: dict[str, dict], latest: dict[str, dict]) -> dict[str, list[str]]:
    """Per scope, the derived fields where the rebuilt view and the latest
    statistics record disagree ([] when they agree). A scope with
    statistics but no observations compares against zero counts."""
    empty = {"selected": 0, "recurred": 0, "avoided": 0, "unknown": 0, "needing_review": 0, "top_revisions": []}
    differences = {}
    for scope_id in sorted(set(rebuilt) | set(latest)):
        view = rebuilt.get(scope_id, empty)
        record = latest.get(scope_id)
        if record is None:
            differences[scope_id] = ["no statistics record"]
            continue
        differences[scope_id] = [name for name in DERIVED_FIELDS if view[name] != record[name]]
    return differences


def compare_revisions(rebuilt: dict[tuple[str, str, int], dict], latest: Iterable[dict]) -> list[tuple[str, str, int]]:
    """Revisions whose rebuilt row differs from the latest revision-statistics
    record (or exists on one side only), sorted."""
    live = {revision_id(row): row for row in latest}
    return sorted(key for key in set(rebuilt) | set(live) if rebuilt.get(key) != live.get(key))
