"""The operator API and dashboard: a small ASGI service that reads the Redis
view of contract §8 (``recurrence_ledger.view``) and serves it as JSON and as a
self-refreshing dashboard page.

Why a separate service and not the worker's web server: it scales
independently of the workers (as many replicas as readers need, none of them
in a consumer group or a Kafka transaction, so a slow dashboard can never slow
the ledger); it reads only Redis (never Kafka, never the ledger state), so it
shows exactly what the workers projected and recomputes no rule; and FastAPI
gives the OpenAPI document (``GET /openapi.json``) for free from the pydantic
response models below, which are the documented shapes. Run it with
``recurrence-ledger serve`` (uvicorn) or ``uvicorn --factory
recurrence_ledger.api:create_app``.

Endpoints (JSON unless noted; every scope endpoint answers 404 for a scope
the view does not hold, 503 when Redis does not answer; every endpoint
answers 400 for a query parameter it does not take, naming it):

| method and path | response |
| --- | --- |
| ``GET /scopes?limit=N&offset=M&sort=…&filter=…&needs_review=…`` | ``ScopeList``: the scopes with their counters, paged (1 ≤ ``limit`` ≤ 1000, the default; ``total`` counts them all), sorted by ``sort`` (scope_id, needing_review, recurred, repeat_failure_rate) and filtered (``filter``: scope id substring; ``needs_review``), read through the scope index (``recurrence_ledger.read_models``) |
| history endpoints | ``…/revisions/{artifact_id}/{revision}/history``, ``/scopes/{scope}/trend``, ``/review-queue``, the ``/timeline`` and ``/review`` pages: ``recurrence_ledger.api_history`` |
| ``GET /scopes/{scope}/statistics`` | ``ScopeStatistics``: the recurrence statistics block (contract §8) plus ``as_of_position``, ``pending_outcomes``, ``late_revisions`` — the scope's last statistics record, byte for byte the view's |
| ``GET /scopes/{scope}/revisions?sort=…&surface=…&low_yield=…&needs_review=…&limit=N&offset=M`` | ``RevisionList``: every revision of the scope (the view's revisions hash), filtered, sorted, paged; ``complete`` is true. ``sort`` ∈ {streak, recurred, yield, selected} (default streak), ``surface`` a repair_surface, ``low_yield`` / ``needs_review`` booleans, 1 ≤ ``limit`` ≤ 100 (default 10), 0 ≤ ``offset`` ≤ 1,000,000; anything else 400 |
| ``GET /scopes/{scope}/review-candidates`` | ``ReviewList``: revisions needing review, from the view's review set, with the review threshold the workers stored |
| ``GET /`` | the dashboard page (HTML; ``/static/…`` its script, style and the bundled Chart.js; ``refresh`` and ``limit`` are read by its script) |
| ``GET /docs``, ``GET /redoc`` | the API's documentation pages (Swagger UI, ReDoc), their scripts served from the fastapi-offline package under ``/static-docs/``: no CDN |
| ``GET /healthz`` | ``Health``: 200 when Redis answers, else 503 |
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

Configuration (environment, or ``ApiSettings``): ``REDIS_URL`` (default
``redis://127.0.0.1:6379/0``) and ``RL_TOPIC_PREFIX`` (the namespace is
``recurrence_ledger.view.default_namespace(prefix)``, as the worker names it).
The review threshold is not configured here: it is the workers' policy
(``--review-threshold``), which the worker stores with each scope in the
view (``recurrence_ledger.view``); the API shows that value.

The dashboard uses Chart.js 4.6.1 (MIT), the npm package's
``dist/chart.umd.min.js`` committed unchanged as
``processors/static/vendor/chart.umd.min.js``: no CDN, no build step.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import orjson
import redis
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field

from recurrence_ledger.settings import DEFAULT_REDIS_URL, settings
from recurrence_ledger.view import COUNTER_FIELDS, default_namespace, escape_scope
from recurrence_ledger.ledger.models import ArtifactRef, RepairSurface, ScopeStatistics
from recurrence_ledger.ledger.statistics import rank_key

#: Directory of the dashboard's static files (package data).
STATIC_DIR = Path(__file__).resolve().parent / "static"

#: Largest ``limit`` of ``GET /scopes/{scope}/revisions``.
MAX_LIMIT = 100

#: Largest ``limit`` (and the default) of ``GET /scopes``.
MAX_SCOPES_LIMIT = 1000

#: Largest ``offset`` of the paged endpoints: beyond any real deployment, so
#: a larger one is a client's error (400), not an empty page.
MAX_OFFSET = 1_000_000

#: Seconds for connect and for each Redis reply: a dashboard must see an
#: outage quickly rather than hang.
REDIS_TIMEOUT_S = 2.0

#: The revision figures a ``top_revisions`` row carries besides its streak
#: (``recurrence_ledger.ledger.statistics.revision_figures``).
FIGURE_FIELDS: tuple[str, ...] = ("repair_surface", "selected", "recurred", "avoided", "yield", "low_yield")


# ----------------------------------------------------------------- settings


@dataclass(frozen=True)
class ApiSettings:
    """Where the API reads from. ``namespace`` None means
    ``default_namespace(topic_prefix)``. No review threshold: the API shows
    the one the workers stored in the view."""

    redis_url: str = DEFAULT_REDIS_URL
    topic_prefix: str = ""
    namespace: str | None = None

    @classmethod
    def from_env(cls, **overrides) -> ApiSettings:
        """Settings from the process settings (REDIS_URL, RL_TOPIC_PREFIX;
        ``recurrence_ledger.settings``); keyword arguments that are not None
        win."""
        env = settings()
        values = {"redis_url": env.redis_url or cls.redis_url, "topic_prefix": env.topic_prefix}
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)

    @property
    def resolved_namespace(self) -> str:
        """The Redis key namespace (``rl``, or ``rl:<prefix>``)."""
        return self.namespace or default_namespace(self.topic_prefix)


# ----------------------------------------------------------------- reading the view


#: ``sort`` of ``GET /scopes`` (``recurrence_ledger.view.SCOPE_SORTS``).
ScopeSort = Literal["scope_id", "needing_review", "recurred", "repeat_failure_rate"]

#: ``sort`` of ``GET /scopes/{scope}/revisions``.
RevisionSort = Literal["streak", "recurred", "yield", "selected"]

#: Order of each ``sort``, every one ending in contract §8 order
#: (``recurrence_ledger.ledger.statistics.rank_key``, the one definition
#: that ``rank`` and the view use too) so that ties are decided the same way
#: everywhere:
#: ``streak`` is contract §8 order itself; ``recurred`` and ``selected`` put
#: the largest count first; ``yield`` puts the lowest yield first (the
#: revisions that help least) and revisions without a yield (no terminal
#: verdict) last.
REVISION_SORTS: dict[str, Callable[[dict], tuple]] = {
    "streak": rank_key,
    "recurred": lambda row: (-row["recurred"], *rank_key(row)),
    "selected": lambda row: (-row["selected"], *rank_key(row)),
    "yield": lambda row: (row["yield"] is None, row["yield"] or 0.0, *rank_key(row)),
}


def select_revisions(
    rows: Iterable[dict],
    sort: str = "streak",
    surface: str | None = None,
    low_yield: bool | None = None,
    needs_review: bool | None = None,
) -> list[dict]:
    """The RevisionStatistics rows that pass every given filter —
    ``repair_surface == surface``, ``low_yield == low_yield``,
    ``needs_review == needs_review``; None means no filter — in the order of
    ``sort`` (:data:`REVISION_SORTS`). Raises KeyError for an unknown sort."""
    order = REVISION_SORTS[sort]
    kept = [
        row
        for row in rows
        if (surface is None or row["repair_surface"] == surface)
        and (low_yield is None or row["low_yield"] == low_yield)
        and (needs_review is None or row["needs_review"] == needs_review)
    ]
    kept.sort(key=order)
    return kept


@dataclass(frozen=True)
class ScopeSnapshot:
    """One scope as the view holds it, read in one MULTI/EXEC (so the record,
    the sorted set and the review set belong to the same write).

    ``record``: the ScopeStatistics dict (contract §8). ``record_bytes``: the
    canonical JSON the view stored. ``top``: the sorted set's rows
    ``{artifact_ref, signature_key, terminal_recurred_streak}`` in contract §8
    order, each with the revision's figures (``FIGURE_FIELDS``) from the
    record's ``top_revisions`` row of the same revision. ``review``: the
    review set's members, as ``(artifact_ref tuple, signature_key)`` keys.
    ``review_threshold``: the threshold the writer (the worker) stored with
    the scope, which decided the review set; None for a view written before
    the threshold was stored. ``review_etag``: entity tag of the review list,
    a digest of everything it is made of (the stored record, the sorted
    set, the review set and the threshold).
    """

    record: dict
    record_bytes: bytes
    top: list[dict]
    review: frozenset = field(default_factory=frozenset)
    review_threshold: int | None = None
    review_etag: str = '""'

    @property
    def etag(self) -> str:
        """Strong entity tag of the statistics body: sha256 of the stored
        record, which is the whole body (quoted, 32 hex)."""
        return '"' + hashlib.sha256(self.record_bytes).hexdigest()[:32] + '"'

    def needs_review(self, row: dict) -> bool:
        """Whether a ``top`` row is in the view's review set."""
        return _row_key(row) in self.review


