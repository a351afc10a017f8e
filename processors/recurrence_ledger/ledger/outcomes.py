"""Task Outcomes in the processor: waiting for their provenance (contract
§5), then decided once — RecurrenceMatches of their failure items (§6),
selected / recurred / avoided observations (§7) and the review runs and
counts they move (§8).

``OutcomeDecisions`` is a part of ``LedgerProcessor`` (a mixin): its
methods read and write the processor's state and publish through its
``_emit``; ``apply``, ``flush`` and the processor's wake-ups call them.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from recurrence_ledger.catalogue import CANDIDATE_SETS, HOLDOUT_OBSERVATIONS, MATCHES, OBSERVATIONS, REVIEW_CANDIDATES
from recurrence_ledger.ledger import chain, matching, patterns, verdicts, withheld
from recurrence_ledger.ledger.config import LedgerConfig, review_threshold_of
from recurrence_ledger.ledger.hooks import PolicyHook
from recurrence_ledger.ledger.results import Emit
from recurrence_ledger.ledger.state import LedgerState
from recurrence_ledger.ledger.severity import count_recurred
from recurrence_ledger.ledger.streaks import count_ambiguous, count_selected, record_verdict
from recurrence_ledger.ledger.validation import check_record


def _surface_count(scope: dict, repair_surface: str, event: str) -> None:
    """Per-scope selected / recurred / avoided counts by repair_surface."""
    surfaces = scope.setdefault("by_repair_surface", {})
    counts = surfaces.get(repair_surface)
    if counts is None:
        counts = surfaces[repair_surface] = {"selected": 0, "recurred": 0, "avoided": 0}
    counts[event] += 1


class OutcomeDecisions:
    """The Task Outcome part of ``LedgerProcessor``: pending outcomes
    (``pending``, ``pending_index`` and ``wait`` records of the state) and
    the decision of each outcome."""

    state: LedgerState
    config: LedgerConfig
    hook: PolicyHook | None
    #: Revisions (artifact_id, revision) the current event changed; see ``_finish_scope``.
    _revisions_touched: dict[tuple[str, int], None]
    #: (scope_id, signature_key) whose recurred count changed in the batch (contract §23.5).
    _patterns_touched: dict[tuple[str, str], None]
    _emit: Callable[[list[Emit], str, str, dict], None]
    #: A ReviewCandidate was published (``reviews.ReviewLoop``, contract §18).
    _on_review_candidate: Callable[[str, dict, int, list[Emit]], None]

    # -- §5 pending outcomes ----------------------------------------------------
    def _try_decide(
        self, scope: dict, scope_id: str, outcome: dict, emits: list[Emit], was_pending: bool, known: tuple | None = None,
    ) -> None:
        state = self.state
        outcome_id = outcome["source_ref"]["source_id"]
        resolution = chain.resolve(state, scope_id, outcome)
        if resolution.status == chain.PENDING:
            state.put({"outcome": outcome, "waiting_on": list(resolution.waiting_on)}, "pending", scope_id, outcome_id)
            state.append(outcome_id, "wait", scope_id, *resolution.waiting_on)
            if not was_pending:
                scope["pending_outcomes"] += 1
                index = state.get("pending_index", scope_id, default=[])
                bisect.insort(index, [outcome["journal_position"], outcome_id])
                state.put(index, "pending_index", scope_id)
            return
        if was_pending:
            self._forget_pending(scope, scope_id, outcome_id)
        self._decide(scope, scope_id, outcome, resolution, emits, known)

    def _wake(self, scope: dict, scope_id: str, entity: tuple, emits: list[Emit]) -> None:
        """Re-resolve the outcomes that were waiting for ``entity``."""
        for outcome_id in self.state.pop_list("wait", scope_id, *entity):
            pending = self.state.get("pending", scope_id, outcome_id)
            if pending is not None:
                self._try_decide(scope, scope_id, pending["outcome"], emits, was_pending=True)

    def _forget_pending(self, scope: dict, scope_id: str, outcome_id: str) -> dict:
        state = self.state
        pending = state.get("pending", scope_id, outcome_id)
        state.delete("pending", scope_id, outcome_id)
        scope["pending_outcomes"] -= 1
        index = [entry for entry in state.get("pending_index", scope_id, default=[]) if entry[1] != outcome_id]
        state.put_nonempty(index, "pending_index", scope_id)
        return pending

    def _decide_expired(self, scope: dict, scope_id: str, outcome_id: str, emits: list[Emit], end_of_input: bool = False) -> None:
        """Decide a pending outcome as unlinked (missing provenance); frozen.
        ``end_of_input``: the input ended (``flush``), not the horizon."""
        if self.hook is not None:
            position = self.state.get("pending", scope_id, outcome_id)["outcome"]["journal_position"]
            self.hook.outcome_expired(self.state, scope_id, outcome_id, position, end_of_input)
        pending = self._forget_pending(scope, scope_id, outcome_id)
        waiting = self.state.get("wait", scope_id, *pending["waiting_on"], default=[])
        self.state.put_nonempty([other for other in waiting if other != outcome_id], "wait", scope_id, *pending["waiting_on"])
        self._decide(scope, scope_id, pending["outcome"], chain.Resolution(chain.UNLINKED), emits)

    def _expire_pending(self, scope: dict, scope_id: str, emits: list[Emit]) -> None:
        horizon = self.config.provenance_horizon
        if horizon is None or not scope["pending_outcomes"]:
            return
        for position, outcome_id in list(self.state.get("pending_index", scope_id, default=[])):
            if position + horizon > scope["as_of_position"]:
                break
            self._decide_expired(scope, scope_id, outcome_id, emits)

    # -- §6/§7/§8 decision --------------------------------------------------------
    def _decide(
        self, scope: dict, scope_id: str, outcome: dict, resolution: chain.Resolution, emits: list[Emit], known: tuple | None = None,
    ) -> None:
        """``known``: the outcome's (OutcomeItems, failure items) when the
        caller already computed them."""
        state = self.state
        outcome_id = outcome["source_ref"]["source_id"]
        position = outcome["journal_position"]
        linked = resolution.status == chain.LINKED
        evidence, items = known if known is not None else (matching.OutcomeItems(outcome), None)
        if items is None:
            items = evidence.failure_items()

        snapshot: matching.CandidateSet | None = None
        decided: list[tuple[dict, dict]] = []
        outcome_record = state.get("outcome", scope_id, outcome_id) if items else None
        merged = outcome_record.get("matches", ()) if outcome_record is not None else ()
        for number, item in enumerate(items):
            eligible: list[dict] = []
            # contract §6 replay rule: reuse, never re-decide. A decision is
            # kept in its outcome's record (``matches``, parallel to
            # ``failure_refs``); a ``match`` record is one restored from the
            # ledger topic (restore_match) or written before the two merged.
            remembered = merged[number] if number < len(merged) else None
            if remembered is None:
                remembered = state.get("match", scope_id, outcome_id, item.item_kind, item.item_index)
            if remembered is None:
                if snapshot is None:
                    if linked:
                        snapshot = resolution.chain.candidate_set
                        if snapshot is None:
                            snapshot = resolution.chain.candidate_set = matching.CandidateSet.of(list(resolution.cited_set))
                    else:
                        snapshot = matching.scope_heads(state, scope, scope_id, position)
                        self._publish_candidate_set(scope_id, snapshot, emits)
                eligible = self._eligible(scope, scope_id, resolution, position, item)
                mode = "handoff_citations" if linked else "scope_heads"
                match = matching.build_match(scope_id, outcome, item, mode, snapshot, eligible)
                check_record("match", match, snapshot)
                self._emit(emits, MATCHES, scope_id, match)
                remembered = matching.remembered_match(match)
            elif remembered["result"] == "ambiguous":  # a match of an earlier run (replay): its candidates as known now
                eligible = self._eligible(scope, scope_id, resolution, position, item)
            self._count_match(scope, scope_id, remembered["result"], eligible)
            decided.append((item.ref, remembered))
        if outcome_record is not None and len(merged) < len(decided):
            outcome_record["matches"] = [remembered for _, remembered in decided]
            state.put(outcome_record, "outcome", scope_id, outcome_id)
        by_target = verdicts.matched_items_by_target(decided)
        # contract §17: the cues of O's ambiguous items (an item's eligible
        # candidates are the frozen set's revisions with its match input as cue)
        ambiguous_cues = {item.match_input for item, (_, remembered) in zip(items, decided) if remembered["result"] == "ambiguous"}

        candidates: list[dict] = []
        if linked:
            chain.mark_linked(state, scope, scope_id, resolution.handoff_ref)
            link = {"receipt_ref": resolution.receipt_ref, "handoff_ref": resolution.handoff_ref}
            for ref in resolution.cited_set:
                failure = state.get("experience", scope_id, ref["artifact_id"], ref["revision"])["failure"]
                signature_key = failure["signature_key"]
                hits = by_target.get((ref["artifact_id"], ref["revision"]), [])
                record = reason = None
                if len(hits) == 1:
                    failure_ref, match = hits[0]
                    record = verdicts.observation(
                        "recurred", scope_id, outcome, ref, signature_key,
                        failure_ref=failure_ref, match_digest=match["match_digest"], **link,
                    )
                else:
                    binding = None if hits else verdicts.bind(evidence, failure)
                    if binding is not None and binding.reason is None:
                        condition_ref, check_ref = verdicts.avoided_refs(evidence, binding)
                        record = verdicts.observation(
                            "avoided", scope_id, outcome, ref, signature_key, condition_ref=condition_ref, check_ref=check_ref, **link,
                        )
                    else:  # contract §17: unknown, for exactly one reason
                        reason = verdicts.unknown_reason(len(hits), signature_key in ambiguous_cues, binding)
                self._emit(emits, OBSERVATIONS, scope_id, verdicts.observation("selected", scope_id, outcome, ref, signature_key, **link))
                scope["selected"] += 1
                count_selected(
                    state, scope_id, ref, signature_key, failure["repair_surface"], reason, scope, self.config.review_threshold,
                    failure.get("severity"),
                )
                self._revisions_touched[(ref["artifact_id"], ref["revision"])] = None
                withheld.count_treated(state, self.config, scope_id, resolution.handoff_ref, ref, failure, record and record["event"])
                _surface_count(scope, failure["repair_surface"], "selected")
                matching.count_selection(state, scope, scope_id, ref["artifact_id"], ref["revision"], position)
                if record is None:
                    continue
                scope["linked_verdicts"] += 1
                candidates += self._verdict(scope, scope_id, record, failure, emits, linked=True)
            self._withheld_set(scope, scope_id, outcome, resolution, evidence, items, emits)
        else:
            scope["max_unlinked_position"] = max(scope["max_unlinked_position"], position)
            for (artifact_id, revision), hits in sorted(by_target.items()):
                if len(hits) != 1:
                    continue  # contract §7: multiple evidence items leave the verdict unknown
                failure_ref, match = hits[0]
                failure = state.get("experience", scope_id, artifact_id, revision)["failure"]
                record = verdicts.observation(
                    "recurred", scope_id, outcome, match["artifact_ref"], match["signature_key"],
                    failure_ref=failure_ref, match_digest=match["match_digest"],
                )
                candidates += self._verdict(scope, scope_id, record, failure, emits)
        for candidate in candidates:
            self._emit(emits, REVIEW_CANDIDATES, scope_id, candidate)
            self._on_review_candidate(scope_id, candidate, position, emits)

    def _withheld_set(
        self, scope: dict, scope_id: str, outcome: dict, resolution: chain.Resolution, evidence: matching.OutcomeItems,
        items: list[matching.FailureItem], emits: list[Emit],
    ) -> None:
        """contract §21.3: one HoldoutObservation per member of the linked
        outcome's withheld set, in ArtifactRef order, after its
        RecurrenceObservations; no RecurrenceMatch, no streak."""
        for ref in resolution.chain.withheld_set:
            failure = self.state.get("experience", scope_id, ref["artifact_id"], ref["revision"])["failure"]
            assigned = withheld.assignment(self.config, scope_id, resolution.handoff_ref, ref, failure, withheld=True)
            record = withheld.holdout_observation(
                scope_id, outcome, ref, failure["signature_key"], resolution.receipt_ref, resolution.handoff_ref,
                withheld.control_verdict(evidence, items, failure), assigned,
            )
            self._emit(emits, HOLDOUT_OBSERVATIONS, scope_id, record)
            withheld.count_holdout(self.state, scope, scope_id, record)
            self._revisions_touched[(ref["artifact_id"], ref["revision"])] = None

    def _publish_candidate_set(self, scope_id: str, candidates: matching.CandidateSet, emits: list[Emit]) -> None:
        """contract §6: a scope_heads set is published once, before the first
        match that cites it; the state remembers the published digests of
        each scope (one small record per digest)."""
        if self.state.get("set_published", scope_id, candidates.digest) is None:
            record = matching.candidate_set_record(scope_id, candidates)
            self._emit(emits, CANDIDATE_SETS, matching.candidate_set_key(scope_id, candidates.digest), record)
            self.state.put(len(record["candidate_refs"]), "set_published", scope_id, candidates.digest)

    def _eligible(self, scope: dict, scope_id: str, resolution: chain.Resolution, position: int, item: matching.FailureItem) -> list[dict]:
        """The eligible candidates of a failure item (contract §6)."""
        if not item.match_input:
            return []
        if resolution.status == chain.LINKED:
            return matching.eligible_cited(self.state, scope_id, resolution.cited_set, item.match_input)
        return matching.eligible_scope_heads(self.state, scope, scope_id, position, item.match_input)

    def _count_match(self, scope: dict, scope_id: str, result: str, eligible: list[dict]) -> None:
        """contract §17: the match of a decided outcome's failure item (new,
        or reused under the replay rule) counts in the scope's
        ``unmatched_failures`` or ``ambiguous_matches``, and an ambiguous
        one for each of its eligible candidates."""
        if result == "unmatched":
            scope["unmatched_failures"] = scope.get("unmatched_failures", 0) + 1
        elif result == "ambiguous":
            scope["ambiguous_matches"] = scope.get("ambiguous_matches", 0) + 1
            for ref in eligible:
                failure = self.state.get("experience", scope_id, ref["artifact_id"], ref["revision"])["failure"]
                count_ambiguous(self.state, scope_id, ref, failure["signature_key"], failure["repair_surface"], failure.get("severity"))
                self._revisions_touched[(ref["artifact_id"], ref["revision"])] = None

    def _verdict(self, scope: dict, scope_id: str, record: dict, failure: dict, emits: list[Emit], linked: bool = False) -> list[dict]:
        """Publish the terminal verdict ``record`` of a revision (its stored
        ``failure`` block) and apply it to the revision's runs (contract
        §7, §8) with the revision's review threshold (``review_threshold_of``:
        the critical one for a critical revision, §22; ``binding_suspect``
        keeps the review threshold); returns the ReviewCandidates it
        publishes."""
        repair_surface, severity = failure["repair_surface"], failure.get("severity")
        self._emit(emits, OBSERVATIONS, scope_id, record)
        scope[record["event"]] += 1
        if record["event"] == "recurred":
            count_recurred(scope, severity)
        _surface_count(scope, repair_surface, record["event"])
        if record["event"] == "recurred" and record["handoff_ref"] is not None:
            scope["linked_recurred"] = scope.get("linked_recurred", 0) + 1
        self._revisions_touched[(record["artifact_ref"]["artifact_id"], record["artifact_ref"]["revision"])] = None
        published = record_verdict(
            self.state, scope, scope_id, record["artifact_ref"], record["signature_key"], repair_surface,
            record["event"], record["task_outcome_position"], record["failure_ref"], self.config.review_threshold, linked,
            severity, review_threshold_of(self.config, failure),
        )
        if record["event"] == "recurred":  # contract §23.2: a RecurrenceObservation, never a holdout's control verdict
            patterns.count_recurred(self.state, scope_id, record["signature_key"])
            self._patterns_touched[(scope_id, record["signature_key"])] = None
        if self.hook is not None:
            self.hook.verdict_recorded(self.state, scope_id, record, repair_surface, published)
        return published
