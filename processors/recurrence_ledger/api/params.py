"""The parameters every route of the operator API shares: the bounds of
its paged endpoints, the ``If-None-Match`` header, the scope id in a path,
:func:`known_query_only`, the dependency that makes an undeclared query
parameter a 400 on every route, and the JSON request bodies:
:func:`strict_json` (contract §9's reading), :class:`StrictJsonRoute` (a
route whose body parameter is read with it) and :func:`model_body` (the
same without FastAPI's generic request path, for less CPU).

Bounds: every response is bounded whatever the view holds, and an offset
above :data:`MAX_OFFSET` is a client's error (400), not an empty page.
"""

from __future__ import annotations

import email.message
import json
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

from fastapi import Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from recurrence_ledger.ledger.intake import BadRecord, decode_json
from recurrence_ledger.ledger.models import MAX_ID_LENGTH

#: Largest ``limit`` of ``GET /scopes/{scope}/revisions``.
MAX_LIMIT = 100
#: Default ``limit`` of ``GET /scopes/{scope}/revisions``: a page size of
#: the API, not the workers' ``--top-revisions`` (``policy.TOP_REVISIONS``),
#: which the endpoint does not depend on (the view's revisions hash holds
#: every revision).
DEFAULT_REVISIONS_LIMIT = 10
#: Largest ``limit`` (and the default) of ``GET /scopes``.
MAX_SCOPES_LIMIT = 1000
#: Largest ``limit`` of the history and the trend (the default N kept).
MAX_HISTORY_LIMIT = 1000
#: Largest ``limit`` of the review queue.
MAX_QUEUE_LIMIT = 200
#: Largest ``offset`` of the paged endpoints: beyond any real deployment, so
#: a larger one is a client's error (400), not an empty page.
MAX_OFFSET = 1_000_000
#: Largest position (Avro long).
MAX_POSITION = 2**63 - 1

ModelT = TypeVar("ModelT", bound=BaseModel)

IfNoneMatch = Annotated[str | None, Header(description="An ETag from an earlier response: 304 when unchanged.")]
#: A scope id in a path: no longer than a scope id can be (ledger.models.MAX_ID_LENGTH), so
#: a longer one answers 400 rather than a 404 quoting it back.
ScopeId = Annotated[str, Path(max_length=MAX_ID_LENGTH, description=f"The scope id (at most {MAX_ID_LENGTH} characters).")]
#: An artifact id in a path, bounded as a scope id.
ArtifactIdPath = Annotated[str, Path(max_length=MAX_ID_LENGTH, description=f"The artifact id (at most {MAX_ID_LENGTH} characters).")]
#: A scope id as a query parameter (``?scope=``), bounded the same way.
ScopeQuery = Annotated[str | None, Query(max_length=MAX_ID_LENGTH, description=f"Only this scope's (at most {MAX_ID_LENGTH} characters).")]

_known_query: dict[int, frozenset[str]] = {}


def _query_names(dependant) -> frozenset[str]:  # noqa: ANN001 - fastapi.dependencies.models.Dependant
    """The query parameter names a route's dependant declares, its
    sub-dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return frozenset(names)


async def known_query_only(request: Request) -> None:
    """Every route's dependency: a query parameter the endpoint does not
    declare is a client error (400 naming it), never silently ignored; so
    is one given more than once (``?limit=1&limit=500``: no parameter of
    the API takes a list, and reading the last would be a guess — as a
    request body with a repeated key is refused). Raises
    RequestValidationError."""
    route = request.scope.get("route")
    known = _known_query.get(id(route))
    if known is None:
        dependant = getattr(route, "dependant", None)
        known = _query_names(dependant) if dependant is not None else frozenset()
        _known_query[id(route)] = known
    given = Counter(name for name, _ in request.query_params.multi_items())
    unknown = [name for name in given if name not in known]
    if unknown:
        takes = f"this endpoint takes {', '.join(sorted(known))}" if known else "this endpoint takes none"
        raise RequestValidationError(
            [{"loc": ("query", name), "msg": f"unknown query parameter {name!r}; {takes}", "type": "unknown_parameter"} for name in unknown]
        )
    repeated = [name for name, count in given.items() if count > 1]
    if repeated:
        raise RequestValidationError(
            [{"loc": ("query", name), "msg": f"query parameter {name!r} given {given[name]} times: give it once", "type": "repeated_parameter"}
             for name in repeated]
        )


def strict_json(raw: bytes) -> Any:
    """A JSON request body read as the ledger reads a JSON record (contract
    §9, ``recurrence_ledger.ledger.intake.decode_json``): UTF-8, no
    repeated key in an object, no NaN or Infinity, integers in the signed
    64-bit range, bounded nesting — so an ambiguous body (a decision that
    says both approved and rejected) is refused, never read one way.
    Raises json.JSONDecodeError naming the §9 reason, which FastAPI (and
    :func:`model_body`) answer with a 400."""
    try:
        return decode_json(raw)
    except BadRecord as error:
        raise json.JSONDecodeError(f"{error.message} ({error.reason}, contract §9)", "", 0) from None


class StrictJsonRequest(Request):
    """A request whose JSON body FastAPI reads with :func:`strict_json`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = strict_json(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """A route whose JSON body parameter is read with :func:`strict_json`
    (FastAPI's "custom Request and APIRoute class" pattern); everything
    else as FastAPI does it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return handle


async def model_body(request: Request, model: type[ModelT]) -> ModelT:
    """The request's JSON body as ``model``, as FastAPI's body parameter
    of a :class:`StrictJsonRoute` gives it — the same bodies taken, the
    same RequestValidationError (locations under ``body``: a 400) for the
    others: a body with a JSON content type is read with
    :func:`strict_json`, any other is handed to the model as its bytes
    (which it refuses)."""
    raw = await request.body()
    if not raw:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    value: Any = raw
    if _is_json(request.headers.get("content-type")):
        try:
            value = strict_json(raw)
        except json.JSONDecodeError as error:
            raise RequestValidationError(
                [{"type": "json_invalid", "loc": ("body", error.pos), "msg": "JSON decode error", "input": {}, "ctx": {"error": error.msg}}]
            ) from None
    try:
        return model.model_validate(value, from_attributes=True)
    except ValidationError as error:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in error.errors()]) from None


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of ``content_type`` as JSON
    (``application/json`` or ``application/…+json``; none: no)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))
