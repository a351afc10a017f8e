"""The single entry point of the pure core: ``LedgerProcessor.apply``.

``apply(kind, event)`` takes one validated source event (contract §3) and
returns the output records it causes, in publication order, as ``Emit``
tuples ``(topic, key, value)``; state changes go to the store it was built
with. Same events in the same order → same emits, byte for byte, whatever
the store (contract §10). A source identity seen again with identical content
is a duplicate and emits nothing, so replaying any window is a no-op.

Publication order within one event: RecurrenceMatches (failure item order;
a scope_heads CandidateSet published for the first time comes just before
the first match that cites it), then RecurrenceObservations (cited /
targeted revisions in ArtifactRef order; selected before the verdict), then
ReviewCandidates, then AdmissionDecisions of candidates the event
completed. ``apply`` returns ledger facts only.

Views are tables (contract §8): ``apply`` marks the scopes and revisions it
changed, and ``end_batch`` — called by the runner at the end of each batch
(a Kafka transaction of the worker; every ``--view-batch`` journal records
and the end of the file in the embedded runner) — publishes at most one view
record per changed key, with its latest value, like a Kafka Streams record
cache.

Admission candidates (``experience-candidates``) go through the same
``apply``: they read the ledger's state (known outcomes and their failure
items, the bigram index of current heads) and never change a ledger fact.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import NamedTuple

from pydantic import BaseModel

from recurrence_ledger import policy
from recurrence_ledger.ledger import admission, chain, matching, verdicts
from recurrence_ledger.ledger.normalize import digest, normalize
from recurrence_ledger.ledger.state import LedgerState, Store
from recurrence_ledger.ledger.statistics import revision_key, revision_statistics, scope_statistics
from recurrence_ledger.ledger.streaks import count_selected, record_verdict
from recurrence_ledger.ledger.validation import check_record
from recurrence_ledger.ledger import models
from recurrence_ledger.catalogue import (
    ADMISSION_DECISIONS,
    CANDIDATE_SETS,
    EXPERIENCE_CANDIDATES,
    EXPERIENCE_REVISIONS,
    HANDOFF_RECEIPTS,
    HANDOFF_REVISIONS,
    MATCHES,
    OBSERVATIONS,
    REVIEW_CANDIDATES,
    REVISION_STATISTICS,
    STATISTICS,
    TASK_OUTCOMES,
)


_OUTPUT_MODELS: dict[str, type[BaseModel]] = {
    MATCHES: models.RecurrenceMatch,
    OBSERVATIONS: models.RecurrenceObservation,
    REVIEW_CANDIDATES: models.ReviewCandidate,
    STATISTICS: models.ScopeStatistics,
    REVISION_STATISTICS: models.RevisionStatistics,
    ADMISSION_DECISIONS: models.AdmissionDecision,
    CANDIDATE_SETS: models.CandidateSet,
}



class Emit(NamedTuple):
    """One output record: logical topic, key (scope_id, or the original key
    for dead-letter) and JSON-compatible value."""

    topic: str
    key: str | None
    value: dict


class Rejection(NamedTuple):
    """Why a valid-looking event was not applied: ``reason`` is
    ``identity_conflict`` or ``position_conflict`` (contract §3
    immutability), ``invalid_value`` (no canonical form) or
    ``too_many_pending`` (admission, see LedgerConfig)."""

    reason: str
    message: str


@dataclass
class ApplyResult:
    """Emits of one ``apply`` call, or the rejection that sends the record to
    dead-letter (the shell adds its coordinates, contract §9)."""

    emits: list[Emit] = field(default_factory=list)
    rejection: Rejection | None = None


@dataclass(frozen=True)
class LedgerConfig:
    """Deployment policy (contract §5, §8, §12); every default and bound is
    the :mod:`recurrence_ledger.policy` setting of the same name.

    - ``review_threshold``: streak at which a revision needs review.
    - ``top_revisions_limit``: N of ``top_revisions``.
    - ``provenance_horizon``: how many journal positions a pending outcome
      may wait, counted on its scope's ``as_of_position``, before it is
      decided as unlinked (missing provenance). None waits until ``flush``
      (end of a journal file in the embedded runner). Positions, not wall
      time, so the decision is the same on every replay.
    - ``max_pending_candidates``: how many admission candidates one scope
      may hold while they wait for cited Task Outcomes; one more that would
      wait goes to dead-letter (``too_many_pending``) and may be published
      again later. It bounds the per-scope waiting index: 5,000 entries of
      the longest ids (512 four-byte characters) are ~10 MB, below a 16 MiB
      changelog record.

    Raises ValueError for a value below its setting's minimum.
    """

    review_threshold: int = policy.REVIEW_THRESHOLD.default
    top_revisions_limit: int = policy.TOP_REVISIONS.default
    provenance_horizon: int | None = policy.PROVENANCE_HORIZON.default
    max_pending_candidates: int = policy.MAX_PENDING_CANDIDATES.default

    def __post_init__(self) -> None:
        policy.REVIEW_THRESHOLD.check(self.review_threshold)
        policy.TOP_REVISIONS.check(self.top_revisions_limit)
        policy.PROVENANCE_HORIZON.check(self.provenance_horizon)
        policy.MAX_PENDING_CANDIDATES.check(self.max_pending_candidates)


def _identity(kind: str, value: dict) -> tuple:
    """Store key parts of a source event's identity (contract §3)."""
    if kind == EXPERIENCE_REVISIONS:
        return ("experience", value["artifact_ref"]["artifact_id"], value["artifact_ref"]["revision"])
    if kind == HANDOFF_REVISIONS:
        return ("handoff", value["artifact_ref"]["artifact_id"], value["artifact_ref"]["revision"])
    if kind == HANDOFF_RECEIPTS:
        return ("receipt", value["source_ref"]["source_id"])
    if kind == TASK_OUTCOMES:
        return ("outcome", value["source_ref"]["source_id"])
    if kind == EXPERIENCE_CANDIDATES:
        return ("candidate", value["candidate_id"])
    raise ValueError(f"unknown source event kind {kind!r}")


