"""contract §8: the ScopeStatistics record (the recurrence statistics block plus
``as_of_position`` and the gauges ``pending_outcomes`` and ``late_revisions``).
"""

from __future__ import annotations

from fractions import Fraction

from recurrence_ledger.ledger.models import REPAIR_SURFACES
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.ratios import published_ratio
from recurrence_ledger.ledger.severity import promotion_rate, recurred_by_severity, rejected_by_reason, severity_review_threshold
from recurrence_ledger.ledger.state import LedgerState, experience_ref
from recurrence_ledger.ledger.streaks import linked_verdicts, runs_reaching_threshold, streak_length
from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS


def scope_statistics(state: LedgerState, scope: dict, scope_id: str, top_limit: int, threshold: int, critical_threshold: int | None = None) -> dict:
    """The statistics record of one scope.

    ``unknown`` = selected − terminal verdicts on linked outcomes (§7).
    ``top_revisions``: revisions with streak ≥ 1, by streak descending, then
    ArtifactRef order, then signature_key; the first ``top_limit``.
    Yield metrics (contract §14, from the failure-journal pattern):
    ``repeat_failure_rate`` = recurred / (recurred + avoided) on linked
    outcomes (None without any), ``stale_revision_selections`` = selected
    events whose cited revision was not its artifact's head at the outcome's
    position, ``by_repair_surface`` = selected / recurred / avoided counts
    per repair_surface. ``top_revisions`` is taken from the sorted ranking
    (cached between streak changes), so the cost is O(top_limit), not
    O(revisions). Revision 3 adds :func:`causal_and_unknown_figures` and
    :func:`review_figures`; record revision 4 adds the review ``threshold``
    that decided ``needing_review`` and each row's ``needs_review``; contract
    revision 4 adds ``recurred_by_severity`` (§22) and, in ``reviews``, the
    rejections by reason code and the promotion rate (§24).
    """
    return {
        "scope_id": scope_id,
        "as_of_position": scope["as_of_position"],
        "selected": scope["selected"],
        "recurred": scope["recurred"],
        "avoided": scope["avoided"],
        "unknown": scope["selected"] - scope["linked_verdicts"],
        "unlinked_handoff_citations": scope["unlinked_handoff_citations"],
        "needing_review": scope["needing_review"],
        "top_revisions": top_revisions(state, scope_id, top_limit, threshold, critical_threshold),
        "pending_outcomes": scope["pending_outcomes"],
        "late_revisions": scope["late_revisions"],
        "repeat_failure_rate": _rate(scope.get("linked_recurred", 0), scope["avoided"]),
        "stale_revision_selections": scope.get("stale_revision_selections", 0),
        "by_repair_surface": {
            surface: dict(scope.get("by_repair_surface", {}).get(surface, {"selected": 0, "recurred": 0, "avoided": 0}))
            for surface in REPAIR_SURFACES
        },
        **causal_and_unknown_figures(scope),
        **review_figures(scope),
        "review_threshold": threshold,
        "recurred_by_severity": recurred_by_severity(scope),
    }


#: ReviewStatus ``status`` values (contract §18), in the order of ScopeStatistics ``reviews``.
REVIEW_STATES: tuple[str, ...] = ("open", "approved", "rejected", "superseded")
#: Repair ``status`` values (contract §18), in the order of ScopeStatistics ``repairs``.
REPAIR_STATES: tuple[str, ...] = ("pending", "held", "recurring", "failed")


def review_figures(scope: dict) -> dict[str, dict[str, int]]:
    """ScopeStatistics' ``reviews`` (the scope's review candidates by the
    status of their ReviewStatus) and ``repairs`` (the rows with a repair,
    by its status), contract §18: every status present, in the contract's
    order, from the counts ``recurrence_ledger.ledger.reviews`` keeps in the
    scope record. Since revision 4 (contract §24) ``reviews`` also has
    ``rejected_by_reason`` (the rejected rows by reason code, summing to
    ``rejected``) and ``promotion_rate`` (approved / (approved + rejected),
    None without a decision)."""
    reviews, repairs = scope.get("reviews", {}), scope.get("repairs", {})
    counts = {status: reviews.get(status, 0) for status in REVIEW_STATES}
    return {
        "reviews": {
            **counts,
            "rejected_by_reason": rejected_by_reason(counts["rejected"], scope.get("rejected_by_reason")),
            "promotion_rate": promotion_rate(counts["approved"], counts["rejected"]),
        },
        "repairs": {status: repairs.get(status, 0) for status in REPAIR_STATES},
    }


def reason_counts(counts: dict | None) -> dict[str, int]:
    """An ``unknown_reasons`` object: every reason of contract §17, in the
    contract's order, with its count (0 when it never occurred)."""
    if not counts:
        return dict(_NO_REASONS)
    if counts.keys() <= _NO_REASONS.keys():  # the common case: the zeros, then the counts, in the contract's order
        return {**_NO_REASONS, **counts}
    return {reason: counts.get(reason, 0) for reason in UNKNOWN_REASONS}


