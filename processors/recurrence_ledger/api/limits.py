"""Every request body bounded by the bytes read, before anything parses it:
:class:`BodyLimit`, the ASGI middleware in front of the routes, and the
caps per route (:func:`body_cap`).

Why by bytes read and not by ``Content-Length`` alone: a chunked request
(``Transfer-Encoding: chunked``) carries no length, so a check of the
header let any body through whole (64 MiB read into memory, a 1 MiB
decision accepted and published). The middleware refuses a declared
``Content-Length`` over the cap at once, and otherwise reads the body's
``http.request`` messages itself, counting their bytes, and answers 413
as soon as the count passes the cap — without asking for another byte.
Its 413 says ``Connection: close``, so the server closes the connection
instead of draining the rest of the body to keep it alive. A body within
the cap is handed to the route unchanged (it is at most the cap, a few
KiB to 128 KiB, held once).

And bounded in time: a client that trickles its body (a slowloris: a few
bytes now and then, or a ``Content-Length`` larger than what it sends)
held the request, its connection and the bytes buffered so far for as long
as it liked — uvicorn has no body read timeout. The whole body must arrive
within :data:`BODY_DEADLINE_S` seconds of the first read, else 408 with
``Connection: close``. (A client that trickles its *headers* never reaches
the app: ``serve``'s protocol bounds those, ``--header-timeout`` and
``--max-header-bytes``, recurrence_ledger.api.transport.)

The caps: a review decision (``POST /review-candidates/{id}/decision``)
:data:`MAX_DECISION_BODY`; an advisory (``POST /advisories``)
:data:`MAX_ADVISORY_BODY`; every other request :data:`MAX_OTHER_BODY` —
the API's other routes are GETs that read no body.
"""

from __future__ import annotations

import asyncio
import time

from fastapi.responses import JSONResponse

from recurrence_ledger.api.auth import is_decision

#: Largest body of a decision request (bytes): a reason has at most 16,384
#: characters (4 bytes each in UTF-8, escaped at most 6 bytes in JSON).
MAX_DECISION_BODY = 128 * 1024
#: Largest body of an advisory request (bytes): a scope id and 64
#: ArtifactRefs of ids up to 512 characters (4 bytes each in UTF-8),
#: with room for the JSON around them.
MAX_ADVISORY_BODY = 160 * 1024
#: The path of an advisory request (``POST``).
ADVISORY_PATH = "/advisories"
#: Largest body of any other request (bytes): they are GETs and HEADs,
#: which take none; a little is let through for clients that send one anyway.
MAX_OTHER_BODY = 1024
#: Seconds the whole request body may take to arrive (a decision's few KiB
#: take milliseconds; 128 KiB at 10 KiB/s take 13 s).
BODY_DEADLINE_S = 30.0


def body_cap(method: str, path: str) -> int:
    """The most bytes a request body of ``method`` ``path`` may have."""
    if is_decision(method, path):
        return MAX_DECISION_BODY
    return MAX_ADVISORY_BODY if method == "POST" and path == ADVISORY_PATH else MAX_OTHER_BODY


def too_slow(deadline_s: float) -> JSONResponse:
    """The 408 of a body that did not arrive within ``deadline_s`` seconds, closing the connection."""
    return JSONResponse({"detail": f"the request body did not arrive within {deadline_s:g} s"}, 408, headers={"Connection": "close"})


def too_large(cap: int) -> JSONResponse:
    """The 413 of a body over ``cap`` bytes, closing the connection."""
    return JSONResponse({"detail": f"a request body here has at most {cap} bytes"}, 413, headers={"Connection": "close"})


class BodyLimit:
    """ASGI middleware: a request whose body is over :func:`body_cap`
    bytes answers 413 (:func:`too_large`) — on its ``Content-Length``
    before a byte is read, else as soon as the bytes read pass the cap;
    one whose body takes longer than :data:`BODY_DEADLINE_S` answers 408
    (:func:`too_slow`). A
    request within the cap reaches ``app`` with its body replayed as one
    ``http.request`` message. A client that disconnects mid-body ends the
    request (nothing reaches ``app``)."""

    def __init__(self, app):  # noqa: ANN001 - ASGI app
        self.app = app

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = body_cap(scope["method"], scope["path"])
        length = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        if length is not None and (not length.strip().isdigit() or int(length) > cap):
            await too_large(cap)(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + BODY_DEADLINE_S
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                await too_slow(BODY_DEADLINE_S)(scope, receive, send)
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                await too_large(cap)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay():  # noqa: ANN202 - ASGI receive
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
