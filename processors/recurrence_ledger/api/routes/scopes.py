"""``GET /scopes`` (every scope with its counters, sorted, filtered and
paged through the scope index of ``recurrence_ledger.read.history``) and
``GET /scopes/{scope}/statistics`` (the scope's ScopeStatistics record, byte
for byte the view's)."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import FastAPI, Query
from fastapi.responses import Response

from recurrence_ledger.api.bodies import shaper
from recurrence_ledger.api.params import MAX_OFFSET, MAX_SCOPES_LIMIT, IfNoneMatch, ScopeId
from recurrence_ledger.api.responses import CONDITIONAL, ERRORS, RawJson, answer, etag_matches, unknown_scope
from recurrence_ledger.api.schemas import ScopeList, ScopeSort, ScopeSummary
from recurrence_ledger.ledger.records import ScopeStatistics
from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.read.pages import page_etag
from recurrence_ledger.read.projection import COUNTER_FIELDS
from recurrence_ledger.read.reader import ViewReader


#: Distinct statistics records (by ETag) remembered as checked against
#: ScopeStatistics; the set starts over when full.
CHECKED_RECORDS = 4096
#: Scopes whose ``GET /scopes`` summary is kept with the record it was
#: parsed from (each entry holds the record: ~5 KiB).
CACHED_SUMMARIES = 4096


def register(app: FastAPI, reader: ViewReader, models: ReadModels) -> None:
    """Add the scope routes to ``app``: the view through ``reader``, the
    scope index through ``models``."""
    checked: set[str] = set()
    summaries: dict[str, tuple[bytes, dict]] = {}
    shape_summary = shaper(ScopeSummary)

    def summary_of(scope_id: str, raw: bytes) -> dict:
        # A scope's summary is parsed once per stored record (a 5 KiB record
        # takes ~20 µs to parse, 50 of them most of a page's CPU); the cache
        # holds one record per scope and starts over when full.
        cached = summaries.get(scope_id)
        if cached is not None and cached[0] == raw:
            return cached[1]
        record = orjson.loads(raw)
        # A record written before revision 3 lacks its counters: the summary's defaults (0).
        summary = shape_summary({"scope_id": record["scope_id"], **{name: record[name] for name in COUNTER_FIELDS if name in record}})
        if len(summaries) >= CACHED_SUMMARIES:
            summaries.clear()
        summaries[scope_id] = (raw, summary)
        return summary

    @app.get("/scopes", response_model=ScopeList, responses={**CONDITIONAL, 400: ERRORS[400], 503: ERRORS[503]}, tags=["statistics"])
    async def list_scopes(
        limit: Annotated[int, Query(ge=1, le=MAX_SCOPES_LIMIT, description=f"Scopes to return, 1–{MAX_SCOPES_LIMIT}.")] = MAX_SCOPES_LIMIT,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Scopes to skip first (paging).")] = 0,
        sort: Annotated[ScopeSort, Query(description="scope_id (default), or largest first: needing_review, recurred, repeat_failure_rate (null last); ties by scope_id.")] = "scope_id",
        filter: Annotated[str | None, Query(min_length=1, max_length=512, description="Only scopes whose id contains this text.")] = None,  # noqa: A002 - the parameter's name
        needs_review: Annotated[bool | None, Query(description="true: only scopes with needing_review > 0; false: only the others.")] = None,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """The scopes in the view with their counters, sorted by scope id (or
        ``sort``), filtered, paged (``total`` says how many there are,
        ``available`` how many pass the filters), from the scope index: a
        page never reads every scope's hash."""
        page = models.scope_page(sort, filter, needs_review, offset, limit)
        total, records = page.total, page.records
        etag = page_etag(total, page.available, records)
        if etag_matches(if_none_match, etag):
            return answer(None, etag, if_none_match, None)
        scopes = [summary_of(scope_id, raw) for scope_id, raw in records.items()]
        body = shaper(ScopeList)({
            "total": total, "limit": limit, "offset": offset, "sort": sort, "filter": filter, "needs_review": needs_review,
            "available": page.available, "scopes": scopes,
        })
        return answer(body, etag, None, None)

    @app.get("/scopes/{scope:path}/statistics", response_model=ScopeStatistics, responses={**CONDITIONAL, **ERRORS}, tags=["statistics"])
    async def scope_statistics(scope: ScopeId, if_none_match: IfNoneMatch = None) -> Response:
        """The scope's ScopeStatistics record (contract §8; every field as
        ``recurrence_ledger.ledger.records`` states it, see the schema) —
        the last record the workers published, as the view stores it."""
        snap = reader.snapshot(scope)
        if snap is None:
            return unknown_scope(scope, reader.namespace)
        if etag_matches(if_none_match, snap.etag):
            return answer(None, snap.etag, if_none_match, snap.record["as_of_position"])
        # The stored canonical JSON (contract §4) as is, checked against its
        # shape once per distinct record (its ETag is the record's sha256).
        if snap.etag not in checked:
            ScopeStatistics.model_validate(snap.record)
            if len(checked) >= CHECKED_RECORDS:
                checked.clear()
            checked.add(snap.etag)
        return answer(RawJson(snap.record_bytes), snap.etag, None, snap.record["as_of_position"])
