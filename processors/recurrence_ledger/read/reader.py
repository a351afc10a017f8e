"""Reading the Redis view (contract §8): :class:`ViewReader` and the
snapshots it returns, read by the HTTP API (``recurrence_ledger.api``) and
by the ``rank`` / ``stats`` commands (``recurrence_ledger.cli.ops``).

The reader never writes and recomputes no rule: it shows what the workers
projected (``recurrence_ledger.read.projection``). Every key name comes from
``recurrence_ledger.read.keys.Keys``, the one owner of the key layout. The
parts of a scope that belong together (the record, the sorted set, the
review set; the record and the revisions hash)
are read in one MULTI/EXEC, so they belong to the same write, and each
snapshot carries a strong entity tag over everything it is made of.

:func:`select_revisions` filters and orders the rows of a scope's
revisions hash (``GET /scopes/{scope}/revisions``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import orjson
import redis

from recurrence_ledger.ledger.fields import figure_fields
from recurrence_ledger.ledger.statistics import rank_key
from recurrence_ledger.read.connect import AsyncClusterClient, AsyncSingleClient, async_redis_client, redis_client
from recurrence_ledger.redact import redact_url
from recurrence_ledger.read.keys import Keys

T = TypeVar("T")

#: Seconds for connect and for each Redis reply: a dashboard must see an
#: outage quickly rather than hang.
REDIS_TIMEOUT_S = 2.0

#: The revision figures a ``top_revisions`` row carries besides its
#: identity and streak: every field of the model's RevisionFigures
#: (``recurrence_ledger.ledger.fields.figure_fields``), some absent from
#: rows written before they existed.
FIGURE_FIELDS: tuple[str, ...] = figure_fields()


#: Order of each ``sort`` of ``GET /scopes/{scope}/revisions``, every one
#: ending in contract §8 order (``recurrence_ledger.ledger.statistics.rank_key``,
#: the one definition that ``rank`` and the view use too) so that ties are
#: decided the same way everywhere:
#: ``streak`` is contract §8 order itself; ``recurred`` and ``selected`` put
#: the largest count first; ``yield`` puts the lowest yield first (the
#: revisions that help least) and revisions without a yield (no terminal
#: verdict) last; ``unknown`` puts the most unknown selections first
#: (contract §17; a row written before revision 3 counts 0);
#: ``probability_helps`` puts the lessons most likely to help first and
#: those without a probability (no effect, or an arm with nothing
#: resolved: contract §21.4) last.
REVISION_SORTS: dict[str, Callable[[dict], tuple]] = {
    "streak": rank_key,
    "recurred": lambda row: (-row["recurred"], *rank_key(row)),
    "selected": lambda row: (-row["selected"], *rank_key(row)),
    "yield": lambda row: (row["yield"] is None, row["yield"] or 0.0, *rank_key(row)),
    "unknown": lambda row: (-row.get("unknown", 0), *rank_key(row)),
    "probability_helps": lambda row: (probability_helps(row) is None, -(probability_helps(row) or 0.0), *rank_key(row)),
}


def effect_verdict(row: dict) -> str | None:
    """The effect verdict of a RevisionStatistics row as the ledger
    published it (contract §21.4), None for a row without an effect (or
    written before revision 4)."""
    effect = row.get("effect")
    return None if effect is None else effect["verdict"]


def probability_helps(row: dict) -> float | None:
    """The published ``probability_helps`` of a RevisionStatistics row
    (contract §21.4), None without an effect or while an arm has nothing
    resolved."""
    effect = row.get("effect")
    return None if effect is None else effect["probability_helps"]


def select_revisions(
    rows: Iterable[dict],
    sort: str = "streak",
    surface: str | None = None,
    low_yield: bool | None = None,
    needs_review: bool | None = None,
    binding_suspect: bool | None = None,
    effect: str | None = None,
) -> list[dict]:
    """The RevisionStatistics rows that pass every given filter —
    ``repair_surface == surface``, ``low_yield == low_yield``,
    ``needs_review == needs_review``, ``binding_suspect == binding_suspect``
    (contract §17; false for a row written before revision 3), the
    published effect verdict ``== effect`` (contract §21.4; a row without an
    effect has none); None means no filter — in the order of ``sort``
    (:data:`REVISION_SORTS`). Raises KeyError for an unknown sort."""
    order = REVISION_SORTS[sort]
    kept = [
        row
        for row in rows
        if (surface is None or row["repair_surface"] == surface)
        and (low_yield is None or row["low_yield"] == low_yield)
        and (needs_review is None or row["needs_review"] == needs_review)
        and (binding_suspect is None or row.get("binding_suspect", False) == binding_suspect)
        and (effect is None or effect_verdict(row) == effect)
    ]
    kept.sort(key=order)
    return kept


def _row_key(row: dict) -> tuple:
    ref = row["artifact_ref"]
    return (ref["family"], ref["artifact_id"], ref["revision"], row["signature_key"])


def _tag(digest) -> str:  # noqa: ANN001 - a hashlib hash object
    """A strong entity tag: the digest's first 32 hex digits, quoted."""
    return '"' + digest.hexdigest()[:32] + '"'


