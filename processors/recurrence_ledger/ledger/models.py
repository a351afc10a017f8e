"""Pydantic v2 models of the contract's value types (§2) and input events
(§3, and the admission candidates of §12).

Inputs are validated strictly: no type coercion, no unknown fields, and
the field rules of §3 (families, source types, 1–512 character cues that do not
normalize to empty, at most MAX_HANDOFF_CITATIONS citations). String lengths
count code points of the NFC form (contract §3, :func:`at_most`). A record that
fails validation goes to dead-letter (§9); see ``recurrence_ledger.ledger.intake``.

The review decisions of contract §18 are inputs too (:class:`ReviewDecision`).
The output records (§4, §6–§9, §18) are ``recurrence_ledger.ledger.records``.

This module imports pydantic only: it is part of the pure core's closure.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from recurrence_ledger.ledger.normalize import is_blank, nfc_length, normalize
from recurrence_ledger.catalogue import (
    EXPERIENCE_CANDIDATES,
    EXPERIENCE_REVISIONS,
    HANDOFF_RECEIPTS,
    HANDOFF_REVISIONS,
    REVIEW_DECISIONS,
    TASK_OUTCOMES,
)

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
    ``too_long``). A string with a lone surrogate (a JSON ``\\ud800``
    escape: no UTF-8 form, so no canonical JSON, contract §4) is the
    ``string_unicode`` error (``invalid_value``) — on every string field
    of an event, so the client library refuses what the ledger would."""

    def check(value: str) -> str:
        ascii_only = value.isascii()  # the common case: its NFC form is itself, and it has a UTF-8 form
        if not ascii_only:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise PydanticCustomError(
                    "string_unicode", "Input should be a valid string, unable to parse raw data as a unicode string (a lone surrogate)",
                ) from None
        if (len(value) > limit or not ascii_only) and nfc_length(value) > limit:
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
#: The repair_surface values, in declaration order (the RepairSurface literal).
REPAIR_SURFACES: tuple[str, ...] = get_args(RepairSurface)
OutcomeStatus = Literal["completed", "failed", "blocked", "cancelled", "timed_out"]
CheckStatus = Literal["passed", "failed", "timed_out", "unavailable", "skipped", "cancelled", "unknown"]
Basis = Literal["verified", "declared"]
#: contract §22 (rev. 4): the severity of a failure record, lowest first;
#: null (absent) is unrated. Any other value, also another spelling such as
#: ``Critical``, is ``invalid_value``.
Severity = Literal["low", "medium", "high", "critical"]