def _row_key(row: dict) -> tuple:
    ref = row["artifact_ref"]
    return (ref["family"], ref["artifact_id"], ref["revision"], row["signature_key"])


@dataclass(frozen=True)
class RevisionsSnapshot:
    """One scope's statistics record and every row of its revisions hash
   , read in one MULTI/EXEC.

    ``record``: the ScopeStatistics dict (contract §8). ``rows``: the
    RevisionStatistics dicts, in contract §8 order (:func:`rank_key`).
    ``etag``: a strong entity tag over the stored record and every stored
    row, so it changes whenever any revision's row or the record does.
    """

    record: dict
    rows: list[dict]
    etag: str


class ViewReader:
    """Read-only access to the Redis view of one namespace (key layout in
    ``recurrence_ledger.view``). Thread-safe (redis-py's connection pool); never
    writes. Every method raises ``redis.RedisError`` when Redis does not
    answer."""

    def __init__(self, url: str, namespace: str, socket_timeout: float = REDIS_TIMEOUT_S):
        self.namespace = namespace
        self._client = redis.Redis.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)

    def _key(self, scope_id: str) -> str:
        return f"{self.namespace}:scope:{escape_scope(scope_id)}"

    def ping(self) -> bool:
        """True when Redis answers PING."""
        return bool(self._client.ping())

    def scope_ids(self) -> list[str]:
        """Every scope id of the namespace, sorted."""
        return sorted(member.decode() for member in self._client.smembers(f"{self.namespace}:scopes"))

    def records(self, offset: int = 0, limit: int | None = None) -> tuple[int, dict[str, bytes]]:
        """``(scopes in the namespace, {scope_id -> stored record bytes})``
        for the scopes ``offset`` to ``offset + limit`` (all with ``limit``
        None) in scope id order, in one pipelined round trip after the scope
        set (a scope listed but without a hash — cleared meanwhile — is left
        out)."""
        every = self.scope_ids()
        scope_ids = every[offset : None if limit is None else offset + limit]
        pipe = self._client.pipeline(transaction=False)
        for scope_id in scope_ids:
            pipe.hget(self._key(scope_id), "record")
        return len(every), {scope_id: raw for scope_id, raw in zip(scope_ids, pipe.execute(), strict=True) if raw is not None}

    def snapshot(self, scope_id: str) -> ScopeSnapshot | None:
        """The scope's record, sorted set and review set from one MULTI/EXEC,
        or None when the view does not hold the scope."""
        key = self._key(scope_id)
        pipe = self._client.pipeline(transaction=True)
        pipe.hmget(key, "record", "review_threshold")
        pipe.zrange(f"{key}:top", 0, -1, withscores=True)
        pipe.smembers(f"{key}:review")
        (raw, threshold), scored, review = pipe.execute()
        if raw is None:
            return None
        digest = hashlib.sha256(raw)
        digest.update(b"\x00threshold\x00" + (threshold or b"none"))
        for member_, score in scored:
            digest.update(b"\x00top\x00" + member_ + b"\x00" + repr(score).encode())
        for member_ in sorted(review):
            digest.update(b"\x00review\x00" + member_)
        record = orjson.loads(raw)
        figures = {_row_key(row): row for row in record.get("top_revisions", [])}
        top = []
        for member, score in scored:
            row = orjson.loads(member)
            row["terminal_recurred_streak"] = int(score)
            full = figures.get(_row_key(row), {})
            row.update({name: full[name] for name in FIGURE_FIELDS if name in full})
            top.append(row)
        top.sort(key=rank_key)
        return ScopeSnapshot(
            record=record,
            record_bytes=raw,
            top=top,
            review=frozenset(_row_key(orjson.loads(member)) for member in review),
            review_threshold=int(threshold) if threshold is not None else None,
            review_etag='"' + digest.hexdigest()[:32] + '"',
        )

    def revisions(self, scope_id: str) -> RevisionsSnapshot | None:
        """The scope's record and every row of its revisions hash
        (``{ns}:scope:{scope}:revisions``) from one MULTI/EXEC, or
        None when the view does not hold the scope (no statistics record). A
        scope without a revisions hash has no rows."""
        key = self._key(scope_id)
        pipe = self._client.pipeline(transaction=True)
        pipe.hget(key, "record")
        pipe.hgetall(f"{key}:revisions")
        raw, stored = pipe.execute()
        if raw is None:
            return None
        digest = hashlib.sha256(raw)
        for field_name in sorted(stored):
            digest.update(b"\x00" + field_name + b"\x00" + stored[field_name])
        rows = sorted((orjson.loads(value) for value in stored.values()), key=rank_key)
        return RevisionsSnapshot(record=orjson.loads(raw), rows=rows, etag='"' + digest.hexdigest()[:32] + '"')

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


