"""Pydantic v2 models of the ledger's output records (contract §4, §6–§9, §12, §18, §23).

Each carries the validation matrix of contract §13 as model validators, so
a record that breaks it can never be published (``LedgerProcessor`` with
``validate_outputs``; the tests). The value types they are made of (§2)
and the input events (§3) are ``recurrence_ledger.ledger.models``.

This module imports pydantic only: it is part of the pure core's closure.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from recurrence_ledger.ledger.holdout_records import Effect, EffectCounts
from recurrence_ledger.ledger.models import (
    ArtifactRef, Count, Digest, Id, Position, RejectionReason, RepairState, RepairSurface, ReviewState, ReviewVerdict, Severity, SourceRef, TaskOutcomeItemRef, Text, Value,
)
from recurrence_ledger.ledger.validation import match_violations, observation_violations


# --------------------------------------------------------------------- §4/§6/§7 outputs


class RecurrenceMatch(Value):
    """contract §6: RecurrenceMatch, with ``match_digest``.

    Validation (contract §13): candidate_refs are sorted and distinct, plus
    ``recurrence_ledger.ledger.validation.match_violations`` (candidate_refs
    null only for a scope_heads set, which is a CandidateSet on
    candidate-sets; matches written before rev. 2 carry the list inline).
    """

    scope_id: Id
    task_outcome_ref: SourceRef
    task_outcome_position: Position
    failure_ref: TaskOutcomeItemRef
    candidate_set_mode: Literal["handoff_citations", "scope_heads"]
    candidate_refs: list[ArtifactRef] | None
    candidate_set_digest: Digest
    result: Literal["matched", "unmatched", "ambiguous"]
    artifact_ref: ArtifactRef | None = None
    signature_key: str | None = None
    match_digest: Digest

    @model_validator(mode="after")
    def _matrix(self) -> RecurrenceMatch:
        _sorted_and_distinct(self.candidate_refs or [])
        problems = match_violations(self.model_dump(mode="json"))
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _sorted_and_distinct(refs: list[ArtifactRef]) -> None:
    keys = [ref.sort_key() for ref in refs]
    if keys != sorted(set(keys)):
        raise ValueError("candidate_refs must be sorted by ArtifactRef order and distinct")


class CandidateSet(Value):
    """contract §6 (rev. 2): a frozen scope_heads candidate set, published
    once per (scope_id, candidate_set_digest) on ``candidate-sets``.
    ``candidate_set_digest`` is the digest of ``candidate_refs`` (by
    construction; pinned by the golden vectors, not recomputed here)."""

    scope_id: Id
    candidate_set_digest: Digest
    candidate_refs: list[ArtifactRef]

    @model_validator(mode="after")
    def _sorted(self) -> CandidateSet:
        _sorted_and_distinct(self.candidate_refs)
        if any(ref.family != "experience" for ref in self.candidate_refs):
            raise ValueError("a candidate set holds Experience revisions only")
        return self


class RecurrenceObservation(Value):
    """contract §7: RecurrenceObservation; the validation matrix (§13) is
    ``recurrence_ledger.ledger.validation.observation_violations``."""

    observation_id: Digest
    scope_id: Id
    artifact_ref: ArtifactRef
    signature_key: Annotated[str, Field(min_length=1)]
    event: Literal["selected", "recurred", "avoided"]
    match_basis: Literal["exact"] = "exact"
    task_outcome_ref: SourceRef
    task_outcome_position: Position
    handoff_receipt_ref: SourceRef | None = None
    handoff_ref: ArtifactRef | None = None
    condition_ref: TaskOutcomeItemRef | None = None
    check_ref: TaskOutcomeItemRef | None = None
    failure_ref: TaskOutcomeItemRef | None = None
    recurrence_match_digest: Digest | None = None

    @model_validator(mode="after")
    def _matrix(self) -> RecurrenceObservation:
        problems = observation_violations(self.model_dump(mode="json"))
        if problems:
            raise ValueError("; ".join(problems))
        return self


# --------------------------------------------------------------------- §8

def _reason(family: str, description: str, suspect: bool = False) -> object:
    """A reason count of :class:`UnknownReasons`: default 0, its ``family``
    (``matching``, ``condition`` or ``check``) and whether it makes a
    binding suspect (contract §17) as JSON Schema extras, so that readers
    (the API's ``/unknown-reasons``, the dashboard) take them from here."""
    return Field(0, ge=0, title=description.split(":")[0], description=description, json_schema_extra={"family": family, "suspect": suspect})


class UnknownReasons(Value):
    """contract §17 (rev. 3): how many unknown selections have each reason,
    every reason present, in the contract's order
    (``recurrence_ledger.ledger.verdicts.UNKNOWN_REASONS``; a test keeps the
    two in step); the counts add up to the record's ``unknown``. Each
    field's description says what the reason means and what to fix; its
    ``family`` and ``suspect`` (``SUSPECT_REASONS``) are JSON Schema
    extras."""

    multiple_matches: int = _reason("matching", "multiple matches: two or more failure items of the outcome matched this revision, and one outcome adds at most one recurrence: make the cue more specific")
    ambiguous: int = _reason("matching", "ambiguous: the failure matched this cue and another revision's: merge the duplicate lessons or make their cues distinct")
    condition_empty: int = _reason("condition", "condition empty: the verification condition is empty once normalized, so the selection can never be avoided: give the revision a condition outcomes can report", suspect=True)
    condition_not_observed: int = _reason("condition", "condition not observed: the outcome did not report the condition: make outcomes report the condition as the revision words it")
    condition_unverified: int = _reason("condition", "condition unverified: the condition was only declared or had no exact evidence: make outcomes report it with verified evidence")
    condition_duplicated: int = _reason("condition", "condition duplicated: the condition was reported more than once in the outcome: report it once")
    check_missing: int = _reason("check", "check missing: the condition was observed but no check of the outcome has the bound name: bind the revision to a check the task runs, or correct its check_subject", suspect=True)
    check_unverified: int = _reason("check", "check unverified: the condition was observed but the bound check was only declared or had no exact evidence: make the check report verified evidence", suspect=True)
    check_duplicated: int = _reason("check", "check duplicated: the condition was observed but the bound check was verified more than once in one outcome: bind the revision to a check name that occurs once", suspect=True)
    check_not_run: int = _reason("check", "check not run: the condition was observed but the bound check did not run (skipped, cancelled or unknown): make it run whenever the condition holds", suspect=True)
    check_failed: int = _reason("check", "check failed: the condition was observed and the bound check failed, but no failure item matched the recall cue: reword the cue to what the check reports", suspect=True)


def _count(title: str, description: str, **extra: object) -> object:
    """A count field (integer ≥ 0, default 0) with its title and description."""
    return Field(0, ge=0, title=title, description=description, json_schema_extra=extra or None)


class RevisionFigures(Value):
    """The figures of one Experience revision that both a ``top_revisions``
    row (:class:`RecurrenceStreak`) and a row of the ``revisions`` view
    (:class:`RevisionStatistics`) carry (contract §8, §14, §17): its streak
    and review flag, its yield figures and its unknown selections. The one
    statement of them: the read side (Redis projection, API, CLI, dashboard)
    takes the names, titles and descriptions from here."""

    artifact_ref: ArtifactRef = Field(title="revision", description="The Experience revision (contract §2).")
    signature_key: str = Field(title="signature key", description="The revision's normalized recall cue (contract §5).")
    terminal_recurred_streak: Annotated[int, Field(ge=0)] = Field(
        title="streak", description="Terminal recurred verdicts since the last avoided one (contract §8)."
    )
    repair_surface: RepairSurface | None = Field(
        None, title="repair surface", description="The revision's repair_surface (contract §3); null when the ledger does not know it."
    )
    selected: Count = _count("selected", "Selections of the revision linked to a Task Outcome.")
    recurred: Count = _count("recurred", "Terminal recurred verdicts of the revision.")
    avoided: Count = _count("avoided", "Terminal avoided verdicts of the revision.")
    yield_: Annotated[float | None, Field(ge=0, le=1)] = Field(
        None, alias="yield", title="yield", description="avoided / (avoided + recurred), rounded to 4 decimals; null without terminal verdicts."
    )
    low_yield: bool = Field(False, title="low yield", description="selected ≥ 3 and yield < 0.3 (surfaced only, never retired: contract §14).")
    unknown: Count = _count("unknown", "Selections without a terminal verdict (contract §17): selected minus the terminal verdicts on linked outcomes.")
    unknown_reasons: UnknownReasons = Field(
        UnknownReasons(), title="unknown reasons", description="Why each unknown selection stayed unknown: the eleven reasons of contract §17, in its order, summing to unknown."
    )
    ambiguous: Count = _count("ambiguous", "Ambiguous RecurrenceMatches with this revision among the eligible candidates (contract §17).")
    binding_suspect: bool = Field(
        False, title="binding suspect", description="No terminal verdict at all, and at least review-threshold unknown selections with condition_empty "
        "or a check_… reason: the bound check proves nothing (contract §17)."
    )
    needs_review: bool = Field(False, title="needs review", description="Streak ≥ the workers' review threshold (contract §8), as the ledger decided it.")
    severity: Severity | None = Field(
        None, title="severity", description="The failure record's severity (contract §22): low, medium, high or critical; null: unrated.")


class RecurrenceStreak(RevisionFigures):
    """RecurrenceStreak — one row of ``top_revisions`` (contract §8) — plus the
    revision's figures (:class:`RevisionFigures`): repair_surface, selected /
    recurred / avoided counts, ``yield`` = avoided / (avoided + recurred)
    (None without terminal verdicts) and ``low_yield`` (selected ≥ 3 and
    yield < 0.3; surfaced only, contract §14); since revision 3 ``unknown``,
    ``unknown_reasons``, ``ambiguous`` and ``binding_suspect`` (contract
    §17, as on RevisionStatistics); since record revision 4 ``needs_review``
    (so that readers never compare the streak with a threshold of their own)
    and ``severity`` (contract §22)."""


class ReviewCandidate(Value):
    """contract §8: an Experience revision candidate for human review.

    ``run_start_position`` names the run: the position of the avoided verdict
    that opened it, or None for the start of the revision's history.
    """

    candidate_id: Digest
    scope_id: Id
    artifact_ref: ArtifactRef
    signature_key: str
    repair_surface: Literal["experience_content"]
    streak: Annotated[int, Field(ge=1)]
    run_start_position: Position | None
    reason: str
    failure_refs: list[TaskOutcomeItemRef]


class SurfaceCounts(Value):
    """Selected / recurred / avoided events of one repair_surface."""

    selected: Annotated[int, Field(ge=0)]
    recurred: Annotated[int, Field(ge=0)]
    avoided: Annotated[int, Field(ge=0)]


class RejectedByReason(Value):
    """contract §24: rejected candidates by reason_code (``unspecified``: none); they sum to ``rejected``."""

    false_cause: Count = 0
    broad_scope: Count = 0
    weak_evidence: Count = 0
    duplicate: Count = 0
    not_reproducible: Count = 0
    other: Count = 0
    unspecified: Count = 0


class ReviewCounts(Value):
    """contract §18: review candidates by ReviewStatus ``status``; §24: rejections by code, ``promotion_rate``."""

    open: Count = 0
    approved: Count = 0
    rejected: Count = 0
    superseded: Count = 0
    rejected_by_reason: RejectedByReason = RejectedByReason()
    promotion_rate: Annotated[float | None, Field(ge=0, le=1)] = None

    @model_validator(mode="after")
    def _sums(self) -> ReviewCounts:
        counts = self.rejected_by_reason.model_dump().values()
        if any(counts) and sum(counts) != self.rejected:
            raise ValueError("rejected_by_reason sums to rejected (contract §24)")
        return self


class RepairCounts(Value):
    """contract §18 (rev. 3): a scope's repairs — the ReviewStatus rows with
    a ``repair`` (approved and superseded candidates) — by repair status."""

    pending: Count = 0
    held: Count = 0
    recurring: Count = 0
    failed: Count = 0


class SeverityCounts(Value):
    """contract §22: recurred verdicts by their revision's severity (``unrated``: none); they sum to ``recurred``."""

    critical: Count = 0
    high: Count = 0
    medium: Count = 0
    low: Count = 0
    unrated: Count = 0


class ScopeStatistics(Value):
    """contract §8: the recurrence statistics block for one scope plus
    ``as_of_position`` and the operational gauges ``pending_outcomes`` and
    ``late_revisions``, plus the yield metrics ``repeat_failure_rate``,
    ``stale_revision_selections`` and ``by_repair_surface``, and since
    revision 3 ``forward_references`` (contract §16), ``unknown_reasons``,
    ``ambiguous_matches``, ``unmatched_failures`` and ``binding_suspects``
    (§17), ``reviews`` and ``repairs`` (§18); since record revision 4
    ``review_threshold`` (the policy that decided ``needing_review``, each
    row's ``needs_review`` and ``binding_suspect``). Re-published whenever it
    changes (compacted topic).

    The one statement of the record for the read side: the Redis
    projection's hash fields, the API's scope summary, the CLI's columns
    and the dashboard's labels are derived from these fields (their
    ``title`` and ``description``; ``total``: the view follower publishes
    the sum over the scopes as a gauge)."""

    scope_id: Id = Field(title="scope", description="The scope (contract §3).")
    as_of_position: Position = Field(title="as of position", description="Highest journal position applied in the scope (pending outcomes included).")
    selected: Count = Field(title="selected", description="Selections linked to a Task Outcome (contract §7).")
    recurred: Count = Field(title="recurred", description="Terminal recurred verdicts (contract §7).")
    avoided: Count = Field(title="avoided", description="Terminal avoided verdicts (contract §7).")
    unknown: Count = Field(title="unknown", description="Linked selections without a terminal verdict: an evidence gap, not a failure.")
    unlinked_handoff_citations: Count = Field(
        title="unlinked Handoff citations", description="Handoff citations no Task Outcome was linked through: provenance coverage, not a failure."
    )
    needing_review: Count = Field(
        title="needing review", description="Revisions whose streak ≥ the review threshold (the true count, even beyond top_revisions)."
    )
    top_revisions: list[RecurrenceStreak] = Field(
        title="top revisions", description="The first N revisions by streak (contract §8 order), each with its figures."
    )
    pending_outcomes: Count = Field(title="pending outcomes", description="Gauge: outcomes waiting for their receipt, Handoff or cited Experience.")
    late_revisions: Count = Field(title="late revisions", description="Gauge: revisions that arrived after outcomes that could have cited them.")
    repeat_failure_rate: Annotated[float | None, Field(ge=0, le=1)] = Field(
        None, title="repeat failure rate", description="recurred / (recurred + avoided) on linked outcomes; null without any (contract §14)."
    )
    stale_revision_selections: Count = _count(
        "stale selections", "Selections whose cited revision was not its artifact's head at the outcome's position (contract §14)."
    )
    by_repair_surface: dict[RepairSurface, SurfaceCounts] = Field(
        {}, title="by repair surface", description="Selected / recurred / avoided counts per repair_surface (contract §14)."
    )
    forward_references: Count = _count(
        "forward references", "References that point forward in the journal and link nothing (contract §16).", total=True
    )
    unknown_reasons: UnknownReasons = Field(
        UnknownReasons(), title="unknown reasons", description="The scope's unknown selections by reason (contract §17), summing to unknown."
    )
    ambiguous_matches: Count = _count(
        "ambiguous matches", "Ambiguous RecurrenceMatches: a failure matched several revisions' cues (contract §17).", total=True
    )
    unmatched_failures: Count = _count(
        "unmatched failures", "Unmatched RecurrenceMatches: failures no lesson covers yet (contract §17).", total=True
    )
    binding_suspects: Count = _count(
        "binding suspects", "Revisions whose bound check proves nothing (binding_suspect, contract §17).", total=True
    )
    reviews: ReviewCounts = Field(ReviewCounts(), title="reviews", description="Review candidates by ReviewStatus status (contract §18).")
    repairs: RepairCounts = Field(RepairCounts(), title="repairs", description="Repairs by repair status (contract §18).")
    review_threshold: Count = _count(
        "review threshold", "The workers' review threshold (--review-threshold) that decided needing_review, needs_review and binding_suspect; "
        "0 in a record written before record revision 4."
    )
    recurred_by_severity: SeverityCounts = Field(
        SeverityCounts(), title="recurred by severity", description="Recurred verdicts by their revision's severity (contract §22).")
    withheld: Count = _count("withheld", "HoldoutObservations in the scope: lessons withheld from linked outcomes (contract §21.3).", total=True)
    holdout_conflicts: Count = _count(
        "holdout conflicts", "(Handoff revision, Experience revision) pairs a Handoff both cites and withholds (contract §21.2).", total=True
    )
    effects: EffectCounts = Field(EffectCounts(), title="effects", description="Revisions with an effect, by verdict (contract §21.4).")

    @model_validator(mode="after")
    def _severity_sums(self) -> ScopeStatistics:
        if any(counts := self.recurred_by_severity.model_dump().values()) and sum(counts) != self.recurred:
            raise ValueError("recurred_by_severity sums to recurred (contract §22)")
        return self


class RevisionRowOrder(Value):
    """The order of the first fields of :class:`RevisionStatistics` as its
    Avro schema has had them since revision 2 (``scope_id`` first,
    ``needs_review`` before the figures): a base listed after
    :class:`RevisionFigures`, so pydantic puts these fields first while
    their definitions stay :class:`RevisionFigures`' (the one statement)."""

    scope_id: Id = Field(title="scope", description="The revision's scope (contract §3).")
    artifact_ref: ArtifactRef
    signature_key: str
    terminal_recurred_streak: int
    needs_review: bool


class RevisionStatistics(RevisionFigures, RevisionRowOrder):
    """One row of the ``revisions`` view (yield metrics for every
    revision, not only the top N): the latest figures of one Experience
    revision with verdicts or selections (:class:`RevisionFigures`),
    re-published whenever they change on the compacted
    ``revision-statistics`` topic (key: scope_id and artifact_ref, see
    ``recurrence_ledger.ledger.statistics.revision_key``).

    ``needs_review``: streak ≥ the deployment's review threshold (contract §8).
    Since revision 3 (contract §17): ``unknown`` (selections without a
    terminal verdict), ``unknown_reasons`` (their reasons), ``ambiguous``
    (ambiguous matches with the revision among the eligible candidates; such
    a revision has a row even without a selection or a verdict) and
    ``binding_suspect`` (no terminal verdict at all, and at least
    review-threshold unknown selections with ``condition_empty`` or a
    ``check_…`` reason). Since record revision 4 ``version``
    (``recurrence_ledger.ledger.statistics.row_version``, plus its
    HoldoutObservations, ``with_effect``): it grows with
    every row the ledger publishes for the revision, so a reader keeps the
    row with the highest version and never decides that order itself. Since
    record revision 5 ``runs_reaching_threshold``; since record revision 6
    ``effect`` (contract §21.4)."""

    version: Count = _count(
        "version", "Grows with every row the ledger publishes for the revision (its observations and ambiguous matches so far); "
        "0 in a row written before record revision 4."
    )
    runs_reaching_threshold: list[Position | None] = Field(default_factory=list, title="runs reaching the threshold", description="The names of the revision's runs (the position of the avoided verdict that opened each; null: the start of its history) that hold at least the review threshold's recurred verdicts now, oldest first (contract §8); empty in a row written before record revision 5.")  # noqa: E501
    effect: Effect | None = Field(
        None, title="effect", description="Both arms, probability_helps and the verdict of the lesson's effect; null without a withheld arm (contract §21.4)."
    )


class NearDuplicate(Value):
    """Admission rule 5: a current head whose normalized cue is within
    Sørensen–Dice ≥ 0.8 (token bigrams) of the candidate's; ``same_cue``
    when the normalized cues are identical (future matches would be
    ambiguous). A suggestion, never a rejection."""

    artifact_ref: ArtifactRef
    signature_key: str
    score: Annotated[float, Field(ge=0, le=1)]
    same_cue: bool


AdmissionReason = Literal[
    "no_failure_evidence",
    "missing_source",
    "missing_failure_record",
    "empty_cue",
    "cue_too_long",
    "cue_restates_outcome",
    "missing_repair_surface",
    "missing_verification",
    "empty_condition",
    "empty_check_subject",
    "check_subject_too_long",
]


class AdmissionDecision(Value):
    """The immutable decision on one ExperienceCandidate (contract §12,
    rules 1–6; topic ``admission-decisions``), one per (scope_id,
    candidate_id).

    ``reasons``: every rule the candidate breaks, in rule order (empty when
    accepted). ``failure_refs``: the failure items of its cited Task Outcomes
    it relied on (rule 1), the first 256 of ``failure_refs_total``;
    ``near_duplicates`` the best 16 of ``near_duplicates_total``. ``missing_sources``: cited Task Outcomes the
    ledger had not seen when the provenance horizon passed. ``cited_sources``
    as the candidate gave them (rule 6). ``decision_digest`` = digest of the
    record without it.
    """

    candidate_id: Id
    scope_id: Id
    journal_position: Position
    decision: Literal["accepted", "rejected"]
    reasons: list[AdmissionReason]
    signature_key: str | None = None
    repair_surface: RepairSurface | None = None
    failure_refs: list[TaskOutcomeItemRef]
    failure_refs_total: Annotated[int, Field(ge=0)]
    missing_sources: list[SourceRef]
    cited_sources: list[SourceRef]
    near_duplicates: list[NearDuplicate]
    near_duplicates_total: Annotated[int, Field(ge=0)]
    decision_digest: Digest

    @model_validator(mode="after")
    def _consistent(self) -> AdmissionDecision:
        if (self.decision == "accepted") != (not self.reasons):
            raise ValueError("an accepted decision has no reasons; a rejected one has at least one")
        if self.decision == "accepted" and not self.failure_refs:
            raise ValueError("an accepted decision relies on at least one failure item (rule 1)")
        return self


# --------------------------------------------------------------------- §18


class AppliedReviewDecision(Value):
    """The ReviewDecision applied to a candidate (contract §18): the first
    one, which stands."""

    decision_id: Id
    decision: ReviewVerdict
    reason: Text | None = None
    reviewer: Id
    decided_at: str
    journal_position: Position


class Repair(Value):
    """The effect of a candidate's fix revision F (contract §18): ``status``
    ``pending`` (F unknown or without a terminal verdict), ``held`` (F's
    latest terminal verdict by position is avoided), ``recurring`` (F's
    streak ≥ 1, F never reached the review threshold) or ``failed`` (F
    reached it: final), and F's figures — all 0 while F is unknown."""

    status: RepairState
    selected: Count
    recurred: Count
    avoided: Count
    unknown: Count
    terminal_recurred_streak: Count
    effect: Literal["helps", "harms", "undecided", "insufficient"] | None = None


class ReviewStatus(Value):
    """contract §18 (rev. 3): the review status of one ReviewCandidate, a
    view row on the compacted ``review-status`` topic (key: canonical JSON
    of ``{"candidate_id": …, "scope_id": …}``,
    ``recurrence_ledger.ledger.reviews.review_status_key``).

    ``status``: approved or rejected once a decision is applied; otherwise
    superseded when a higher revision of the artifact is known, else open.
    ``decision``: the applied decision or None. ``fix_revision``: for
    approved the named revision, or the lowest known revision of the
    artifact above the candidate's; for superseded that lowest higher
    revision; else None. ``repair``: None for open and rejected.
    ``reason_code`` (§24): the rejecting decision's, else None."""

    scope_id: Id
    candidate_id: Digest
    artifact_ref: ArtifactRef
    signature_key: str
    streak: Annotated[int, Field(ge=1)]
    status: ReviewState
    decision: AppliedReviewDecision | None = None
    fix_revision: ArtifactRef | None = None
    repair: Repair | None = None
    reason_code: RejectionReason | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ReviewStatus:
        if self.reason_code is not None and self.status != "rejected":
            raise ValueError("only a rejected candidate has a reason_code (contract §24)")
        decided = self.status in ("approved", "rejected")
        if decided != (self.decision is not None) or (decided and self.decision.decision != self.status):
            raise ValueError("status approved or rejected is the applied decision's; open and superseded have none")
        if (self.repair is None) != (self.status in ("open", "rejected")):
            raise ValueError("approved and superseded candidates have a repair, open and rejected ones none")
        if self.status in ("open", "rejected") and self.fix_revision is not None:
            raise ValueError("open and rejected candidates have no fix_revision")
        if self.status == "superseded" and self.fix_revision is None:
            raise ValueError("a superseded candidate names the revision that superseded it")
        fix = self.fix_revision
        own = self.artifact_ref
        if fix is not None and ((fix.family, fix.artifact_id) != (own.family, own.artifact_id) or fix.revision <= own.revision):
            raise ValueError("fix_revision is a higher revision of the candidate's own artifact")
        return self


# --------------------------------------------------------------------- §23


class PatternContribution(Value):
    """contract §23.5: a scope's new absolute count of recurred verdicts
    with a signature, on the repartition topic (``patterns.pattern_key``)."""

    group: str
    signature_key: Annotated[str, Field(min_length=1)]
    scope_id: Id
    recurred: Annotated[int, Field(ge=1)]


class SignaturePattern(Value):
    """contract §23.3: a signature across a group's scopes (view
    ``signature-patterns``): the first 100 scopes in code point order."""

    group: str = Field(title="group", description="The pattern group (contract §23.1): its scope_ids up to the first group separator (\"\": no separator, every scope).")
    signature_key: Annotated[str, Field(min_length=1)] = Field(title="signature key", description="The normalized recall cue (contract §5).")
    scope_count: Annotated[int, Field(ge=1)] = Field(title="scopes", description="Scopes of the group with a recurred verdict with the signature.")
    scopes: Annotated[list[Id], Field(min_length=1, max_length=100)] = Field(title="scope ids", description="The first 100 of them, in code point order.")
    recurred: Annotated[int, Field(ge=1)] = Field(title="recurred", description="Recurred verdicts with the signature over the group's scopes.")

    @model_validator(mode="after")
    def _consistent(self) -> SignaturePattern:
        if self.scopes != sorted(set(self.scopes)) or len(self.scopes) != min(self.scope_count, 100) or self.recurred < self.scope_count:
            raise ValueError("scopes: the first min(scope_count, 100), distinct, in code point order; recurred ≥ scope_count")
        return self


class PatternCandidate(Value):
    """contract §23.4: a pattern that reached the pattern threshold;
    ``candidate_id`` = digest of ``{group, signature_key, threshold}``."""

    candidate_id: Digest
    group: str
    signature_key: Annotated[str, Field(min_length=1)]
    threshold: Annotated[int, Field(ge=1)]
    reason: str


# --------------------------------------------------------------------- §9


class DeadLetter(Value):
    """contract §9: a record that could not be applied.

    ``partition``/``offset`` are the Kafka coordinates; the embedded runner
    uses partition None and the 0-based line number as offset. ``raw`` is the
    record's bytes in base64.
    """

    topic: str
    partition: int | None
    offset: int | None
    key: str | None
    raw: str
    reason: str
    message: str
