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

It is asked once per recall, so it is served for little CPU
(BENCHMARKS.md, advisory benchmark): a coroutine on the event loop, its
two Redis round trips awaited through ``redis.asyncio``
(``ViewReader.async_client``, bounded as a whole by ``ViewReader.bounded``)
— no hand-off to a worker thread, and one request's wait on Redis
overlaps another's work; its body read as contract §9 reads JSON
(``recurrence_ledger.api.params.strict_json``) and validated without
FastAPI's generic body path (:class:`AdvisoryRoute`);
each stored row parsed, and each known revision's advisory written, once
per distinct stored bytes (``recurrence_ledger.read.advisory``); the
answer written by orjson in the shape of ``Advisories``
(``recurrence_ledger.api.bodies.shaper``), byte for byte the model's.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from recurrence_ledger.api.bodies import shaper
from recurrence_ledger.api.params import known_query_only, model_body
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


class AdvisoryRoute(APIRoute):
    """The route of ``POST /advisories``: documented from its endpoint
    like any other (the ``AdvisoryRequest`` body, the ``Advisories``
    answer), but served without FastAPI's generic request path — its
    dependency solving and body validation were most of the request's CPU
    (BENCHMARKS.md, advisory benchmark). Each request runs what that path
    ran for this endpoint: :func:`recurrence_ledger.api.params.known_query_only`
    (every route's dependency: the endpoint takes no query parameter), the
    body read as FastAPI reads it
    (:func:`recurrence_ledger.api.params.model_body`), then the endpoint."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint

        async def handle(request: Request) -> Response:
            await known_query_only(request)
            return await endpoint(await model_body(request, AdvisoryRequest))

        return handle


def register(app: FastAPI, reader: ViewReader) -> None:
    """Add ``POST /advisories`` to ``app``, reading the view through
    ``reader``'s ``redis.asyncio`` client (:class:`AdvisoryRoute`)."""
    shape = shaper(Advisories)

    async def advisories(body: AdvisoryRequest) -> Response:
        # On the event loop, its two Redis round trips awaited
        # (redis.asyncio): no hand-off to a worker thread, and one
        # request's wait on Redis overlaps another's work.
        """Advise a recall on up to 64 Experience revisions of one scope,
        from what the ledger published about each (never written, never
        decided here)."""
        if len(body.artifact_refs) > MAX_ADVISORY_REFS:
            detail = f"at most {MAX_ADVISORY_REFS} artifact_refs per request, not {len(body.artifact_refs)}: split the request"
            return JSONResponse({"detail": detail}, status_code=422)
        refs = body.model_dump()["artifact_refs"]
        found = await reader.bounded(read_advisory(reader.async_client(), reader.keys, body.scope_id, refs))
        payload = shape({
            "scope_id": found.scope_id, "known": found.known, "as_of_position": found.as_of_position, "advisories": found.advisories,
        })
        return Response(orjson.dumps(payload), media_type="application/json", headers={"Cache-Control": "no-store"})

    app.router.add_api_route("/advisories", advisories, methods=["POST"], response_model=Advisories, responses=ADVISORY_ERRORS,
                             tags=["advisory"], route_class_override=AdvisoryRoute)