# ----------------------------------------------------------------- response shapes


class _Shape(BaseModel):
    model_config = ConfigDict(frozen=True)


class ScopeSummary(_Shape):
    """One scope's counters (contract §8): ledger facts (selected, recurred,
    avoided, needing_review), the evidence-coverage figures (unknown,
    unlinked_handoff_citations) and the operational gauges
    (pending_outcomes, late_revisions)."""

    scope_id: str
    as_of_position: int = Field(description="Highest journal position applied in the scope (pending outcomes included).")
    selected: int
    recurred: int
    avoided: int
    unknown: int = Field(description="Linked selections without a terminal verdict: an evidence gap, not a failure.")
    unlinked_handoff_citations: int = Field(description="Handoff citations no Task Outcome was linked through: provenance coverage, not a failure.")
    needing_review: int = Field(description="Revisions whose streak ≥ the review threshold (the true count, even beyond top_revisions).")
    pending_outcomes: int = Field(description="Gauge: outcomes waiting for their receipt, Handoff or cited Experience.")
    late_revisions: int = Field(description="Gauge: revisions that arrived after outcomes that could have cited them.")


class ScopeList(_Shape):
    """``GET /scopes``: the scopes of the namespace, sorted by scope_id,
    ``offset`` to ``offset + limit``; ``total``: scopes in the namespace."""

    total: int = Field(description="Scopes in the view.")
    limit: int
    offset: int
    sort: ScopeSort = "scope_id"
    filter: str | None = Field(None, description="The scope id substring filter, null when none.")
    needs_review: bool | None = Field(None, description="The needs_review filter, null when none.")
    available: int | None = Field(None, description="Scopes passing the filters (before offset and limit).")
    scopes: list[ScopeSummary]


