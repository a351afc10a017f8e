"""The operator API and dashboard: a small ASGI service that reads the Redis
view of contract §8 (``recurrence_ledger.read.projection``) and serves it as JSON and as a
self-refreshing dashboard page.

Why a separate service and not the worker's web server: it scales
independently of the workers (as many replicas as readers need, none of them
in a consumer group or a Kafka transaction, so a slow dashboard can never slow
the ledger); it reads only Redis (never Kafka, never the ledger state), so it
shows exactly what the workers projected and recomputes no rule; and FastAPI
gives the OpenAPI document (``GET /openapi.json``) for free from the pydantic
response models below, which are the documented shapes. Run it with
``recurrence-ledger serve`` (uvicorn) or ``uvicorn --factory
recurrence_ledger.api.app:create_app``.

Endpoints (JSON unless noted; every scope endpoint answers 404 for a scope
the view does not hold, 503 when Redis does not answer; every endpoint
answers 400 for a query parameter it does not take, naming it, and 401
without the API token when one is set — all but ``/healthz``, ``/`` and the
documentation, see below):

| method and path | response |
| --- | --- |
| ``GET /scopes?limit=N&offset=M&sort=…&filter=…&needs_review=…`` | ``ScopeList``: the scopes with their counters, paged (1 ≤ ``limit`` ≤ 1000, the default; ``total`` counts them all), sorted by ``sort`` (scope_id, needing_review, recurred, repeat_failure_rate) and filtered (``filter``: scope id substring; ``needs_review``), read through the scope index (``recurrence_ledger.read.history``) |
| history endpoints | ``…/revisions/{artifact_id}/{revision}/history``, ``/scopes/{scope}/trend``, ``/review-queue``, the ``/timeline`` and ``/review`` pages: ``recurrence_ledger.api.history`` |
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

Who may read (``ApiSettings``; ``serve`` in ``recurrence_ledger.cli.ops``
decides): with an API token (``RL_API_TOKEN`` or ``RL_API_TOKEN_FILE``)
every request answers 401 with ``WWW-Authenticate: Bearer`` unless it
carries ``Authorization: Bearer <token>`` — compared in constant time
(:class:`BearerToken`) — except the public paths (:data:`PUBLIC_PATHS`:
``/healthz``, the dashboard page and its static files, the documentation
pages and ``/openapi.json``, none of which holds data of the view). The
check runs before routing (:class:`ReadSideGuard`), so an unauthenticated
request learns nothing, not even whether a path or parameter exists. No
CORS header is sent unless origins are configured (``cors_origins``; GET
with the Authorization and If-None-Match headers, ETag and X-As-Of-Position
exposed, no credentials). Without a token ``serve`` binds loopback only and
answers only loopback ``Host`` names (``allowed_hosts``).

Bounds: every response is bounded whatever the view holds — ``/scopes``
at most 1000 scope summaries, ``/revisions`` at most 100 rows,
``/review-candidates`` at most the worker's ``--top-revisions`` rows,
``/statistics`` one record (its ``top_revisions`` at most that N); offsets
above 1,000,000 and any unknown query parameter answer 400 on every route.

Configuration (environment, or ``ApiSettings``): ``REDIS_URL`` (default
``redis://127.0.0.1:6379/0``; ``redis://user:password@host:port/db`` for an
ACL user, ``rediss://…`` for TLS with ``RL_REDIS_CA_FILE`` or the URL's
``ssl_ca_certs``) and ``RL_TOPIC_PREFIX`` (the namespace is
``recurrence_ledger.read.projection.default_namespace(prefix)``, as the worker names it).
The review threshold is not configured here: it is the workers' policy
(``--review-threshold``), which the worker stores with each scope in the
view (``recurrence_ledger.read.projection``); the API shows that value.

The dashboard uses Chart.js 4.6.1 (MIT), the npm package's
``dist/chart.umd.min.js`` committed unchanged as
``processors/static/vendor/chart.umd.min.js``: no CDN, no build step.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

import orjson
import redis
from fastapi import Depends, FastAPI, Header, Path as PathParam, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field
from starlette.middleware.cors import CORSMiddleware

from recurrence_ledger.read.connect import describe_error, redis_client
from recurrence_ledger.redact import redact_url
from recurrence_ledger.settings import DEFAULT_REDIS_URL, ENV_API_TOKEN, settings
from recurrence_ledger.read.projection import COUNTER_FIELDS
from recurrence_ledger.read.keys import default_namespace, escape_scope
from recurrence_ledger.ledger.models import MAX_ID_LENGTH, ArtifactRef, RepairSurface, ScopeStatistics
from recurrence_ledger.ledger.statistics import rank_key

#: Directory of the dashboard's static files (package data).
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

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
    """Where the API reads from and who may read. ``namespace`` None means
    ``default_namespace(topic_prefix)``. No review threshold: the API shows
    the one the workers stored in the view.

    ``redis_url``: a redis-py URL (``recurrence_ledger.read.connect``:
    ``redis://user:password@host:port/db``, ``rediss://…``);
    ``redis_ca_file``: CA certificates for a ``rediss://`` URL without
    ``ssl_ca_certs``. ``api_token``: the bearer token every request but the
    public paths must carry (None: none needed; see :func:`check_api_token`).
    ``cors_origins``: origins whose pages may read the API from a browser
    (none by default: no CORS header at all). ``allowed_hosts``: the
    ``Host`` header values the API answers (host names without port; empty:
    any) — ``serve`` sets the loopback names when it runs without a token,
    so that a web page cannot reach the API through a DNS name rebound to
    127.0.0.1. The repr never shows the token or the Redis password."""

    redis_url: str = DEFAULT_REDIS_URL
    topic_prefix: str = ""
    namespace: str | None = None
    redis_ca_file: str | None = None
    api_token: str | None = None
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (
            f"ApiSettings(redis_url={redact_url(self.redis_url)!r}, topic_prefix={self.topic_prefix!r}, namespace={self.namespace!r}, "
            f"redis_ca_file={self.redis_ca_file!r}, api_token={'***' if self.api_token else None}, "
            f"cors_origins={self.cors_origins!r}, allowed_hosts={self.allowed_hosts!r})"
        )

    @classmethod
    def from_env(cls, **overrides) -> ApiSettings:
        """Settings from the process settings (REDIS_URL, RL_REDIS_CA_FILE,
        RL_TOPIC_PREFIX; ``recurrence_ledger.settings``); keyword arguments
        that are not None win. The API token is not read here (``rank`` and
        ``stats`` need none): :func:`api_token_from_env` reads it."""
        env = settings()
        values = {
            "redis_url": env.redis_url or cls.redis_url,
            "topic_prefix": env.topic_prefix,
            "redis_ca_file": str(env.redis_ca_file) if env.redis_ca_file else None,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)

    @property
    def resolved_namespace(self) -> str:
        """The Redis key namespace (``rl``, or ``rl:<prefix>``)."""
        return self.namespace or default_namespace(self.topic_prefix)


# ----------------------------------------------------------------- who may read

#: Shortest API token accepted: a guessable token is no door.
MIN_TOKEN_LENGTH = 16


def check_api_token(token: str) -> str:
    """``token`` when it can be a bearer token: at least
    :data:`MIN_TOKEN_LENGTH` characters, all visible ASCII (no space, no
    control character: it travels in an HTTP header). Raises ValueError
    saying what is wrong, never quoting the token."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"the API token has {len(token)} characters, fewer than {MIN_TOKEN_LENGTH}; "
            "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if not all("!" <= char <= "~" for char in token):
        raise ValueError("the API token may only hold visible ASCII characters (no spaces)")
    return token


def read_api_token(token: str | None, token_file: Path | None) -> str | None:
    """The API token of ``serve``: ``token`` (RL_API_TOKEN) or the content
    of ``token_file`` (--token-file / RL_API_TOKEN_FILE; surrounding
    whitespace and the final newline dropped), checked with
    :func:`check_api_token`; None when neither is given. Raises ValueError
    when both are given, the file cannot be read or the token is unfit —
    the message names the file, never the token."""
    if token is not None and token_file is not None:
        raise ValueError(f"both {ENV_API_TOKEN} and a token file ({token_file}) are set: give the API token one way")
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read the API token file {token_file}: {type(error).__name__}") from None
        if not token:
            raise ValueError(f"the API token file {token_file} is empty")
    return None if token is None else check_api_token(token)


def api_token_from_env() -> str | None:
    """:func:`read_api_token` of RL_API_TOKEN and RL_API_TOKEN_FILE."""
    env = settings()
    return read_api_token(env.api_token.get_secret_value() if env.api_token else None, env.api_token_file)


#: Paths that answer without the token when one is set: the health check,
#: and what holds no data of the view — the dashboard page and its static
#: files (a browser loads them before the page can ask for the token), the
#: documentation pages and the OpenAPI document (Swagger UI fetches it
#: without credentials; it describes the API's shapes, which the source
#: code publishes anyway). Everything else — every ``/scopes…`` endpoint and
#: any unknown path — answers 401 without ``Authorization: Bearer <token>``.
PUBLIC_PATHS = frozenset({"/healthz", "/", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
PUBLIC_PREFIXES = ("/static/", "/static-docs/")


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


def check_origin(origin: str) -> str:
    """``origin`` when it is a web origin: ``http(s)://host[:port]`` and
    nothing after the authority (no path, no ``*``). Raises ValueError."""
    try:
        parts = urlsplit(origin)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if not port_ok or parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query or parts.fragment or "*" in origin:
        raise ValueError(f"{origin!r} is not an origin: give scheme://host[:port], e.g. https://dashboards.example.com")
    return origin


# ----------------------------------------------------------------- reading the view


#: ``sort`` of ``GET /scopes`` (``recurrence_ledger.read.projection.SCOPE_SORTS``).
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
    ``recurrence_ledger.read.projection``). Thread-safe (redis-py's connection pool); never
    writes. Every method raises ``redis.RedisError`` when Redis does not
    answer. ``url`` and ``ca_file`` as
    ``recurrence_ledger.read.connect.redis_client`` takes them (ValueError
    for a bad URL or CA file); ``where`` is the URL fit to print."""

    def __init__(self, url: str, namespace: str, socket_timeout: float = REDIS_TIMEOUT_S, ca_file: str | Path | None = None):
        self.namespace = namespace
        self.where = redact_url(url)
        self._client = redis_client(url, ca_file=ca_file, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)

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
#: A scope id in a path: no longer than a scope id can be (ledger.models.MAX_ID_LENGTH), so
#: a longer one answers 400 rather than a 404 quoting it back.
ScopeId = Annotated[str, PathParam(max_length=MAX_ID_LENGTH, description=f"The scope id (at most {MAX_ID_LENGTH} characters).")]

#: Where the documentation pages' assets (Swagger UI, ReDoc) are served from.
DOCS_STATIC_URL = "/static-docs"

#: Headers of the dashboard page. The page keeps the API token in
#: sessionStorage (see processors/static/dashboard.js), which its scripts can
#: read, so it allows no script, style, connection or frame from anywhere but
#: this service: an injected script could not load or send the token away.
DASHBOARD_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

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
    """The FastAPI application (``settings`` None: ``ApiSettings.from_env()``
    with the token of RL_API_TOKEN / RL_API_TOKEN_FILE, which is how
    ``uvicorn --factory`` runs it). Never connects to Redis here: a request
    that finds it down answers 503. Raises ValueError for an unfit token or
    CORS origin, a bad Redis URL or CA file."""
    settings = settings or ApiSettings.from_env(api_token=api_token_from_env())
    token = BearerToken(check_api_token(settings.api_token)) if settings.api_token is not None else None
    origins = [check_origin(origin) for origin in settings.cors_origins]
    reader = ViewReader(settings.redis_url, settings.resolved_namespace, ca_file=settings.redis_ca_file)

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
    # The guard first (inner), CORS around it: preflight requests carry no
    # token, and a 401 must carry the CORS headers for a configured origin's
    # page to read it. Without origins there is no CORS middleware at all,
    # so no response has an Access-Control-Allow-Origin header.
    app.add_middleware(ReadSideGuard, token=token, allowed_hosts=settings.allowed_hosts)
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
    errors = {
        400: {"model": ErrorBody, "description": "Unknown or bad query parameter"},
        404: {"model": ErrorBody, "description": "Unknown scope"},
        503: {"model": ErrorBody, "description": "Redis unavailable"},
    }
    conditional = {304: {"description": "Not Modified: If-None-Match matched the current ETag"}}
    # History endpoints and pages (recurrence_ledger.api.history): read models kept by the view follower.
    from recurrence_ledger.api.history import history_router
    from recurrence_ledger.read.history import ReadModels
    from recurrence_ledger.read.pages import page_etag

    app.include_router(history_router(reader._client, settings.resolved_namespace, settings.topic_prefix, errors, conditional))
    scope_index = ReadModels(reader._client, settings.resolved_namespace)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, error: RequestValidationError) -> JSONResponse:
        # Bad parameters are the client's error in plain HTTP terms: 400, not 422.
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()]
        return JSONResponse({"detail": detail}, status_code=400)

    @app.exception_handler(redis.RedisError)
    async def redis_down(_request: Request, error: redis.RedisError) -> JSONResponse:
        return JSONResponse({"detail": f"Redis unavailable: {describe_error(error, settings.redis_url)}"}, status_code=503)

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
    def scope_statistics(scope: ScopeId, if_none_match: IfNoneMatch = None) -> Response:
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
        scope: ScopeId,
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
    def scope_review(scope: ScopeId, if_none_match: IfNoneMatch = None) -> Response:
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
    def healthz(request: Request) -> JSONResponse:
        """200 when Redis answers PING, else 503. It needs no API token; with
        one set, why Redis is down (``detail``) is only told to a request
        that carries the token."""
        try:
            reader.ping()
        except redis.RedisError as error:
            told = token is None or token.accepts(request.scope["headers"])
            detail = describe_error(error, settings.redis_url) if told else None
            body = Health(status="unavailable", redis="down", namespace=settings.resolved_namespace, detail=detail)
            return JSONResponse(body.model_dump(), status_code=503)
        return JSONResponse(Health(status="ok", redis="up", namespace=settings.resolved_namespace).model_dump())

    @app.get("/", include_in_schema=False)
    def dashboard(
        refresh: Annotated[str | None, Query(description="Milliseconds between polls (read by the page's script).")] = None,
        limit: Annotated[str | None, Query(description="Revisions the page shows (read by the page's script).")] = None,
    ) -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html", headers={"Cache-Control": "no-cache", **DASHBOARD_HEADERS})

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
            if token is not None:
                # Swagger UI's Authorize button, and the 401 of every protected operation.
                schema.setdefault("components", {}).setdefault("securitySchemes", {})["bearerAuth"] = {
                    "type": "http", "scheme": "bearer", "description": "The API token (serve: RL_API_TOKEN or --token-file)."
                }
                for route_path, path in schema.get("paths", {}).items():
                    if is_public(route_path):
                        continue
                    for operation in path.values():
                        operation["security"] = [{"bearerAuth": []}]
                        operation.setdefault("responses", {})["401"] = {"description": "Missing or wrong API token (WWW-Authenticate: Bearer)"}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def serve(settings: ApiSettings, host: str = "127.0.0.1", port: int = 8080, log_level: str = "info") -> None:
    """Run the API with uvicorn until SIGINT/SIGTERM."""
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level)
