"""The signature patterns of the operator API (contract §23): one pattern
group's patterns, and the team patterns page.

| method and path | response |
| --- | --- |
| ``GET /patterns?group=&min_scopes=&limit=&offset=`` | ``PatternList``: the SignaturePatterns of ``group`` (default ``""``: the one group of a deployment without a group separator) with at least ``min_scopes`` scopes (default 1), most scopes first, then signature_key; 1 ≤ ``limit`` ≤ 100 (the default), 0 ≤ ``offset`` ≤ 1,000,000 |
| ``GET /team-patterns`` | the team patterns page (HTML) |

Answers only the group asked for (§23.1): the view keeps each group's
patterns in a key of its own (``recurrence_ledger.read.patterns``), the
route reads that key alone, and a pattern names only its own group's
scopes — so no row, count or error message of the answer names a scope of
another group. A group the view does not hold answers an empty list (200),
exactly like a group without patterns: the answer does not tell whether
some other group exists. ``ETag`` and ``If-None-Match`` → 304 like every
JSON endpoint; 400 for a bad or unknown query parameter, 503 when Redis
does not answer.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from fastapi.responses import FileResponse, Response

from recurrence_ledger.api.bodies import shaper
from recurrence_ledger.api.params import MAX_LIMIT, MAX_OFFSET, IfNoneMatch
from recurrence_ledger.api.responses import CONDITIONAL, ERRORS, answer, etag_matches, page
from recurrence_ledger.api.schemas import PatternList
from recurrence_ledger.ledger.models import MAX_ID_LENGTH
from recurrence_ledger.ledger.records import SignaturePattern
from recurrence_ledger.read.patterns import PatternView

#: The path of the team patterns page (public, like the other pages: it holds no data).
PATTERNS_PAGE = "/team-patterns"


def register(app: FastAPI, patterns: PatternView) -> None:
    """Add ``GET /patterns`` (reading ``patterns``) and the team patterns
    page to ``app``."""
    shape = shaper(PatternList)
    shape_row = shaper(SignaturePattern)

    @app.get("/patterns", response_model=PatternList, responses={**CONDITIONAL, 400: ERRORS[400], 503: ERRORS[503]}, tags=["patterns"])
    async def group_patterns(
        group: Annotated[str, Query(max_length=MAX_ID_LENGTH, description="The pattern group (\"\", the default: a deployment without a group separator).")] = "",
        min_scopes: Annotated[int, Query(ge=1, le=MAX_OFFSET, description="Only patterns with at least this many scopes.")] = 1,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Patterns to return, 1–{MAX_LIMIT}.")] = MAX_LIMIT,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Patterns to skip first (paging).")] = 0,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """The signature patterns of one pattern group (contract §23.3): per
        signature, how many of the group's scopes recurred on it, the first
        100 of them and the recurred verdicts over the group — the view's
        rows as the ledger published them, never a scope of another group."""
        found = patterns.group(group, min_scopes, offset, limit)
        if etag_matches(if_none_match, found.etag):
            return answer(None, found.etag, if_none_match, None)
        body = shape({
            "group": group, "total": found.total, "available": found.available, "min_scopes": min_scopes, "limit": limit, "offset": offset,
            "patterns": [shape_row(row) for row in found.rows],
        })
        return answer(body, found.etag, None, None)

    @app.get(PATTERNS_PAGE, include_in_schema=False)
    def patterns_page(
        group: Annotated[str | None, Query(description="Read by the page's script.")] = None,
        min_scopes: Annotated[str | None, Query(description="Read by the page's script.")] = None,
        refresh: Annotated[str | None, Query(description="Read by the page's script.")] = None,
    ) -> FileResponse:
        """The team patterns page: a group's signature patterns, with the
        labels of ``GET /field-catalogue``."""
        return page("patterns.html")
