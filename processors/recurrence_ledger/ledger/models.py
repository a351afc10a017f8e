"""Pydantic v2 models of every event in contract §2–§9.

Inputs (§3) are validated strictly: no type coercion, no unknown fields, and
the field rules of §3 (families, source types, 1–512 character cues that do not
normalize to empty, at most MAX_HANDOFF_CITATIONS citations). String lengths
count code points of the NFC form (contract §3, :func:`at_most`). A record that
fails validation goes to dead-letter (§9); see ``recurrence_ledger.ledger.intake``.

Outputs (§6–§8) carry the validation matrix of contract §13 as model
validators, so a record that breaks it can never be published.

This module imports pydantic only: it is part of the pure core's closure.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from recurrence_ledger.ledger.normalize import nfc_length, normalize
from recurrence_ledger.catalogue import EXPERIENCE_CANDIDATES, EXPERIENCE_REVISIONS, HANDOFF_RECEIPTS, HANDOFF_REVISIONS, TASK_OUTCOMES
from recurrence_ledger.ledger.validation import match_violations, observation_violations

#: contract §3: recall_cue and check_subject have at most 512 characters.
MAX_FAILURE_CUE_LENGTH = 512
#: contract §3: at most 64 artifact citations per Handoff revision.
MAX_HANDOFF_CITATIONS = 64
#: Hostile-input bounds (contract §3, §9); chosen so one record
#: stays far below Kafka's default 1 MiB message size.
MAX_ID_LENGTH = 512
MAX_TEXT_LENGTH = 16_384
MAX_ITEMS = 256
MAX_EVIDENCE = 64
MAX_MEMORY_CITATIONS = 1_024
MAX_POSITION = 2**63 - 1  # Avro long



def at_most(limit: int) -> AfterValidator:
    """A string length limit (contract §3 rev. 2): at most ``limit`` code
    points of the string's NFC form (``normalize.nfc_length``), whatever
    canonically equivalent spelling was sent. The string itself is kept as
    sent. Breaking it is the ``string_too_long`` error (dead-letter reason
    ``too_long``)."""

    def check(value: str) -> str:
        if (len(value) > limit or not value.isascii()) and nfc_length(value) > limit:
            raise PydanticCustomError(
                "string_too_long", "String should have at most {max_length} characters (code points of its NFC form)",
                {"max_length": limit},
            )
        return value

    return AfterValidator(check)


#: Identifiers: 1–512 characters, no control characters (C0, DEL, C1: they
#: would be invisible in dashboards and logs). Every length limit counts
#: code points of the NFC form (:func:`at_most`).
Id = Annotated[str, Field(min_length=1, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$"), at_most(MAX_ID_LENGTH)]
Text = Annotated[str, at_most(MAX_TEXT_LENGTH)]
CueText = Annotated[str, Field(min_length=1), at_most(MAX_FAILURE_CUE_LENGTH)]
Position = Annotated[int, Field(ge=0, le=MAX_POSITION)]
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]

RepairSurface = Literal["experience_content", "working_state", "recall_policy", "acceptance_check"]
OutcomeStatus = Literal["completed", "failed", "blocked", "cancelled", "timed_out"]
CheckStatus = Literal["passed", "failed", "timed_out", "unavailable", "skipped", "cancelled", "unknown"]
Basis = Literal["verified", "declared"]


class _Value(BaseModel):
    """Immutable, strict value: no coercion, unknown fields rejected."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


# --------------------------------------------------------------------- §2


class ArtifactRef(_Value):
    """contract §2: ``{family, artifact_id, revision}``; total order by the
    tuple (family, artifact_id, revision) — see :meth:`sort_key`."""

    family: Literal["experience", "handoff"]
    artifact_id: Id
    revision: Annotated[int, Field(ge=1, le=MAX_POSITION)]

    def sort_key(self) -> tuple[str, str, int]:
        """ArtifactRef order (contract §2)."""
        return (self.family, self.artifact_id, self.revision)


