"""The history endpoints of the operator API (an APIRouter that
``recurrence_ledger.api.create_app`` mounts): they read the read models that
the view follower keeps (``recurrence_ledger.read.history``), never Kafka.

| method and path | response |
| --- | --- |
| ``GET /scopes/{scope}/revisions/{artifact_id}/{revision}/history?order=&limit=&offset=`` | ``RevisionHistoryBody``: the revision's verdict history — every selected / recurred / avoided observation kept (the newest N, default 1,000; ``total`` counts them all), newest first (``order=newest``, default) or oldest first (``order=oldest``), ordered by task_outcome_position (at one position the selection before its verdict), each with its task outcome, failure_ref, run and the ``explain`` command line; its runs (contract §8) and the scope's review threshold |
| ``GET /scopes/{scope}/trend?from_position=&limit=`` | ``ScopeTrend``: the scope's trend points, one per ScopeStatistics record, oldest first from ``from_position`` |
| ``GET /review-queue?scope=&surface=&offset=&limit=`` | ``ReviewQueue``: the ReviewCandidates of every scope not yet followed by an avoided verdict of their revision, oldest first |
| ``GET /timeline``, ``GET /review`` | the revision timeline and review-queue pages (HTML) |

Like the other endpoints: ``ETag`` on every JSON answer (``If-None-Match`` →
304), ``X-As-Of-Position`` on the scope endpoints, 404 for a scope the view
does not hold (and for a revision it knows nothing of), 400 for a bad or
unknown query parameter, 503 when Redis does not answer.
"""

from __future__ import annotations

import datetime
import shlex
from pathlib import Path as FilePath
from typing import Annotated, Literal

import redis
from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from recurrence_ledger.ledger.models import ArtifactRef, RepairSurface
from recurrence_ledger.read.history import ReadModels

STATIC_DIR = FilePath(__file__).resolve().parent.parent / "static"
#: Largest ``limit`` of the history and the trend (the default N kept).
MAX_HISTORY_LIMIT = 1000
#: Largest ``limit`` of the review queue.
MAX_QUEUE_LIMIT = 200
#: Largest ``offset`` (as the other paged endpoints).
MAX_OFFSET = 1_000_000
#: Largest position (Avro long).
MAX_POSITION = 2**63 - 1

IfNoneMatch = Annotated[str | None, Header(description="An ETag from an earlier response: 304 when unchanged.")]


class _Shape(BaseModel):
    model_config = ConfigDict(frozen=True)


class ItemRef(_Shape):
    """A failure item of a Task Outcome (contract §6 TaskOutcomeItemRef)."""

    task_outcome_ref: dict = Field(description='{"source_type": "task_outcome", "source_id": …}')
    item_kind: Literal["observation", "check"]
    item_index: int
    item_digest: str


class Verdict(_Shape):
    """One observation of the revision's history."""

    task_outcome_id: str = Field(description="source_id of the Task Outcome.")
    task_outcome_position: int
    event: Literal["selected", "recurred", "avoided"]
    verdict: Literal["recurred", "avoided"] | None = Field(
        description="The outcome's terminal verdict for this revision: the event itself for recurred / avoided; for a selection, its "
        "outcome's verdict among the kept history, null when it has none (an unknown selection, contract §7)."
    )
    failure_ref: ItemRef | None = Field(description="The failure item of a recurred verdict; null otherwise.")
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


class QueueItem(_Shape):
    """A ReviewCandidate (contract §8) waiting for review."""

    candidate_id: str
    scope_id: str
    artifact_ref: ArtifactRef
    signature_key: str
    repair_surface: RepairSurface
    streak: int = Field(description="The run's recurrence count when the candidate was published.")
    run_start_position: int | None
    reason: str
    failure_refs: list[ItemRef]
    published_at: str = Field(description="The candidate record's Kafka timestamp, ISO 8601 UTC.")


class ReviewQueue(_Shape):
    """``GET /review-queue``: open candidates, oldest first."""

    total: int = Field(description="Open candidates in every scope.")
    available: int = Field(description="Open candidates passing the filters.")
    scope: str | None
    surface: RepairSurface | None
    limit: int
    offset: int
    candidates: list[QueueItem]


