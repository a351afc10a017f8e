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

Review decisions (``review-decisions``, contract §18) go through ``apply``
too: they are applied to their ReviewCandidate, wait for it, or are
rejected; they never change a ledger fact, and ``end_batch`` publishes the
ReviewStatus rows they and the fix revisions' figures change.

The processor is this module (the entry points, the source events'
bookkeeping, the views and the output check) and three parts it inherits:
:mod:`recurrence_ledger.ledger.outcomes` (pending Task Outcomes and their
decision, §5–§8), :mod:`recurrence_ledger.ledger.candidates` (held
admission candidates, §12) and :mod:`recurrence_ledger.ledger.reviews`
(review decisions and the review-status view, §18).
"""

from __future__ import annotations

from pydantic import BaseModel

from recurrence_ledger.ledger import admission, causal, chain, matching, patterns, records, withheld
from recurrence_ledger.ledger.candidates import CandidateAdmission
from recurrence_ledger.ledger.reviews import ReviewLoop
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.holdout_records import HoldoutObservation
from recurrence_ledger.ledger.models import identity_content
from recurrence_ledger.ledger.hooks import PolicyHook
from recurrence_ledger.ledger.normalize import digest, normalize
from recurrence_ledger.ledger.outcomes import OutcomeDecisions
from recurrence_ledger.ledger.results import ApplyResult, Emit, Rejection
from recurrence_ledger.ledger.state import LedgerState, Store
from recurrence_ledger.ledger.statistics import revision_key, revision_statistics, scope_statistics, with_effect
from recurrence_ledger.ledger.validation import check_record
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
    REVIEW_DECISIONS,
    REVIEW_STATUS,
    REVISION_STATISTICS,
    STATISTICS,
    TASK_OUTCOMES,
    HOLDOUT_OBSERVATIONS,
)

#: The processor's interface: what it is built with (LedgerConfig) and what
#: it returns (recurrence_ledger.ledger.results) are importable from here.
__all__ = ["ApplyResult", "Emit", "LedgerConfig", "LedgerProcessor", "Rejection"]

_OUTPUT_MODELS: dict[str, type[BaseModel]] = {
    MATCHES: records.RecurrenceMatch,
    OBSERVATIONS: records.RecurrenceObservation,
    REVIEW_CANDIDATES: records.ReviewCandidate,
    STATISTICS: records.ScopeStatistics,
    REVISION_STATISTICS: records.RevisionStatistics,
    ADMISSION_DECISIONS: records.AdmissionDecision,
    CANDIDATE_SETS: records.CandidateSet,
    REVIEW_STATUS: records.ReviewStatus,
    HOLDOUT_OBSERVATIONS: HoldoutObservation,
}


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
    if kind == REVIEW_DECISIONS:
        return ("review_decision", value["decision_id"])
    raise ValueError(f"unknown source event kind {kind!r}")



class LedgerProcessor(OutcomeDecisions, CandidateAdmission, ReviewLoop):
    """The recurrence ledger (contract §3–§8) over a mapping store.

    ``store``: MutableMapping for the state (a dict by default; the worker's
    partition store). Every RecurrenceMatch and RecurrenceObservation is
    checked against the validation matrix (contract §13) before it is returned
    (``validation.check_record``; LedgerInvariantError on a bug).
    ``validate_outputs`` additionally validates every output against its full
    pydantic model (field types and bounds) — the tests turn it on; it costs
    about 40 % of throughput. ``hook``: a policy hook told of the core's
    verdicts, admission decisions and expired outcomes (``ledger.hooks``;
    what-if replays, contract §20), or None.
    """

    def __init__(self, store: Store | None = None, config: LedgerConfig | None = None, validate_outputs: bool = False,
                 hook: PolicyHook | None = None):
        self.state = LedgerState(store)
        self.config = config or LedgerConfig()
        self.validate_outputs = validate_outputs
        self.hook = hook
        self._scopes_touched: dict[str, None] = {}
        self._candidate_scopes: dict[str, None] = {}
        self._decision_scopes: dict[str, None] = {}
        self._revisions_touched: dict[tuple[str, int], None] = {}
        # The batch's changed view keys: scope_id → its changed revisions
        # (artifact_id, revision); see end_batch.
        self._dirty: dict[str, dict[tuple[str, int], None]] = {}
        self._dirty_at_mark: dict[str, dict[tuple[str, int], None]] = {}
        # The batch's artifacts whose review candidates' rows may change
        # (contract §18): scope_id → artifact ids; see end_batch.
        self._review_dirty: dict[str, dict[str, None]] = {}
        self._review_dirty_at_mark: dict[str, dict[str, None]] = {}
        # ... and the candidates whose own row may change: scope_id → candidate ids.
        self._candidates_dirty: dict[str, dict[str, None]] = {}
        self._candidates_dirty_at_mark: dict[str, dict[str, None]] = {}
        # The batch's (scope_id, signature_key) whose recurred count changed
        # (contract §23.5); see contributions.
        self._patterns_touched: dict[tuple[str, str], None] = {}
        self._patterns_at_mark: dict[tuple[str, str], None] = {}

    # -- public ---------------------------------------------------------------
    @property
    def scope_ids(self) -> list[str]:
        """The scopes of every source event applied, in order first seen."""
        return list(self._scopes_touched)

    def apply(self, kind: str, value: dict, origin: dict | None = None) -> ApplyResult:
        """Apply one validated source event of ``kind`` (an input topic name
        of contract §1, e.g. "task-outcomes").

        ``value`` is the event in canonical form: the JSON dump of its
        validated pydantic model (every field present), as
        ``intake.validate`` returns it. The core never mutates it.
        ``origin``: for a review decision (contract §18), where it was read
        (``intake.origin``), kept while it waits for its candidate so that
        it can be dead-lettered later with its own coordinates.

        Returns the emits, nothing for a duplicate, or a Rejection for an
        identity or position conflict (the first version stands), or for a
        review decision that cannot be applied (§18). Raises ValueError for
        an unknown ``kind``.
        """
        scope_id = value["scope_id"]
        position = value["journal_position"]
        identity = _identity(kind, value)
        try:
            content_digest = digest(withheld.identity_value(value) if kind == HANDOFF_REVISIONS else identity_content(kind, value))
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
        if kind == REVIEW_DECISIONS:
            return self._on_decision(scope_id, value, content_digest, origin)
        scope = state.scope(scope_id)
        holder = state.position_holder(scope, scope_id, position)
        if holder is not None:
            return ApplyResult(
                rejection=Rejection(
                    "position_conflict",
                    f"journal position {position} in scope {scope_id!r} is already used by {holder}",
                )
            )
        state.claim_position(scope, scope_id, position, " ".join(map(str, identity)))

        self._scopes_touched[scope_id] = None
        if scope["as_of_position"] is None or position > scope["as_of_position"]:
            scope["as_of_position"] = position
        emits: list[Emit] = []
        record = {"digest": content_digest, "position": position}
        if kind == TASK_OUTCOMES:
            if (receipt_ref := value["handoff_receipt_ref"]) is not None:  # contract §16: counted once both are known
                receipt_id = receipt_ref["source_id"]
                causal.refer(state, scope, scope_id, position, state.get("receipt", scope_id, receipt_id), "receipt", receipt_id)
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
            causal.arrived(state, scope, scope_id, position, *identity)
            chain.count_new_handoff(state, scope, scope_id, record, value["artifact_ref"])
            withheld.on_handoff(state, scope, scope_id, record, value)
            state.put(record, *identity[:1], scope_id, *identity[1:])
            self._wake(scope, scope_id, identity, emits)
        else:
            record["resolves_to"] = target = chain.receipt_target(value)
            causal.arrived(state, scope, scope_id, position, *identity)
            if target is not None:
                handoff = ("handoff", target["artifact_id"], target["revision"])
                causal.refer(state, scope, scope_id, position, state.get(handoff[0], scope_id, *handoff[1:]), *handoff)
            state.put(record, *identity[:1], scope_id, *identity[1:])
            self._wake(scope, scope_id, identity, emits)
        self._expire_pending(scope, scope_id, emits)
        self._expire_candidates(scope_id, scope["as_of_position"], emits)
        self._expire_decisions(scope_id, scope["as_of_position"], emits)
        self._finish_scope(scope, scope_id, emits)
        return ApplyResult(emits)

    def flush(self) -> list[Emit]:
        """The provenance horizon passes for everything still pending
        (contract §5: end of a journal file). Pending outcomes are decided as
        unlinked in (scope first seen, journal position) order. Returns
        ledger facts; the view changes follow with ``end_batch``."""
        return [emit for _, _, emits in self.flush_by_scope() for emit in emits]

    def flush_by_scope(self) -> list[tuple[int, str, list[Emit]]]:
        """:meth:`flush`'s emits, in its order, as ``(part, scope_id,
        emits)``: part 0 the pending outcomes of each scope in the order
        first seen (:attr:`scope_ids`), part 1 the held admission candidates
        of each scope that received one, part 2 the review decisions that
        waited in vain, each scope in the order it first held one
        (:meth:`flush_part_sizes`). A run split by scope (``run-journal
        --jobs``) merges the parts of its processes by (part, when the scope
        entered it) and gets :meth:`flush`'s order exactly."""
        parts: list[tuple[int, str, list[Emit]]] = []
        for scope_id in self._scopes_touched:
            emits: list[Emit] = []
            scope = self.state.scope(scope_id)
            for _, outcome_id in list(self.state.get("pending_index", scope_id, default=[])):
                self._decide_expired(scope, scope_id, outcome_id, emits, end_of_input=True)
            self._finish_scope(scope, scope_id, emits)
            parts.append((0, scope_id, emits))
        for scope_id in self._candidate_scopes:
            emits = []
            self._expire_candidates(scope_id, None, emits, end_of_input=True)
            parts.append((1, scope_id, emits))
        for scope_id in self._decision_scopes:  # contract §18: their candidates never came
            emits = []
            self._expire_decisions(scope_id, None, emits, end_of_input=True)
            parts.append((2, scope_id, emits))
        return parts

    def flush_part_sizes(self) -> tuple[int, int, int]:
        """How many scopes each part of :meth:`flush_by_scope` holds so far.
        An applied event adds at most its own scope to a part, so a runner
        that reads the sizes after each event knows at which input record
        each scope entered each part."""
        return len(self._scopes_touched), len(self._candidate_scopes), len(self._decision_scopes)

    def end_batch(self) -> list[Emit]:
        """Close a batch of the views (contract §8): the view records of every
        key that changed since the last call, each once, with its latest
        value.

        Order: scopes in code point order of scope_id; for each, the
        RevisionStatistics rows of its changed revisions in ArtifactRef
        order, then the ReviewStatus rows (contract §18) of the candidates
        whose row the batch may have changed (a candidate published or
        decided, a new revision of its artifact, new figures of a higher
        revision: ``ReviewLoop._review_rows``) and whose row differs from the
        last one published, in candidate_id order, then its ScopeStatistics when it differs from the last one
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
        for scope_id in sorted(self._dirty.keys() | self._review_dirty.keys() | self._candidates_dirty.keys()):
            revisions = self._dirty.get(scope_id, {})
            scope = state.scope(scope_id)
            for artifact_id, revision in sorted(revisions):
                record = with_effect(  # contract §21.4: the effect of only revisions changed in the batch
                    revision_statistics(state, scope_id, artifact_id, revision, threshold, self.config.critical_review_threshold),
                    withheld.effect(state, self.config, scope, scope_id, artifact_id, revision, state.get("streak", scope_id, artifact_id, revision)),
                )
                self._emit(emits, REVISION_STATISTICS, revision_key(scope_id, record["artifact_ref"]), record)
            self._review_rows(
                scope, scope_id, self._review_dirty.get(scope_id, {}).keys(), self._candidates_dirty.get(scope_id, {}).keys(), revisions, emits,
            )
            statistics = {
                **scope_statistics(state, scope, scope_id, self.config.top_revisions_limit, threshold, self.config.critical_review_threshold),
                **withheld.scope_figures(scope),
            }
            published = digest(statistics)
            if scope.get("published_digest") != published:
                scope["published_digest"] = published
                state.put_scope(scope_id, scope)
                self._emit(emits, STATISTICS, scope_id, statistics)
            if state.get("published", scope_id) is not None:
                state.delete("published", scope_id)  # the full record kept before rev. 2: now a digest in the scope record
        self._dirty.clear()
        self._review_dirty.clear()
        self._candidates_dirty.clear()
        return emits

    def contributions(self) -> list[Emit]:
        """Close a batch of the pattern stage's input (contract §23.5): for
        every (scope, signature_key) whose count of recurred verdicts
        changed since the last call, the scope's new absolute count as a
        PatternContribution on the repartition topic, keyed by ``{group,
        signature_key}`` (``patterns.contribution``), in code point order of
        (scope_id, signature_key). The worker calls it with ``end_batch``,
        in the same transaction; the embedded runner feeds them to its
        ``PatternStage``. Reads state only."""
        separator = self.config.pattern_group_separator
        emits = [
            patterns.contribution(scope_id, signature_key, patterns.recurred_count(self.state, scope_id, signature_key), separator)
            for scope_id, signature_key in sorted(self._patterns_touched)
        ]
        self._patterns_touched.clear()
        return emits

    def mark(self) -> None:
        """Remember the batch's view marks as they are now: the runtime made
        the current state its rollback point (see :meth:`rolled_back`)."""
        self._patterns_at_mark = dict(self._patterns_touched)
        self._dirty_at_mark = {scope_id: dict(revisions) for scope_id, revisions in self._dirty.items()}
        self._review_dirty_at_mark = {scope_id: dict(artifacts) for scope_id, artifacts in self._review_dirty.items()}
        self._candidates_dirty_at_mark = {scope_id: dict(candidates) for scope_id, candidates in self._candidates_dirty.items()}

    def rolled_back(self) -> None:
        """The store was returned to its state at the last :meth:`mark` (a
        runtime's rollback of one record): drop the derived caches, the
        revisions the failed record touched, and the view marks it added."""
        self.state.invalidate_caches()
        self._revisions_touched.clear()
        self._dirty = {scope_id: dict(revisions) for scope_id, revisions in self._dirty_at_mark.items()}
        self._review_dirty = {scope_id: dict(artifacts) for scope_id, artifacts in self._review_dirty_at_mark.items()}
        self._candidates_dirty = {scope_id: dict(candidates) for scope_id, candidates in self._candidates_dirty_at_mark.items()}
        self._patterns_touched = dict(self._patterns_at_mark)

    def restore_candidate_set(self, scope_id: str, candidate_set_digest: str, size: int = 0) -> None:
        """Record an already-published CandidateSet (read back from
        candidate-sets) so it is not published again (contract §6)."""
        self.state.legacy_positions()  # a fresh store's format, decided before the restored records make it non-empty
        self.state.put(size, "set_published", scope_id, candidate_set_digest)

    def restore_match(self, match: dict) -> None:
        """Record an already-published RecurrenceMatch (read back from the
        ledger topic) so the replay rule (contract §6) reuses it as is. It
        is kept as a ``match`` record, which ``_decide`` reads when the
        outcome's own record holds no decision for the item."""
        self.state.legacy_positions()
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
            if failure.get("severity") is not None:  # contract §22; an unrated record is as before revision 4
                record["failure"]["severity"] = failure["severity"]
            state.append([artifact_id, revision], "cue", scope_id, record["failure"]["signature_key"])
        state.put(record, "experience", scope_id, artifact_id, revision)
        matching.revision_known(state, scope, scope_id, artifact_id, revision, position)
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
        chain.count_late_citation(state, scope, scope_id, ref, failure is not None, position)
        withheld.on_experience(state, scope, scope_id, ref, position)
        if state.get("reviews", scope_id, artifact_id) is not None:  # contract §18: it may supersede or fix a candidate
            self._mark_review(scope_id, artifact_id)
        self._wake(scope, scope_id, ("experience", artifact_id, revision), emits)

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
