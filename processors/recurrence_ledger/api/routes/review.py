"""The review endpoints of the operator API (contract §8, §18): the review
queue across scopes with each candidate's review status, one candidate,
and the human decision on it; and the review inbox page.

| method and path | response |
| --- | --- |
| ``GET /review-queue?status=&scope=&surface=&offset=&limit=`` | ``ReviewQueue``: the ReviewCandidates of every scope whose review status passes ``status`` (open — the default —, superseded, approved, rejected, decided, all), oldest first, each with its decision, fix revision and repair, and the candidates by status |
| ``GET /review-candidates/{candidate_id}`` | ``ReviewCandidateBody``: one candidate with its review status and its scope's ``as_of_position``; 404 for a candidate the view does not hold |
| ``POST /review-candidates/{candidate_id}/decision`` | ``202 DecisionAccepted``: the ReviewDecision published to Kafka (body ``DecisionRequest``) |
| ``GET /review`` | the review inbox page (HTML) |

The GETs read the read models the view follower keeps
(``recurrence_ledger.read.history``), like the history's: ``ETag`` and
``If-None-Match`` → 304, 400 for a bad or unknown query parameter, 503 when
Redis does not answer.

A decision is published, never applied here: the API writes no state (in
Redis only the answer of a request with an ``Idempotency-Key``, so that a
retry is answered, not published again: ``recurrence_ledger.api.idempotency``). It needs a reviewer token (``recurrence_ledger.api.auth``:
401 without a token, 403 with the read token or an unknown one), whose
reviewer's name the decision records — a ``reviewer`` in the body is a 400,
and so is any other field than ``decision``, ``reason``, ``fix_revision``
and ``reason_code`` (contract §24: only with a rejection, one of its six
codes; another code, or one with an approval, is a 400 too). Its
``journal_position`` is the scope's current
``as_of_position`` in the view, its ``decided_at`` the API's clock, its id
``recurrence_ledger.kafka.review.decision_id``. Refused before anything
is published: 404 for a candidate the view does not hold
(``unknown_candidate``), 409 for one whose status is already approved or
rejected (``already_decided``; the worker dead-letters a second decision
that passed here because the view was behind), 400 for a rejection without
a reason, a fix_revision with a rejection or of another artifact or not
above the candidate's revision, a reason over 16,384 characters
(``invalid_value``); 503 when Kafka does not take the decision.
"""

from __future__ import annotations

from typing import Annotated

from confluent_kafka import KafkaException

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from recurrence_ledger.api.bodies import shaper
from recurrence_ledger.api.idempotency import IDEMPOTENCY_TTL_S, KEY_FORMAT, REPLAYED_HEADER, DecisionAnswers
from recurrence_ledger.api.params import MAX_OFFSET, MAX_QUEUE_LIMIT, IfNoneMatch, ScopeQuery, StrictJsonRoute
from recurrence_ledger.api.responses import CONDITIONAL, ERRORS, answer, etag_matches, not_found, page
from recurrence_ledger.api.routes.history import iso
from recurrence_ledger.api.schemas import QUEUE_STATUS_FIELDS, DecisionAccepted, DecisionRequest, QueueItem, ReviewCandidateBody, ReviewFilter, ReviewQueue
from recurrence_ledger.ledger.models import MAX_ID_LENGTH, RepairSurface, TaskOutcomeItemRef
from recurrence_ledger.ledger.records import ReviewCandidate
from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.kafka.review import DecisionPublisher, DecisionRefused, new_decision

#: A candidate id in a path: no longer than an id can be.
CandidateId = Annotated[str, Path(max_length=MAX_ID_LENGTH, description="The candidate_id (sha256:…).")]
#: The documented answers of the decision besides 202.
DECISION_ERRORS: dict[int, dict] = {
    400: {"model": ERRORS[400]["model"], "description": "Bad body: a reviewer in it, an unknown field, a rejection without a reason, a bad fix_revision; a bad Idempotency-Key, or one sent with another request"},
    401: {"model": ERRORS[400]["model"], "description": "No reviewer token (WWW-Authenticate: Bearer)"},
    403: {"model": ERRORS[400]["model"], "description": "The read token, or a token that is no reviewer's (or no reviewer tokens configured)"},
    404: {"model": ERRORS[400]["model"], "description": "Unknown candidate"},
    409: {"model": ERRORS[400]["model"], "description": "The candidate was already decided (or the first request with this Idempotency-Key is still being answered)"},
    413: {"model": ERRORS[400]["model"], "description": "A body over 128 KiB (counted as it is read: chunked bodies too)"},
    503: {"model": ERRORS[400]["model"], "description": "Redis or Kafka unavailable"},
}