class SourceRef(_Value):
    """contract §2: ``{source_type, source_id}``."""

    source_type: Literal["task_outcome", "handoff_receipt"]
    source_id: Id


class EvidenceRef(_Value):
    """contract §2: ``{kind, ref}``; kind "exact" with a non-blank ``ref``
    makes evidence non-empty exact. A blank ``ref`` is valid input (the event
    is accepted and stored) that counts as no evidence
    (``recurrence_ledger.ledger.matching.has_exact_evidence``)."""

    kind: Literal["exact", "summary"]
    ref: Text


# --------------------------------------------------------------------- §3


def _reject_blank(value: str, field: str) -> str:
    if not normalize(value):
        raise ValueError(f"{field} normalizes to the empty string")
    return value


class FailureSignature(_Value):
    """FailureSignature (contract §3): the recall_cue is the match key."""

    recall_cue: CueText
    symptom: Text | None = None

    @field_validator("recall_cue")
    @classmethod
    def _cue_not_blank(cls, value: str) -> str:
        return _reject_blank(value, "recall_cue")


class FailureVerification(_Value):
    """FailureVerification (contract §3): exact normalized bindings for avoided (§7)."""

    condition: Text
    check_subject: CueText

    @field_validator("check_subject")
    @classmethod
    def _subject_not_blank(cls, value: str) -> str:
        return _reject_blank(value, "check_subject")


class FailureRecord(_Value):
    """FailureRecord (contract §3): signature, repair_surface, verification."""

    signature: FailureSignature
    repair_surface: RepairSurface
    verification: FailureVerification


class ExperienceContent(_Value):
    """ExperienceContent (contract §3) with the optional failure block."""

    situation: Text
    action: Text
    outcome: Text
    lesson: Text
    failure: FailureRecord | None = None


class ExperienceRevision(_Value):
    """contract §3: a published, immutable Experience revision."""

    scope_id: Id
    journal_position: Position
    artifact_ref: ArtifactRef
    content: ExperienceContent

    @field_validator("artifact_ref")
    @classmethod
    def _experience_family(cls, value: ArtifactRef) -> ArtifactRef:
        if value.family != "experience":
            raise ValueError("artifact_ref.family must be 'experience'")
        return value


class ArtifactCitation(_Value):
    """HandoffArtifactCitation: one cited artifact revision."""

    artifact_ref: ArtifactRef


class MemoryCitation(_Value):
    """HandoffMemoryCitation: carried through, not used by the ledger."""

    entry_id: Id
    version_id: Id


class HandoffRevision(_Value):
    """contract §3: a published Handoff revision with its citations."""

    scope_id: Id
    journal_position: Position
    artifact_ref: ArtifactRef
    artifact_citations: Annotated[list[ArtifactCitation], Field(max_length=MAX_HANDOFF_CITATIONS)]
    memory_citations: Annotated[list[MemoryCitation], Field(max_length=MAX_MEMORY_CITATIONS)] = []

    @field_validator("artifact_ref")
    @classmethod
    def _handoff_family(cls, value: ArtifactRef) -> ArtifactRef:
        if value.family != "handoff":
            raise ValueError("artifact_ref.family must be 'handoff'")
        return value


class HandoffReceipt(_Value):
    """contract §3: which Handoff revision a successor agent received.

    Any status / selection / evidence_status string is a valid event; only
    accepted + exact + available with a known ``selected_revision`` resolves.
    """

    scope_id: Id
    journal_position: Position
    source_ref: SourceRef
    status: Id
    selection: Id
    selected_revision: ArtifactRef | None = None
    current_revision: ArtifactRef | None = None
    evidence_status: Id

    @field_validator("source_ref")
    @classmethod
    def _receipt_type(cls, value: SourceRef) -> SourceRef:
        if value.source_type != "handoff_receipt":
            raise ValueError("source_ref.source_type must be 'handoff_receipt'")
        return value


class WorkClaim(_Value):
    """A Task Outcome observation (WorkClaim, contract §3)."""

    text: Text
    basis: Basis
    evidence: Annotated[list[EvidenceRef], Field(max_length=MAX_EVIDENCE)] = []


