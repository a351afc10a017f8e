"""The history endpoints of the operator API (an APIRouter that
``recurrence_ledger.api.app.create_app`` mounts): they read the read models
that the view follower keeps (``recurrence_ledger.read.history``), never Kafka.

| method and path | response |
| --- | --- |
| ``GET /scopes/{scope}/revisions/{artifact_id}/{revision}/history?order=&limit=&offset=`` | ``RevisionHistoryBody``: the revision's verdict history — every selected / recurred / avoided observation kept (the newest N, default 1,000; ``total`` counts them all), newest first (``order=newest``, default) or oldest first (``order=oldest``), ordered by task_outcome_position (at one position the selection before its verdict), each with its task outcome, failure_ref, run and the ``explain`` command line; its runs (contract §8) and the scope's review threshold |
| ``GET /scopes/{scope}/trend?from_position=&limit=`` | ``ScopeTrend``: the scope's trend points, one per ScopeStatistics record, oldest first from ``from_position`` |
| ``GET /timeline`` | the revision timeline page (HTML) |

The review queue and its page are ``recurrence_ledger.api.routes.review``.

Like the other endpoints: ``ETag`` on every JSON answer (``If-None-Match`` →
304), ``X-As-Of-Position`` on the scope endpoints, 404 for a scope the view
does not hold (and for a revision it knows nothing of), 400 for a bad or
unknown query parameter, 503 when Redis does not answer.
"""

from __future__ import annotations

import datetime
import shlex
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import FileResponse, Response

from recurrence_ledger.api.bodies import shaper
from recurrence_ledger.api.params import MAX_HISTORY_LIMIT, MAX_OFFSET, MAX_POSITION, ArtifactIdPath, IfNoneMatch, ScopeId
from recurrence_ledger.api.responses import CONDITIONAL, ERRORS, answer, etag_matches, not_found, page, unknown_scope
from recurrence_ledger.api.schemas import RevisionHistoryBody, Run, ScopeTrend, TrendPoint, Verdict
from recurrence_ledger.ledger.models import TaskOutcomeItemRef
from recurrence_ledger.read.history import ReadModels


def iso(timestamp_ms: int) -> str:
    """A Kafka timestamp (ms) as ISO 8601 UTC."""
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def explain_command(scope_id: str, outcome_id: str, topic_prefix: str = "") -> str:
    """``recurrence-ledger explain SCOPE OUTCOME`` quoted for a POSIX shell
    (with ``--topic-prefix`` when the deployment has one)."""
    command = f"recurrence-ledger explain {shlex.quote(scope_id)} {shlex.quote(outcome_id)}"
    return command + (f" --topic-prefix {shlex.quote(topic_prefix)}" if topic_prefix else "")


def router(models: ReadModels, topic_prefix: str) -> APIRouter:
    """The router, reading the namespace's read models through ``models``
    (on the API's own Redis connection); ``topic_prefix`` goes into each
    verdict's ``explain`` command line."""
    routes = APIRouter()
    namespace = models.keys.namespace

    @routes.get(
        "/scopes/{scope:path}/revisions/{artifact_id:path}/{revision}/history",
        response_model=RevisionHistoryBody, responses={**CONDITIONAL, **ERRORS}, tags=["history"],
    )
    async def revision_history(
        scope: ScopeId,
        artifact_id: ArtifactIdPath,
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
        history = models.history(scope, artifact_id, revision, scope_fields=("review_threshold",))
        if history is None:
            return unknown_scope(scope, namespace)
        if history.row is None and not history.entries and not history.meta:
            return not_found(f"unknown revision {artifact_id} r{revision} of scope {scope!r}", namespace)
        if etag_matches(if_none_match, history.etag):
            return answer(None, history.etag, if_none_match, history.as_of_position)
        verdicts = history.verdicts()
        runs = history.runs(verdicts)
        ordered = verdicts if order == "oldest" else verdicts[::-1]
        row = history.row or {}
        # The scope's review_threshold as its record stored it (0 or absent: a record before record revision 4).
        shape_verdict, shape_ref = shaper(Verdict), shaper(TaskOutcomeItemRef)
        rows = [
            shape_verdict({
                "task_outcome_id": item["task_outcome_id"], "task_outcome_position": item["task_outcome_position"], "event": item["event"],
                "verdict": item["verdict"],
                "failure_ref": None if item["failure_ref"] is None else shape_ref(
                    {"task_outcome_ref": {"source_type": "task_outcome", "source_id": item["task_outcome_id"]}, **item["failure_ref"]}
                ),
                "run_start_position": item["run"], "observation_id_prefix": item["observation"],
                "explain": explain_command(scope, item["task_outcome_id"], topic_prefix),
            })
            for item in ordered[offset : offset + limit]
        ]
        shape_run = shaper(Run)
        body = shaper(RevisionHistoryBody)({
            "scope_id": scope, "as_of_position": history.as_of_position,
            "artifact_ref": {"family": "experience", "artifact_id": artifact_id, "revision": revision},
            "signature_key": row.get("signature_key", history.meta.get("signature_key")), "repair_surface": row.get("repair_surface"),
            "terminal_recurred_streak": row.get("terminal_recurred_streak"), "needs_review": row.get("needs_review"),
            "review_threshold": int(history.scope["review_threshold"] or 0) or None, "order": order, "limit": limit, "offset": offset, "total": history.total,
            "retained": len(verdicts), "truncated": history.total > len(verdicts), "runs": [shape_run(run) for run in runs], "verdicts": rows,
        })
        return answer(body, history.etag, None, history.as_of_position)

    @routes.get("/scopes/{scope:path}/trend", response_model=ScopeTrend, responses={**CONDITIONAL, **ERRORS}, tags=["history"])
    async def scope_trend(
        scope: ScopeId,
        from_position: Annotated[int, Query(ge=0, le=MAX_POSITION, description="Only points with as_of_position ≥ this.")] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_HISTORY_LIMIT, description=f"Points to return, 1–{MAX_HISTORY_LIMIT}.")] = MAX_HISTORY_LIMIT,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """The scope's trend: one point per ScopeStatistics record the
        workers committed (its as_of_position, commit time and counters),
        oldest first, paged by position (``next_from_position``)."""
        trend = models.trend(scope, from_position, limit)
        if trend is None:
            return unknown_scope(scope, namespace)
        if etag_matches(if_none_match, trend.etag):
            return answer(None, trend.etag, if_none_match, trend.as_of_position)
        shape_point = shaper(TrendPoint)
        points = [shape_point({**row, "committed_at": iso(row["timestamp"]), "timestamp_ms": row["timestamp"]}) for row in trend.rows()]
        body = shaper(ScopeTrend)({
            "scope_id": scope, "as_of_position": trend.as_of_position, "from_position": from_position, "limit": limit, "total": trend.total,
            "retained": trend.retained, "next_from_position": trend.next_from_position, "points": points,
        })
        return answer(body, trend.etag, None, trend.as_of_position)

    @routes.get("/timeline", include_in_schema=False)
    def timeline_page(
        scope: Annotated[str | None, Query()] = None,
        artifact_id: Annotated[str | None, Query()] = None,
        revision: Annotated[str | None, Query()] = None,
        refresh: Annotated[str | None, Query()] = None,
    ) -> FileResponse:
        return page("timeline.html")

    return routes