def queue_item(item: dict, status: dict | None) -> dict:
    """The QueueItem fields of a read-model queue item and its ReviewStatus,
    nested values in their models' shapes (``recurrence_ledger.api.bodies``):
    the candidate's record fields, when it was published, its status's
    fields (open without one) and the revision's severity."""
    candidate = item["candidate"]
    shape_ref = shaper(TaskOutcomeItemRef)
    status = status or {"status": "open"}
    return {
        **{name: candidate[name] for name in ReviewCandidate.model_fields},
        "failure_refs": [shape_ref(ref) for ref in candidate["failure_refs"]], "published_at": iso(item["timestamp"]), "severity": item.get("severity"),
        **{name: status.get(name) for name in QUEUE_STATUS_FIELDS},
    }


def router(models: ReadModels, publisher: DecisionPublisher | None) -> APIRouter:
    """The router, reading the read models through ``models`` and
    publishing decisions with ``publisher`` (None: no decision is taken;
    the guard refuses them first, without reviewer tokens)."""
    routes = APIRouter(route_class=StrictJsonRoute)
    namespace = models.keys.namespace
    answers = DecisionAnswers(models.client, models.keys)

    @routes.get("/review-queue", response_model=ReviewQueue, responses={**CONDITIONAL, 400: ERRORS[400], 503: ERRORS[503]}, tags=["review"])
    async def review_queue(
        status: Annotated[ReviewFilter, Query(description="open (default), superseded, approved, rejected, decided (approved or rejected) or all.")] = "open",
        scope: ScopeQuery = None,
        surface: Annotated[RepairSurface | None, Query(description="Only candidates with this repair_surface.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_QUEUE_LIMIT, description=f"Rows to return, 1–{MAX_QUEUE_LIMIT}.")] = 50,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Rows to skip first (paging).")] = 0,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """The ReviewCandidates of every scope whose review status
        (contract §18) passes ``status``, oldest first by their record's
        Kafka timestamp, each with its failure refs, streak, repair_surface,
        scope, decision, fix revision and repair; and the candidates by
        status (of the scope, or of every scope)."""
        queue = models.review_queue(scope, surface, offset, limit, status)
        if etag_matches(if_none_match, queue.etag):
            return answer(None, queue.etag, if_none_match, None)
        shape_item = shaper(QueueItem)
        items = [shape_item(queue_item(item, item["status"])) for item in queue.items]
        body = shaper(ReviewQueue)({
            "total": queue.total, "available": queue.available, "counts": queue.counts, "status": status, "scope": scope, "surface": surface,
            "limit": limit, "offset": offset, "candidates": items,
        })
        return answer(body, queue.etag, None, None)

    @routes.get(
        "/review-candidates/{candidate_id}", response_model=ReviewCandidateBody,
        responses={**CONDITIONAL, 400: ERRORS[400], 404: {"model": ERRORS[404]["model"], "description": "Unknown candidate"}, 503: ERRORS[503]},
        tags=["review"],
    )
    async def review_candidate(candidate_id: CandidateId, if_none_match: IfNoneMatch = None) -> Response:
        """One ReviewCandidate with its review status, decision, fix revision
        and repair (contract §18), and its scope's as_of_position."""
        entry = models.review_candidate(candidate_id)
        if entry is None:
            return not_found(f"unknown review candidate {candidate_id!r}", namespace)
        if etag_matches(if_none_match, entry.etag):
            return answer(None, entry.etag, if_none_match, entry.as_of_position)
        body = shaper(ReviewCandidateBody)({**queue_item(entry.item, entry.status), "as_of_position": entry.as_of_position})
        return answer(body, entry.etag, None, entry.as_of_position)

    @routes.post(
        "/review-candidates/{candidate_id}/decision", status_code=202, response_model=DecisionAccepted, responses=DECISION_ERRORS,
        tags=["review"],
    )
    def decide(
        candidate_id: CandidateId, body: DecisionRequest, request: Request,
        idempotency_key: Annotated[str | None, Header(description=(
            "Optional, 1–128 visible ASCII characters (a UUID): the same key sent again by the same reviewer within "
            f"{IDEMPOTENCY_TTL_S // 60} minutes gets the first request's answer and publishes nothing."))] = None,
    ) -> JSONResponse:
        """Publish a human decision on a review candidate (contract §18) to
        ``review-decisions``: approved (optionally with the fix_revision
        that repairs it) or rejected (with a reason, and a reason_code the
        ledger counts, contract §24). Needs a reviewer token
        (Authorization: Bearer), whose reviewer it records. 202 once Kafka
        acknowledged it; the worker then publishes the candidate's new
        review status. With an ``Idempotency-Key`` a retry is answered,
        not published again (``recurrence_ledger.api.idempotency``)."""
        reviewer = request.state.reviewer  # set by the guard, which refused the request without a reviewer's token
        if idempotency_key is None:
            status, answer_body = decide_once(candidate_id, body, reviewer)
            return JSONResponse(answer_body, status)
        if KEY_FORMAT.fullmatch(idempotency_key) is None:
            return JSONResponse({"detail": "an Idempotency-Key has 1–128 visible ASCII characters"}, 400)
        name = answers.name(reviewer, idempotency_key)
        fingerprint = digest({"candidate_id": candidate_id, "body": body.model_dump(mode="json")})
        first = answers.begin(name, fingerprint)
        if first is not None:
            status, answer_body, replayed = first
            return JSONResponse(answer_body, status, headers={REPLAYED_HEADER: "true"} if replayed else None)
        try:
            status, answer_body = decide_once(candidate_id, body, reviewer)
        except BaseException:
            answers.abandon(name)
            raise
        answers.finish(name, fingerprint, status, answer_body)
        return JSONResponse(answer_body, status)

    def decide_once(candidate_id: str, body: DecisionRequest, reviewer: str) -> tuple[int, dict]:
        """The answer ``(status, body)`` of one decision request: the
        decision published (202), or why not."""
        entry = models.review_candidate(candidate_id)
        if entry is None:
            return 404, {"detail": f"unknown review candidate {candidate_id!r} (not in the view {namespace}): unknown_candidate"}
        if entry.as_of_position is None:
            scope = entry.item["candidate"]["scope_id"]
            return 503, {"detail": f"the view does not hold the as_of_position of scope {scope!r} yet: try again"}
        try:
            decision = new_decision(
                entry.item["candidate"], entry.status, reviewer=reviewer, decision=body.decision, reason=body.reason,
                fix_revision=body.fix_revision.model_dump() if body.fix_revision is not None else None, journal_position=entry.as_of_position,
                reason_code=body.reason_code,
            )
        except DecisionRefused as refused:
            return 409 if refused.code == "already_decided" else 400, {"detail": f"{refused}: {refused.code}"}
        if publisher is None:  # the guard refuses decisions without reviewer tokens, which need a publisher
            return 503, {"detail": "this API publishes no decisions (no Kafka configured)"}
        try:
            where = publisher.publish(decision)
        except (LookupError, RuntimeError, KafkaException) as error:  # PublishError, RegistryError, a missing topic
            return 503, {"detail": f"the decision was not published: {error}"}
        accepted = DecisionAccepted(
            decision_id=decision["decision_id"], decision=decision, topic=where.topic, partition=where.partition, offset=where.offset,
            status_url=f"/review-candidates/{candidate_id}",
        )
        return 202, accepted.model_dump(mode="json")

    @routes.get("/review", include_in_schema=False)
    def review_page(
        status: Annotated[str | None, Query()] = None,
        scope: Annotated[str | None, Query()] = None,
        surface: Annotated[str | None, Query()] = None,
        refresh: Annotated[str | None, Query()] = None,
    ) -> FileResponse:
        return page("review.html")

    return routes
