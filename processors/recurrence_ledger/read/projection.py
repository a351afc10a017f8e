"""contract §8 (ScopeStatistics) and §1 (the Redis projection that dashboards
read): the `recurrence-statistics` records of every scope and the
`revision-statistics` records of every revision (the ``revisions`` view), projected into Redis.

The projection is a materialized view of the compacted
`recurrence-statistics` and `revision-statistics` topics, never a source of
truth: it can be dropped and rebuilt from the topics at any time
(`recurrence_ledger.read.rebuild.rebuild_from_topic`, CLI `recurrence-ledger
view rebuild`). The worker feeds it with `RedisView.submit` in publication
order, after each committed transaction; Redis being down, unreachable or
hung never stops or slows the worker (the latest record of each scope and of
each revision waits in memory).

Redis key layout: ``recurrence_ledger.read.keys`` (the one owner of every key name).

A dashboard reads one scope in one round trip: `HGETALL {ns}:scope:{<scope>}`.
Each scope is written by one MULTI/EXEC transaction on the scope's keys
(one slot: Redis Cluster) that replaces its hash, sorted set and set
together and sets the fields of the revisions it carries (fields of other
revisions are kept: a revision's row changes only when a new record for it
comes), so a reader never sees a half-written scope, nor a scope record
without the revision rows the worker submitted with it; then one script
on the namespace's slot (``index_scope``) adds it to the scope set and
index, never over a newer record's entries. Writes are last-writer-wins in submission order
(the worker submits in publication order), per scope for the scope keys and
per revision for the revisions hash.

Limits:

- The sorted set and the review set only know the rows of `top_revisions`
  (the first N revisions by streak, N = the worker's `--top-revisions`,
  default 10). The review set holds the rows the ledger flagged
  (`needs_review`): it is exact when `needing_review` ≤ N; otherwise it
  holds the N worst revisions needing review and `needing_review` in the hash
  is the true count.
- Redis ties in a sorted set are ordered by member bytes, which is not the
  ArtifactRef order (`revision` 10 sorts before 2 as text); `RedisView.top`
  re-sorts ties as contract §8 does. A dashboard reading the sorted set
  directly should do the same.
- The revisions hash is complete (one field per revision the ledger
  published a RevisionStatistics record for) but unordered: readers
  (`RedisView.revisions`, the API, `rank`) read the whole hash of a scope
  and sort it, O(revisions of the scope) per read.
- On a single Redis or Redis Cluster alike (``recurrence_ledger.read.connect``):
  a scope's keys share the scope's hash tag, the scope set and index the
  namespace's; the index is written just after the scope's keys, so a
  reader may for a moment see a scope whose index entry is one record
  behind.
- A Redis restarted without persistence comes back empty. The view then
  re-writes only the scopes it still holds pending; it notices that the
  namespace vanished under it (`RedisView.needs_rebuild`, one warning) and the
  remedy is `recurrence-ledger view rebuild`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.fields import integer_fields
from recurrence_ledger.ledger.records import RevisionStatistics, ScopeStatistics
from recurrence_ledger.ledger.statistics import rank_key
from recurrence_ledger.read.connect import redis_client
from recurrence_ledger.redact import redact_url
from recurrence_ledger.read.keys import SCOPE_SORTS, Keys
from recurrence_ledger.read.records import pad
from recurrence_ledger.read.scripts import run_call, scripts

log = logging.getLogger(__name__)


#: Fields per HSET command when a scope's revisions are written (a rebuild
#: of a scope with many revisions sends several HSETs in its MULTI/EXEC).
HSET_CHUNK = 1000

#: Hash fields holding the integer figures of a ScopeStatistics record
#: (counters, gauges, its position and the review threshold the ledger
#: applied), as integer strings: every plain integer field of the model
#: (``recurrence_ledger.ledger.fields.integer_fields``), in its order. A
#: record written before a field existed has the model's default (0).
COUNTER_FIELDS: tuple[str, ...] = integer_fields(ScopeStatistics)
#: The scope hash field of the scope's recurred verdicts of critical
#: revisions (contract §22: ``recurred_by_severity.critical``), which the
#: follower's ``recurrence_ledger_view_critical_recurrences`` reports.
CRITICAL_RECURRENCES_FIELD = "critical_recurrences"
#: The scope hash field of the scope's lessons by effect verdict (contract
#: §21.4: the record's ``effects``) as canonical JSON, which the follower's
#: ``recurrence_ledger_view_effects`` sums over the scopes.
EFFECTS_FIELD = "effects"
#: Hash field holding the record's ``unknown_reasons`` (contract §17: every
#: reason with its count) as canonical JSON, so that readers of the totals
#: (``recurrence_ledger.read.totals``) need not parse the whole record.
UNKNOWN_REASONS_FIELD = "unknown_reasons"

#: Errors that mean "Redis is not available right now". Every RedisError is
#: included, not only ConnectionError/TimeoutError: an OOM, READONLY (failover
#: in progress) or MISCONF reply is as much an outage for a projection, and
#: the worker must never stop for its dashboard view.
REDIS_DOWN_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    OSError,
    redis.exceptions.RedisError,
    RedisClusterException,  # Redis Cluster: no node of the cluster answers (not a RedisError)
)

#: Upper bound of the retry back-off (seconds) as a multiple of retry_seconds.
MAX_BACKOFF_FACTOR = 30


def member(row: dict) -> str:
    """Sorted-set / review-set member of a ``top_revisions`` row: canonical
    JSON of ``{"artifact_ref": …, "signature_key": …}`` (contract §4)."""
    return canonical_json({"artifact_ref": row["artifact_ref"], "signature_key": row["signature_key"]}).decode()


def revision_member(artifact_ref: dict) -> str:
    """Field of a revision in ``{ns}:scope:{scope}:revisions``:
    the canonical JSON of its ArtifactRef (contract §4), e.g.
    ``{"artifact_id":"P1","family":"experience","revision":1}``. One field
    per revision, like the topic's record key
    (``recurrence_ledger.ledger.statistics.revision_key``) within a scope. Raises
    KeyError for an ArtifactRef without family, artifact_id or revision."""
    return canonical_json(
        {"family": artifact_ref["family"], "artifact_id": artifact_ref["artifact_id"], "revision": artifact_ref["revision"]}
    ).decode()


def scope_index(record: dict) -> dict[str, float]:
    """The score of a ScopeStatistics record in each ``{ns}:scopes:by:{sort}``
    sorted set (``recurrence_ledger.read.keys.SCOPE_SORTS``): 0 for
    ``scope_id``; minus the count for ``needing_review`` and ``recurred``;
    minus the rate for ``repeat_failure_rate``, 1 (after every rate) when it
    is null."""
    rate = record.get("repeat_failure_rate")
    return {
        "scope_id": 0,
        "needing_review": -record["needing_review"],
        "recurred": -record["recurred"],
        "repeat_failure_rate": 1.0 if rate is None else -rate,
    }


def _latest_per_scope(records: Iterable[dict]) -> dict[str, dict]:
    latest: dict[str, dict] = {}
    for record in records:
        try:
            latest[record["scope_id"]] = record
        except (KeyError, TypeError):
            raise ValueError(f"not a ScopeStatistics record (no scope_id): {str(record)[:200]}") from None
    return latest


def _latest_per_revision(records: Iterable[dict]) -> dict[tuple[str, str], dict]:
    latest: dict[tuple[str, str], dict] = {}
    for record in records:
        try:
            latest[(record["scope_id"], revision_member(record["artifact_ref"]))] = record
        except (KeyError, TypeError):
            raise ValueError(f"not a RevisionStatistics record (no scope_id or artifact_ref): {str(record)[:200]}") from None
    return latest


@dataclass(frozen=True)
class _ScopeWrite:
    """The scope keys one scope's transaction writes, prepared at submit time
    so that a record that cannot be written fails in ``submit``, never later."""

    scope_id: str
    fields: dict[str, bytes | str]
    top: dict[str, int]
    review: tuple[str, ...]


@dataclass
class PendingWrite:
    """What waits to be written for one scope: its latest statistics record
    (None when only revision rows changed) and the latest row of each of its
    revisions (``revision_member`` → canonical JSON)."""

    scope: _ScopeWrite | None = None
    revisions: dict[str, bytes] = field(default_factory=dict)


class RedisView:
    """The Redis projection of ``recurrence-statistics`` (contract §8) and
    ``revision-statistics``; key layout in ``recurrence_ledger.read.keys``.

    ``url``: a redis-py URL (``redis://127.0.0.1:6379/0``;
    ``redis://user:password@host:port/db`` for an ACL user, ``rediss://…``
    for TLS: ``recurrence_ledger.read.connect``). ``ca_file``: the CA
    certificates of a ``rediss://`` URL without ``ssl_ca_certs``
    (``RL_REDIS_CA_FILE``). ``namespace``: the key prefix
    (``recurrence_ledger.read.keys.default_namespace()`` gives the
    deployment's).
    ``retry_seconds``: after a failed write, no new attempt from ``submit``
    before this many seconds; consecutive failures double the wait up to
    ``MAX_BACKOFF_FACTOR`` × retry_seconds, so that even a hung Redis (each
    attempt costs ``socket_timeout``) takes a negligible share of the caller's
    time. ``socket_timeout``: seconds for connect and for each reply.

    Never connects in the constructor. Not thread-safe: one owner (the worker
    loop) calls it. Raises ValueError for a bad URL or CA file, an empty
    namespace. ``where``: the URL fit to print (no
    password).
    """

    def __init__(
        self,
        url: str,
        namespace: str = "rl",
        retry_seconds: float = 1.0,
        socket_timeout: float = 0.5,
        ca_file: str | Path | None = None,
    ):
        if not namespace:
            raise ValueError("namespace must not be empty")
        self.namespace = namespace
        self.retry_seconds = retry_seconds
        # No client-side retries: the view has its own back-off, and redis-py's
        # default (3 retries with exponential back-off) would multiply the time
        # a dead Redis costs the caller.
        self.where = redact_url(url)
        self._client = redis_client(
            url,
            ca_file=ca_file,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
            retry=Retry(NoBackoff(), 0),
            decode_responses=True,
        )
        self._pending: dict[str, PendingWrite] = {}
        self._healthy = True
        self._failures = 0  # consecutive failed attempts
        self._retry_at = 0.0  # time.monotonic() before which submit does not try
        self._wrote = False  # this view wrote a scope since its last clear()
        self._needs_rebuild = False
        self.layout = Keys(namespace)
        self._scopes_key = self.layout.scopes
        self._key_pattern = self.layout.layout_pattern()

    # ------------------------------------------------------------ state

    @property
    def pending(self) -> int:
        """Scopes whose latest statistics record or revision rows are not yet
        in Redis."""
        return len(self._pending)

    @property
    def pending_revisions(self) -> int:
        """Revision rows not yet in Redis, over every scope."""
        return sum(len(pending.revisions) for pending in self._pending.values())

    @property
    def healthy(self) -> bool:
        """False from a failed Redis attempt until the next successful one
        (True before the first attempt)."""
        return self._healthy

    @property
    def needs_rebuild(self) -> bool:
        """True once this view saw its namespace vanish after it had written
        to it (a Redis restarted without persistence, or a ``clear`` from
        another process): scopes that were not pending are missing until
        ``recurrence_ledger.read.rebuild.rebuild_from_topic`` runs."""
        return self._needs_rebuild

    def scope_key(self, scope_id: str) -> str:
        """``{ns}:scope:{scope}`` (the hash) of a scope id."""
        return self.layout.scope(scope_id)

    def revisions_key(self, scope_id: str) -> str:
        """``{ns}:scope:{scope}:revisions`` (the revisions hash) of a
        scope id."""
        return self.layout.revisions(scope_id)

    # ------------------------------------------------------------ writes

    def submit(self, records: Iterable[dict], revisions: Iterable[dict] = ()) -> None:
        """Take ScopeStatistics records (contract §8 dicts) and
        RevisionStatistics records (contract §14 dicts), each in publication
        order; keep the latest record per scope and the latest row per
        revision (scope_id + artifact_ref) as pending, then try to flush. A
        scope's statistics record and the rows of its revisions from the same
        call go into the same MULTI/EXEC.

        Never raises because of Redis: on a Redis error the records stay
        pending, ``healthy`` turns False and ``submit`` makes no new attempt
        until the back-off has passed (``retry_seconds``, doubling per
        consecutive failure), so with Redis down a call costs microseconds
        after the first failure. Raises ValueError (pydantic ValidationError)
        for a record that is not a valid ScopeStatistics / RevisionStatistics
        — only the last record of each scope and of each revision in the
        batch is validated — before anything of the batch is kept.
        """
        latest = _latest_per_scope(records)
        latest_revisions = _latest_per_revision(revisions)
        if not latest and not latest_revisions:
            return
        prepared = [self._prepare(record) for record in latest.values()]
        rows = [(scope_id, member_, self._prepare_revision(record)) for (scope_id, member_), record in latest_revisions.items()]
        for write in prepared:
            self._pending.setdefault(write.scope_id, PendingWrite()).scope = write
        for scope_id, member_, value in rows:
            self._pending.setdefault(scope_id, PendingWrite()).revisions[member_] = value
        self.flush(force=False)

    def flush(self, force: bool = True) -> int:
        """Write every pending scope (its statistics record and/or revision
        rows), one MULTI/EXEC per scope; returns the number of scopes written.

        ``force`` False respects the back-off (what ``submit`` does; a worker
        loop calls ``flush(force=False)`` when idle so pending scopes catch up
        after an outage even without new records); True tries now. Never
        raises because of Redis: what was not written stays pending.
        """
        if not self._pending:
            return 0
        if not force and not self._healthy and time.monotonic() < self._retry_at:
            return 0
        written = 0
        try:
            for scope_id in list(self._pending):
                self._write(scope_id, self._pending[scope_id], check_namespace=written == 0)
                del self._pending[scope_id]
                written += 1
        except REDIS_DOWN_ERRORS as error:
            self._failed(error)
            return written
        self._succeeded()
        return written

    @staticmethod
    def _prepare_revision(record: dict) -> bytes:
        """The revisions-hash value of a RevisionStatistics record: its
        canonical JSON, once validated. Raises ValueError."""
        RevisionStatistics.model_validate(record)
        return canonical_json(record)

    def _prepare(self, record: dict) -> _ScopeWrite:
        model = ScopeStatistics.model_validate(record)
        fields: dict[str, bytes | str] = {name: str(getattr(model, name)) for name in COUNTER_FIELDS}
        fields[UNKNOWN_REASONS_FIELD] = canonical_json(model.unknown_reasons.model_dump())
        fields["top_revisions"] = canonical_json(record["top_revisions"])
        fields[CRITICAL_RECURRENCES_FIELD] = str(model.recurred_by_severity.critical)
        fields[EFFECTS_FIELD] = canonical_json(model.effects.model_dump())
        fields["record"] = canonical_json(record)
        top = {member(row): row["terminal_recurred_streak"] for row in record["top_revisions"]}
        # The review set: the rows the ledger flagged (needs_review), never a
        # threshold of the view's own.
        review = tuple(member(row) for row, flagged in zip(record["top_revisions"], model.top_revisions, strict=True) if flagged.needs_review)
        return _ScopeWrite(record["scope_id"], fields, top, review)

    def _write(self, scope_id: str, pending: PendingWrite, check_namespace: bool = False) -> None:
        """One scope's MULTI/EXEC of its own keys (one slot): its scope keys
        (replaced) when a statistics record is pending, and the fields of its
        pending revision rows; then, for a statistics record, the scope set
        and index (:meth:`_index`). With ``check_namespace``, whether
        ``{ns}:{<ns>}:scopes`` existed is asked to notice a namespace that
        vanished after this view wrote to it (by the index script, atomically
        before it adds the scope; by one EXISTS before the write when only
        revision rows are pending). Raises redis errors."""
        key = self.scope_key(scope_id)
        top_key, review_key = self.layout.top(scope_id), self.layout.review(scope_id)
        write = pending.scope
        existed = True
        if check_namespace and write is None:
            existed = bool(self._client.exists(self._scopes_key))
        pipe = self._client.pipeline(transaction=True)
        if write is not None:
            pipe.delete(key, top_key, review_key)
            pipe.hset(key, mapping=write.fields)
            if write.top:
                pipe.zadd(top_key, write.top)
            if write.review:
                pipe.sadd(review_key, *write.review)
        rows = list(pending.revisions.items())
        for start in range(0, len(rows), HSET_CHUNK):
            pipe.hset(self.layout.revisions(scope_id), mapping=dict(rows[start : start + HSET_CHUNK]))
        pipe.execute()
        if write is not None:
            existed = self._index(scope_id, orjson.loads(write.fields["record"]))
        self._noticed(check_namespace and not existed)
        if write is not None:  # {ns}:{<ns>}:scopes exists from now on (revision rows alone do not create it)
            self._wrote = True

    def _index(self, scope_id: str, record: dict) -> bool:
        """Put the scope into the scope set and index with ``record``'s
        scores (``index_scope``: the namespace's slot, never over a newer
        record's); returns whether the scope set existed before. Raises
        redis errors."""
        scores = scope_index(record)
        existed, _ = run_call(
            self._client, scripts(self._client).index_scope,
            keys=[self._scopes_key, self.layout.scopes_at, *self.layout.scope_index_keys()],
            args=[scope_id, pad(record["as_of_position"]), *(scores[sort] for sort in SCOPE_SORTS)],
        )
        return bool(existed)

    def _noticed(self, vanished: bool) -> None:
        """Warn once when the namespace vanished since this view wrote to it."""
        if vanished and self._wrote and not self._needs_rebuild:
            self._needs_rebuild = True
            log.warning(
                "Redis view %s: the namespace vanished since this view last wrote to it (Redis restarted "
                "without persistence?); scopes not updated since are missing until `recurrence-ledger view rebuild`",
                self.namespace,
            )

    def _failed(self, error: BaseException) -> None:
        self._failures += 1
        backoff = min(self.retry_seconds * 2 ** (self._failures - 1), self.retry_seconds * MAX_BACKOFF_FACTOR)
        self._retry_at = time.monotonic() + backoff
        if self._healthy:
            self._healthy = False
            log.warning(
                "Redis view %s is down (%s: %s); keeping the latest record of %d scope(s) pending, retrying after %.1f s",
                self.namespace,
                type(error).__name__,
                error,
                len(self._pending),
                backoff,
            )
        else:
            log.debug("Redis view %s still down (%s); next attempt in %.1f s", self.namespace, error, backoff)

    def _succeeded(self) -> None:
        if not self._healthy:
            log.info("Redis view %s is back after %d failed attempt(s); pending scopes written", self.namespace, self._failures)
        self._healthy = True
        self._failures = 0
        self._retry_at = 0.0

    # ------------------------------------------------------------ reads and admin

    def read(self, scope_id: str) -> dict | None:
        """The ScopeStatistics record (contract §8) of a scope from one HGETALL
        (its ``record`` field), or None when the scope is not in Redis.
        Raises redis errors (reads are for dashboards and tools, which should
        see an outage)."""
        fields = self._client.hgetall(self.scope_key(scope_id))
        if not fields:
            return None
        return orjson.loads(fields["record"])

    def scopes(self) -> list[str]:
        """Every scope id in the view, sorted. Raises redis errors."""
        return sorted(self._client.smembers(self._scopes_key))

    def top(self, scope_id: str, limit: int = 10) -> list[dict]:
        """The first ``limit`` rows of a scope's sorted set as RecurrenceStreak
        dicts (with the revision's figures when the record carries them), in
        contract §8 order (streak descending, then ArtifactRef order, then
        signature_key); [] for an unknown scope. Two round trips: the
        ``limit``-th score, then every member at or above it, so that ties at
        the cut are decided by the contract's order and not by Redis' byte
        order. Raises redis errors."""
        if limit <= 0:
            return []
        key = self.layout.top(scope_id)
        cut = self._client.zrevrange(key, limit - 1, limit - 1, withscores=True)
        floor = cut[0][1] if cut else "-inf"
        rows = []
        for text, score in self._client.zrangebyscore(key, floor, "+inf", withscores=True):
            row = orjson.loads(text)
            row["terminal_recurred_streak"] = int(score)
            rows.append(row)
        rows.sort(key=rank_key)
        rows = rows[:limit]
        # The record's rows carry each revision's figures (repair_surface,
        # counts, yield): return those for the members they describe.
        stored = self._client.hget(self.scope_key(scope_id), "top_revisions")
        full = {member(row): row for row in orjson.loads(stored)} if stored else {}
        return [full.get(member(row), row) for row in rows]

    def revisions(self, scope_id: str) -> list[dict]:
        """Every row of the scope's revisions hash as
        RevisionStatistics dicts, in contract §8 order (streak descending,
        then ArtifactRef order, then signature_key); [] for a scope the view
        holds no revision of. One HVALS. Raises redis errors."""
        rows = [orjson.loads(value) for value in self._client.hvals(self.revisions_key(scope_id))]
        rows.sort(key=rank_key)
        return rows

    def review(self, scope_id: str) -> set[str]:
        """The review-set members of a scope (see the layout's limits).
        Raises redis errors."""
        return set(self._client.smembers(self.layout.review(scope_id)))

    def keys(self) -> Iterator[str]:
        """Every key of the namespace that :meth:`clear` deletes (SCAN, never
        KEYS; unordered): only keys of this layout, so namespace ``rl``
        never lists ``rl:other:…`` keys. Raises redis errors."""
        for key in self._client.scan_iter(match=self.layout.glob(), count=1000):
            if self._key_pattern.fullmatch(key):
                yield key

    def clear(self) -> int:
        """Delete every key of the namespace (:meth:`keys`, then UNLINK in
        batches); returns the number of keys deleted. Pending records are
        kept. Raises redis errors."""
        deleted = 0
        batch: list[str] = []
        for key in self.keys():
            batch.append(key)
            if len(batch) >= 500:
                deleted += self._client.unlink(*batch)
                batch.clear()
        if batch:
            deleted += self._client.unlink(*batch)
        self._wrote = False
        return deleted

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