class _Figures(_Shape):
    """The revision's figures: from its RevisionStatistics row
    (``/revisions``) or its ``top_revisions`` row (``/review-candidates``)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, serialize_by_alias=True)

    repair_surface: RepairSurface | None = Field(None, description="The revision's repair_surface (contract §3); null when the ledger does not know it.")
    selected: int = Field(0, description="Selections of the revision linked to a Task Outcome.")
    recurred: int = Field(0, description="Terminal recurred verdicts of the revision.")
    avoided: int = Field(0, description="Terminal avoided verdicts of the revision.")
    yield_: float | None = Field(None, alias="yield", description="avoided / (avoided + recurred), rounded to 4 decimals; null without terminal verdicts.")
    low_yield: bool = Field(False, description="selected ≥ 3 and yield < 0.3 (surfaced only, never retired: contract §14).")


class RevisionRow(_Figures):
    """One revision of the scope (its last RevisionStatistics record,
    contract §14) with its streak, review flag and figures."""

    rank: int = Field(description="1-based position in the requested order, after the filters (offset included).")
    artifact_ref: ArtifactRef
    signature_key: str
    terminal_recurred_streak: int = Field(description="Terminal recurred verdicts since the last avoided one (contract §8).")
    needs_review: bool = Field(description="Streak ≥ the workers' review threshold (contract §8), as the worker published it.")


class RevisionList(_Shape):
    """``GET /scopes/{scope}/revisions``: the rows of every revision
    of the scope with a selection or a verdict — not only the top N — that
    pass the filters, in the order of ``sort``, rows ``offset`` to
    ``offset + limit``. ``total``: revisions the view holds for the scope;
    ``available``: those passing the filters; ``complete``: the rows come
    from every revision of the scope (always true: the revisions view holds them all)."""

    scope_id: str
    as_of_position: int
    sort: RevisionSort = Field(
        description="streak: contract §8 order (streak desc, ArtifactRef, signature_key); recurred / selected: that count desc; "
        "yield: lowest first, null last; ties in contract §8 order."
    )
    surface: RepairSurface | None = Field(None, description="The repair_surface filter, null when none.")
    low_yield: bool | None = Field(None, description="The low_yield filter, null when none.")
    needs_review: bool | None = Field(None, description="The needs_review filter, null when none.")
    limit: int
    offset: int
    total: int = Field(description="Revisions of the scope in the view.")
    available: int = Field(description="Revisions passing the filters (before offset and limit).")
    complete: bool = Field(description="True: every revision of the scope is covered, not only the top N.")
    revisions: list[RevisionRow]


class ReviewRow(_Figures):
    """A revision needing review (member of the view's review set) with its
    figures; ``repair_surface`` says what to review."""

    artifact_ref: ArtifactRef
    signature_key: str
    terminal_recurred_streak: int


class ReviewList(_Shape):
    """``GET /scopes/{scope}/review-candidates``: the revisions needing review
    (streak ≥ the threshold, contract §8) from the view's review set, in
    contract §8 order, each with its repair_surface and figures. These are
    revisions, not ReviewCandidate records: the ReviewCandidate records
    themselves (one per run, experience_content only, with reason and
    failure_refs) live on the
    ``review-candidates`` topic. ``complete`` is false when more revisions
    need review (``needing_review``) than the view's top N holds."""

    scope_id: str
    as_of_position: int
    review_threshold: int | None = Field(
        description="The review threshold the workers applied (their --review-threshold), as they stored it in the view with the scope; "
        "it decided which revisions are listed. null when the view was written before the threshold was stored: rebuild it."
    )
    needing_review: int
    complete: bool
    revisions: list[ReviewRow]


class Health(_Shape):
    """``GET /healthz``: ``status`` ok (Redis answers) or unavailable."""

    status: Literal["ok", "unavailable"]
    redis: Literal["up", "down"]
    namespace: str
    detail: str | None = None


class ErrorBody(_Shape):
    """Error responses: 400 (``detail`` is a list of parameter errors), 404,
    503 (``detail`` is a message)."""

    detail: str | list[dict]


@dataclass(frozen=True)
class RawJson:
    """A response body that is already JSON bytes (the view's canonical record)."""

    data: bytes


# ----------------------------------------------------------------- conditional requests


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 §13.1.2: ``If-None-Match`` matches when it is ``*`` or lists
    the tag under weak comparison (``W/`` ignored)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    wanted = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == wanted for tag in if_none_match.split(","))