class Value(BaseModel):
    """Base of every model of the contract (inputs and output records):
    immutable, strict — no coercion, unknown fields rejected."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


# --------------------------------------------------------------------- §2


class ArtifactRef(Value):
    """contract §2: ``{family, artifact_id, revision}``; total order by the
    tuple (family, artifact_id, revision) — see :meth:`sort_key`."""

    family: Literal["experience", "handoff"]
    artifact_id: Id
    revision: Annotated[int, Field(ge=1, le=MAX_POSITION)]

    def sort_key(self) -> tuple[str, str, int]:
        """ArtifactRef order (contract §2)."""
        return (self.family, self.artifact_id, self.revision)


class SourceRef(Value):
    """contract §2: ``{source_type, source_id}``."""

    source_type: Literal["task_outcome", "handoff_receipt"]
    source_id: Id


class EvidenceRef(Value):
    """contract §2: ``{kind, ref}``; kind "exact" with a non-blank ``ref``
    makes evidence non-empty exact. A blank ``ref`` (only White_Space,
    controls and format characters such as U+200B, U+2060 or U+FEFF:
    ``recurrence_ledger.ledger.normalize.is_blank``, rev. 3) is valid input
    (the event is accepted and stored) that counts as no evidence
    (``recurrence_ledger.ledger.matching.has_exact_evidence``)."""

    kind: Literal["exact", "summary"]
    ref: Text


# --------------------------------------------------------------------- §3


def _reject_blank(value: str, field: str) -> str:
    if not normalize(value):
        raise ValueError(f"{field} normalizes to the empty string")
    return value


class FailureSignature(Value):
    """FailureSignature (contract §3): the recall_cue is the match key."""

    recall_cue: CueText
    symptom: Text | None = None

    @field_validator("recall_cue")
    @classmethod
    def _cue_not_blank(cls, value: str) -> str:
        return _reject_blank(value, "recall_cue")


class FailureVerification(Value):
    """FailureVerification (contract §3): exact normalized bindings for avoided (§7)."""

    condition: Text
    check_subject: CueText

    @field_validator("check_subject")
    @classmethod
    def _subject_not_blank(cls, value: str) -> str:
        return _reject_blank(value, "check_subject")


class FailureRecord(Value):
    """FailureRecord (contract §3): signature, repair_surface, verification;
    since revision 4 ``severity`` (§22: :data:`Severity` or None, unrated)."""

    signature: FailureSignature
    repair_surface: RepairSurface
    verification: FailureVerification
    severity: Severity | None = None


class ExperienceContent(Value):
    """ExperienceContent (contract §3) with the optional failure block."""

    situation: Text
    action: Text
    outcome: Text
    lesson: Text
    failure: FailureRecord | None = None


class ExperienceRevision(Value):
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


class ArtifactCitation(Value):
    """HandoffArtifactCitation: one cited artifact revision."""

    artifact_ref: ArtifactRef


class MemoryCitation(Value):
    """HandoffMemoryCitation: carried through, not used by the ledger."""

    entry_id: Id
    version_id: Id


class HandoffRevision(Value):
    """contract §3: a published Handoff revision with its citations."""

    scope_id: Id
    journal_position: Position
    artifact_ref: ArtifactRef
    artifact_citations: Annotated[list[ArtifactCitation], Field(max_length=MAX_HANDOFF_CITATIONS)]
    memory_citations: Annotated[list[MemoryCitation], Field(max_length=MAX_MEMORY_CITATIONS)] = []
    #: contract §21.1 (rev. 4): the Experience revisions the platform's recall
    #: selected and left out of this Handoff under a holdout; the item shape of
    #: ``artifact_citations``. More than 64, or an item that is not an
    #: artifact citation, is ``invalid_value``.
    withheld_citations: list[ArtifactCitation] = []

    @field_validator("withheld_citations", mode="before")
    @classmethod
    def _withheld_entries(cls, value: object) -> object:
        if not isinstance(value, list):
            raise ValueError("withheld_citations must be a list of artifact citations")
        if len(value) > MAX_HANDOFF_CITATIONS:
            raise ValueError(f"withheld_citations holds {len(value)} entries, at most {MAX_HANDOFF_CITATIONS}")
        for index, item in enumerate(value):
            if isinstance(item, ArtifactCitation):
                continue
            try:
                ArtifactCitation.model_validate(item)
            except ValueError:
                raise ValueError(f"withheld_citations[{index}] is not an artifact citation {{artifact_ref: ArtifactRef}}") from None
        return value

    @field_validator("artifact_ref")
    @classmethod
    def _handoff_family(cls, value: ArtifactRef) -> ArtifactRef:
        if value.family != "handoff":
            raise ValueError("artifact_ref.family must be 'handoff'")
        return value


class HandoffReceipt(Value):
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


class WorkClaim(Value):
    """A Task Outcome observation (WorkClaim, contract §3)."""

    text: Text
    basis: Basis
    evidence: Annotated[list[EvidenceRef], Field(max_length=MAX_EVIDENCE)] = []


class TaskCheck(Value):
    """A Task Outcome check (TaskCheck, contract §3); ``details`` is never a match input."""

    name: Text
    status: CheckStatus
    basis: Basis
    evidence: Annotated[list[EvidenceRef], Field(max_length=MAX_EVIDENCE)] = []
    details: Text | None = None


class TaskOutcome(Value):
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


class CandidateSignature(Value):
    """The proposed FailureSignature. Unlike a published revision's, the cue
    is not bounded to 512 characters or checked for blankness here: those are
    admission rule 2's rejections (``recurrence_ledger.ledger.admission``), not bad
    input."""

    recall_cue: Text
    symptom: Text | None = None


class CandidateVerification(Value):
    """The proposed FailureVerification; blank bindings are admission rule
    4's rejections, not bad input."""

    condition: Text
    check_subject: Text


class CandidateFailure(Value):
    """The proposed FailureRecord; ``repair_surface`` and ``verification``
    may be absent (admission rules 3 and 4 reject it then); ``severity`` as
    on a FailureRecord (contract §22, rev. 4: an unknown value is
    ``invalid_value``)."""

    signature: CandidateSignature
    repair_surface: RepairSurface | None = None
    verification: CandidateVerification | None = None
    severity: Severity | None = None


class CandidateContent(Value):
    """The proposed ExperienceContent; ``failure`` null is rejected by
    admission (``missing_failure_record``)."""

    situation: Text
    action: Text
    outcome: Text
    lesson: Text
    failure: CandidateFailure | None = None


class ExperienceCandidate(Value):
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


# --------------------------------------------------------------------- §18 review decisions

ReviewVerdict = Literal["approved", "rejected"]
#: contract §24 (rev. 4): why a candidate was rejected, in the contract's
#: order; only with ``rejected``.
RejectionReason = Literal["false_cause", "broad_scope", "weak_evidence", "duplicate", "not_reproducible", "other"]
#: A review candidate's status (ReviewStatus ``status``, contract §18).
ReviewState = Literal["open", "superseded", "approved", "rejected"]
#: A repair's status (Repair ``status``, contract §18).
RepairState = Literal["pending", "held", "recurring", "failed"]
#: contract §18: ``decided_at`` is an RFC 3339 timestamp in UTC — date,
#: ``T``, time with optional fraction, then ``Z`` or ``+00:00`` (RFC 3339
#: allows a lower-case ``t`` and ``z``; its digits are ASCII); the date and time must exist.
RFC3339_UTC = r"^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?([Zz]|\+00:00)$"
_RFC3339_UTC = re.compile(RFC3339_UTC)