@dataclass(frozen=True)
class ScopeSnapshot:
    """One scope as the view holds it, read in one MULTI/EXEC (so the record,
    the sorted set and the review set belong to the same write).

    ``record``: the ScopeStatistics dict (contract §8). ``record_bytes``: the
    canonical JSON the view stored. ``top``: the sorted set's rows
    ``{artifact_ref, signature_key, terminal_recurred_streak}`` in contract §8
    order, each with the revision's figures (``FIGURE_FIELDS``) from the
    record's ``top_revisions`` row of the same revision. ``review``: the
    review set's members (the rows the ledger flagged ``needs_review``), as
    ``(artifact_ref tuple, signature_key)`` keys. ``review_etag``: entity
    tag of the review list, a digest of everything it is made of (the
    stored record — with the review threshold the ledger applied —, the
    sorted set and the review set).
    """

    record: dict
    record_bytes: bytes
    top: list[dict]
    review: frozenset = field(default_factory=frozenset)
    review_etag: str = '""'

    @property
    def etag(self) -> str:
        """Strong entity tag of the statistics body: sha256 of the stored
        record, which is the whole body (quoted, 32 hex)."""
        return _tag(hashlib.sha256(self.record_bytes))

    def needs_review(self, row: dict) -> bool:
        """Whether a ``top`` row is in the view's review set."""
        return _row_key(row) in self.review


@dataclass(frozen=True)
class RevisionsSnapshot:
    """One scope's statistics record and every row of its revisions hash,
    read in one MULTI/EXEC.

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
    ``recurrence_ledger.read.keys``). Thread-safe (redis-py's connection
    pool); never writes. Every method raises ``redis.RedisError`` when Redis
    does not answer. ``url`` and ``ca_file`` as
    ``recurrence_ledger.read.connect.redis_client`` takes them (ValueError
    for a bad URL or CA file); ``where`` is the URL fit to print."""

    def __init__(self, url: str, namespace: str, socket_timeout: float = REDIS_TIMEOUT_S, ca_file: str | Path | None = None):
        self.namespace = namespace
        self.keys = Keys(namespace)
        self.where = redact_url(url)
        self.timeout_s = socket_timeout
        self._url, self._ca_file = url, ca_file
        self._client = redis_client(url, ca_file=ca_file, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)
        self._async: tuple[asyncio.AbstractEventLoop, AsyncSingleClient | AsyncClusterClient] | None = None

    @property
    def client(self) -> redis.Redis:
        """The reader's redis-py client: the API's read models
        (``recurrence_ledger.read.history.ReadModels``) share its pool."""
        return self._client

    def async_client(self) -> AsyncSingleClient | AsyncClusterClient:
        """The reader's ``redis.asyncio`` client for the running event loop
        (``recurrence_ledger.read.connect.async_redis_client``, the same URL
        and connect timeout), made on the loop's first use: a client's
        connections belong to one loop. It sets no timeout per reply (one
        costs a task or a timer per command): bound each read as a whole
        with :meth:`bounded`. Call from a coroutine."""
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            self._async = (loop, async_redis_client(self._url, ca_file=self._ca_file, socket_connect_timeout=self.timeout_s))
        return self._async[1]

    async def bounded(self, read: Awaitable[T]) -> T:
        """What ``read`` (through :meth:`async_client`) returns, if it
        does within ``timeout_s`` seconds, the reader's timeout per reply;
        else ``redis.exceptions.TimeoutError`` (its connection is dropped,
        as redis-py drops one whose read is cancelled)."""
        try:
            async with asyncio.timeout(self.timeout_s):
                return await read
        except TimeoutError:
            raise redis.exceptions.TimeoutError(f"Redis did not answer within {self.timeout_s:g} s ({self.where})") from None

    async def aclose(self) -> None:
        """Close the ``redis.asyncio`` client's connections (those of the running loop)."""
        if self._async is not None and self._async[0] is asyncio.get_running_loop():
            await self._async[1].aclose()
        self._async = None

    def ping(self) -> bool:
        """True when Redis answers PING."""
        return bool(self._client.ping())

    def scope_ids(self) -> list[str]:
        """Every scope id of the namespace, sorted."""
        return sorted(member.decode() for member in self._client.smembers(self.keys.scopes))

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
            pipe.hget(self.keys.scope(scope_id), "record")
        return len(every), {scope_id: raw for scope_id, raw in zip(scope_ids, pipe.execute(), strict=True) if raw is not None}

    def snapshot(self, scope_id: str) -> ScopeSnapshot | None:
        """The scope's record, sorted set and review set from one MULTI/EXEC,
        or None when the view does not hold the scope."""
        pipe = self._client.pipeline(transaction=True)
        pipe.hget(self.keys.scope(scope_id), "record")
        pipe.zrange(self.keys.top(scope_id), 0, -1, withscores=True)
        pipe.smembers(self.keys.review(scope_id))
        raw, scored, review = pipe.execute()
        if raw is None:
            return None
        digest = hashlib.sha256(raw)
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
            review_etag=_tag(digest),
        )

    def revisions(self, scope_id: str) -> RevisionsSnapshot | None:
        """The scope's record and every row of its revisions hash
        (``{ns}:scope:{scope}:revisions``) from one MULTI/EXEC, or
        None when the view does not hold the scope (no statistics record). A
        scope without a revisions hash has no rows."""
        pipe = self._client.pipeline(transaction=True)
        pipe.hget(self.keys.scope(scope_id), "record")
        pipe.hgetall(self.keys.revisions(scope_id))
        raw, stored = pipe.execute()
        if raw is None:
            return None
        digest = hashlib.sha256(raw)
        for field_name in sorted(stored):
            digest.update(b"\x00" + field_name + b"\x00" + stored[field_name])
        rows = sorted((orjson.loads(value) for value in stored.values()), key=rank_key)
        return RevisionsSnapshot(record=orjson.loads(raw), rows=rows, etag=_tag(digest))

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
