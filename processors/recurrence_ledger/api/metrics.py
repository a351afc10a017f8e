"""Prometheus metrics of ``serve`` (prometheus-client), served as text on
``serve --metrics-port`` — a port of their own, as the worker's and the
view follower's are, so that the API's token never guards them and a
scraper never reaches the API through them.

| metric | type | labels | meaning |
| --- | --- | --- | --- |
| ``recurrence_ledger_api_requests_total`` | counter | method, route, status | requests answered, by HTTP method (``other`` for one not in :data:`METHODS`), route and status code |
| ``recurrence_ledger_api_request_seconds`` | histogram | method, route | a request's arrival at the app → its response's last byte handed to the server |
| ``recurrence_ledger_api_requests_in_progress`` | gauge | | requests being answered |

``route`` is the path template of the route that answered
(``/scopes/{scope:path}/statistics``), never the requested path, so a
scraper sees one series per route and status however many scopes and
bad paths are asked for: ``/static`` for the dashboard's files,
``unmatched`` for a path no route has (404). A request refused before
routing (401 without the token, 400 for a bad ``Host``, 413 for a body
too large) still counts under the route it asked for.

What the middleware does not see: a request head uvicorn refuses itself
(431, 408: ``recurrence_ledger.api.transport``) never reaches the app.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from starlette.routing import Match

#: Seconds: an answer from Redis takes about a millisecond; a slow one, a second.
REQUEST_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
#: The route label of a path that no route has.
UNMATCHED = "unmatched"
#: The method labels; any other method is counted as ``other``.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ApiMetrics:
    """The API's metrics in their own registry (so that several apps in one
    process, as in the tests, do not collide): the module docstring's
    table."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("recurrence_ledger_api_requests", "HTTP requests answered, by method, route (path template) and status",
                                ["method", "route", "status"], registry=self.registry)
        self.seconds = Histogram("recurrence_ledger_api_request_seconds", "Seconds from a request's arrival to its response's last byte",
                                 ["method", "route"], buckets=REQUEST_BUCKETS_S, registry=self.registry)
        self.in_progress = Gauge("recurrence_ledger_api_requests_in_progress", "HTTP requests being answered", registry=self.registry)

    def serve(self, port: int, host: str) -> None:
        """Serve the registry as Prometheus text on ``host:port`` (a daemon
        thread; prometheus-client's server). Raises OSError when the port
        cannot be bound."""
        start_http_server(port, addr=host, registry=self.registry)


def route_label(scope: Scope, arrived: Scope, routes: list[Any]) -> str:
    """The ``route`` label of an answered request: the path template of the
    route the router matched (``scope["route"]``, which FastAPI sets),
    else of the first route whose path matches the request as it
    ``arrived`` (a copy of its scope before the app ran: a mount such as
    ``/static`` rewrites the scope; a request refused before routing),
    else :data:`UNMATCHED`."""
    route = scope.get("route")
    if route is not None:
        return route.path
    return _matching_path(arrived, routes) or UNMATCHED


def _matching_path(arrived: Scope, routes: list[Any]) -> str | None:
    """The path template of the first of ``routes`` that matches
    ``arrived``, looking into included routers (FastAPI 0.16x lists a
    router added with ``include_router`` as one entry without a ``path``,
    its own routes in ``original_router``); None when none does."""
    for candidate in routes:
        path = getattr(candidate, "path", None)
        if path is None:
            inner = getattr(candidate, "original_router", None)
            found = _matching_path(arrived, inner.routes) if inner is not None else None
            if found is not None:
                return found
            continue
        match, _ = candidate.matches(arrived)
        if match != Match.NONE:
            return path
    return None


class RequestMetrics:
    """ASGI middleware, the outermost: counts and times every HTTP request
    of the app ``app`` into ``metrics`` (``routes``: the app's routes, for
    :func:`route_label`)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], metrics: ApiMetrics, routes: list[Any]):
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        arrived = dict(scope)
        status = 500  # what the server answers when the app fails before it starts a response

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.metrics.in_progress.inc()
        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.in_progress.dec()
            route = route_label(scope, arrived, self.routes)
            method = scope["method"] if scope["method"] in METHODS else "other"
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.seconds.labels(method, route).observe(time.perf_counter() - started)
