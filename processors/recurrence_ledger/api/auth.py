"""Who may read, enforced on every request: the API token's constant-time
check (:class:`BearerToken`), the public paths (:func:`is_public`), the
``Host`` rule and the middleware in front of the app that applies them
(:class:`ReadSideGuard`), and the security headers of the dashboard page
(:data:`DASHBOARD_HEADERS`). What is configured, and its checks:
``recurrence_ledger.api.settings``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from fastapi.responses import JSONResponse

#: Paths that answer without the token when one is set: the health check,
#: and what holds no data of the view — the dashboard page and its static
#: files (a browser loads them before the page can ask for the token), the
#: documentation pages and the OpenAPI document (Swagger UI fetches it
#: without credentials; it describes the API's shapes, which the source
#: code publishes anyway). Everything else — every ``/scopes…`` endpoint and
#: any unknown path — answers 401 without ``Authorization: Bearer <token>``.
PUBLIC_PATHS = frozenset({"/healthz", "/", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
PUBLIC_PREFIXES = ("/static/", "/static-docs/")

#: Headers of the dashboard page. The page keeps the API token in
#: sessionStorage (see processors/recurrence_ledger/static/dashboard.js),
#: which its scripts can read, so it allows no script, style, connection or
#: frame from anywhere but this service: an injected script could not load
#: or send the token away.
DASHBOARD_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


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


class ReadSideGuard:
    """ASGI middleware in front of the app. With ``allowed_hosts``, a
    request whose ``Host`` is not one of them answers 400. With a ``token``,
    a request for a non-public path (:func:`is_public`) without it answers
    401 with ``WWW-Authenticate: Bearer`` — before routing, so unknown paths
    and bad parameters of an unauthenticated request answer 401 too and
    reveal nothing."""

    def __init__(self, app, token: BearerToken | None, allowed_hosts: Iterable[str] = ()):  # noqa: ANN001 - ASGI app
        self.app = app
        self.token = token
        self.allowed_hosts = frozenset(host.lower() for host in allowed_hosts)

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        if scope["type"] == "http":
            headers = scope["headers"]
            if self.allowed_hosts:
                host = next((value for name, value in headers if name == b"host"), b"")
                if host_name(host) not in self.allowed_hosts:
                    detail = "unexpected Host header: this API answers only " + ", ".join(sorted(self.allowed_hosts))
                    await JSONResponse({"detail": detail}, 400)(scope, receive, send)
                    return
            if self.token is not None and not is_public(scope["path"]) and not self.token.accepts(headers):
                challenge = 'Bearer realm="recurrence-ledger"'
                if BearerToken.presented(headers) is not None:
                    challenge += ', error="invalid_token"'
                body = {"detail": "missing or wrong API token: send Authorization: Bearer <token>"}
                await JSONResponse(body, 401, headers={"WWW-Authenticate": challenge})(scope, receive, send)
                return
        await self.app(scope, receive, send)