_NO_REASONS: dict[str, int] = dict.fromkeys(UNKNOWN_REASONS, 0)


def causal_and_unknown_figures(scope: dict) -> dict:
    """The ScopeStatistics figures of revision 3: ``forward_references``
    (contract §16: distinct referring/referenced pairs that point forward),
    ``unknown_reasons`` (§17: the sums over the scope's revisions; they add
    up to ``unknown`` for everything decided since revision 3),
    ``ambiguous_matches`` and ``unmatched_failures`` (RecurrenceMatches with
    that result) and ``binding_suspects`` (revisions with
    ``binding_suspect``)."""
    return {
        "forward_references": scope.get("forward_references", 0),
        "unknown_reasons": reason_counts(scope.get("unknown_reasons")),
        "ambiguous_matches": scope.get("ambiguous_matches", 0),
        "unmatched_failures": scope.get("unmatched_failures", 0),
        "binding_suspects": scope.get("binding_suspects", 0),
    }


def unknown_figures(record: dict | None) -> dict:
    """A revision's figures of contract §17: ``unknown`` (its selections
    without a terminal verdict: selected − terminal verdicts on linked
    outcomes), ``unknown_reasons`` (:func:`reason_counts`), ``ambiguous``
    (ambiguous matches with it among the eligible candidates) and
    ``binding_suspect`` (as last decided, ``streaks.is_binding_suspect``)."""
    record = record or {}
    return {
        "unknown": record.get("selected", 0) - linked_verdicts(record),
        "unknown_reasons": reason_counts(record.get("unknown_reasons")),
        "ambiguous": record.get("ambiguous", 0),
        "binding_suspect": record.get("binding_suspect", False),
    }


def rank_key(row: dict) -> tuple:
    """The one revision rank order (contract §8 top_revisions order):
    ``terminal_recurred_streak`` descending, then ArtifactRef order (family,
    artifact_id, revision), then signature_key, then ``scope_id`` (the last
    tiebreak when rows of several scopes are ranked together; rows without
    one, such as top_revisions rows, count as ""). ``row`` is a
    RecurrenceStreak or RevisionStatistics dict. ``LedgerState.ranking``
    keeps its entries in the same order (their tuples are this key's first
    five fields), so ``top_revisions`` is a prefix of any list sorted with
    it; the API, the ``rank`` command and the Redis view sort with it."""
    ref = row["artifact_ref"]
    return (
        -row["terminal_recurred_streak"], ref["family"], ref["artifact_id"], ref["revision"], row["signature_key"],
        row.get("scope_id", ""),
    )


def _rate(recurred: int, avoided: int) -> float | None:
    """recurred / (recurred + avoided) as published (``ratios.published_ratio``:
    4 decimals, ties to even); None without verdicts."""
    return published_ratio(recurred, recurred + avoided)


#: low_yield (surfaced only, contract §14): at
#: least this many selections and a yield below LOW_YIELD, compared as
#: exact fractions (§19 rev. 3: 10·avoided < 3·(avoided + recurred)).
LOW_YIELD_MIN_SELECTED = 3
LOW_YIELD = Fraction(3, 10)


def is_low_yield(selected: int, recurred: int, avoided: int) -> bool:
    """low_yield: ``selected`` ≥ 3 and avoided / (avoided + recurred) <
    3/10, on the exact fraction (a yield of 0.29995 is low although it is
    published as 0.3); False without terminal verdicts."""
    verdicts = avoided + recurred
    # avoided / verdicts < LOW_YIELD, cross-multiplied (exact, no Fraction built)
    return selected >= LOW_YIELD_MIN_SELECTED and verdicts > 0 and avoided * LOW_YIELD.denominator < LOW_YIELD.numerator * verdicts


def revision_figures(record: dict | None) -> dict:
    """A revision's repair_surface, selected / recurred / avoided counts,
    ``yield`` = avoided / (avoided + recurred) over terminal verdicts (None
    when there are none; published with 4 decimals, ``ratios.published_ratio``)
    and ``low_yield`` (:func:`is_low_yield`)."""
    record = record or {}
    recurred, avoided, selected = record.get("recurred", 0), record.get("avoided", 0), record.get("selected", 0)
    revision_yield = published_ratio(avoided, avoided + recurred)
    return {
        "repair_surface": record.get("repair_surface") or None,
        "selected": selected,
        "recurred": recurred,
        "avoided": avoided,
        "yield": revision_yield,
        "low_yield": is_low_yield(selected, recurred, avoided),
    }


def figures(state: LedgerState, scope_id: str, artifact_id: str, revision: int) -> dict:
    """:func:`revision_figures` and :func:`unknown_figures` of a revision's
    streak record and its ``severity`` (contract §22, None: unrated), cached until its counts change
    (``LedgerState.forget_top``). Do not mutate."""
    cached = state.cached_figures(scope_id, artifact_id, revision)
    if cached is None:
        record = state.get("streak", scope_id, artifact_id, revision)
        cached = {**revision_figures(record), **unknown_figures(record), "severity": (record or {}).get("severity")}
        state.cache_figures(scope_id, artifact_id, revision, cached)
    return cached


