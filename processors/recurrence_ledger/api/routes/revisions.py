"""The revisions of one scope in the view: ``GET /scopes/{scope}/revisions``
(every revision with a selection or a verdict — the view's revisions hash,
not only the top N — filtered, sorted and paged with
``recurrence_ledger.read.reader.select_revisions``) and ``GET
/scopes/{scope}/review-candidates`` (the revisions in the view's review set,
with the review threshold the workers stored)."""

from __future__ import annotations

import hashlib
from typing import Annotated

from fastapi import FastAPI, Query
from fastapi.responses import Response

from recurrence_ledger.api.bodies import shaper
from recurrence_ledger.api.params import DEFAULT_REVISIONS_LIMIT, MAX_LIMIT, MAX_OFFSET, IfNoneMatch, ScopeId
from recurrence_ledger.api.responses import CONDITIONAL, ERRORS, answer, etag_matches, unknown_scope
from recurrence_ledger.api.schemas import ErrorBody, ReviewList, ReviewRow, RevisionList, RevisionRow, RevisionSort
from recurrence_ledger.ledger.holdout_records import EffectVerdict
from recurrence_ledger.ledger.models import RepairSurface
from recurrence_ledger.read.advisory import review_split
from recurrence_ledger.read.reader import ViewReader, select_revisions


def register(app: FastAPI, reader: ViewReader) -> None:
    """Add the revision routes to ``app``, reading the view through ``reader``."""

    @app.get(
        "/scopes/{scope:path}/revisions",
        response_model=RevisionList,
        responses={**CONDITIONAL, **ERRORS, 400: {"model": ErrorBody, "description": "Unknown parameter, or bad sort, filter, limit or offset"}},
        tags=["statistics"],
    )
    async def scope_revisions(
        scope: ScopeId,
        sort: Annotated[
            RevisionSort,
            Query(
                description="streak (contract §8 order), recurred, selected or unknown (count desc), yield (lowest first, null last), "
                "probability_helps (highest first, null last; contract §21.4); ties in contract §8 order."
            ),
        ] = "streak",
        surface: Annotated[RepairSurface | None, Query(description="Only revisions with this repair_surface.")] = None,
        low_yield: Annotated[bool | None, Query(description="true: only low-yield revisions; false: only the others.")] = None,
        needs_review: Annotated[bool | None, Query(description="true: only revisions needing review; false: only the others.")] = None,
        binding_suspect: Annotated[
            bool | None, Query(description="true: only binding suspects (contract §17: the bound check proves nothing); false: only the others.")
        ] = None,
        effect: Annotated[
            EffectVerdict | None, Query(description="Only revisions whose published effect verdict is this one (contract §21.4: helps, harms, undecided, insufficient).")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Rows to return, 1–{MAX_LIMIT}.")] = DEFAULT_REVISIONS_LIMIT,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description=f"Rows to skip first (paging), 0–{MAX_OFFSET:,}.")] = 0,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """Every revision of the scope with a selection or a verdict (the
        view's revisions hash) — each with its streak, review flag,
        repair_surface, selected / recurred / avoided counts, yield,
        low_yield, and its unknown selections by reason, ambiguous matches
        and binding_suspect flag (contract §17), and the lesson's effect
        (contract §21.4) — filtered, sorted and paged."""
        snap = reader.revisions(scope)
        if snap is None:
            return unknown_scope(scope, reader.namespace)
        as_of = snap.record["as_of_position"]
        if etag_matches(if_none_match, snap.etag):
            return answer(None, snap.etag, if_none_match, as_of)
        selected = select_revisions(snap.rows, sort, surface, low_yield, needs_review, binding_suspect, effect)
        shape_row = shaper(RevisionRow)
        rows = [shape_row({**row, "rank": rank}) for rank, row in enumerate(selected[offset : offset + limit], start=offset + 1)]
        body = shaper(RevisionList)({
            "scope_id": scope, "as_of_position": as_of, "sort": sort, "surface": surface, "low_yield": low_yield, "needs_review": needs_review,
            "binding_suspect": binding_suspect, "effect": effect, "limit": limit, "offset": offset, "total": len(snap.rows), "available": len(selected), "complete": True,
            "revisions": rows,
        })
        return answer(body, snap.etag, None, as_of)

    @app.get("/scopes/{scope:path}/review-candidates", response_model=ReviewList, responses={**CONDITIONAL, **ERRORS}, tags=["statistics"])
    async def scope_review(scope: ScopeId, if_none_match: IfNoneMatch = None) -> Response:
        """Revisions needing review, from the view's review set, with their
        repair_surface and figures, and every revision needing review split
        by its newest candidate's status (waiting for a decision, decided,
        no candidate). The ReviewCandidate records themselves live on the
        review-candidates topic."""
        snap = reader.snapshot(scope)
        if snap is None:
            return unknown_scope(scope, reader.namespace)
        as_of = snap.record["as_of_position"]
        found = review_split(reader.client, reader.keys, scope)
        split, split_digest = found if found is not None else (None, b"")
        etag = '"' + hashlib.sha256(snap.review_etag.encode() + b"\x00" + split_digest).hexdigest()[:32] + '"'
        if etag_matches(if_none_match, etag):
            return answer(None, etag, if_none_match, as_of)
        shape_row = shaper(ReviewRow)
        rows = [shape_row(row) for row in snap.top if snap.needs_review(row)]
        body = shaper(ReviewList)({
            "scope_id": scope, "as_of_position": as_of, "review_threshold": snap.record.get("review_threshold") or None, "needing_review": snap.record["needing_review"],
            "split": split, "complete": len(rows) >= snap.record["needing_review"], "revisions": rows,
        })
        return answer(body, etag, None, as_of)