def iso(timestamp_ms: int) -> str:
    """A Kafka timestamp (ms) as ISO 8601 UTC."""
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def explain_command(scope_id: str, outcome_id: str, topic_prefix: str = "") -> str:
    """``recurrence-ledger explain SCOPE OUTCOME`` quoted for a POSIX shell
    (with ``--topic-prefix`` when the deployment has one)."""
    command = f"recurrence-ledger explain {shlex.quote(scope_id)} {shlex.quote(outcome_id)}"
    return command + (f" --topic-prefix {shlex.quote(topic_prefix)}" if topic_prefix else "")


def _etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))


def _answer(body: BaseModel | None, etag: str, if_none_match: str | None, as_of: int | None) -> Response:
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if as_of is not None:
        headers["X-As-Of-Position"] = str(as_of)
    if body is None or _etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    return Response(body.model_dump_json(), media_type="application/json", headers=headers)


def history_router(client: redis.Redis, namespace: str, topic_prefix: str, errors: dict, conditional: dict) -> APIRouter:
    """The router, reading the namespace's read models on ``client`` (the
    API's own Redis connection). ``errors`` / ``conditional``: the API's
    documented 400/404/503 and 304 responses."""
    models = ReadModels(client, namespace)
    router = APIRouter()

    def not_found(what: str) -> JSONResponse:
        return JSONResponse({"detail": f"{what} (not in the view {namespace})"}, status_code=404)

    @router.get(
        "/scopes/{scope:path}/revisions/{artifact_id:path}/{revision}/history",
        response_model=RevisionHistoryBody, responses={**conditional, **errors}, tags=["history"],
    )
    def revision_history(
        scope: str,
        artifact_id: str,
        revision: Annotated[int, Path(ge=1, le=MAX_POSITION, description="The revision number.")],
        order: Annotated[Literal["newest", "oldest"], Query(description="newest (default): position descending; oldest: ascending.")] = "newest",
        limit: Annotated[int, Query(ge=1, le=MAX_HISTORY_LIMIT, description=f"Rows to return, 1–{MAX_HISTORY_LIMIT}.")] = 100,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Rows to skip first (paging).")] = 0,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """The verdict history of one Experience revision: its selected,
        recurred and avoided observations with task outcome, position,
        failure_ref and run, the runs (contract §8) and the review
        threshold. Kept: the newest N by position (``total`` counts them
        all)."""
        history = models.history(scope, artifact_id, revision)
        if history is None:
            return not_found(f"unknown scope {scope!r}")
        if history.row is None and not history.entries and not history.meta:
            return not_found(f"unknown revision {artifact_id} r{revision} of scope {scope!r}")
        if _etag_matches(if_none_match, history.etag):
            return _answer(None, history.etag, if_none_match, history.as_of_position)
        verdicts = history.verdicts()
        runs = history.runs(verdicts)
        ordered = verdicts if order == "oldest" else verdicts[::-1]
        row = history.row or {}
        rows = [
            Verdict(
                task_outcome_id=item["task_outcome_id"], task_outcome_position=item["task_outcome_position"], event=item["event"],
                verdict=item["verdict"],
                failure_ref=None if item["failure_ref"] is None else ItemRef(
                    task_outcome_ref={"source_type": "task_outcome", "source_id": item["task_outcome_id"]}, **item["failure_ref"]
                ),
                run_start_position=item["run"], observation_id_prefix=item["observation"],
                explain=explain_command(scope, item["task_outcome_id"], topic_prefix),
            )
            for item in ordered[offset : offset + limit]
        ]
        body = RevisionHistoryBody(
            scope_id=scope, as_of_position=history.as_of_position,
            artifact_ref=ArtifactRef(family="experience", artifact_id=artifact_id, revision=revision),
            signature_key=row.get("signature_key", history.meta.get("signature_key")), repair_surface=row.get("repair_surface"),
            terminal_recurred_streak=row.get("terminal_recurred_streak"), needs_review=row.get("needs_review"),
            review_threshold=history.review_threshold, order=order, limit=limit, offset=offset, total=history.total,
            retained=len(verdicts), truncated=history.total > len(verdicts), runs=[Run(**run) for run in runs], verdicts=rows,
        )
        return _answer(body, history.etag, None, history.as_of_position)

    @router.get("/scopes/{scope:path}/trend", response_model=ScopeTrend, responses={**conditional, **errors}, tags=["history"])
    def scope_trend(
        scope: str,
        from_position: Annotated[int, Query(ge=0, le=MAX_POSITION, description="Only points with as_of_position ≥ this.")] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_HISTORY_LIMIT, description=f"Points to return, 1–{MAX_HISTORY_LIMIT}.")] = MAX_HISTORY_LIMIT,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """The scope's trend: one point per ScopeStatistics record the
        workers committed (its as_of_position, commit time and counters),
        oldest first, paged by position (``next_from_position``)."""
        page = models.trend(scope, from_position, limit)
        if page is None:
            return not_found(f"unknown scope {scope!r}")
        if _etag_matches(if_none_match, page.etag):
            return _answer(None, page.etag, if_none_match, page.as_of_position)
        points = [
            TrendPoint(committed_at=iso(row["timestamp"]), timestamp_ms=row["timestamp"], **{k: v for k, v in row.items() if k not in ("partition", "offset", "timestamp")})
            for row in page.rows()
        ]
        body = ScopeTrend(
            scope_id=scope, as_of_position=page.as_of_position, from_position=from_position, limit=limit, total=page.total,
            retained=page.retained, next_from_position=page.next_from_position, points=points,
        )
        return _answer(body, page.etag, None, page.as_of_position)

    @router.get("/review-queue", response_model=ReviewQueue, responses={**conditional, 400: errors[400], 503: errors[503]}, tags=["history"])
    def review_queue(
        scope: Annotated[str | None, Query(description="Only this scope's candidates.")] = None,
        surface: Annotated[RepairSurface | None, Query(description="Only candidates with this repair_surface.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_QUEUE_LIMIT, description=f"Rows to return, 1–{MAX_QUEUE_LIMIT}.")] = 50,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Rows to skip first (paging).")] = 0,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """Every ReviewCandidate across scopes whose run is still its
        revision's current run (no avoided verdict of the revision after the
        run's start), oldest first, with its failure refs, streak,
        repair_surface and scope."""
        page = models.review_queue(scope, surface, offset, limit)
        if _etag_matches(if_none_match, page.etag):
            return _answer(None, page.etag, if_none_match, None)
        items = []
        for item in page.items:
            candidate = item["candidate"]
            items.append(QueueItem(
                candidate_id=candidate["candidate_id"], scope_id=candidate["scope_id"], artifact_ref=ArtifactRef(**candidate["artifact_ref"]),
                signature_key=candidate["signature_key"], repair_surface=candidate["repair_surface"], streak=candidate["streak"],
                run_start_position=candidate["run_start_position"], reason=candidate["reason"],
                failure_refs=[ItemRef(**ref) for ref in candidate["failure_refs"]], published_at=iso(item["timestamp"]),
            ))
        body = ReviewQueue(total=page.total, available=page.available, scope=scope, surface=surface, limit=limit, offset=offset, candidates=items)
        return _answer(body, page.etag, None, None)

    @router.get("/timeline", include_in_schema=False)
    def timeline_page(
        scope: Annotated[str | None, Query()] = None,
        artifact_id: Annotated[str | None, Query()] = None,
        revision: Annotated[str | None, Query()] = None,
        refresh: Annotated[str | None, Query()] = None,
    ) -> FileResponse:
        return FileResponse(STATIC_DIR / "timeline.html", media_type="text/html", headers={"Cache-Control": "no-cache"})

    @router.get("/review", include_in_schema=False)
    def review_page(
        scope: Annotated[str | None, Query()] = None,
        surface: Annotated[str | None, Query()] = None,
        refresh: Annotated[str | None, Query()] = None,
    ) -> FileResponse:
        return FileResponse(STATIC_DIR / "review.html", media_type="text/html", headers={"Cache-Control": "no-cache"})

    return router