def _utc_timestamp(value: str) -> str:
    """``value`` when it is an RFC 3339 UTC timestamp of a real date and time
    (:data:`RFC3339_UTC`; no leap second), else a ValueError
    (``invalid_value``). The text is kept as sent."""
    found = _RFC3339_UTC.fullmatch(value)
    if found is None:
        raise ValueError("decided_at must be an RFC 3339 UTC timestamp such as 2025-03-01T09:30:00Z")
    try:
        datetime(*(int(part) for part in found.groups()[:6]))
    except ValueError as error:
        raise ValueError(f"decided_at is not a real date and time: {error}") from None
    return value


class ReviewDecision(Value):
    """A human decision on one ReviewCandidate (contract §18; input topic
    ``review-decisions``, keyed by scope_id; also on ``source-journal`` and
    as a journal line with that topic).

    Identity is (scope_id, decision_id). ``candidate_id`` is the
    ReviewCandidate's (a digest). ``journal_position`` is where the
    decision was made in the scope's journal: like an ExperienceCandidate it
    does not use up the position and moves no ``as_of_position``; it starts
    the provenance horizon of a decision that waits for its candidate.
    ``reason`` is free text, required and not blank
    (``normalize.is_blank``) for ``rejected``; ``reviewer`` an identifier;
    ``decided_at`` an RFC 3339 UTC timestamp, shown and measured, never used
    for ordering. ``fix_revision`` only with ``approved``: an Experience
    ArtifactRef, which the processor checks is a higher revision of the
    candidate's own artifact once it knows the candidate. ``reason_code``
    (contract §24, rev. 4): a :data:`RejectionReason` or None, only with
    ``rejected``. Breaking a rule here is ``invalid_value`` (a reason over
    16,384 characters ``too_long``).
    """

    scope_id: Id
    decision_id: Id
    candidate_id: Digest
    journal_position: Position
    decision: ReviewVerdict
    reason: Text | None = None
    reviewer: Id
    decided_at: Annotated[str, AfterValidator(_utc_timestamp)]
    fix_revision: ArtifactRef | None = None
    reason_code: RejectionReason | None = None

    @model_validator(mode="after")
    def _decision_rules(self) -> ReviewDecision:
        if self.reason_code is not None and self.decision != "rejected":
            raise ValueError("reason_code is only given with a rejected decision (contract §24)")
        if self.decision == "rejected":
            if self.reason is None or is_blank(self.reason):
                raise ValueError("a rejected decision needs a reason that is not blank")
            if self.fix_revision is not None:
                raise ValueError("fix_revision is only given with an approved decision")
        if self.fix_revision is not None and self.fix_revision.family != "experience":
            raise ValueError("fix_revision must be an Experience revision (family 'experience')")
        return self


def identity_content(kind: str, value: dict) -> dict:
    """The content of a source event in canonical form (``intake.validate``)
    that its identity compares (contract §3: the same identity with other
    content is ``identity_conflict``): the event without the revision-4
    fields it leaves null — a failure block's ``severity`` (§22) and a
    review decision's ``reason_code`` (§24) — so an event sent before
    revision 4, and sent again after it, is still the same event and its
    ledger facts stay the same bytes. ``value`` is not changed."""
    if kind == REVIEW_DECISIONS:
        if "reason_code" in value and value["reason_code"] is None:
            return {name: item for name, item in value.items() if name != "reason_code"}
        return value
    if kind in (EXPERIENCE_REVISIONS, EXPERIENCE_CANDIDATES):
        content = value["content"]
        failure = content.get("failure")
        if failure is not None and "severity" in failure and failure["severity"] is None:
            failure = {name: item for name, item in failure.items() if name != "severity"}
            return {**value, "content": {**content, "failure": failure}}
    return value


#: A count (contract §8 ff.): a non-negative integer.
Count = Annotated[int, Field(ge=0)]


class TaskOutcomeItemRef(Value):
    """contract §4: a ledger-local locator of one embedded item of a Task
    Outcome; ``item_digest`` = digest of that item (see ``normalize.item_digest``)."""

    task_outcome_ref: SourceRef
    item_kind: Literal["observation", "check"]
    item_index: Annotated[int, Field(ge=0)]
    item_digest: Digest


#: Input topic (contract §1) → the event kind it carries. The journal file's
#: ``topic`` field and the source-journal envelope use the same names.
SOURCE_KINDS: dict[str, type[BaseModel]] = {
    EXPERIENCE_REVISIONS: ExperienceRevision,
    HANDOFF_REVISIONS: HandoffRevision,
    HANDOFF_RECEIPTS: HandoffReceipt,
    TASK_OUTCOMES: TaskOutcome,
    EXPERIENCE_CANDIDATES: ExperienceCandidate,
    REVIEW_DECISIONS: ReviewDecision,
}