def list_etag(total: int, records: dict[str, bytes]) -> str:
    """Entity tag of a ``GET /scopes`` page: sha256 over the number of
    scopes and every (scope id, record) of the page."""
    digest = hashlib.sha256(b"%d\x00" % total)
    for scope_id, raw in records.items():
        digest.update(scope_id.encode() + b"\x00" + raw + b"\x00")
    return '"' + digest.hexdigest()[:32] + '"'


# ----------------------------------------------------------------- the app

IfNoneMatch = Annotated[str | None, Header(description="An ETag from an earlier response: 304 when unchanged.")]

#: Where the documentation pages' assets (Swagger UI, ReDoc) are served from.
DOCS_STATIC_URL = "/static-docs"

_known_query: dict[int, frozenset[str]] = {}


def _query_names(dependant) -> frozenset[str]:  # noqa: ANN001 - fastapi.dependencies.models.Dependant
    """The query parameter names a route's dependant declares, its
    sub-dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return frozenset(names)


def known_query_only(request: Request) -> None:
    """Every route's dependency: a query parameter the endpoint does not
    declare is a client error (400 naming it), never silently ignored.
    Raises RequestValidationError."""
    route = request.scope.get("route")
    known = _known_query.get(id(route))
    if known is None:
        dependant = getattr(route, "dependant", None)
        known = _query_names(dependant) if dependant is not None else frozenset()
        _known_query[id(route)] = known
    unknown = [name for name in dict.fromkeys(request.query_params.keys()) if name not in known]
    if unknown:
        takes = f"this endpoint takes {', '.join(sorted(known))}" if known else "this endpoint takes none"
        raise RequestValidationError(
            [{"loc": ("query", name), "msg": f"unknown query parameter {name!r}; {takes}", "type": "unknown_parameter"} for name in unknown]
        )


def create_app(settings: ApiSettings | None = None) -> FastAPI:
    """The FastAPI application (``settings`` None: ``ApiSettings.from_env()``).
    Never connects to Redis here: a request that finds it down answers 503."""
    settings = settings or ApiSettings.from_env()
    reader = ViewReader(settings.redis_url, settings.resolved_namespace)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        reader.close()

    # FastAPIOffline: FastAPI whose /docs (Swagger UI) and /redoc pages load
    # their scripts from the fastapi-offline package, not from a CDN.
    app = FastAPIOffline(
        lifespan=lifespan,
        title="recurrence-ledger",
        version="0.1.0",
        summary="Recurrence statistics of every scope, read from the Redis view (contract §8).",
        description=(__doc__ or "").split("\n\n")[0],
        static_url=DOCS_STATIC_URL,
        favicon_url="data:,",
        swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from an outside validator
        dependencies=[Depends(known_query_only)],
    )
    app.state.settings = settings
    app.state.reader = reader
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    errors = {
        400: {"model": ErrorBody, "description": "Unknown or bad query parameter"},
        404: {"model": ErrorBody, "description": "Unknown scope"},
        503: {"model": ErrorBody, "description": "Redis unavailable"},
    }
    conditional = {304: {"description": "Not Modified: If-None-Match matched the current ETag"}}
    # History endpoints and pages (recurrence_ledger.api_history): read models kept by the view follower.
    from recurrence_ledger.api_history import history_router
    from recurrence_ledger.read_models import ReadModels, page_etag

    app.include_router(history_router(reader._client, settings.resolved_namespace, settings.topic_prefix, errors, conditional))
    scope_index = ReadModels(reader._client, settings.resolved_namespace)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, error: RequestValidationError) -> JSONResponse:
        # Bad parameters are the client's error in plain HTTP terms: 400, not 422.
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()]
        return JSONResponse({"detail": detail}, status_code=400)

    @app.exception_handler(redis.RedisError)
    async def redis_down(_request: Request, error: redis.RedisError) -> JSONResponse:
        return JSONResponse({"detail": f"Redis unavailable: {type(error).__name__}: {error}"}, status_code=503)

    def not_found(scope: str) -> JSONResponse:
        return JSONResponse({"detail": f"unknown scope {scope!r} (not in the view {settings.resolved_namespace})"}, status_code=404)

    def answer(body: BaseModel | RawJson | None, etag: str, if_none_match: str | None, as_of: int | None) -> Response:
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if as_of is not None:
            headers["X-As-Of-Position"] = str(as_of)
        if etag_matches(if_none_match, etag):
            return Response(status_code=304, headers=headers)
        content = body.data if isinstance(body, RawJson) else body.model_dump_json()
        return Response(content, media_type="application/json", headers=headers)

    def snapshot_or_404(scope: str) -> ScopeSnapshot | JSONResponse:
        snap = reader.snapshot(scope)
        return not_found(scope) if snap is None else snap

    @app.get("/scopes", response_model=ScopeList, responses={**conditional, 400: errors[400], 503: errors[503]}, tags=["statistics"])
    def list_scopes(
        limit: Annotated[int, Query(ge=1, le=MAX_SCOPES_LIMIT, description=f"Scopes to return, 1–{MAX_SCOPES_LIMIT}.")] = MAX_SCOPES_LIMIT,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Scopes to skip first (paging).")] = 0,
        sort: Annotated[ScopeSort, Query(description="scope_id (default), or largest first: needing_review, recurred, repeat_failure_rate (null last); ties by scope_id.")] = "scope_id",
        filter: Annotated[str | None, Query(min_length=1, max_length=512, description="Only scopes whose id contains this text.")] = None,  # noqa: A002 - the parameter's name
        needs_review: Annotated[bool | None, Query(description="true: only scopes with needing_review > 0; false: only the others.")] = None,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """The scopes in the view with their counters, sorted by scope id (or
        ``sort``), filtered, paged (``total`` says how many there are,
        ``available`` how many pass the filters), from the scope index: a
        page never reads every scope's hash."""
        page = scope_index.scope_page(sort, filter, needs_review, offset, limit)
        total, records = page.total, page.records
        etag = page_etag(total, page.available, records)
        if etag_matches(if_none_match, etag):
            return answer(None, etag, if_none_match, None)
        scopes = []
        for raw in records.values():
            record = orjson.loads(raw)
            scopes.append(ScopeSummary(scope_id=record["scope_id"], **{name: record[name] for name in COUNTER_FIELDS}))
        body = ScopeList(total=total, limit=limit, offset=offset, sort=sort, filter=filter, needs_review=needs_review, available=page.available, scopes=scopes)
        return answer(body, etag, None, None)

    @app.get("/scopes/{scope:path}/statistics", response_model=ScopeStatistics, responses={**conditional, **errors}, tags=["statistics"])
    def scope_statistics(scope: str, if_none_match: IfNoneMatch = None) -> Response:
        """The scope's ScopeStatistics record (contract §8): the recurrence
        statistics block (selected, recurred, avoided, unknown,
        unlinked_handoff_citations, needing_review, top_revisions) plus
        as_of_position and the gauges pending_outcomes and late_revisions —
        the last record the workers published, as the view stores it."""
        snap = snapshot_or_404(scope)
        if isinstance(snap, JSONResponse):
            return snap
        if etag_matches(if_none_match, snap.etag):
            return answer(None, snap.etag, if_none_match, snap.record["as_of_position"])
        # The stored canonical JSON (contract §4) as is, once checked against its shape.
        ScopeStatistics.model_validate(snap.record)
        return answer(RawJson(snap.record_bytes), snap.etag, None, snap.record["as_of_position"])

    @app.get(
        "/scopes/{scope:path}/revisions",
        response_model=RevisionList,
        responses={**conditional, **errors, 400: {"model": ErrorBody, "description": "Unknown parameter, or bad sort, filter, limit or offset"}},
        tags=["statistics"],
    )
    def scope_revisions(
        scope: str,
        sort: Annotated[
            RevisionSort,
            Query(description="streak (contract §8 order), recurred or selected (count desc), yield (lowest first, null last); ties in contract §8 order."),
        ] = "streak",
        surface: Annotated[RepairSurface | None, Query(description="Only revisions with this repair_surface.")] = None,
        low_yield: Annotated[bool | None, Query(description="true: only low-yield revisions; false: only the others.")] = None,
        needs_review: Annotated[bool | None, Query(description="true: only revisions needing review; false: only the others.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Rows to return, 1–100.")] = 10,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description=f"Rows to skip first (paging), 0–{MAX_OFFSET:,}.")] = 0,
        if_none_match: IfNoneMatch = None,
    ) -> Response:
        """Every revision of the scope with a selection or a verdict (the
        view's revisions hash) — each with its streak, review flag,
        repair_surface, selected / recurred / avoided counts, yield and
        low_yield — filtered, sorted and paged."""
        snap = reader.revisions(scope)
        if snap is None:
            return not_found(scope)
        as_of = snap.record["as_of_position"]
        if etag_matches(if_none_match, snap.etag):
            return answer(None, snap.etag, if_none_match, as_of)
        selected = select_revisions(snap.rows, sort, surface, low_yield, needs_review)
        rows = [
            RevisionRow(rank=rank, **{name: value for name, value in row.items() if name != "scope_id"})
            for rank, row in enumerate(selected[offset : offset + limit], start=offset + 1)
        ]
        body = RevisionList(
            scope_id=scope, as_of_position=as_of, sort=sort, surface=surface, low_yield=low_yield, needs_review=needs_review,
            limit=limit, offset=offset, total=len(snap.rows), available=len(selected), complete=True, revisions=rows,
        )
        return answer(body, snap.etag, None, as_of)

    @app.get("/scopes/{scope:path}/review-candidates", response_model=ReviewList, responses={**conditional, **errors}, tags=["statistics"])
    def scope_review(scope: str, if_none_match: IfNoneMatch = None) -> Response:
        """Revisions needing review, from the view's review set, with their
        repair_surface and figures. The ReviewCandidate records themselves
        live on the review-candidates topic."""
        snap = snapshot_or_404(scope)
        if isinstance(snap, JSONResponse):
            return snap
        as_of = snap.record["as_of_position"]
        if etag_matches(if_none_match, snap.review_etag):
            return answer(None, snap.review_etag, if_none_match, as_of)
        rows = [ReviewRow(**row) for row in snap.top if snap.needs_review(row)]
        body = ReviewList(
            scope_id=scope,
            as_of_position=as_of,
            review_threshold=snap.review_threshold,
            needing_review=snap.record["needing_review"],
            complete=len(rows) >= snap.record["needing_review"],
            revisions=rows,
        )
        return answer(body, snap.review_etag, None, as_of)

    @app.get(
        "/healthz", response_model=Health, responses={400: errors[400], 503: {"model": Health, "description": "Redis does not answer"}}, tags=["service"]
    )
    def healthz() -> JSONResponse:
        """200 when Redis answers PING, else 503."""
        try:
            reader.ping()
        except redis.RedisError as error:
            body = Health(status="unavailable", redis="down", namespace=settings.resolved_namespace, detail=f"{type(error).__name__}: {error}")
            return JSONResponse(body.model_dump(), status_code=503)
        return JSONResponse(Health(status="ok", redis="up", namespace=settings.resolved_namespace).model_dump())

    @app.get("/", include_in_schema=False)
    def dashboard(
        refresh: Annotated[str | None, Query(description="Milliseconds between polls (read by the page's script).")] = None,
        limit: Annotated[str | None, Query(description="Revisions the page shows (read by the page's script).")] = None,
    ) -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html", headers={"Cache-Control": "no-cache"})

    def openapi() -> dict:
        # FastAPI documents 422 for every route with parameters; this API
        # answers 400 instead (see bad_request), so the document says so.
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary, description=app.description, routes=app.routes)
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    operation.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def serve(settings: ApiSettings, host: str = "127.0.0.1", port: int = 8080, log_level: str = "info") -> None:
    """Run the API with uvicorn until SIGINT/SIGTERM."""
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level)
