"""The response shapes of the operator API (pydantic models): what every
endpoint answers, and so what ``GET /openapi.json`` documents. The view's
endpoints (``/scopes``, ``…/statistics`` — the core's ScopeStatistics —,
``…/revisions``, ``…/review-candidates``, ``/healthz``) and the history's
(``…/history``, ``…/trend``, ``/review-queue``; read models of
``recurrence_ledger.read.history``), and the review's
(``/review-candidates/{id}``, its decision's request and answer), and a
pattern group's signature patterns (``/patterns``, contract §23).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from recurrence_ledger.ledger.models import ArtifactRef, Id, RejectionReason, RepairSurface, ReviewDecision, ReviewState, Severity, TaskOutcomeItemRef
from recurrence_ledger.ledger.fields import REVISION_IDENTITY
from recurrence_ledger.ledger.holdout_records import Effect, EffectVerdict
from recurrence_ledger.read.keys import REVIEW_FILTERS
from recurrence_ledger.ledger.records import ReviewCandidate, ReviewStatus, RevisionFigures, RevisionStatistics, ScopeStatistics, SignaturePattern

#: ``sort`` of ``GET /scopes`` (``recurrence_ledger.read.keys.SCOPE_SORTS``).
ScopeSort = Literal["scope_id", "needing_review", "recurred", "repeat_failure_rate"]

#: ``sort`` of ``GET /scopes/{scope}/revisions``
#: (``recurrence_ledger.read.reader.REVISION_SORTS``).
RevisionSort = Literal["streak", "recurred", "yield", "selected", "unknown", "probability_helps"]


class _Shape(BaseModel):
    model_config = ConfigDict(frozen=True)


# ----------------------------------------------------------------- the view


def copied_fields(model: type[BaseModel], names: Iterable[str]) -> dict[str, tuple[object, FieldInfo]]:
    """``create_model`` field definitions of ``names`` (field names, not
    aliases) of a record model of ``recurrence_ledger.ledger.records``:
    each with the model's type, default, alias, title and description —
    so an answer of the API documents a figure exactly as the record
    states it, and a new figure of the record needs no edit here."""
    return {name: (model.model_fields[name].annotation, FieldInfo.merge_field_infos(model.model_fields[name])) for name in names}


#: One scope's integer figures (contract §8): ledger facts (selected,
#: recurred, avoided, needing_review), the evidence-coverage figures,
#: the operational gauges, the counts of §16–§17 and the review threshold
#: the ledger applied — every plain integer field of ScopeStatistics
#: (``recurrence_ledger.ledger.fields.integer_fields``), documented as the
#: record documents it; a record written before a field existed has its
#: default (0).
ScopeSummary = create_model(
    "ScopeSummary",
    __base__=_Shape,
    __doc__="One scope's integer figures: every plain integer field of its ScopeStatistics record (contract §8), and its scope_id.",
    scope_id=(str, Field(description="The scope (contract §3).")),
    **copied_fields(ScopeStatistics, (name for name, info in ScopeStatistics.model_fields.items() if info.annotation is int)),
)


class ScopeList(_Shape):
    """``GET /scopes``: the scopes of the namespace, sorted by scope_id,
    ``offset`` to ``offset + limit``; ``total``: scopes in the namespace."""

    total: int = Field(description="Scopes in the view.")
    limit: int
    offset: int
    sort: ScopeSort = "scope_id"
    filter: str | None = Field(None, description="The scope id substring filter, null when none.")
    needs_review: bool | None = Field(None, description="The needs_review filter, null when none.")
    available: int | None = Field(None, description="Scopes passing the filters (before offset and limit).")
    scopes: list[ScopeSummary]


class _FiguresBase(_Shape):
    model_config = ConfigDict(frozen=True, populate_by_name=True, serialize_by_alias=True)


#: The revision's figures: from its RevisionStatistics row (``/revisions``)
#: or its ``top_revisions`` row (``/review-candidates``) — the fields of the
#: ledger's RevisionFigures besides the revision's identity
#: (``recurrence_ledger.ledger.fields.figure_fields``).
_Figures = create_model(
    "_Figures",
    __base__=_FiguresBase,
    __doc__="The revision's figures, as the ledger's RevisionFigures states them.",
    **copied_fields(RevisionFigures, (name for name in RevisionFigures.model_fields if name not in REVISION_IDENTITY)),
)


class RevisionRow(_Figures):
    """One revision of the scope (its last RevisionStatistics record,
    contract §14) with its streak, review flag, figures and the effect of
    the lesson (contract §21.4)."""

    rank: int = Field(description="1-based position in the requested order, after the filters (offset included).")
    artifact_ref: ArtifactRef
    signature_key: str
    terminal_recurred_streak: int = Field(description="Terminal recurred verdicts since the last avoided one (contract §8).")
    effect: Effect | None = Field(
        None, title=RevisionStatistics.model_fields["effect"].title, description=RevisionStatistics.model_fields["effect"].description
    )


class RevisionList(_Shape):
    """``GET /scopes/{scope}/revisions``: the rows of every revision
    of the scope with a selection or a verdict — not only the top N — that
    pass the filters, in the order of ``sort``, rows ``offset`` to
    ``offset + limit``. ``total``: revisions the view holds for the scope;
    ``available``: those passing the filters; ``complete``: the rows come
    from every revision of the scope (always true: the revisions view holds them all)."""

    scope_id: str
    as_of_position: int
    sort: RevisionSort = Field(
        description="streak: contract §8 order (streak desc, ArtifactRef, signature_key); recurred / selected / unknown: that count desc; "
        "yield: lowest first, null last; probability_helps: highest first, null last (contract §21.4); ties in contract §8 order."
    )
    surface: RepairSurface | None = Field(None, description="The repair_surface filter, null when none.")
    low_yield: bool | None = Field(None, description="The low_yield filter, null when none.")
    needs_review: bool | None = Field(None, description="The needs_review filter, null when none.")
    binding_suspect: bool | None = Field(None, description="The binding_suspect filter, null when none.")
    effect: EffectVerdict | None = Field(None, description="The effect verdict filter (contract §21.4), null when none.")
    limit: int
    offset: int
    total: int = Field(description="Revisions of the scope in the view.")
    available: int = Field(description="Revisions passing the filters (before offset and limit).")
    complete: bool = Field(description="True: every revision of the scope is covered, not only the top N.")
    revisions: list[RevisionRow]


class ReviewRow(_Figures):
    """A revision needing review (member of the view's review set) with its
    figures; ``repair_surface`` says what to review."""

    artifact_ref: ArtifactRef
    signature_key: str
    terminal_recurred_streak: int


class ReviewSplit(_Shape):
    """The scope's revisions needing review (every one, not only the top N)
    by their newest review candidate's status (contract §8, §18)."""

    waiting: int = Field(description="Its candidate waits for a decision (open or superseded): the review inbox lists it.")
    decided: int = Field(description="Its candidate was decided (approved or rejected); the streak still holds the threshold.")
    no_candidate: int = Field(description="No review candidate: its repair surface is not experience_content (contract §8), or none is applied yet.")


class ReviewList(_Shape):
    """``GET /scopes/{scope}/review-candidates``: the revisions needing review
    (streak ≥ the threshold, contract §8) from the view's review set, in
    contract §8 order, each with its repair_surface and figures. These are
    revisions, not ReviewCandidate records: the ReviewCandidate records
    themselves (one per run, experience_content only, with reason and
    failure_refs) live on the
    ``review-candidates`` topic. ``complete`` is false when more revisions
    need review (``needing_review``) than the view's top N holds."""

    scope_id: str
    as_of_position: int
    review_threshold: int | None = Field(
        description="The review threshold the workers applied (their --review-threshold), as they stored it in the view with the scope; "
        "it decided which revisions are listed. null when the view was written before the threshold was stored: rebuild it."
    )
    needing_review: int
    split: ReviewSplit | None = Field(None, description="needing_review split by the revisions' review candidates' status.")
    complete: bool
    revisions: list[ReviewRow]


class Health(_Shape):
    """``GET /healthz``: ``status`` ok (Redis answers) or unavailable."""

    status: Literal["ok", "unavailable"]
    redis: Literal["up", "down"]
    namespace: str
    detail: str | None = None


class ErrorBody(_Shape):
    """Error responses: 400 (``detail`` is a list of parameter errors), 404,
    503 (``detail`` is a message)."""

    detail: str | list[dict]


# ----------------------------------------------------------------- the history


class Verdict(_Shape):
    """One observation of the revision's history."""

    task_outcome_id: str = Field(description="source_id of the Task Outcome.")
    task_outcome_position: int
    event: Literal["selected", "recurred", "avoided"]
    verdict: Literal["recurred", "avoided"] | None = Field(
        description="The outcome's terminal verdict for this revision: the event itself for recurred / avoided; for a selection, its "
        "outcome's verdict among the kept history, null when it has none (an unknown selection, contract §7)."
    )
    failure_ref: TaskOutcomeItemRef | None = Field(description="The failure item of a recurred verdict; null otherwise.")
    run_start_position: int | None = Field(
        description="The run it belongs to (contract §8): the position of the avoided verdict that opened it (an avoided verdict opens "
        "its own run), null for the run at the start of the history."
    )
    observation_id_prefix: str = Field(description="The first 16 hex digits of the observation_id.")
    explain: str = Field(description="The command line that explains this outcome from Kafka.")


class Run(_Shape):
    """A run of the revision (contract §8), from the kept history."""

    run_start_position: int | None = Field(description="Its name: the position of its opening avoided verdict, null for the start of the history.")
    recurred: int = Field(description="Its recurred verdicts among the kept history.")
    first_position: int
    last_position: int
    reaches_threshold: bool = Field(description="recurred ≥ the review threshold.")
    current: bool = Field(description="The revision's last run: its recurred count is the streak.")
    complete: bool = Field(description="Every observation of the run is kept (false for the oldest run of a truncated history).")
    review_candidate: str | None = Field(description="candidate_id of the run's review candidate while it waits in the review queue.")


class RevisionHistoryBody(_Shape):
    """``GET …/history``: the verdict history of one revision."""

    scope_id: str
    as_of_position: int
    artifact_ref: ArtifactRef
    signature_key: str | None
    repair_surface: RepairSurface | None
    terminal_recurred_streak: int | None = Field(description="From the revision's view row; null when the view has none.")
    needs_review: bool | None
    review_threshold: int | None = Field(description="The workers' review threshold stored with the scope (null: a view written before it was stored).")
    order: Literal["newest", "oldest"] = Field(description="newest: by task_outcome_position descending; oldest: ascending.")
    limit: int
    offset: int
    total: int = Field(description="Observations of the revision ever recorded in the history.")
    retained: int = Field(description="Observations kept (the newest N by position).")
    truncated: bool = Field(description="total > retained: older observations were dropped.")
    runs: list[Run] = Field(description="Runs of the kept history, oldest first.")
    verdicts: list[Verdict] = Field(description="Rows offset to offset + limit in the requested order.")


class TrendPoint(_Shape):
    """One ScopeStatistics record (one per batch the workers committed)."""

    as_of_position: int
    committed_at: str = Field(description="The record's Kafka timestamp, ISO 8601 UTC.")
    timestamp_ms: int
    selected: int
    recurred: int
    avoided: int
    unknown: int
    unlinked_handoff_citations: int
    pending_outcomes: int
    needing_review: int
    repeat_failure_rate: float | None


class ScopeTrend(_Shape):
    """``GET /scopes/{scope}/trend``: points with as_of_position ≥ from_position, oldest first."""

    scope_id: str
    as_of_position: int
    from_position: int
    limit: int
    total: int = Field(description="Points ever recorded for the scope.")
    retained: int = Field(description="Points kept (the newest N).")
    next_from_position: int | None = Field(description="from_position of the next page; null when this page reaches the newest point.")
    points: list[TrendPoint]


#: ``status`` of ``GET /review-queue``.
ReviewFilter = Literal[REVIEW_FILTERS]  # type: ignore[valid-type]


#: The fields a QueueItem takes from the candidate's ReviewStatus.
QUEUE_STATUS_FIELDS: tuple[str, ...] = ("status", "decision", "fix_revision", "repair", "reason_code")

#: A ReviewCandidate (contract §8) with its review status (contract §18):
#: the candidate's fields as its record states them, when it was published,
#: the revision's severity, and its ReviewStatus's fields (``status`` open
#: before the worker published one).
QueueItem = create_model(
    "QueueItem",
    __base__=_Shape,
    __doc__="A ReviewCandidate (contract §8) with its review status (contract §18): ``status`` open (no decision, no higher revision "
    "known; also before the worker published a status), superseded, approved or rejected; the applied ``decision``; the "
    "``fix_revision`` and its ``repair`` (pending, held, recurring, failed, with the fix revision's counts).",
    **copied_fields(ReviewCandidate, ReviewCandidate.model_fields),
    published_at=(str, Field(description="The candidate record's Kafka timestamp, ISO 8601 UTC.")),
    severity=(Severity | None, Field(
        None, description="The revision's severity (contract §22; null: unrated or not in the view yet): the inbox shows critical candidates first.")),
    **{**copied_fields(ReviewStatus, QUEUE_STATUS_FIELDS), "status": (ReviewState, Field("open", description="open (no decision, no higher revision known; also before the worker published a status), superseded, approved or rejected."))},
)


class ReviewQueue(_Shape):
    """``GET /review-queue``: review candidates with one status (or
    decided: approved or rejected; or all), oldest first."""

    total: int = Field(description="Candidates with the status in every scope.")
    available: int = Field(description="Candidates with the status passing the filters.")
    counts: dict[ReviewState, int] = Field(description="Candidates of the scope (every scope without one) by status.")
    status: ReviewFilter
    scope: str | None
    surface: RepairSurface | None
    limit: int
    offset: int
    candidates: list[QueueItem]


class ReviewCandidateBody(QueueItem):
    """``GET /review-candidates/{id}``: one candidate with its review status
    and its scope's ``as_of_position`` (the position a decision gets)."""

    as_of_position: int | None = Field(description="The scope's as_of_position in the view (null: not there yet).")


class DecisionRequest(BaseModel):
    """The body of ``POST /review-candidates/{id}/decision`` (contract §18):
    ``decision`` approved or rejected; ``reason`` free text, required and not
    blank for rejected (at most 16,384 characters); ``fix_revision`` only
    with approved: a higher revision of the candidate's own artifact (null:
    the lowest known one above it counts); ``reason_code`` only with
    rejected (contract §24). Nothing else: the reviewer is
    the reviewer token's, the position and time the API's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decision: Literal["approved", "rejected"]
    reason: str | None = None
    fix_revision: ArtifactRef | None = None
    reason_code: RejectionReason | None = Field(
        None, description="Only with rejected (contract §24): false_cause, broad_scope, weak_evidence, duplicate, not_reproducible or other; "
        "counted in the scope's reviews.rejected_by_reason (none: unspecified).")

    @model_validator(mode="before")
    @classmethod
    def _no_reviewer(cls, data: object) -> object:
        if isinstance(data, dict) and "reviewer" in data:
            raise PydanticCustomError("reviewer_not_accepted", "reviewer is not taken from the body: it is the name of the reviewer token")
        return data


class DecisionAccepted(_Shape):
    """``202 Accepted``: the ReviewDecision published to ``review-decisions``
    (where: topic, partition, offset). The worker applies it — or
    dead-letters it (contract §9, §18) — and publishes the candidate's new
    ReviewStatus; ``status_url`` shows it once the view has it."""

    decision_id: str
    decision: ReviewDecision
    topic: str
    partition: int
    offset: int
    status_url: str


# ----------------------------------------------------------------- the field catalogue


class FieldLabel(_Shape):
    """One field of a published record as ``recurrence_ledger.ledger.records``
    states it."""

    title: str = Field(description="A short label.")
    description: str | None = Field(None, description="What the field means (units, contract section).")
    family: str | None = Field(None, description="An unknown reason's family: matching, condition or check (contract §17).")
    suspect: bool | None = Field(None, description="An unknown reason that makes a binding suspect (contract §17).")
    total: bool | None = Field(None, description="A scope figure the view follower sums over the scopes (a Prometheus gauge).")


class FieldCatalogue(_Shape):
    """``GET /field-catalogue``: the fields of the published records, by
    published name, in the records' order."""

    scope: dict[str, FieldLabel] = Field(description="ScopeStatistics (contract §8).")
    revision: dict[str, FieldLabel] = Field(description="A revision's row: top_revisions and the revisions view (contract §8, §14).")
    unknown_reasons: dict[str, FieldLabel] = Field(description="The eleven unknown reasons of contract §17, in the contract's order.")
    pattern: dict[str, FieldLabel] = Field(description="A signature pattern across a group's scopes (contract §23.3).")
    effect: dict[str, FieldLabel] = Field({}, description="A revision's effect (contract §21.4): its arms, probability_helps and verdict.")
    effects: dict[str, FieldLabel] = Field({}, description="The effect verdicts of contract §21.4, in the contract's order.")


# ----------------------------------------------------------------- signature patterns


class PatternList(_Shape):
    """``GET /patterns?group=``: the signature patterns of one pattern group
    (contract §23.3), most scopes first (then signature_key). Only the
    group asked for: no row, count or message names a scope of another
    group (§23.1)."""

    group: str = Field(description="The pattern group asked for (\"\": every scope of a deployment without a group separator).")
    total: int = Field(description="Patterns of the group.")
    available: int = Field(description="Patterns of the group with at least min_scopes scopes.")
    min_scopes: int = Field(description="The least scope_count of a pattern listed.")
    limit: int
    offset: int
    patterns: list[SignaturePattern]


# ----------------------------------------------------------------- the advisory


class AdvisoryRequest(BaseModel):
    """The body of ``POST /advisories``: one scope and the Experience
    revisions a recall is about to hand over (at most 64: more answer 422)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope_id: Id = Field(description="The scope (contract §3).")
    artifact_refs: list[ArtifactRef] = Field(
        description="The revisions to advise on, 0–64 (more: 422), answered in this order.", json_schema_extra={"maxItems": 64})


class AdvisoryReview(_Shape):
    """The newest review candidate of a revision (contract §8) and its
    ReviewStatus (contract §18)."""

    candidate_id: str
    status: ReviewState = Field(description="open (waiting for a decision), superseded, approved or rejected.")
    streak: int | None = Field(None, description="The run's recurrence count when the candidate was published.")
    decision: Literal["approved", "rejected"] | None = None
    reviewer: str | None = None
    fix_revision: ArtifactRef | None = Field(None, description="The approved fix, or the revision that superseded the candidate.")
    repair_status: Literal["pending", "held", "recurring", "failed"] | None = Field(
        None, description="How the fix revision fares (contract §18); null for open and rejected candidates.")


#: The flags and figures of a revision an advisory carries, as the ledger's
#: RevisionFigures states them.
_AdvisoryFigures = create_model(
    "_AdvisoryFigures",
    __base__=_FiguresBase,
    __doc__="The revision's flags and figures an advisory carries, as the ledger's RevisionFigures states them.",
    **copied_fields(RevisionFigures, ("needs_review", "terminal_recurred_streak", "severity", "binding_suspect", "low_yield", "selected", "yield_")),
)


class RefAdvisory(_AdvisoryFigures):
    """What the ledger published about one revision, for a recall ranker:
    its RevisionStatistics flags and figures (contract §14, §17, §22; their
    defaults when ``known`` is false), its effect (contract §21.4), its
    newest review candidate's status (contract §18) and a one-line
    ``advice``."""

    artifact_ref: ArtifactRef
    known: bool = Field(description="The revisions view holds the revision (it has a selection, a verdict or an ambiguous match).")
    head: bool | None = Field(
        None, description="false when the ledger published that a higher revision superseded it (a superseded review candidate); "
        "null otherwise: the ledger publishes no head per revision.")
    superseded_by: ArtifactRef | None = Field(None, description="The revision that superseded it, from its ReviewStatus.")
    verdict: Literal["helps", "harms", "undecided", "insufficient"] | None = Field(
        None, description="The effect's verdict (contract §21.4); null without a withheld arm.")
    probability_helps: float | None = Field(None, description="P(the lesson lowers the recurrence rate) (contract §21.4); null without one.")
    review: AdvisoryReview | None = Field(None, description="Its newest review candidate with its status; null without one.")
    advice: str = Field(description="One line for a recall ranker or a human, most pressing first (\"superseded by r3\", …).")


class Advisories(_Shape):
    """``POST /advisories``: one advisory per asked ref, in the order asked."""

    scope_id: str
    known: bool = Field(description="The view holds the scope (false: every ref is unknown).")
    as_of_position: int | None = Field(description="The scope's as_of_position in the view; null for an unknown scope.")
    advisories: list[RefAdvisory]
