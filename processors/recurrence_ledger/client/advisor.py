"""The recall-time advisory for a platform's recall: :class:`Advisor`.

Before a recall hands lessons to an agent it asks the ledger's API
(``POST /advisories``, ``recurrence-ledger serve``) what the ledger
published about them — superseded, recurring and waiting for review, a
check that proves nothing, a low yield, a harmful effect — and gets one
:class:`Advice` per lesson. The answers are kept for a short time (``ttl``
seconds), so a recall that asks about the same lessons again costs no
request.

It **fails open**: when the API is slow (no answer within ``timeout``),
down, refuses the token or answers anything but the advisory, every lesson
gets an Advice with ``available`` false and the advice ``"unknown: the
ledger did not answer"``, the recall goes on, and the advisor says so once
in its log (a warning naming why), then asks no more for ``retry_after``
seconds; the first answer after that is logged once too. Nothing here
raises for the ledger's sake, and nothing is ever written: recall stays
write-free (the advisory only reads).

Standard library only (``http.client``): importing it connects to nothing.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from recurrence_ledger.ledger.models import ArtifactRef

log = logging.getLogger(__name__)

#: Most refs the API takes in one request (``POST /advisories``: more is 422).
MAX_REFS_PER_REQUEST = 64
#: The advice of a lesson the ledger said nothing about because it did not answer.
UNKNOWN_ADVICE = "unknown: the ledger did not answer"


@dataclass(frozen=True)
class Advice:
    """What the ledger published about one lesson (an Experience
    revision), as ``POST /advisories`` answers it (docs/results.md, the
    recall-time advisory).

    ``artifact_ref``: the lesson, as asked; ``available``: false when the
    ledger did not answer (every other field then says nothing: ``known``
    false, no flags); ``known``: the ledger has figures for it; ``advice``:
    one line for a ranker or a person; ``superseded_by``: the revision that
    superseded it (an ArtifactRef dict), when the ledger published one;
    ``needs_review``, ``binding_suspect``, ``low_yield``: the ledger's
    flags; ``severity``: low, medium, high, critical or None;
    ``review_status``: open, superseded, approved, rejected or None (no
    review candidate); ``repair_status``: pending, held, recurring, failed
    or None; ``verdict`` and ``probability_helps``: its effect (None
    without one); ``details``: the whole answer for the lesson (empty when
    not available)."""

    artifact_ref: dict
    available: bool
    known: bool = False
    advice: str = UNKNOWN_ADVICE
    superseded_by: dict | None = None
    needs_review: bool = False
    binding_suspect: bool = False
    low_yield: bool = False
    severity: str | None = None
    review_status: str | None = None
    repair_status: str | None = None
    verdict: str | None = None
    probability_helps: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_answer(cls, row: Mapping[str, Any]) -> Advice:
        """The Advice of one ``advisories`` row of the API's answer."""
        review = row.get("review") or {}
        return cls(
            artifact_ref=dict(row["artifact_ref"]), available=True, known=bool(row.get("known")), advice=str(row.get("advice", "")),
            superseded_by=row.get("superseded_by"), needs_review=bool(row.get("needs_review")),
            binding_suspect=bool(row.get("binding_suspect")), low_yield=bool(row.get("low_yield")), severity=row.get("severity"),
            review_status=review.get("status"), repair_status=review.get("repair_status"), verdict=row.get("verdict"),
            probability_helps=row.get("probability_helps"), details=dict(row),
        )

    @classmethod
    def unavailable(cls, artifact_ref: dict) -> Advice:
        """The Advice of a lesson when the ledger did not answer."""
        return cls(artifact_ref=dict(artifact_ref), available=False)


class AdvisoryUnavailable(Exception):
    """Internal: why one request got no advisory (never leaves the advisor)."""


def _ref_key(ref: Mapping[str, Any]) -> tuple[str, str, int]:
    return (ref["family"], ref["artifact_id"], ref["revision"])