class TaskCheck(_Value):
    """A Task Outcome check (TaskCheck, contract §3); ``details`` is never a match input."""

    name: Text
    status: CheckStatus
    basis: Basis
    evidence: Annotated[list[EvidenceRef], Field(max_length=MAX_EVIDENCE)] = []
    details: Text | None = None


class TaskOutcome(_Value):
    """contract §3: how a task ended, with embedded claims and checks."""

    scope_id: Id
    journal_position: Position
    source_ref: SourceRef
    status: OutcomeStatus
    handoff_receipt_ref: SourceRef | None = None
    observations: Annotated[list[WorkClaim], Field(max_length=MAX_ITEMS)] = []
    checks: Annotated[list[TaskCheck], Field(max_length=MAX_ITEMS)] = []

    @field_validator("source_ref")
    @classmethod
    def _outcome_type(cls, value: SourceRef) -> SourceRef:
        if value.source_type != "task_outcome":
            raise ValueError("source_ref.source_type must be 'task_outcome'")
        return value

    @field_validator("handoff_receipt_ref")
    @classmethod
    def _receipt_ref_type(cls, value: SourceRef | None) -> SourceRef | None:
        if value is not None and value.source_type != "handoff_receipt":
            raise ValueError("handoff_receipt_ref.source_type must be 'handoff_receipt'")
        return value


SourceEventModel = ExperienceRevision | HandoffRevision | HandoffReceipt | TaskOutcome


# --------------------------------------------------------------------- admission


class CandidateSignature(_Value):
    """The proposed FailureSignature. Unlike a published revision's, the cue
    is not bounded to 512 characters or checked for blankness here: those are
    admission rule 2's rejections (``recurrence_ledger.ledger.admission``), not bad
    input."""

    recall_cue: Text
    symptom: Text | None = None


class CandidateVerification(_Value):
    """The proposed FailureVerification; blank bindings are admission rule
    4's rejections, not bad input."""

    condition: Text
    check_subject: Text


class CandidateFailure(_Value):
    """The proposed FailureRecord; ``repair_surface`` and ``verification``
    may be absent (admission rules 3 and 4 reject it then)."""

    signature: CandidateSignature
    repair_surface: RepairSurface | None = None
    verification: CandidateVerification | None = None


class CandidateContent(_Value):
    """The proposed ExperienceContent; ``failure`` null is rejected by
    admission (``missing_failure_record``)."""

    situation: Text
    action: Text
    outcome: Text
    lesson: Text
    failure: CandidateFailure | None = None


class ExperienceCandidate(_Value):
    """A proposed failure record awaiting admission (contract §12;
    input topic ``experience-candidates``, keyed by scope_id).

    ``candidate_id`` identifies it within the scope (decisions are
    idempotent on it). ``journal_position`` is where it is proposed in the
    scope's journal: the provenance horizon for its cited Task Outcomes
    counts from it. It is not a source event and does not use up the
    position (contract §12: no new Source kind). ``artifact_id`` optionally names the
    Experience artifact it would revise — that artifact's own head is then
    not reported as a near-duplicate. ``cited_sources`` are the SourceRefs
    of the Review evidence model (rule 6).
    """

    candidate_id: Id
    scope_id: Id
    journal_position: Position
    artifact_id: Id | None = None
    content: CandidateContent
    cited_sources: Annotated[list[SourceRef], Field(max_length=MAX_ITEMS)] = []


#: Input topic (contract §1) → the event kind it carries. The journal file's
#: ``topic`` field and the source-journal envelope use the same names.
SOURCE_KINDS: dict[str, type[BaseModel]] = {
    EXPERIENCE_REVISIONS: ExperienceRevision,
    HANDOFF_REVISIONS: HandoffRevision,
    HANDOFF_RECEIPTS: HandoffReceipt,
    TASK_OUTCOMES: TaskOutcome,
    EXPERIENCE_CANDIDATES: ExperienceCandidate,
}


# --------------------------------------------------------------------- §4/§6/§7 outputs


