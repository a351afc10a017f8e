"""How the operator API answers: conditional requests (every JSON answer
carries an ``ETag``; a matching ``If-None-Match`` gets ``304 Not Modified``
with no body), ``X-As-Of-Position`` on the scope endpoints, the 404 of
something the view does not hold, the error responses every route
documents (:data:`ERRORS`, :data:`CONDITIONAL`), and the HTML pages from
the package's static files (:data:`STATIC_DIR`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel

from recurrence_ledger.api.schemas import ErrorBody

#: Directory of the dashboard's static files (package data), served under ``/static/``.
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

#: Headers of every HTML page (``/``, ``/review``, ``/timeline``; :func:`page`).
#: The pages keep the API token (and the review page a reviewer token) in
#: sessionStorage (see processors/recurrence_ledger/static/login.js),
#: which their scripts can read, so they allow no script, style, connection
#: or frame from anywhere but this service, and no inline script or handler:
#: an injected script could not load or send a token away.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

#: Headers of the documentation pages (``/docs`` Swagger UI, ``/redoc``,
#: the OAuth2 redirect; :class:`DocsHeaders`): never framed (a framed Swagger
#: UI could trick a user into typing a token into its Authorize dialog) and
#: never sniffed. Their inline scripts rule out the pages' script policy.
DOCS_HEADERS = {
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

#: The documented 400 / 404 / 503 answers of the scope endpoints.
ERRORS: dict[int, dict] = {
    400: {"model": ErrorBody, "description": "Unknown or bad query parameter"},
    404: {"model": ErrorBody, "description": "Unknown scope"},
    503: {"model": ErrorBody, "description": "Redis unavailable"},
}
#: The documented 304 of every JSON endpoint.
CONDITIONAL: dict[int, dict] = {304: {"description": "Not Modified: If-None-Match matched the current ETag"}}


@dataclass(frozen=True)
class RawJson:
    """A response body that is already JSON bytes (the view's canonical record)."""

    data: bytes


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 §13.1.2: ``If-None-Match`` matches when it is ``*`` or lists
    the tag under weak comparison (``W/`` ignored)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    wanted = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == wanted for tag in if_none_match.split(","))


def answer(body: BaseModel | RawJson | dict | None, etag: str, if_none_match: str | None, as_of: int | None) -> Response:
    """The JSON answer of ``body`` — a model, stored JSON bytes, or a dict
    already in its response model's shape (``recurrence_ledger.api.bodies``,
    written by orjson) — with its ``ETag`` (and
    ``X-As-Of-Position`` when ``as_of`` is not None); ``304 Not Modified``
    without a body when ``body`` is None or ``if_none_match`` matches
    ``etag``."""
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if as_of is not None:
        headers["X-As-Of-Position"] = str(as_of)
    if body is None or etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    if isinstance(body, dict):
        content = orjson.dumps(body)
    else:
        content = body.data if isinstance(body, RawJson) else body.model_dump_json()
    return Response(content, media_type="application/json", headers=headers)


def not_found(what: str, namespace: str) -> JSONResponse:
    """404 saying ``what`` the view of ``namespace`` does not hold."""
    return JSONResponse({"detail": f"{what} (not in the view {namespace})"}, status_code=404)


def unknown_scope(scope: str, namespace: str) -> JSONResponse:
    """404 for a scope the view of ``namespace`` does not hold."""
    return not_found(f"unknown scope {scope!r}", namespace)


def page(name: str) -> FileResponse:
    """The HTML page ``name`` of :data:`STATIC_DIR`, never cached without
    revalidation, with the pages' security headers (:data:`PAGE_HEADERS`):
    every page is answered here, so every page has them."""
    return FileResponse(STATIC_DIR / name, media_type="text/html", headers={"Cache-Control": "no-cache", **PAGE_HEADERS})


class DocsHeaders:
    """ASGI middleware adding :data:`DOCS_HEADERS` to the answers of the
    documentation pages ``paths`` (FastAPI serves them itself, so they
    cannot be answered by :func:`page`)."""

    def __init__(self, app, paths: frozenset[str]) -> None:  # noqa: ANN001 - an ASGI app
        self.app = app
        self.paths = paths
        self.headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in DOCS_HEADERS.items()]

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        if scope["type"] != "http" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message) -> None:  # noqa: ANN001 - ASGI
            if message["type"] == "http.response.start":
                names = {name for name, _ in self.headers}
                kept = [(name, value) for name, value in message.get("headers", []) if name.lower() not in names]
                message = {**message, "headers": [*kept, *self.headers]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
