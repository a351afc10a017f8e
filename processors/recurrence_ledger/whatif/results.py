"""What one policy concluded on the inputs of a what-if (contract §20):
:class:`PolicyResult`, read off a finished
:class:`~recurrence_ledger.whatif.shadow.WhatIfProcessor`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from recurrence_ledger.ledger.effect import assess_effect
from recurrence_ledger.ledger.patterns import patterns_of_counts, state_counts
from recurrence_ledger.ledger.statistics import scope_statistics
from recurrence_ledger.ledger.severity import severity_review_threshold
from recurrence_ledger.ledger.withheld import final_arms
from recurrence_ledger.whatif.policies import Policy
from recurrence_ledger.whatif.shadow import WhatIfProcessor

#: The ScopeStatistics figures a report shows per scope and adds up.
FIGURES = ("selected", "recurred", "avoided", "unknown", "needing_review", "pending_outcomes")


@dataclass
class PolicyResult:
    """One policy's conclusions, per scope id:

    - ``candidates``: ``{candidate_id: ReviewCandidate}`` it published (§8);
    - ``needing_review``: ``{(artifact_id, revision): {signature_key,
      streak}}`` of the revisions whose final streak is ≥ its review
      threshold (the ``needing_review`` of the view);
    - ``decisions``: ``{candidate_id: AdmissionDecision}`` (§12);
    - ``horizon_unlinked`` / ``end_unlinked``: ``{task outcome source_id:
      journal_position}`` decided unlinked because the provenance horizon
      passed / the input ended (§5);
    - ``statistics``: the scope's final ScopeStatistics under this policy
      (its threshold's ``needing_review``, its top-N of ``top_revisions``);
    - ``pattern_candidates``: ``{candidate_id: PatternCandidate}`` of the
      whole input (contract §23: patterns span scopes), under its pattern
      threshold and group separator;
    - ``effects``: ``{(artifact_id, revision): {verdict,
      probability_helps}}`` of every revision with an effect (§21.4), under
      its effect minimum and probability (and its pass's holdout policy).
    """

    policy: Policy
    candidates: dict[str, dict[str, dict]] = field(default_factory=dict)
    needing_review: dict[str, dict[tuple[str, int], dict]] = field(default_factory=dict)
    decisions: dict[str, dict[str, dict]] = field(default_factory=dict)
    horizon_unlinked: dict[str, dict[str, int]] = field(default_factory=dict)
    end_unlinked: dict[str, dict[str, int]] = field(default_factory=dict)
    statistics: dict[str, dict] = field(default_factory=dict)
    pattern_candidates: dict[str, dict] = field(default_factory=dict)
    effects: dict[str, dict[tuple[str, int], dict]] = field(default_factory=dict)

    @property
    def scope_ids(self) -> list[str]:
        """Every scope with a statistics record, sorted."""
        return sorted(self.statistics)

    def totals(self) -> dict[str, int]:
        """Counts over every scope: review candidates, revisions needing
        review, admission decisions listing a near-duplicate, outcomes the
        horizon / the end of the input decided unlinked, and the
        :data:`FIGURES` of the statistics."""
        totals = {
            "review_candidates": sum(map(len, self.candidates.values())),
            "revisions_needing_review": sum(map(len, self.needing_review.values())),
            "admission_decisions": sum(map(len, self.decisions.values())),
            "decisions_with_near_duplicates": sum(
                1 for decided in self.decisions.values() for decision in decided.values() if decision["near_duplicates_total"]
            ),
            "horizon_unlinked": sum(map(len, self.horizon_unlinked.values())),
            "end_unlinked": sum(map(len, self.end_unlinked.values())),
            "pattern_candidates": len(self.pattern_candidates),
        }
        for name in FIGURES:
            totals[name] = sum(record[name] for record in self.statistics.values())
        return totals


def policy_effects(processor: WhatIfProcessor, policy: Policy) -> dict[str, dict[tuple[str, int], dict]]:
    """Per scope, ``{(artifact_id, revision): {verdict, probability_helps}}``
    of every revision with an effect in the pass, assessed (§21.4) from its
    final arms with ``policy``'s effect minimum and probability: the arms
    do not depend on them, so one pass serves every pair (contract §21.6)."""
    effects: dict[str, dict[tuple[str, int], dict]] = {}
    for scope_id, artifact_id, revision, treated, withheld in final_arms(processor.state):
        assessment = assess_effect(treated, withheld, policy.effect_min_resolved, policy.effect_probability)
        effects.setdefault(scope_id, {})[(artifact_id, revision)] = {
            "verdict": assessment.verdict, "probability_helps": assessment.probability_helps,
        }
    return effects


def policy_result(processor: WhatIfProcessor, policy: Policy) -> PolicyResult:
    """The conclusions of ``policy``, one of the policies ``processor``
    computed (its provenance horizon, one of its review and near-duplicate
    thresholds), after ``flush``."""
    state = processor.state
    result = PolicyResult(policy, horizon_unlinked=processor.horizon_unlinked, end_unlinked=processor.end_unlinked,
                          effects=policy_effects(processor, policy))
    _, result.pattern_candidates = patterns_of_counts(state_counts(state.store), policy.pattern_group_separator, policy.pattern_threshold)
    for candidate in processor.candidates[(policy.review_threshold, policy.critical_review_threshold)]:
        result.candidates.setdefault(candidate["scope_id"], {})[candidate["candidate_id"]] = candidate
    for (scope_id, candidate_id), decision in processor.decisions[policy.near_duplicate_threshold].items():
        result.decisions.setdefault(scope_id, {})[candidate_id] = decision
    for scope_id in processor.scope_ids:
        needing = {}
        lowest = min(policy.review_threshold, policy.critical_review_threshold)
        for negative_streak, _, artifact_id, revision, signature_key in state.ranking(scope_id):
            if -negative_streak < lowest:
                break
            severity = state.get("streak", scope_id, artifact_id, revision).get("severity")
            if -negative_streak < severity_review_threshold(severity, policy.review_threshold, policy.critical_review_threshold):
                continue  # contract §22: a critical revision's own threshold
            needing[(artifact_id, revision)] = {"signature_key": signature_key, "streak": -negative_streak}
        if needing:
            result.needing_review[scope_id] = needing
        statistics = scope_statistics(state, state.scope(scope_id), scope_id, policy.top_revisions, policy.review_threshold,
                                      policy.critical_review_threshold)
        statistics["needing_review"] = len(needing)
        result.statistics[scope_id] = statistics
    return result


def merge_results(policy: Policy, parts: Sequence[PolicyResult], counts: Iterable[tuple[str, str, int]]) -> PolicyResult:
    """One policy's result from the results of processes that applied
    disjoint sets of scopes (``what-if --jobs``): the per-scope parts taken
    from each, the pattern candidates (which span scopes, contract §23)
    from every process's pattern ``counts`` (``patterns.state_counts``)."""
    result = PolicyResult(policy)
    for part in parts:
        for name in ("candidates", "needing_review", "decisions", "horizon_unlinked", "end_unlinked", "statistics", "effects"):
            getattr(result, name).update(getattr(part, name))
    _, result.pattern_candidates = patterns_of_counts(counts, policy.pattern_group_separator, policy.pattern_threshold)
    return result