def _surface_count(scope: dict, repair_surface: str, event: str) -> None:
    """Per-scope selected / recurred / avoided counts by repair_surface."""
    counts = scope.setdefault("by_repair_surface", {}).setdefault(repair_surface, {"selected": 0, "recurred": 0, "avoided": 0})
    counts[event] += 1


class LedgerProcessor:
    """The recurrence ledger (contract §3–§8) over a mapping store.

    ``store``: MutableMapping for the state (a dict by default; the worker's
    partition store). Every RecurrenceMatch and RecurrenceObservation is
    checked against the validation matrix (contract §13) before it is returned
    (``validation.check_record``; LedgerInvariantError on a bug).
    ``validate_outputs`` additionally validates every output against its full
    pydantic model (field types and bounds) — the tests turn it on; it costs
    about 40 % of throughput.
    """

    def __init__(self, store: Store | None = None, config: LedgerConfig | None = None, validate_outputs: bool = False):
        self.state = LedgerState(store)
        self.config = config or LedgerConfig()
        self.validate_outputs = validate_outputs
        self._scopes_touched: dict[str, None] = {}
        self._candidate_scopes: dict[str, None] = {}
        self._revisions_touched: dict[tuple[str, int], None] = {}
        # The batch's changed view keys: scope_id → its changed revisions
        # (artifact_id, revision); see end_batch.
        self._dirty: dict[str, dict[tuple[str, int], None]] = {}
        self._dirty_at_mark: dict[str, dict[tuple[str, int], None]] = {}

    # -- public ---------------------------------------------------------------
    def apply(self, kind: str, value: dict) -> ApplyResult:
        """Apply one validated source event of ``kind`` (an input topic name
        of contract §1, e.g. "task-outcomes").

        ``value`` is the event in canonical form: the JSON dump of its
        validated pydantic model (every field present), as
        ``intake.validate`` returns it. The core never mutates it.

        Returns the emits, nothing for a duplicate, or a Rejection for an
        identity or position conflict (the first version stands).
        Raises ValueError for an unknown ``kind``.
        """
        scope_id = value["scope_id"]
        position = value["journal_position"]
        identity = _identity(kind, value)
        try:
            content_digest = digest(value)
        except ValueError as error:  # e.g. a lone surrogate: no canonical form, no identity
            return ApplyResult(rejection=Rejection("invalid_value", str(error)))
        state = self.state

        existing = state.get(identity[0], scope_id, *identity[1:])
        if existing is not None:
            if existing["digest"] == content_digest:
                return ApplyResult()
            return ApplyResult(
                rejection=Rejection(
                    "identity_conflict",
                    f"{' '.join(map(str, identity))} in scope {scope_id!r} already exists with different content",
                )
            )
        if kind == EXPERIENCE_CANDIDATES:
            return self._on_candidate(scope_id, value, content_digest)
        holder = state.get("position", scope_id, position)
        if holder is not None:
            return ApplyResult(
                rejection=Rejection(
                    "position_conflict",
                    f"journal position {position} in scope {scope_id!r} is already used by {holder}",
                )
            )
        state.put(" ".join(map(str, identity)), "position", scope_id, position)

        self._scopes_touched[scope_id] = None
        scope = state.scope(scope_id)
        if scope["as_of_position"] is None or position > scope["as_of_position"]:
            scope["as_of_position"] = position
        emits: list[Emit] = []
        record = {"digest": content_digest, "position": position}
        if kind == TASK_OUTCOMES:
            evidence = matching.OutcomeItems(value)
            items = evidence.failure_items()
            if items:  # admission rule 1 reads them after the outcome is decided
                record["failure_refs"] = [item.ref for item in items]
            state.put(record, *identity[:1], scope_id, *identity[1:])
            self._try_decide(scope, scope_id, value, emits, was_pending=False, known=(evidence, items))
            self._wake_candidates(scope_id, identity[1], emits)
        elif kind == EXPERIENCE_REVISIONS:
            self._on_experience(scope, scope_id, value, record, emits)
        elif kind == HANDOFF_REVISIONS:
            record.update(cites=chain.distinct_experience_citations(value), linked=False, failure_pairs=0)
            chain.count_new_handoff(state, scope, scope_id, record, value["artifact_ref"])
            state.put(record, *identity[:1], scope_id, *identity[1:])
            self._wake(scope, scope_id, identity, emits)
        else:
            record["resolves_to"] = chain.receipt_target(value)
            state.put(record, *identity[:1], scope_id, *identity[1:])
            self._wake(scope, scope_id, identity, emits)
        self._expire_pending(scope, scope_id, emits)
        self._expire_candidates(scope_id, scope["as_of_position"], emits)
        self._finish_scope(scope, scope_id, emits)
        return ApplyResult(emits)

    def flush(self) -> list[Emit]:
        """The provenance horizon passes for everything still pending
        (contract §5: end of a journal file). Pending outcomes are decided as
        unlinked in (scope first seen, journal position) order. Returns
        ledger facts; the view changes follow with ``end_batch``."""
        emits: list[Emit] = []
        for scope_id in self._scopes_touched:
            scope = self.state.scope(scope_id)
            for _, outcome_id in list(self.state.get("pending_index", scope_id, default=[])):
                self._decide_expired(scope, scope_id, outcome_id, emits)
            self._finish_scope(scope, scope_id, emits)
        for scope_id in self._candidate_scopes:
            self._expire_candidates(scope_id, None, emits, end_of_input=True)
        return emits

    def end_batch(self) -> list[Emit]:
        """Close a batch of the views (contract §8): the view records of every
        key that changed since the last call, each once, with its latest
        value.

        Order: scopes in code point order of scope_id; for each, the
        RevisionStatistics rows of its changed revisions in ArtifactRef
        order, then its ScopeStatistics when it differs from the last one
        published (whose digest the scope record keeps as
        ``published_digest``, updated here, so a value is never re-sent
        unchanged; the scope record was written in this batch anyway, so
        this adds no state record). A revision is marked only when its counts
        change, and counts only grow, so a marked revision's row always
        differs from the one last published. An event that changed nothing
        a view shows publishes nothing.

        The worker calls it once per transaction and partition, before it
        collects the changelog, so the ``published`` writes commit with the
        records; the embedded runner every ``view_batch`` records and at the
        end of the file (after ``flush``)."""
        emits: list[Emit] = []
        state, threshold = self.state, self.config.review_threshold
        for scope_id in sorted(self._dirty):
            for artifact_id, revision in sorted(self._dirty[scope_id]):
                record = revision_statistics(state, scope_id, artifact_id, revision, threshold)
                self._emit(emits, REVISION_STATISTICS, revision_key(scope_id, record["artifact_ref"]), record)
            scope = state.scope(scope_id)
            statistics = scope_statistics(state, scope, scope_id, self.config.top_revisions_limit)
            published = digest(statistics)
            if scope.get("published_digest") != published:
                scope["published_digest"] = published
                state.put_scope(scope_id, scope)
                self._emit(emits, STATISTICS, scope_id, statistics)
            if state.get("published", scope_id) is not None:
                state.delete("published", scope_id)  # the full record kept before rev. 2: now a digest in the scope record
        self._dirty.clear()
        return emits

    def mark(self) -> None:
        """Remember the batch's view marks as they are now: the runtime made
        the current state its rollback point (see :meth:`rolled_back`)."""
        self._dirty_at_mark = {scope_id: dict(revisions) for scope_id, revisions in self._dirty.items()}

    def rolled_back(self) -> None:
        """The store was returned to its state at the last :meth:`mark` (a
        runtime's rollback of one record): drop the derived caches, the
        revisions the failed record touched, and the view marks it added."""
        self.state.invalidate_caches()
        self._revisions_touched.clear()
        self._dirty = {scope_id: dict(revisions) for scope_id, revisions in self._dirty_at_mark.items()}

    def restore_candidate_set(self, scope_id: str, candidate_set_digest: str, size: int = 0) -> None:
        """Record an already-published CandidateSet (read back from
        candidate-sets) so it is not published again (contract §6)."""
        self.state.put(size, "set_published", scope_id, candidate_set_digest)

    def restore_match(self, match: dict) -> None:
        """Record an already-published RecurrenceMatch (read back from the
        ledger topic) so the replay rule (contract §6) reuses it as is. It
        is kept as a ``match`` record, which ``_decide`` reads when the
        outcome's own record holds no decision for the item."""
        failure_ref = match["failure_ref"]
        self.state.put(
            matching.remembered_match(match),
            "match",
            match["scope_id"],
            match["task_outcome_ref"]["source_id"],
            failure_ref["item_kind"],
            failure_ref["item_index"],
        )

    # -- events -------------------------------------------------------------------
    def _on_experience(self, scope: dict, scope_id: str, value: dict, record: dict, emits: list[Emit]) -> None:
        state = self.state
        ref = value["artifact_ref"]
        artifact_id, revision, position = ref["artifact_id"], ref["revision"], value["journal_position"]
        failure = value["content"]["failure"]
        record["failure"] = None
        if failure is not None:
            record["failure"] = {
                "signature_key": normalize(failure["signature"]["recall_cue"]),
                "repair_surface": failure["repair_surface"],
                "condition_key": normalize(failure["verification"]["condition"]),
                "check_subject_key": normalize(failure["verification"]["check_subject"]),
            }
            state.append([artifact_id, revision], "cue", scope_id, record["failure"]["signature_key"])
        state.put(record, "experience", scope_id, artifact_id, revision)
        state.append([revision, position], "history", scope_id, artifact_id)
        heads = state.get("heads", scope_id, default={})
        current = heads.get(artifact_id)
        if current is None or revision > current[0]:
            heads[artifact_id] = [revision, failure is not None]
            state.put(heads, "heads", scope_id)
            old = None
            if current is not None and current[1]:
                old = (current[0], state.get("experience", scope_id, artifact_id, current[0])["failure"]["signature_key"])
            new_key = record["failure"]["signature_key"] if failure is not None else None
            admission.index_head(state, scope_id, artifact_id, old, (revision, new_key))
            matching.head_changed(state, scope_id, artifact_id, revision, failure is not None)
        scope["max_experience_position"] = max(scope["max_experience_position"], position)
        if position < scope["max_unlinked_position"]:
            # contract §1: it does not change frozen matches of unlinked
            # outcomes decided after it in journal position; count it.
            scope["late_revisions"] += 1
        chain.count_late_citation(state, scope, scope_id, ref, failure is not None)
        self._wake(scope, scope_id, ("experience", artifact_id, revision), emits)

    def _wake(self, scope: dict, scope_id: str, entity: tuple, emits: list[Emit]) -> None:
        """Re-resolve the outcomes that were waiting for ``entity``."""
        for outcome_id in self.state.pop_list("wait", scope_id, *entity):
            pending = self.state.get("pending", scope_id, outcome_id)
            if pending is not None:
                self._try_decide(scope, scope_id, pending["outcome"], emits, was_pending=True)

    # -- admission (contract §12; recurrence_ledger.ledger.admission) ---------
    def _on_candidate(self, scope_id: str, candidate: dict, content_digest: str) -> ApplyResult:
        """Decide a new candidate now, or hold it until every Task Outcome it
        cites is known (like a pending outcome, contract §5). A candidate is
        not a source event: it uses no journal position and moves no
        watermark. Rejected (``too_many_pending``, nothing recorded) when it
        would wait in a scope already holding ``max_pending_candidates``."""
        state = self.state
        candidate_id = candidate["candidate_id"]
        waiting = [source_id for source_id in admission.cited_outcome_ids(candidate) if state.get("outcome", scope_id, source_id) is None]
        index = state.get("candidate_index", scope_id, default=[])
        if waiting and len(index) >= self.config.max_pending_candidates:
            return ApplyResult(rejection=Rejection(
                "too_many_pending",
                f"scope {scope_id!r} already holds {len(index)} candidates waiting for Task Outcomes "
                f"(max_pending_candidates); publish it again once its cited outcomes are in",
            ))
        state.put({"digest": content_digest, "position": candidate["journal_position"]}, "candidate", scope_id, candidate_id)
        self._candidate_scopes[scope_id] = None
        emits: list[Emit] = []
        if not waiting:
            self._decide_candidate(scope_id, candidate, emits)
            return ApplyResult(emits)
        state.put({"candidate": candidate, "waiting_on": waiting}, "candidate_pending", scope_id, candidate_id)
        for source_id in waiting:
            state.append(candidate_id, "candidate_wait", scope_id, source_id)
        bisect.insort(index, [candidate["journal_position"], candidate_id])
        state.put(index, "candidate_index", scope_id)
        self._expire_candidates(scope_id, state.scope(scope_id)["as_of_position"], emits)
        return ApplyResult(emits)

    def _wake_candidates(self, scope_id: str, outcome_id: str, emits: list[Emit]) -> None:
        """The Task Outcome ``outcome_id`` is now known: decide the candidates
        that were waiting for nothing else."""
        state = self.state
        for candidate_id in state.pop_list("candidate_wait", scope_id, outcome_id):
            pending = state.get("candidate_pending", scope_id, candidate_id)
            if pending is None:
                continue
            pending["waiting_on"] = [other for other in pending["waiting_on"] if other != outcome_id]
            if pending["waiting_on"]:
                state.put(pending, "candidate_pending", scope_id, candidate_id)
            else:
                self._decide_candidate(scope_id, self._forget_candidate(scope_id, candidate_id)["candidate"], emits)

    def _forget_candidate(self, scope_id: str, candidate_id: str) -> dict:
        state = self.state
        pending = state.get("candidate_pending", scope_id, candidate_id)
        state.delete("candidate_pending", scope_id, candidate_id)
        index = [entry for entry in state.get("candidate_index", scope_id, default=[]) if entry[1] != candidate_id]
        state.put_nonempty(index, "candidate_index", scope_id)
        for source_id in pending["waiting_on"]:
            waiting = [other for other in state.get("candidate_wait", scope_id, source_id, default=[]) if other != candidate_id]
            state.put_nonempty(waiting, "candidate_wait", scope_id, source_id)
        return pending

    def _expire_candidates(self, scope_id: str, as_of_position: int | None, emits: list[Emit], end_of_input: bool = False) -> None:
        """Decide held candidates whose horizon has passed: the provenance
        horizon counted from the candidate's journal_position on the scope's
        ``as_of_position`` — or, at ``end_of_input`` (``flush``), every held
        candidate."""
        horizon = self.config.provenance_horizon
        index = self.state.get("candidate_index", scope_id)
        if not index or (not end_of_input and (horizon is None or as_of_position is None)):
            return
        for position, candidate_id in list(index):
            if not end_of_input and position + horizon > as_of_position:
                break
            self._decide_candidate(scope_id, self._forget_candidate(scope_id, candidate_id)["candidate"], emits)

    def _decide_candidate(self, scope_id: str, candidate: dict, emits: list[Emit]) -> None:
        """Rules 1–6 on what the ledger knows now; the decision is final."""
        state = self.state
        failure_refs: list[dict] = []
        missing: list[str] = []
        for source_id in admission.cited_outcome_ids(candidate):
            record = state.get("outcome", scope_id, source_id)
            if record is None:
                missing.append(source_id)
            else:
                failure_refs += record.get("failure_refs", [])
        key = admission.signature_key(candidate["content"])
        near = admission.near_duplicates(state, scope_id, key, candidate["artifact_id"]) if key else []
        self._emit(emits, ADMISSION_DECISIONS, scope_id, admission.decision(candidate, failure_refs, missing, near))

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

    def _forget_pending(self, scope: dict, scope_id: str, outcome_id: str) -> dict:
        state = self.state
        pending = state.get("pending", scope_id, outcome_id)
        state.delete("pending", scope_id, outcome_id)
        scope["pending_outcomes"] -= 1
        index = [entry for entry in state.get("pending_index", scope_id, default=[]) if entry[1] != outcome_id]
        state.put_nonempty(index, "pending_index", scope_id)
        return pending

    def _decide_expired(self, scope: dict, scope_id: str, outcome_id: str, emits: list[Emit]) -> None:
        """Decide a pending outcome as unlinked (missing provenance); frozen."""
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
                if not item.match_input:
                    eligible = []
                elif linked:
                    eligible = matching.eligible_cited(state, scope_id, resolution.cited_set, item.match_input)
                else:
                    eligible = matching.eligible_scope_heads(state, scope, scope_id, position, item.match_input)
                mode = "handoff_citations" if linked else "scope_heads"
                match = matching.build_match(scope_id, outcome, item, mode, snapshot, eligible)
                check_record("match", match, snapshot)
                self._emit(emits, MATCHES, scope_id, match)
                remembered = matching.remembered_match(match)
            decided.append((item.ref, remembered))
        if outcome_record is not None and len(merged) < len(decided):
            outcome_record["matches"] = [remembered for _, remembered in decided]
            state.put(outcome_record, "outcome", scope_id, outcome_id)
        by_target = verdicts.matched_items_by_target(decided)

        candidates: list[dict] = []
        if linked:
            chain.mark_linked(state, scope, scope_id, resolution.handoff_ref)
            link = {"receipt_ref": resolution.receipt_ref, "handoff_ref": resolution.handoff_ref}
            for ref in resolution.cited_set:
                failure = state.get("experience", scope_id, ref["artifact_id"], ref["revision"])["failure"]
                signature_key = failure["signature_key"]
                self._emit(emits, OBSERVATIONS, scope_id, verdicts.observation("selected", scope_id, outcome, ref, signature_key, **link))
                scope["selected"] += 1
                count_selected(state, scope_id, ref, signature_key, failure["repair_surface"])
                self._revisions_touched[(ref["artifact_id"], ref["revision"])] = None
                _surface_count(scope, failure["repair_surface"], "selected")
                if matching.head_revision_at(state, scope, scope_id, ref["artifact_id"], position) != ref["revision"]:
                    scope["stale_revision_selections"] = scope.get("stale_revision_selections", 0) + 1
                hits = by_target.get((ref["artifact_id"], ref["revision"]), [])
                if len(hits) == 1:
                    failure_ref, match = hits[0]
                    record = verdicts.observation(
                        "recurred", scope_id, outcome, ref, signature_key,
                        failure_ref=failure_ref, match_digest=match["match_digest"], **link,
                    )
                elif not hits and (bound := verdicts.avoided_binding(evidence, failure)[0]) is not None:
                    record = verdicts.observation(
                        "avoided", scope_id, outcome, ref, signature_key,
                        condition_ref=bound[0], check_ref=bound[1], **link,
                    )
                else:  # two or more matched failure items (ambiguous verdict), or unknown
                    continue
                scope["linked_verdicts"] += 1
                candidates += self._verdict(scope, scope_id, record, failure["repair_surface"], emits)
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
                candidates += self._verdict(scope, scope_id, record, failure["repair_surface"], emits)
        for candidate in candidates:
            self._emit(emits, REVIEW_CANDIDATES, scope_id, candidate)

    def _publish_candidate_set(self, scope_id: str, candidates: matching.CandidateSet, emits: list[Emit]) -> None:
        """contract §6: a scope_heads set is published once, before the first
        match that cites it; the state remembers the published digests of
        each scope (one small record per digest)."""
        if self.state.get("set_published", scope_id, candidates.digest) is None:
            record = matching.candidate_set_record(scope_id, candidates)
            self._emit(emits, CANDIDATE_SETS, matching.candidate_set_key(scope_id, candidates.digest), record)
            self.state.put(len(record["candidate_refs"]), "set_published", scope_id, candidates.digest)

    def _verdict(self, scope: dict, scope_id: str, record: dict, repair_surface: str, emits: list[Emit]) -> list[dict]:
        self._emit(emits, OBSERVATIONS, scope_id, record)
        scope[record["event"]] += 1
        _surface_count(scope, repair_surface, record["event"])
        if record["event"] == "recurred" and record["handoff_ref"] is not None:
            scope["linked_recurred"] = scope.get("linked_recurred", 0) + 1
        self._revisions_touched[(record["artifact_ref"]["artifact_id"], record["artifact_ref"]["revision"])] = None
        return record_verdict(
            self.state, scope, scope_id, record["artifact_ref"], record["signature_key"], repair_surface,
            record["event"], record["task_outcome_position"], record["failure_ref"], self.config.review_threshold,
        )

    # -- output -------------------------------------------------------------------
    def _finish_scope(self, scope: dict, scope_id: str, emits: list[Emit]) -> None:
        """Write the scope record; mark the scope and every revision this
        event changed for the batch's view records (``end_batch``)."""
        self.state.put_scope(scope_id, scope)
        self._dirty.setdefault(scope_id, {}).update(self._revisions_touched)
        self._revisions_touched.clear()

    def _emit(self, emits: list[Emit], topic: str, key: str, value: dict) -> None:
        # contract §13: a record that breaks the matrix never leaves the
        # core — always on (plain dicts, cheap);
        # matches are checked where their candidate set is at hand.
        if topic == OBSERVATIONS:
            check_record("observation", value)
        if self.validate_outputs:
            _OUTPUT_MODELS[topic].model_validate(value)
        emits.append(Emit(topic, key, value))
