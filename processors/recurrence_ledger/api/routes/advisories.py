"""The recall-time advisory: ``POST /advisories`` (body
``AdvisoryRequest``: ``{scope_id, artifact_refs: [...]}``, at most
:data:`recurrence_ledger.read.advisory.MAX_ADVISORY_REFS` refs) answers
``Advisories``: per ref, what the ledger published about it — known, head
(only when a ReviewStatus says it was superseded), the RevisionStatistics
flags and figures, ``binding_suspect``, ``low_yield``, its effect, its newest
review candidate's status or the repair status of an approved one — and a
one-line ``advice``, read from Redis by
``recurrence_ledger.read.advisory`` (which decides no ledger rule).

It reads like every data endpoint: the API token when one is set
(``recurrence_ledger.api.auth``), 503 when Redis does not answer, 400 for
a body that is no ``AdvisoryRequest``, 422 for more than 64 refs, 413 for
a body over ``recurrence_ledger.api.limits.MAX_ADVISORY_BODY`` bytes. An
unknown scope is an answer, not a 404: its refs are all unknown (a recall
goes on either way). It writes nothing: recall stays write-free.
"""

from __future__ import annotations

import orjson
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from recurrence_ledger.api.bodies import shaper
from recurrence_ledger.api.responses import ERRORS
from recurrence_ledger.api.schemas import Advisories, AdvisoryRequest, ErrorBody
from recurrence_ledger.read.advisory import MAX_ADVISORY_REFS, read_advisory
from recurrence_ledger.read.reader import ViewReader

#: The documented answers besides 200.
ADVISORY_ERRORS: dict[int, dict] = {
    400: {"model": ErrorBody, "description": "The body is no AdvisoryRequest"},
    413: {"model": ErrorBody, "description": "The body is too large"},
    422: {"model": ErrorBody, "description": f"More than {MAX_ADVISORY_REFS} artifact_refs"},
    503: ERRORS[503],
}


def register(app: FastAPI, reader: ViewReader) -> None:
    """Add ``POST /advisories`` to ``app``, reading the view through ``reader``."""
    shape = shaper(Advisories)

    @app.post("/advisories", response_model=Advisories, responses=ADVISORY_ERRORS, tags=["advisory"])
    def advisories(body: AdvisoryRequest) -> Response:
        # A plain def, unlike the GET routes: its two Redis round trips run in
        # the worker threads, so one request's wait on Redis overlaps
        # another's (BENCHMARKS.md, advisory benchmark: 350 → 457 requests/s
        # at the same offered 500, p99 2.1 s → 0.47 s on the loaded machine).
        """Advise a recall on up to 64 Experience revisions of one scope,
        from what the ledger published about each (never written, never
        decided here)."""
        if len(body.artifact_refs) > MAX_ADVISORY_REFS:
            detail = f"at most {MAX_ADVISORY_REFS} artifact_refs per request, not {len(body.artifact_refs)}: split the request"
            return JSONResponse({"detail": detail}, status_code=422)
        refs = [ref.model_dump() for ref in body.artifact_refs]
        found = read_advisory(reader.client, reader.keys, body.scope_id, refs)
        payload = shape({
            "scope_id": found.scope_id, "known": found.known, "as_of_position": found.as_of_position, "advisories": found.advisories,
        })
        return Response(orjson.dumps(payload), media_type="application/json", headers={"Cache-Control": "no-store"})
