"""The operator API and dashboard: a small ASGI service that reads the Redis
view of contract §8 (``recurrence_ledger.read.projection``) and serves it as JSON and as a
self-refreshing dashboard page.

Why a separate service and not the worker's web server: it scales
independently of the workers (as many replicas as readers need, none of them
in a consumer group or a Kafka transaction, so a slow dashboard can never slow
the ledger); it reads only Redis (never Kafka, never the ledger state), so it
shows exactly what the workers projected and recomputes no rule; and FastAPI
gives the OpenAPI document (``GET /openapi.json``) for free from the pydantic
response models (``recurrence_ledger.api.schemas``), which are the documented
shapes. Run it with ``recurrence-ledger serve`` (uvicorn) or ``uvicorn --factory
recurrence_ledger.api.app:create_app``. This module builds the app (middleware,
routers, error handlers, the OpenAPI document); the routes live in
``recurrence_ledger.api.routes``, one module per resource, and read the view
through ``recurrence_ledger.read.reader.ViewReader``.

Endpoints (JSON unless noted; every scope endpoint answers 404 for a scope
the view does not hold, 503 when Redis does not answer; every endpoint
answers 400 for a query parameter it does not take, naming it, and 401
without the API token when one is set — all but ``/healthz``, ``/`` and the
documentation, see below):

| method and path | response |
| --- | --- |
| ``GET /scopes?limit=N&offset=M&sort=…&filter=…&needs_review=…`` | ``ScopeList``: the scopes with their counters, paged (1 ≤ ``limit`` ≤ 1000, the default; ``total`` counts them all), sorted by ``sort`` (scope_id, needing_review, recurred, repeat_failure_rate) and filtered (``filter``: scope id substring; ``needs_review``), read through the scope index (``recurrence_ledger.read.history``) |
| history endpoints | ``…/revisions/{artifact_id}/{revision}/history``, ``/scopes/{scope}/trend``, the ``/timeline`` page: ``recurrence_ledger.api.routes.history`` |
| ``GET /patterns?group=…`` | ``PatternList``: one pattern group's signature patterns (contract §23), never a scope of another group; the ``/team-patterns`` page: ``recurrence_ledger.api.routes.patterns`` |
| review endpoints | ``GET /review-queue?status=…``, ``GET /review-candidates/{id}``, ``POST /review-candidates/{id}/decision`` (a reviewer token; publishes a ReviewDecision to Kafka, contract §18), the ``/review`` inbox page: ``recurrence_ledger.api.routes.review`` |
| ``GET /scopes/{scope}/statistics`` | ``ScopeStatistics``: the recurrence statistics block (contract §8) plus ``as_of_position``, ``pending_outcomes``, ``late_revisions`` — the scope's last statistics record, byte for byte the view's |
| ``GET /scopes/{scope}/revisions?sort=…&surface=…&low_yield=…&needs_review=…&limit=N&offset=M`` | ``RevisionList``: every revision of the scope (the view's revisions hash), filtered, sorted, paged; ``complete`` is true. ``sort`` ∈ {streak, recurred, yield, selected} (default streak), ``surface`` a repair_surface, ``low_yield`` / ``needs_review`` booleans, 1 ≤ ``limit`` ≤ 100 (default 10), 0 ≤ ``offset`` ≤ 1,000,000; anything else 400 |
| ``POST /advisories`` | ``Advisories``: the recall-time advisory, per asked revision of one scope what the ledger published about it and a one-line advice (body ``{scope_id, artifact_refs}``, at most 64 refs: ``recurrence_ledger.api.routes.advisories``) |
| ``GET /scopes/{scope}/review-candidates`` | ``ReviewList``: revisions needing review (the rows the ledger flagged ``needs_review``), from the view's review set, with the review threshold the ledger published in the record, and ``split``: every revision needing review by its newest candidate's status (waiting for a decision, decided, no candidate; ``recurrence_ledger.read.advisory.review_split``) |
| ``GET /`` | the dashboard page (HTML; ``/static/…`` its script, style and the bundled Chart.js; ``refresh`` and ``limit`` are read by its script) |
| ``GET /docs``, ``GET /redoc`` | the API's documentation pages (Swagger UI, ReDoc), their scripts served from the fastapi-offline package under ``/static-docs/``: no CDN |
| ``GET /healthz`` | ``Health``: 200 when Redis answers, else 503 |
| ``GET /field-catalogue`` | ``FieldCatalogue``: the published records' fields with their titles and descriptions, and the eleven unknown reasons of contract §17 with their family and suspect flag (``recurrence_ledger.ledger.records``) |
| ``GET /openapi.json`` | FastAPI's OpenAPI 3.1 document |

Polling: every response of the JSON endpoints carries an ``ETag`` that
covers everything its body is made of, and the scope endpoints
``X-As-Of-Position``: ``/statistics`` a digest of the scope's stored record
(its whole body); ``/review-candidates`` a digest of that record, the
sorted set, the review set and the stored review threshold (all written in
one MULTI/EXEC and read in one); ``/revisions`` a digest of the record and
of every row of the scope's revisions hash (read in one MULTI/EXEC);
``GET /scopes`` a digest of the number of scopes and every record of the
page. A request whose ``If-None-Match`` matches gets ``304 Not Modified``
with no body. Bad query parameters answer 400 (not FastAPI's default 422)
with ``{"detail": [...]}``.

Each revision row carries, besides its streak, the revision's figures:
``repair_surface`` (null when the revision's surface is unknown),
``selected`` / ``recurred`` / ``avoided`` counts, ``yield`` = avoided /
(avoided + recurred) (null without terminal verdicts) and ``low_yield``
(surfaced only). ``/revisions`` reads them from the revision's last
RevisionStatistics record (every revision with a selection or a verdict); ``/review-candidates`` from the statistics record's
``top_revisions`` rows, so it only knows the worker's top N
(``--top-revisions``) and says ``complete: false`` when more revisions need
review — ``/revisions?needs_review=true`` lists them all. What the view does
not hold, and so this API does not show: the ReviewCandidate records
themselves (reason, failure_refs), which live on the ``review-candidates``
topic.

Who may read (``recurrence_ledger.api.settings.ApiSettings``; ``serve`` in
``recurrence_ledger.cli.ops`` decides; ``recurrence_ledger.api.auth``
enforces): with an API token (``RL_API_TOKEN`` or ``RL_API_TOKEN_FILE``)
every request answers 401 with ``WWW-Authenticate: Bearer`` unless it
carries ``Authorization: Bearer <token>`` — compared in constant time
(``BearerToken``) — except the public paths (``PUBLIC_PATHS``:
``/healthz``, the dashboard pages (``/``, ``/review``, ``/timeline``, ``/team-patterns``) and their static files, the documentation
pages and ``/openapi.json``, none of which holds data of the view). The
check runs before routing (``ReadSideGuard``), so an unauthenticated
request learns nothing, not even whether a path or parameter exists. No
CORS header is sent unless origins are configured (``cors_origins``; GET
with the Authorization and If-None-Match headers, ETag and X-As-Of-Position
exposed, no credentials). Without a token ``serve`` binds loopback only and
answers only loopback ``Host`` names (``allowed_hosts``).

Bounds: every response is bounded whatever the view holds — ``/scopes``
at most 1000 scope summaries, ``/revisions`` at most 100 rows,
``/review-candidates`` at most the worker's ``--top-revisions`` rows,
``/statistics`` one record (its ``top_revisions`` at most that N); offsets
above 1,000,000 and any unknown query parameter answer 400 on every route
(``recurrence_ledger.api.params``); and every request body is bounded by
the bytes read, chunked or not, before anything parses it (413:
``recurrence_ledger.api.limits``).

Who may decide: a review decision needs a reviewer token (``serve
--reviewer-tokens FILE`` / ``RL_REVIEWER_TOKENS_FILE``, each token naming
its reviewer), never the read token; the API publishes the decision to the
deployment's ``review-decisions`` topic (``KAFKA_BOOTSTRAP_SERVERS``,
``KAFKA_CONFIG_FILE``, ``SCHEMA_REGISTRY_URL``, ``RL_TOPIC_PREFIX``) and
writes nothing itself but the answer of a request with an
``Idempotency-Key`` (``recurrence_ledger.api.idempotency``). Without
reviewer tokens it takes no decision.

Configuration (environment, or ``ApiSettings``): ``REDIS_URL`` (default
``redis://127.0.0.1:6379/0``; ``redis://user:password@host:port/db`` for an
ACL user, ``rediss://…`` for TLS with ``RL_REDIS_CA_FILE`` or the URL's
``ssl_ca_certs``) and ``RL_TOPIC_PREFIX`` (the namespace is
``recurrence_ledger.read.keys.default_namespace(prefix)``, as the worker names it).
The review threshold is not configured here: it is the workers' policy
(``--review-threshold``), which the worker stores with each scope in the
view (``recurrence_ledger.read.projection``); the API shows that value.

The dashboard uses Chart.js 4.6.1 (MIT), the npm package's
``dist/chart.umd.min.js`` committed unchanged as
``processors/recurrence_ledger/static/vendor/chart.umd.min.js``: no CDN, no build step.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import redis
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.middleware.cors import CORSMiddleware

from recurrence_ledger.api.auth import BearerToken, ReadSideGuard, ReviewerTokens, is_decision, is_public
from recurrence_ledger.api.limits import BodyLimit
from recurrence_ledger.api.metrics import ApiMetrics, RequestMetrics
from recurrence_ledger.api.params import known_query_only
from recurrence_ledger.api.responses import STATIC_DIR, DocsHeaders
from recurrence_ledger.api.routes import advisories, history, holdout, patterns, review, revisions, scopes, service
from recurrence_ledger.api.settings import ApiSettings, api_token_from_env, check_api_token, check_origin, kafka_from_env, reviewer_tokens_from_env
from recurrence_ledger.api.transport import ServeLimits, http_protocol
from recurrence_ledger.read.connect import describe_error
from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.read.patterns import PatternView
from recurrence_ledger.read.reader import ViewReader
from recurrence_ledger.kafka.review import DecisionPublisher

#: Where the documentation pages' assets (Swagger UI, ReDoc) are served from.
DOCS_STATIC_URL = "/static-docs"
#: The documentation pages: Swagger UI and ReDoc.
DOCS_URL, REDOC_URL = "/docs", "/redoc"


class HeadAsGet:
    """ASGI middleware: a ``HEAD`` request is answered as the same ``GET``
    (status, headers, ``Content-Length`` included) without the body (RFC
    9110 §9.3.2) — FastAPI routes a GET route's HEAD to 405, and a load
    balancer probing ``/healthz`` with HEAD would take the API for down."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def without_body(message: dict) -> None:
            await send({**message, "body": b""} if message["type"] == "http.response.body" else message)

        await self.app({**scope, "method": "GET"}, receive, without_body)


