"""Who may read and who may decide, enforced on every request: the API
token's constant-time check (:class:`BearerToken`), the reviewer tokens'
(:class:`ReviewerTokens`), the public paths (:func:`is_public`), the
decision path (:func:`is_decision`), the ``Host`` rule and the middleware
in front of the app that applies them (:class:`ReadSideGuard`). The
security headers of the pages: ``recurrence_ledger.api.responses.PAGE_HEADERS``. What
is configured, and its checks: ``recurrence_ledger.api.settings``.

A review decision (``POST /review-candidates/{id}/decision``, contract §18)
needs a reviewer token, never the read token: 401 without a token, 403 with
the read token or a token that is no reviewer's, before the body is read.
The reviewer's name (the token's, in the reviewer tokens file) is what the
decision records; the route finds it in ``request.state.reviewer``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable

from fastapi.responses import JSONResponse

#: Paths that answer without the token when one is set: the health check,
#: and what holds no data of the view — the dashboard pages (``/``, the
#: review inbox ``/review``, the timeline ``/timeline``, the team patterns
#: ``/team-patterns``: a browser's
#: navigation carries no header, so they load, then ask for the token) and
#: their static files, the
#: documentation pages and the OpenAPI document (Swagger UI fetches it
#: without credentials; it describes the API's shapes, which the source
#: code publishes anyway). Everything else — every ``/scopes…`` endpoint and
#: any unknown path — answers 401 without ``Authorization: Bearer <token>``.
PUBLIC_PATHS = frozenset({"/healthz", "/", "/review", "/timeline", "/team-patterns", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
PUBLIC_PREFIXES = ("/static/", "/static-docs/")

#: The path of a review decision (``POST``): guarded by the reviewer tokens.
DECISION_PATH = re.compile(r"/review-candidates/[^/]+/decision")


def is_decision(method: str, path: str) -> bool:
    """Whether a request posts a review decision (:data:`DECISION_PATH`)."""
    return method == "POST" and DECISION_PATH.fullmatch(path) is not None


def is_public(path: str) -> bool:
    """Whether ``path`` answers without the API token (:data:`PUBLIC_PATHS`)."""
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


class BearerToken:
    """The configured API token, compared in constant time: both sides are
    hashed with SHA-256 and the digests compared with
    ``hmac.compare_digest``, so neither the token's content nor its length
    shows in the response time."""

    def __init__(self, token: str):
        self._digest = hashlib.sha256(token.encode()).digest()

    @staticmethod
    def presented(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
        """The credentials of the first ``Authorization`` header when its
        scheme is Bearer (case-insensitive), else None."""
        for name, value in headers:
            if name.lower() == b"authorization":
                scheme, _, credentials = value.strip().partition(b" ")
                return credentials.strip() if scheme.lower() == b"bearer" and credentials.strip() else None
        return None

    def accepts(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """Whether ``headers`` (ASGI raw headers) carry the token."""
        presented = self.presented(headers)
        if presented is None:
            return False
        return hmac.compare_digest(hashlib.sha256(presented).digest(), self._digest)


def host_name(host_header: bytes) -> str:
    """The host of a ``Host`` header without port and brackets, lowercased
    (``[::1]:8080`` → ``::1``)."""
    host = host_header.decode("latin-1").strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class ReviewerTokens:
    """The reviewer tokens (``(name, token)`` pairs): :meth:`reviewer` finds
    the name of a presented token comparing it, in constant time, with
    every token (SHA-256 digests compared with ``hmac.compare_digest``, all
    of them whatever matched), so the response time tells nothing of which
    tokens exist."""

    def __init__(self, pairs: Iterable[tuple[str, str]]):
        self._digests = [(hashlib.sha256(token.encode()).digest(), name) for name, token in pairs]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def reviewer(self, presented: bytes) -> str | None:
        """The reviewer whose token ``presented`` is, or None."""
        wanted = hashlib.sha256(presented).digest()
        found = None
        for stored, name in self._digests:
            if hmac.compare_digest(wanted, stored) and found is None:
                found = name
        return found


class ReadSideGuard:
    """ASGI middleware in front of the app. With ``allowed_hosts``, a
    request whose ``Host`` is not one of them answers 400. A review
    decision (:func:`is_decision`) answers 403 without ``reviewers``, 401
    without a bearer token, 403 with the read ``token`` or another that is
    no reviewer's (its body's size is bounded behind the guard:
    ``recurrence_ledger.api.limits``); with a reviewer's token it goes on with the name in ``scope["state"]
    ["reviewer"]`` (``request.state.reviewer``). With a ``token``, a request
    for a non-public path (:func:`is_public`) without it answers 401 with
    ``WWW-Authenticate: Bearer`` — before routing, so unknown paths and bad
    parameters of an unauthenticated request answer 401 too and reveal
    nothing."""

    def __init__(self, app, token: BearerToken | None, allowed_hosts: Iterable[str] = (),  # noqa: ANN001 - ASGI app
                 reviewers: ReviewerTokens | None = None):
        self.app = app
        self.token = token
        self.allowed_hosts = frozenset(host.lower() for host in allowed_hosts)
        self.reviewers = reviewers or ReviewerTokens(())

    def _refuse_decision(self, scope) -> JSONResponse | None:  # noqa: ANN001 - ASGI scope
        """The answer refusing a decision request, or None (then the
        reviewer's name is in ``scope["state"]``)."""
        headers = scope["headers"]
        if not self.reviewers:
            return JSONResponse({"detail": "this API takes no review decisions: serve it with --reviewer-tokens FILE"}, 403)
        presented = BearerToken.presented(headers)
        if presented is None:
            body = {"detail": "a review decision needs a reviewer token: send Authorization: Bearer <reviewer token>"}
            return JSONResponse(body, 401, headers={"WWW-Authenticate": 'Bearer realm="recurrence-ledger reviewers"'})
        reviewer = self.reviewers.reviewer(presented)
        if reviewer is None:
            if self.token is not None and self.token.accepts(headers):
                return JSONResponse({"detail": "the read token may not decide: a review decision needs a reviewer token"}, 403)
            return JSONResponse({"detail": "not a reviewer token: a review decision needs a reviewer token"}, 403)
        scope.setdefault("state", {})["reviewer"] = reviewer
        return None

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        if scope["type"] == "http":
            headers = scope["headers"]
            if self.allowed_hosts:
                host = next((value for name, value in headers if name == b"host"), b"")
                if host_name(host) not in self.allowed_hosts:
                    detail = "unexpected Host header: this API answers only " + ", ".join(sorted(self.allowed_hosts))
                    await JSONResponse({"detail": detail}, 400)(scope, receive, send)
                    return
            if is_decision(scope["method"], scope["path"]):
                refusal = self._refuse_decision(scope)
                if refusal is not None:
                    await refusal(scope, receive, send)
                    return
            elif self.token is not None and not is_public(scope["path"]) and not self.token.accepts(headers):
                challenge = 'Bearer realm="recurrence-ledger"'
                if BearerToken.presented(headers) is not None:
                    challenge += ', error="invalid_token"'
                body = {"detail": "missing or wrong API token: send Authorization: Bearer <token>"}
                await JSONResponse(body, 401, headers={"WWW-Authenticate": challenge})(scope, receive, send)
                return
        await self.app(scope, receive, send)