def top_revisions(state: LedgerState, scope_id: str, limit: int, threshold: int, critical_threshold: int | None = None) -> list[dict]:
    """The first ``limit`` revisions of the streak ranking as RecurrenceStreak
    rows (contract §8: artifact_ref, signature_key, terminal_recurred_streak)
    with the revision's figures (:func:`revision_figures`) and
    ``needs_review`` (streak ≥ ``threshold``); cached until a streak or
    count of the scope changes (``needs_review`` is added to the cached
    rows: what-if replays read one state with several thresholds)."""
    rows = state.cached_top(scope_id, limit)
    if rows is None:
        rows = [
            {
                "artifact_ref": {"family": family, "artifact_id": artifact_id, "revision": revision},
                "signature_key": signature_key,
                "terminal_recurred_streak": -negative_streak,
                **figures(state, scope_id, artifact_id, revision),
            }
            for negative_streak, family, artifact_id, revision, signature_key in state.ranking(scope_id).islice(0, limit)
        ]
        state.cache_top(scope_id, limit, rows)
    if critical_threshold is None:
        return [{**row, "needs_review": row["terminal_recurred_streak"] >= threshold} for row in rows]
    return [  # contract §22: a critical row's own threshold
        {**row, "needs_review": row["terminal_recurred_streak"] >= severity_review_threshold(row.get("severity"), threshold, critical_threshold)}
        for row in rows
    ]


def revision_statistics(
    state: LedgerState, scope_id: str, artifact_id: str, revision: int, threshold: int, critical_threshold: int | None = None,
) -> dict:
    """The RevisionStatistics row of one revision (the ``revisions`` view): its streak (contract §8), ``needs_review`` (streak ≥
    ``threshold``), :func:`revision_figures`, its :func:`row_version` and
    ``runs_reaching_threshold`` (the names of its runs holding ≥
    ``threshold`` recurred verdicts, :func:`recurrence_ledger.ledger.streaks.runs_reaching_threshold`). A
    revision with neither a selection nor a verdict (no ``streak`` record)
    but a HoldoutObservation (contract §21) has a row with zero figures and
    no runs; its Experience revision must be known (KeyError/TypeError
    otherwise)."""
    record = state.get("streak", scope_id, artifact_id, revision)
    if record is None:
        signature_key = state.get("experience", scope_id, artifact_id, revision)["failure"]["signature_key"]
        severity = state.get("experience", scope_id, artifact_id, revision)["failure"].get("severity")
        streak = 0
    else:
        signature_key, severity = record["signature_key"], record.get("severity")
        streak = streak_length(record)
    if critical_threshold is not None:
        threshold = severity_review_threshold(severity, threshold, critical_threshold)
    return {
        "scope_id": scope_id,
        "artifact_ref": experience_ref(artifact_id, revision),
        "signature_key": signature_key,
        "terminal_recurred_streak": streak,
        "needs_review": streak >= threshold,
        **(revision_figures := figures(state, scope_id, artifact_id, revision)),
        "version": row_version(revision_figures),
        "runs_reaching_threshold": [] if record is None else runs_reaching_threshold(state, scope_id, artifact_id, revision, record, threshold),
    }


def row_version(figures: dict) -> int:
    """The ``version`` of a RevisionStatistics row: ``selected + recurred +
    avoided + ambiguous`` of its figures. The processor publishes a row for
    a revision only when one of these counts changed, and they never
    decrease (observations and ambiguous matches are never withdrawn), so
    the version grows with every row published for the revision, in
    publication order; a rebuild from the ledger gives the same value."""
    return figures["selected"] + figures["recurred"] + figures["avoided"] + figures.get("ambiguous", 0)


def with_effect(row: dict, effect: dict | None) -> dict:
    """A RevisionStatistics ``row`` with its ``effect`` (contract §21.4, None:
    no HoldoutObservation and no assignment mismatch); its ``version`` also
    counts the revision's HoldoutObservations (``effect.withheld.withheld``),
    so a row published again only because a HoldoutObservation changed its
    effect still has a higher version (the read side's write guard keeps
    the row with the highest version)."""
    withheld = 0 if effect is None else effect["withheld"]["withheld"]
    return {**row, "effect": effect, "version": row["version"] + withheld}


def revision_id(record: dict) -> tuple[str, str, int]:
    """``(scope_id, artifact_id, revision)`` of a RevisionStatistics record:
    which revision's row it is."""
    ref = record["artifact_ref"]
    return (record["scope_id"], ref["artifact_id"], ref["revision"])


def revision_key(scope_id: str, artifact_ref: dict) -> str:
    """Record key of a ``revision-statistics`` row: the canonical JSON of
    ``{"artifact_ref": …, "scope_id": …}`` — one key per revision, so the
    compacted topic keeps each revision's latest row."""
    return canonical_json({"scope_id": scope_id, "artifact_ref": artifact_ref}).decode("utf-8")