def create_app(settings: ApiSettings | None = None) -> FastAPI:
    """The FastAPI application (``settings`` None: ``ApiSettings.from_env()``
    with the token of RL_API_TOKEN / RL_API_TOKEN_FILE, the reviewer tokens
    of RL_REVIEWER_TOKENS_FILE and, with them, the Kafka connection of the
    process settings, which is how ``uvicorn --factory`` runs it). Never
    connects to Redis or Kafka here: a request that finds one down answers
    503. Raises ValueError for an unfit token or CORS origin, a bad Redis
    URL or CA file, reviewer tokens without Kafka (:func:`decision_publisher`)."""
    if settings is None:
        tokens = reviewer_tokens_from_env()
        settings = ApiSettings.from_env(api_token=api_token_from_env(), reviewer_tokens=tokens or None, kafka=kafka_from_env() if tokens else None)
    token = BearerToken(check_api_token(settings.api_token)) if settings.api_token is not None else None
    reviewers = ReviewerTokens(settings.reviewer_tokens)
    publisher = decision_publisher(settings)
    origins = [check_origin(origin) for origin in settings.cors_origins]
    reader = ViewReader(settings.redis_url, settings.resolved_namespace, ca_file=settings.redis_ca_file)
    # The read models kept by the view follower (history, trend, review
    # queue, scope index), on the reader's connection pool.
    models = ReadModels(reader.client, settings.resolved_namespace)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await reader.aclose()
        reader.close()
        if publisher is not None:
            publisher.close()

    # FastAPIOffline: FastAPI whose /docs (Swagger UI) and /redoc pages load
    # their scripts from the fastapi-offline package, not from a CDN.
    app = FastAPIOffline(
        lifespan=lifespan,
        title="recurrence-ledger",
        version="0.1.0",
        summary="Recurrence statistics of every scope, read from the Redis view (contract §8).",
        description=(__doc__ or "").split("\n\n")[0],
        static_url=DOCS_STATIC_URL,
        docs_url=DOCS_URL,
        redoc_url=REDOC_URL,
        favicon_url="data:,",
        swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from an outside validator
        dependencies=[Depends(known_query_only)],
    )
    app.state.settings = settings
    app.state.reader = reader
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    # The guard first (inner), CORS around it: preflight requests carry no
    # token, and a 401 must carry the CORS headers for a configured origin's
    # page to read it. Without origins there is no CORS middleware at all,
    # so no response has an Access-Control-Allow-Origin header.
    # Innermost, behind the guard: every request body bounded by the bytes
    # read (recurrence_ledger.api.limits), so a refused request reads none.
    app.add_middleware(BodyLimit)
    app.add_middleware(DocsHeaders, paths=frozenset({DOCS_URL, REDOC_URL, app.swagger_ui_oauth2_redirect_url}))
    app.add_middleware(ReadSideGuard, token=token, allowed_hosts=settings.allowed_hosts, reviewers=reviewers)
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET"],
            allow_headers=["Authorization", "If-None-Match"],
            expose_headers=["ETag", "X-As-Of-Position"],
            allow_credentials=False,  # the token is a header the page sends, never a cookie
            max_age=600,
        )
    # A HEAD request answered as its GET without the body, behind the guard's
    # rules for a GET: load balancers and uptime checks probe with HEAD.
    app.add_middleware(HeadAsGet)
    # Outermost: every request counted and timed, the refused ones too
    # (recurrence_ledger.api.metrics; served by serve --metrics-port).
    app.state.metrics = ApiMetrics()
    app.add_middleware(RequestMetrics, metrics=app.state.metrics, routes=app.routes)
    # The advisory first: a request is matched against the routes in order,
    # and POST /advisories is the one called hundreds of times a second.
    advisories.register(app, reader)
    app.include_router(history.router(models, settings.topic_prefix))
    app.include_router(review.router(models, publisher))
    scopes.register(app, reader, models)
    revisions.register(app, reader)
    service.register(app, reader, settings.redis_url, token)
    holdout.register(app)
    patterns.register(app, PatternView(reader.client, settings.resolved_namespace))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, error: RequestValidationError) -> JSONResponse:
        # Bad parameters are the client's error in plain HTTP terms: 400, not 422.
        # A body that is no JSON says why (api.params.strict_json: the contract §9 reason).
        detail = [{"loc": list(e["loc"]), "msg": f"{e['msg']}: {e['ctx']['error']}" if e["type"] == "json_invalid" and "ctx" in e else e["msg"],
                   "type": e["type"]} for e in error.errors()]
        return JSONResponse({"detail": detail}, status_code=400)

    @app.exception_handler(redis.RedisError)
    async def redis_down(_request: Request, error: redis.RedisError) -> JSONResponse:
        return JSONResponse({"detail": f"Redis unavailable: {describe_error(error, settings.redis_url)}"}, status_code=503)

    def openapi() -> dict:
        # FastAPI documents 422 for every route with parameters; this API
        # answers 400 instead (see bad_request), so the document says so.
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary, description=app.description, routes=app.routes)
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    # FastAPI's own 422 (a validation error) goes; a 422 a route documents itself stays
                    # (POST /advisories: more refs than it takes).
                    if operation.get("responses", {}).get("422", {}).get("description") == "Validation Error":
                        operation["responses"].pop("422")
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            if token is not None:
                # Swagger UI's Authorize button, and the 401 of every protected operation.
                schema.setdefault("components", {}).setdefault("securitySchemes", {})["bearerAuth"] = {
                    "type": "http", "scheme": "bearer", "description": "The API token (serve: RL_API_TOKEN or --token-file)."
                }
                for route_path, path in schema.get("paths", {}).items():
                    if is_public(route_path):
                        continue
                    for method, operation in path.items():
                        if not is_decision(method.upper(), route_path):
                            operation["security"] = [{"bearerAuth": []}]
                            operation.setdefault("responses", {})["401"] = {"description": "Missing or wrong API token (WWW-Authenticate: Bearer)"}
            # A decision always needs a reviewer token (without reviewer tokens it is refused: 403).
            schema.setdefault("components", {}).setdefault("securitySchemes", {})["reviewerAuth"] = {
                "type": "http", "scheme": "bearer", "description": "A reviewer token (serve: --reviewer-tokens FILE); never the read token.",
            }
            for route_path, path in schema.get("paths", {}).items():
                for method, operation in path.items():
                    if is_decision(method.upper(), route_path):
                        operation["security"] = [{"reviewerAuth": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def decision_publisher(settings: ApiSettings) -> DecisionPublisher | None:
    """The publisher of review decisions of ``settings`` (None without
    reviewer tokens; never connects here). Raises ValueError for reviewer
    tokens without a Kafka connection, or one that is the API token, and
    for unusable Schema Registry settings."""
    if not settings.reviewer_tokens:
        return None
    if settings.kafka is None:
        raise ValueError("reviewer tokens need Kafka to publish the decisions on: set --bootstrap / KAFKA_BOOTSTRAP_SERVERS (or a --kafka-config file)")
    if settings.api_token is not None and any(token == settings.api_token for _, token in settings.reviewer_tokens):
        raise ValueError("a reviewer token is the API token: the read token may never decide; give the reviewer another token")
    from recurrence_ledger.serde.codec import make_codec
    from recurrence_ledger.serde.registry import registry_settings

    codec = make_codec(registry_settings(settings.schema_registry_url))
    return DecisionPublisher(settings.kafka, settings.topic_prefix, codec)


def serve(settings: ApiSettings, host: str = "127.0.0.1", port: int = 8080, log_level: str = "info", access_log: bool = False,
          limits: ServeLimits | None = None, metrics: tuple[int, str] | None = None) -> None:
    """Run the API with uvicorn until SIGINT/SIGTERM: one process, uvloop
    and httptools when installed (uvicorn's ``auto``), each response sent
    in one write and each request head bounded by ``limits`` (default
    :class:`ServeLimits`, with uvicorn's connection limits;
    ``recurrence_ledger.api.transport``), the access log only
    with ``access_log`` (``serve --access-log``), and with ``metrics``
    (``(port, host)``) the request metrics served there
    (``recurrence_ledger.api.metrics``; OSError when the port cannot be
    bound). When Redis does not answer at start, one warning line on
    stderr says so, and it serves anyway."""
    import gc

    import uvicorn

    app = create_app(settings)
    if metrics is not None:
        app.state.metrics.serve(*metrics)
    try:
        app.state.reader.ping()
    except redis.RedisError as error:
        # Said once, at start: serving goes on (every request that needs Redis answers 503 until it answers).
        print(f"warning: Redis does not answer ({describe_error(error, settings.redis_url)}): /healthz and every data path answer 503 "
              "until it does", file=sys.stderr, flush=True)
    # What is loaded by now lives as long as the process: out of the
    # collector's generations, each full collection has less to walk.
    gc.collect()
    gc.freeze()
    limits = limits or ServeLimits()
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=access_log, http=http_protocol(limits), **limits.uvicorn_options())