class TaskOutcomeItemRef(_Value):
    """contract §4: a ledger-local locator of one embedded item of a Task
    Outcome; ``item_digest`` = digest of that item (see ``normalize.item_digest``)."""

    task_outcome_ref: SourceRef
    item_kind: Literal["observation", "check"]
    item_index: Annotated[int, Field(ge=0)]
    item_digest: Digest


class RecurrenceMatch(_Value):
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


class CandidateSet(_Value):
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


class RecurrenceObservation(_Value):
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


class RecurrenceStreak(_Value):
    """RecurrenceStreak — one row of ``top_revisions`` (contract §8) — plus the
    revision's yield figures: repair_surface, selected / recurred / avoided
    counts, ``yield`` = avoided / (avoided + recurred) (None without terminal
    verdicts) and ``low_yield`` (selected ≥ 3 and yield < 0.3; surfaced only,
    contract §14)."""

    artifact_ref: ArtifactRef
    signature_key: str
    terminal_recurred_streak: Annotated[int, Field(ge=0)]
    repair_surface: RepairSurface | None = None
    selected: Annotated[int, Field(ge=0)] = 0
    recurred: Annotated[int, Field(ge=0)] = 0
    avoided: Annotated[int, Field(ge=0)] = 0
    yield_: Annotated[float | None, Field(alias="yield", ge=0, le=1)] = None
    low_yield: bool = False


class ReviewCandidate(_Value):
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


class SurfaceCounts(_Value):
    """Selected / recurred / avoided events of one repair_surface."""

    selected: Annotated[int, Field(ge=0)]
    recurred: Annotated[int, Field(ge=0)]
    avoided: Annotated[int, Field(ge=0)]


class ScopeStatistics(_Value):
    """contract §8: the recurrence statistics block for one scope plus
    ``as_of_position`` and the operational gauges ``pending_outcomes`` and
    ``late_revisions``, plus the yield metrics ``repeat_failure_rate``,
    ``stale_revision_selections`` and ``by_repair_surface``. Re-published
    whenever it changes (compacted topic)."""

    scope_id: Id
    as_of_position: Position
    selected: Annotated[int, Field(ge=0)]
    recurred: Annotated[int, Field(ge=0)]
    avoided: Annotated[int, Field(ge=0)]
    unknown: Annotated[int, Field(ge=0)]
    unlinked_handoff_citations: Annotated[int, Field(ge=0)]
    needing_review: Annotated[int, Field(ge=0)]
    top_revisions: list[RecurrenceStreak]
    pending_outcomes: Annotated[int, Field(ge=0)]
    late_revisions: Annotated[int, Field(ge=0)]
    repeat_failure_rate: Annotated[float | None, Field(ge=0, le=1)] = None
    stale_revision_selections: Annotated[int, Field(ge=0)] = 0
    by_repair_surface: dict[RepairSurface, SurfaceCounts] = {}


class RevisionStatistics(_Value):
    """One row of the ``revisions`` view (yield metrics for every
    revision, not only the top N): the latest figures of one Experience
    revision with verdicts or selections, re-published whenever they change
    on the compacted ``revision-statistics`` topic (key: scope_id and
    artifact_ref, see ``recurrence_ledger.ledger.statistics.revision_key``).

    ``needs_review``: streak ≥ the deployment's review threshold (contract §8).
    """

    scope_id: Id
    artifact_ref: ArtifactRef
    signature_key: str
    terminal_recurred_streak: Annotated[int, Field(ge=0)]
    needs_review: bool
    repair_surface: RepairSurface | None = None
    selected: Annotated[int, Field(ge=0)] = 0
    recurred: Annotated[int, Field(ge=0)] = 0
    avoided: Annotated[int, Field(ge=0)] = 0
    yield_: Annotated[float | None, Field(alias="yield", ge=0, le=1)] = None
    low_yield: bool = False


class NearDuplicate(_Value):
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


class AdmissionDecision(_Value):
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


# --------------------------------------------------------------------- §9


class DeadLetter(_Value):
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