class Advisor:
    """Asks a ledger API for the advisory of the lessons a recall is about
    to hand over; thread-safe (one keep-alive connection per thread).

    ``url``: the API's base URL (``http://127.0.0.1:8080``; ``https://``
    too); ``token`` or ``token_file``: the API's read token when it has one
    (``RL_API_TOKEN``; a reviewer token is not needed); ``timeout``: seconds
    one request may take before the ledger counts as slow (default 0.2: a
    recall must not wait); ``ttl``: seconds an answer is reused (default 5);
    ``retry_after``: seconds to stop asking after a failure (default 5);
    ``max_entries``: answers kept at most (the oldest go first);
    ``clock``: the monotonic clock (seconds). Raises ValueError for a URL
    that is not http(s) or a negative setting, OSError for an unreadable
    ``token_file`` — configuration errors are raised at once; everything
    the ledger does later fails open (module docstring).

    ``advise(scope_id, refs)`` returns one :class:`Advice` per ref, in
    order; use it as a context manager or call :meth:`close`."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        token_file: Path | str | None = None,
        timeout: float = 0.2,
        ttl: float = 5.0,
        retry_after: float = 5.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the advisory URL must be http(s)://host[:port], not {url!r}")
        if min(timeout, ttl, retry_after) < 0 or max_entries < 1:
            raise ValueError("timeout, ttl and retry_after must be ≥ 0 and max_entries ≥ 1")
        if token is None and token_file is not None:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._path = (parts.path.rstrip("/") or "") + "/advisories"
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self.timeout, self.ttl, self.retry_after, self.max_entries, self._clock = timeout, ttl, retry_after, max_entries, clock
        self._cache: OrderedDict[tuple, tuple[float, Advice]] = OrderedDict()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._down_until: float | None = None
        self._failing = False
        #: Requests sent to the API, and those that failed (the advisor's own counters).
        self.requests = 0
        self.failures = 0

    def __repr__(self) -> str:
        return f"Advisor({self.url!r}, timeout={self.timeout}, ttl={self.ttl}, token={'set' if 'Authorization' in self._headers else 'none'})"

    def __enter__(self) -> Advisor:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection the advisor opened."""
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    @property
    def available(self) -> bool:
        """False while the advisor has stopped asking after a failure."""
        return not self._failing

    def advise(self, scope_id: str, artifact_refs: Iterable[ArtifactRef | Mapping[str, Any]]) -> list[Advice]:
        """One :class:`Advice` per ref of ``artifact_refs`` (ArtifactRef
        models or ``{family, artifact_id, revision}`` dicts), in order:
        from the cache when asked within ``ttl`` seconds, else from one
        request per 64 refs not cached. Never raises for the ledger: when
        it does not answer, the refs it did not answer for are
        ``available`` false (module docstring)."""
        refs = [ref.model_dump() if isinstance(ref, ArtifactRef) else dict(ref) for ref in artifact_refs]
        now = self._clock()
        found: dict[tuple, Advice] = {}
        with self._lock:
            for ref in refs:
                key = (scope_id, _ref_key(ref))
                hit = self._cache.get(key)
                if hit is not None and hit[0] > now:
                    found[key] = hit[1]
        missing: dict[tuple, dict] = {}
        for ref in refs:
            key = (scope_id, _ref_key(ref))
            if key not in found:
                missing.setdefault(key, ref)
        wanted = list(missing.values())
        for start in range(0, len(wanted), MAX_REFS_PER_REQUEST):
            chunk = wanted[start : start + MAX_REFS_PER_REQUEST]
            answered = self._ask(scope_id, chunk)
            if answered is None:
                for ref in chunk:
                    found[(scope_id, _ref_key(ref))] = Advice.unavailable(ref)
                continue
            expires = self._clock() + self.ttl
            with self._lock:
                for advice in answered:
                    key = (scope_id, _ref_key(advice.artifact_ref))
                    found[key] = advice
                    self._cache[key] = (expires, advice)
                    self._cache.move_to_end(key)
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
        return [found.get((scope_id, _ref_key(ref))) or Advice.unavailable(ref) for ref in refs]

    def _ask(self, scope_id: str, refs: list[dict]) -> list[Advice] | None:
        """The API's answer for ``refs``, or None (failed open, logged once)."""
        if self._down_until is not None and self._clock() < self._down_until:
            return None
        with self._lock:
            self.requests += 1
        try:
            answer = self._post({"scope_id": scope_id, "artifact_refs": refs})
            advices = [Advice.from_answer(row) for row in answer["advisories"]]
            if len(advices) != len(refs):
                raise AdvisoryUnavailable(f"it answered {len(advices)} advisories for {len(refs)} refs")
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError, AdvisoryUnavailable) as error:
            with self._lock:
                self.failures += 1
            self._down_until = self._clock() + self.retry_after
            if not self._failing:
                self._failing = True
                log.warning("the ledger's advisory at %s did not answer (%s): recall goes on without its advice; asking again in %g s",
                            self.url, _why(error), self.retry_after)
            return None
        self._down_until = None
        if self._failing:
            self._failing = False
            log.info("the ledger's advisory at %s answers again", self.url)
        return advices

    def _connection(self) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            connection = kind(self._host, self._port, timeout=self.timeout)
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def _post(self, body: dict) -> dict:
        """POST ``body`` on this thread's keep-alive connection; a
        connection that failed is dropped (the next request opens another)."""
        connection = self._connection()
        try:
            connection.request("POST", self._path, json.dumps(body, ensure_ascii=False).encode(), self._headers)
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            connection.close()
            self._local.connection = None
            with self._lock:
                if connection in self._connections:
                    self._connections.remove(connection)
            raise
        if response.status != 200:
            raise AdvisoryUnavailable(f"HTTP {response.status}: {data[:200].decode(errors='replace')}")
        return json.loads(data)


def _why(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return f"no answer within the timeout: {error}"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
