"""Read models of the history (operators see history, not just a snapshot):
each revision's verdict history with its runs (contract §8), each scope's
trend, the review queue across scopes, and the scope index of ``GET
/scopes?sort=…`` — kept in Redis beside the view (``recurrence_ledger.read.projection``)
by the view follower (``recurrence_ledger.read.follower``) and rebuilt
from the topics by ``recurrence-ledger view rebuild``.

Like the view, they are never a source of truth: every one is derived from
the ledger topics (``recurrence-observations``, ``review-candidates``) and
the ``recurrence-statistics`` view topic, and can be dropped and rebuilt.

Redis key layout: ``recurrence_ledger.read.keys`` (the one owner of every key name).

A review candidate is **open** while no avoided verdict of its revision has a
position after its run's start (``run_start_position``; null: any avoided
verdict): the run it was published for is still the revision's current run.
It leaves the queue when such an avoided verdict is applied, or never
enters it when the verdict was applied first, so the queue is the same in
any order of the two topics.

Exactly-once application: each batch of one partition of one topic is
applied by one Lua script, which skips the records below the partition's
``follow-applied`` offset and moves it past the batch in the same atomic
step. So a follower that applied a batch and died before committing its
consumer offsets (at-least-once) applies nothing twice: counts and trims
stay exact. A rebuild applies every record of the topics through the same
scripts, so it recreates exactly what a follower that read them all holds.

Scope and revision rows of the view itself are written by
:class:`FollowerView`: ``RedisView``'s writing code (the same prepared
fields) behind a guard, so that a follower never puts back an older row than
the one Redis holds, whoever wrote it (a worker writing the view after its
commits, or the follower itself replaying after a restart).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson
import redis

from recurrence_ledger.catalogue import OBSERVATIONS, REVIEW_CANDIDATES, STATISTICS
from recurrence_ledger.read.keys import SCOPE_SORTS, Keys
from recurrence_ledger.read.projection import RedisView, _Pending, revision_member, scope_index

#: Default number of verdicts kept per revision, and of trend points per scope.
DEFAULT_HISTORY_LIMIT = 1000
DEFAULT_TREND_LIMIT = 1000
#: Records per Lua call when a rebuild applies a whole topic.
APPLY_CHUNK = 500
#: The counters of a trend point, in the order of its member after the Kafka coordinates.
TREND_FIELDS: tuple[str, ...] = (
    "as_of_position", "selected", "recurred", "avoided", "unknown", "unlinked_handoff_citations", "pending_outcomes",
    "needing_review", "repeat_failure_rate",
)
#: Order of the events of one task outcome at one position: the selection before its verdict.
EVENT_ORDER = {"selected": 0, "recurred": 1, "avoided": 1}


def pad(position: int) -> str:
    """A position as 19 digits: positions (≤ 2^63 − 1) compare as text."""
    return f"{position:019d}"


# ----------------------------------------------------------------- Lua

_PAD = "local function pad(s) return string.rep('0', 19 - #s) .. s end\n"

#: One scope of the view, guarded (see FollowerView). KEYS: scope hash, top,
#: review, scopes set, revisions hash. ARGV[1]: JSON payload.
GUARDED_WRITE = _PAD + """
local p = cjson.decode(ARGV[1])
local existed = redis.call('EXISTS', KEYS[4])
local wrote = 0
if type(p.scope) == 'table' then
  local stored = redis.call('HGET', KEYS[1], 'as_of_position')
  if (not stored) or pad(stored) <= p.scope.pos then
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
    local f = p.scope.fields
    for i = 1, #f, 2 do redis.call('HSET', KEYS[1], f[i], f[i + 1]) end
    local t = p.scope.top
    for i = 1, #t, 2 do redis.call('ZADD', KEYS[2], t[i], t[i + 1]) end
    for _, m in ipairs(p.scope.review) do redis.call('SADD', KEYS[3], m) end
    redis.call('SADD', KEYS[4], p.scope_id)
    local ix = p.scope.index
    for i = 1, #ix, 2 do redis.call('ZADD', p.index_prefix .. ix[i], ix[i + 1], p.scope_id) end
    wrote = 1
  end
end
local rows = 0
for _, r in ipairs(p.rows) do
  local stored = redis.call('HGET', KEYS[5], r[1])
  local newer = true
  if stored then
    local old = cjson.decode(stored)
    newer = (old.selected + old.recurred + old.avoided) <= r[3]
  end
  if newer then
    redis.call('HSET', KEYS[5], r[1], r[2])
    rows = rows + 1
  end
end
return {existed, wrote, rows}
"""

#: One filtered page of the scope index, read-only. KEYS: the sort's index,
#: the needing_review index. ARGV: needs_review ("", "1" or "0"), the scope id
#: substring ("" for none), offset, limit. Returns {available, ids…}: the
#: members of the sort's index in its order that pass the filters, counted,
#: rows offset to offset + limit returned — in Redis, without sending the
#: index to the caller.
SCOPE_PAGE = """
local needs, text = ARGV[1], ARGV[2]
local first, last = tonumber(ARGV[3]) + 1, tonumber(ARGV[3]) + tonumber(ARGV[4])
local page, seen = {}, 0
local function passes(id)
  if text ~= '' and string.find(id, text, 1, true) == nil then return false end
  if needs == '' then return true end
  local score = tonumber(redis.call('ZSCORE', KEYS[2], id) or '0')
  return (needs == '1') == (score < 0)
end
local available
if text == '' then
  -- Only the needing_review filter: its count is exact without a pass, and the
  -- walk stops once the page is full.
  local needing = redis.call('ZCOUNT', KEYS[2], '-inf', '(0')
  available = needs == '1' and needing or redis.call('ZCARD', KEYS[1]) - needing
end
local start, chunk = 0, 1000
while true do
  local ids = redis.call('ZRANGE', KEYS[1], start, start + chunk - 1)
  for _, id in ipairs(ids) do
    if passes(id) then
      seen = seen + 1
      if seen >= first and seen <= last then page[#page + 1] = id end
    end
  end
  if #ids < chunk or (available ~= nil and seen >= last) then break end
  start = start + chunk
end
table.insert(page, 1, available or seen)
return page
"""

#: RecurrenceObservations of one partition. KEYS: applied hash, queue,
#: queue items. ARGV: applied field, history limit, surface key prefix, JSON entries.
APPLY_OBSERVATIONS = """
local field, limit, surface_prefix = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local nxt = tonumber(redis.call('HGET', KEYS[1], field) or '0')
local applied = 0
for _, e in ipairs(cjson.decode(ARGV[4])) do
  if e.o >= nxt then
    redis.call('ZADD', e.h, e.s, e.mem)
    redis.call('HINCRBY', e.m, 'total', 1)
    redis.call('HINCRBY', e.m, e.e, 1)
    redis.call('HSET', e.m, 'signature_key', e.sig)
    if e.e == 'avoided' then
      redis.call('ZADD', e.a, e.s, e.pp)
      local fields = redis.call('HGETALL', e.m)
      for i = 1, #fields, 2 do
        local name = fields[i]
        if string.sub(name, 1, 2) == 'c:' then
          local start, surface = string.match(fields[i + 1], '^([0-9]*)|(.*)$')
          if start == '' or start < e.pp then
            local id = string.sub(name, 3)
            redis.call('ZREM', KEYS[2], id)
            redis.call('ZREM', e.q, id)
            redis.call('ZREM', surface_prefix .. surface, id)
            redis.call('HDEL', KEYS[3], id)
            redis.call('HDEL', e.m, name)
          end
        end
      end
    end
    local n = redis.call('ZCARD', e.h)
    if n > limit then redis.call('ZREMRANGEBYRANK', e.h, 0, n - limit - 1) end
    nxt = e.o + 1
    applied = applied + 1
  end
end
redis.call('HSET', KEYS[1], field, nxt)
return applied
"""

#: ReviewCandidates of one partition. KEYS: applied hash, queue, queue
#: items. ARGV: applied field, surface key prefix, JSON entries.
APPLY_CANDIDATES = """
local field, surface_prefix = ARGV[1], ARGV[2]
local nxt = tonumber(redis.call('HGET', KEYS[1], field) or '0')
local applied = 0
for _, e in ipairs(cjson.decode(ARGV[3])) do
  if e.o >= nxt then
    local last = redis.call('ZREVRANGE', e.a, 0, 0)
    local closed = #last > 0 and (e.start == '' or last[1] > e.start)
    if not closed then
      redis.call('ZADD', KEYS[2], e.ts, e.id)
      redis.call('ZADD', e.q, e.ts, e.id)
      redis.call('ZADD', surface_prefix .. e.surface, e.ts, e.id)
      redis.call('HSET', KEYS[3], e.id, e.item)
      redis.call('HSET', e.m, 'c:' .. e.id, e.start .. '|' .. e.surface)
    end
    nxt = e.o + 1
    applied = applied + 1
  end
end
redis.call('HSET', KEYS[1], field, nxt)
return applied
"""

#: ScopeStatistics records of one partition as trend points. KEYS: applied
#: hash, trend totals. ARGV: applied field, trend limit, JSON entries.
APPLY_TREND = """
local field, limit = ARGV[1], tonumber(ARGV[2])
local nxt = tonumber(redis.call('HGET', KEYS[1], field) or '0')
local applied = 0
for _, e in ipairs(cjson.decode(ARGV[3])) do
  if e.o >= nxt then
    redis.call('ZADD', e.k, e.s, e.mem)
    redis.call('HINCRBY', KEYS[2], e.scope, 1)
    local n = redis.call('ZCARD', e.k)
    if n > limit then redis.call('ZREMRANGEBYRANK', e.k, 0, n - limit - 1) end
    nxt = e.o + 1
    applied = applied + 1
  end
end
redis.call('HSET', KEYS[1], field, nxt)
return applied
"""


# ----------------------------------------------------------------- the guarded view


class FollowerView(RedisView):
    """``RedisView`` whose scope writes are guarded: a scope's keys are
    replaced only when the record's ``as_of_position`` is ≥ the stored one,
    a revision row only when its ``selected + recurred + avoided`` is ≥ the
    stored row's. Both grow with every record of the key in publication
    order (a scope's position is the highest applied; observations are
    never withdrawn), so an older record never replaces a newer one,
    whoever wrote the newer one. A record equal on that measure is written
    (the later read wins). Each scope is one Lua script (atomic, one round
    trip) writing exactly the keys and values ``RedisView._write`` writes
    (fields prepared by ``RedisView._prepare``), the scope index included.
    Everything else (pending records, back-off, ``submit``/``flush``) is
    RedisView's."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._guarded = self._client.register_script(GUARDED_WRITE)
        #: Scope records and revision rows left out by the guard since creation.
        self.stale_skipped = 0

    def _write(self, scope_id: str, pending: _Pending, check_namespace: bool = False) -> None:
        key = self.scope_key(scope_id)
        write = pending.scope
        payload: dict = {"scope_id": scope_id, "index_prefix": f"{self.namespace}:scopes:by:", "scope": None, "rows": []}
        if write is not None:
            record = orjson.loads(write.fields["record"])
            payload["scope"] = {
                "pos": pad(record["as_of_position"]),
                "fields": [item for name, value in write.fields.items() for item in (name, value.decode() if isinstance(value, bytes) else value)],
                "top": [item for member_, score in write.top.items() for item in (score, member_)],
                "review": list(write.review),
                "index": [item for sort, score in scope_index(record).items() for item in (sort, score)],
            }
        for member_, value in pending.revisions.items():
            row = orjson.loads(value)
            payload["rows"].append([member_, value.decode(), row["selected"] + row["recurred"] + row["avoided"]])
        existed, wrote, rows = self._guarded(
            keys=[key, f"{key}:top", f"{key}:review", self._scopes_key, f"{key}:revisions"], args=[orjson.dumps(payload)]
        )
        self.stale_skipped += (write is not None and not wrote) + len(pending.revisions) - rows
        if check_namespace and self._wrote and not existed and not self._needs_rebuild:
            self._needs_rebuild = True
        if write is not None and wrote:
            self._wrote = True


# ----------------------------------------------------------------- applying records


@dataclass(frozen=True)
class Located:
    """A decoded record with its Kafka coordinates: ``topic`` is the logical
    name, ``timestamp`` the record's Kafka timestamp in ms."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    value: dict


def history_member(observation: dict) -> str:
    """The history sorted-set member of a RecurrenceObservation (layout in
    the module docstring)."""
    ref = observation.get("failure_ref") or {}
    return orjson.dumps([
        observation["task_outcome_position"], observation["event"], observation["task_outcome_ref"]["source_id"],
        ref.get("item_kind"), ref.get("item_index"), ref.get("item_digest"), observation["observation_id"][7:23],
    ]).decode()


def trend_member(record: Located) -> str:
    """The trend sorted-set member of a ScopeStatistics record read at
    ``record``'s coordinates."""
    value = record.value
    return orjson.dumps([record.partition, record.offset, record.timestamp, *(value.get(name) for name in TREND_FIELDS)]).decode()


@dataclass
class AppliedCounts:
    """Records a call applied (the others were already applied)."""

    observations: int = 0
    candidates: int = 0
    trend_points: int = 0
    by_partition: dict[str, int] = field(default_factory=dict)


class ReadModels:
    """Writes and reads the read models of one namespace (layout in the
    module docstring) on a redis-py client (``decode_responses`` either
    way). ``history_limit`` / ``trend_limit``: verdicts kept per revision,
    points kept per scope (≥ 1). Not thread-safe for writes (one follower
    owns them); reads are."""

    def __init__(self, client: redis.Redis, namespace: str, history_limit: int = DEFAULT_HISTORY_LIMIT, trend_limit: int = DEFAULT_TREND_LIMIT):
        if history_limit < 1 or trend_limit < 1:
            raise ValueError("history_limit and trend_limit must be ≥ 1")
        self.client = client
        self.keys = Keys(namespace)
        self.history_limit = history_limit
        self.trend_limit = trend_limit
        self._observations = client.register_script(APPLY_OBSERVATIONS)
        self._candidates = client.register_script(APPLY_CANDIDATES)
        self._trend = client.register_script(APPLY_TREND)
        self._scope_page = client.register_script(SCOPE_PAGE)

    # -- writes

    def _observation_entry(self, record: Located) -> dict | None:
        value = record.value
        ref = value["artifact_ref"]
        if ref.get("family") != "experience":
            return None
        scope_id, artifact_id, revision = value["scope_id"], ref["artifact_id"], ref["revision"]
        position = value["task_outcome_position"]
        return {
            "o": record.offset, "h": self.keys.history(scope_id, artifact_id, revision),
            "m": self.keys.history_meta(scope_id, artifact_id, revision), "a": self.keys.avoided(scope_id, artifact_id, revision),
            "q": self.keys.scope_queue(scope_id), "s": position, "pp": pad(position), "mem": history_member(value),
            "e": value["event"], "sig": value["signature_key"],
        }

    def _candidate_entry(self, record: Located) -> dict:
        value = record.value
        ref = value["artifact_ref"]
        scope_id, artifact_id, revision = value["scope_id"], ref["artifact_id"], ref["revision"]
        start = value["run_start_position"]
        return {
            "o": record.offset, "id": value["candidate_id"], "ts": record.timestamp, "q": self.keys.scope_queue(scope_id),
            "m": self.keys.history_meta(scope_id, artifact_id, revision), "a": self.keys.avoided(scope_id, artifact_id, revision),
            "start": "" if start is None else pad(start), "surface": value["repair_surface"],
            "item": orjson.dumps({"candidate": value, "timestamp": record.timestamp}).decode(),
        }

    def _trend_entry(self, record: Located) -> dict:
        scope_id = record.value["scope_id"]
        return {"o": record.offset, "k": self.keys.trend(scope_id), "s": record.value["as_of_position"], "mem": trend_member(record), "scope": scope_id}

    def apply(self, records: Iterable[Located]) -> AppliedCounts:
        """Apply RecurrenceObservation, ReviewCandidate and ScopeStatistics
        records (other topics are ignored), each partition's in offset
        order, in one MULTI/EXEC (one Lua script per topic partition and
        chunk). Records below a partition's ``follow-applied`` offset are
        skipped. Returns what was applied; raises redis errors (then nothing
        or everything of the call was applied)."""
        groups: dict[tuple[str, int], list[Located]] = {}
        for record in records:
            if record.topic in (OBSERVATIONS, REVIEW_CANDIDATES, STATISTICS):
                groups.setdefault((record.topic, record.partition), []).append(record)
        counts = AppliedCounts()
        if not groups:
            return counts
        keys = self.keys
        pipe = self.client.pipeline(transaction=True)
        calls: list[str] = []
        for (topic, partition), group in sorted(groups.items()):
            group.sort(key=lambda record: record.offset)
            applied_field = f"{topic}:{partition}"
            for start in range(0, len(group), APPLY_CHUNK):
                chunk = group[start : start + APPLY_CHUNK]
                if topic == OBSERVATIONS:
                    # Observations are of Experience revisions (contract §7); anything else has no history.
                    entries = [entry for entry in map(self._observation_entry, chunk) if entry is not None]
                    self._observations(
                        keys=[keys.applied, keys.queue, keys.queue_items],
                        args=[applied_field, self.history_limit, keys.surface_prefix, orjson.dumps(entries)], client=pipe,
                    )
                elif topic == REVIEW_CANDIDATES:
                    entries = [self._candidate_entry(record) for record in chunk]
                    self._candidates(keys=[keys.applied, keys.queue, keys.queue_items], args=[applied_field, keys.surface_prefix, orjson.dumps(entries)], client=pipe)
                else:
                    entries = [self._trend_entry(record) for record in chunk]
                    self._trend(keys=[keys.applied, keys.trend_totals], args=[applied_field, self.trend_limit, orjson.dumps(entries)], client=pipe)
                calls.append(topic)
        for topic, applied in zip(calls, pipe.execute(), strict=True):
            if topic == OBSERVATIONS:
                counts.observations += applied
            elif topic == REVIEW_CANDIDATES:
                counts.candidates += applied
            else:
                counts.trend_points += applied
        return counts

    def clear(self) -> int:
        """Delete every read-model key of the namespace (SCAN, UNLINK in
        batches; the view's keys and the scope index stay); returns the
        number deleted."""
        pattern = self.keys.read_model_pattern()
        deleted = 0
        batch: list = []
        for key in self.client.scan_iter(match=self.keys.glob(), count=1000):
            text = key.decode() if isinstance(key, bytes) else key
            if pattern.fullmatch(text):
                batch.append(key)
                if len(batch) >= 500:
                    deleted += self.client.unlink(*batch)
                    batch.clear()
        if batch:
            deleted += self.client.unlink(*batch)
        return deleted

    def memory(self) -> dict[str, int]:
        """Bytes of the read models by kind (``MEMORY USAGE`` of every key,
        samples 0 = exact): history (the three per-revision keys), trend,
        review_queue, applied, and keys (how many)."""
        pattern = self.keys.read_model_pattern()
        kinds = {"history": 0, "trend": 0, "review_queue": 0, "applied": 0, "keys": 0}
        for key in self.client.scan_iter(match=self.keys.glob(), count=1000):
            text = key.decode() if isinstance(key, bytes) else key
            if not pattern.fullmatch(text):
                continue
            size = self.client.memory_usage(key, samples=0) or 0
            kinds["keys"] += 1
            if re.search(r":(history|history-meta|avoided):", text):
                kinds["history"] += size
            elif text.endswith((":trend", ":trend-totals")):
                kinds["trend"] += size
            elif "review-queue" in text:
                kinds["review_queue"] += size
            else:
                kinds["applied"] += size
        return kinds

    # -- reads

    def history(self, scope_id: str, artifact_id: str, revision: int) -> RevisionHistory | None:
        """The revision's history as stored, with the scope's review
        threshold and the revision's view row, or None when the view does
        not hold the scope. Two round trips: one MULTI/EXEC for the scope,
        the row, the kept verdicts and the meta hash, then the position of
        the last avoided verdict before the oldest kept one."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=True)
        pipe.hmget(keys.scope(scope_id), "as_of_position", "review_threshold")
        pipe.hget(f"{keys.scope(scope_id)}:revisions", revision_member({"family": "experience", "artifact_id": artifact_id, "revision": revision}))
        pipe.zrange(keys.history(scope_id, artifact_id, revision), 0, -1)
        pipe.hgetall(keys.history_meta(scope_id, artifact_id, revision))
        (as_of, threshold), row, members, meta = pipe.execute()
        if as_of is None:
            return None
        entries = [orjson.loads(member_) for member_ in members]
        floor = None
        if entries:
            lowest = min(entry[0] for entry in entries)
            below = self.client.zrevrangebyscore(keys.avoided(scope_id, artifact_id, revision), f"({lowest}", "-inf", start=0, num=1)
            floor = int(below[0]) if below else None
        meta = {_text(name): _text(value) for name, value in meta.items()}
        digest = hashlib.sha256(b"%s\x00%s\x00%s\x00" % (_bytes(as_of), _bytes(threshold or b"none"), _bytes(row or b"none")))
        for member_ in members:
            digest.update(_bytes(member_) + b"\x00")
        for name in sorted(meta):
            digest.update(f"{name}={meta[name]}\x00".encode())
        digest.update(b"floor=%s" % str(floor).encode())
        return RevisionHistory(
            scope_id=scope_id, artifact_id=artifact_id, revision=revision, as_of_position=int(as_of),
            review_threshold=int(threshold) if threshold is not None else None,
            row=orjson.loads(row) if row is not None else None,
            entries=entries, floor=floor, meta=meta, etag='"' + digest.hexdigest()[:32] + '"',
        )

    def trend(self, scope_id: str, from_position: int, limit: int) -> TrendPage | None:
        """Up to ``limit`` trend points with ``as_of_position ≥
        from_position``, oldest first (ties by Kafka partition and offset),
        never splitting the points of one position across pages unless one
        position alone has more than ``limit``; None when the view does not
        hold the scope."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(keys.scope(scope_id), "as_of_position")
        pipe.zrangebyscore(keys.trend(scope_id), from_position, "+inf", start=0, num=limit + 1)
        pipe.zcard(keys.trend(scope_id))
        pipe.hget(keys.trend_totals, scope_id)
        as_of, members, retained, total = pipe.execute()
        if as_of is None:
            return None
        points = sorted((orjson.loads(member_) for member_ in members), key=lambda p: (p[3], p[0], p[1]))
        next_from = None
        if len(points) > limit:
            extra = points[limit]
            points = points[:limit]
            tied = [point for point in points if point[3] == extra[3]]
            if len(tied) < len(points):
                points = [point for point in points if point[3] != extra[3]]
                next_from = extra[3]
            else:
                next_from = extra[3] + 1
        digest = hashlib.sha256(b"%d\x00%s\x00%s\x00" % (retained, _bytes(total or b"0"), _bytes(as_of)))
        for member_ in members:
            digest.update(_bytes(member_) + b"\x00")
        return TrendPage(scope_id, int(as_of), int(total or 0), retained, points, next_from, '"' + digest.hexdigest()[:32] + '"')

    def review_queue(self, scope_id: str | None, surface: str | None, offset: int, limit: int) -> QueuePage:
        """The open review candidates, oldest first (ties by candidate_id),
        of one scope and/or one repair_surface (None: all), rows ``offset``
        to ``offset + limit``; ``available`` counts those passing the
        filters. One MULTI/EXEC for the ids and one HMGET for the page."""
        keys = self.keys
        source = keys.scope_queue(scope_id) if scope_id is not None else keys.surface_prefix + surface if surface is not None else keys.queue
        pipe = self.client.pipeline(transaction=True)
        pipe.zcard(keys.queue)
        if scope_id is not None and surface is not None:
            pipe.zrange(source, 0, -1)  # a scope's queue is small: filtered below
        else:
            pipe.zcard(source)
            pipe.zrange(source, offset, offset + limit - 1)
        results = pipe.execute()
        total = results[0]
        if scope_id is not None and surface is not None:
            ids = results[1]
            items = self.client.hmget(keys.queue_items, ids) if ids else []
            kept = [item for item in items if item is not None and orjson.loads(item)["candidate"]["repair_surface"] == surface]
            available, page = len(kept), kept[offset : offset + limit]
        else:
            available, ids = results[1], results[2]
            page = [item for item in (self.client.hmget(keys.queue_items, ids) if ids else []) if item is not None]
        digest = hashlib.sha256(b"%d\x00%d\x00" % (total, available))
        for item in page:
            digest.update(_bytes(item) + b"\x00")
        return QueuePage(total, available, [orjson.loads(item) for item in page], '"' + digest.hexdigest()[:32] + '"')

    def scope_page(self, sort: str, text: str | None, needs_review: bool | None, offset: int, limit: int) -> ScopePage:
        """One page of ``GET /scopes``: the scope ids in ``sort`` order
        (:data:`recurrence_ledger.read.projection.SCOPE_SORTS`) whose id contains
        ``text`` (None: any) and whose ``needing_review`` is > 0 (True) or 0
        (False) (None: any), rows ``offset`` to ``offset + limit``, with
        their stored records.

        Reads the scope index, never every scope's hash: without a filter
        one ZRANGE of the page; with one, a read-only Lua script walks the
        sort's index in Redis and sends back only the page (a scope id
        substring: the whole index, O(scopes); needs_review alone: until the
        page is full, its count from the needing_review index);
        then the page's records in one pipeline. When the index does not hold every scope
        (a view written before it existed), the records of every scope are
        read and sorted here, as ``GET /scopes`` did before (``indexed``
        False): ``recurrence-ledger view rebuild`` writes the index."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.scard(keys.scopes)
        pipe.zcard(keys.scope_index("scope_id"))
        total, indexed = pipe.execute()
        filtered = text is not None or needs_review is not None
        if indexed != total or sort not in SCOPE_SORTS:
            ordered = self._unindexed(sort, text, needs_review)
            return self._page(total, len(ordered), ordered[offset : offset + limit], indexed=False)
        if not filtered:
            ids = [_text(member_) for member_ in self.client.zrange(keys.scope_index(sort), offset, offset + limit - 1)]
            return self._page(total, total, ids, indexed=True)
        if sort == "needing_review" and text is None and needs_review is True:
            # The needing_review index in its own order: the scopes with needing_review > 0 come first.
            key = keys.scope_index("needing_review")
            pipe = self.client.pipeline(transaction=False)
            pipe.zcount(key, "-inf", "(0")
            pipe.zrangebyscore(key, "-inf", "(0", start=offset, num=limit)
            available, members = pipe.execute()
            return self._page(total, available, [_text(member_) for member_ in members], indexed=True)
        flag = "" if needs_review is None else "1" if needs_review else "0"
        result = self._read_only_script(self._scope_page, [keys.scope_index(sort), keys.scope_index("needing_review")], [flag, text or "", offset, limit])
        return self._page(total, int(result[0]), [_text(member_) for member_ in result[1:]], indexed=True)

    def _read_only_script(self, script, keys: list[str], args: list) -> list:  # noqa: ANN001 - redis.commands.core.Script
        """Run a read-only Lua script with EVALSHA_RO (Redis ≥ 7), loading it
        first when Redis lacks it: a reader whose ACL grants read-only key
        access (``%R~``) may run it, where EVALSHA counts as a write."""
        try:
            return self.client.evalsha_ro(script.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.client.script_load(script.script)
            return self.client.evalsha_ro(script.sha, len(keys), *keys, *args)

    def _unindexed(self, sort: str, text: str | None, needs_review: bool | None) -> list[str]:
        every = sorted(_text(member_) for member_ in self.client.smembers(self.keys.scopes))
        pipe = self.client.pipeline(transaction=False)
        for scope_id in every:
            pipe.hget(self.keys.scope(scope_id), "record")
        rows = []
        for scope_id, raw in zip(every, pipe.execute(), strict=True):
            if raw is None or (text is not None and text not in scope_id):
                continue
            record = orjson.loads(raw)
            if needs_review is not None and (record["needing_review"] > 0) != needs_review:
                continue
            rows.append((scope_index(record).get(sort, 0), scope_id))
        rows.sort()
        return [scope_id for _, scope_id in rows]

    def _page(self, total: int, available: int, ids: list[str], indexed: bool) -> ScopePage:
        pipe = self.client.pipeline(transaction=False)
        for scope_id in ids:
            pipe.hget(self.keys.scope(scope_id), "record")
        records = {scope_id: _bytes(raw) for scope_id, raw in zip(ids, pipe.execute(), strict=True) if raw is not None}
        return ScopePage(total, available, records, indexed)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


# ----------------------------------------------------------------- what the readers return


@dataclass(frozen=True)
class ScopePage:
    """``total``: scopes in the view; ``available``: those passing the
    filters; ``records``: scope id → stored record bytes of the page, in
    order; ``indexed``: read through the scope index."""

    total: int
    available: int
    records: dict[str, bytes]
    indexed: bool


@dataclass(frozen=True)
class TrendPage:
    """Trend points (member lists, layout in the module docstring), oldest
    first; ``total`` points ever applied, ``retained`` kept;
    ``next_from_position`` the ``from_position`` of the next page (None:
    this was the last)."""

    scope_id: str
    as_of_position: int
    total: int
    retained: int
    points: list[list]
    next_from_position: int | None
    etag: str

    def rows(self) -> list[dict]:
        """The points as dicts: as_of_position, timestamp (ms), partition,
        offset and the counters."""
        return [
            {"partition": point[0], "offset": point[1], "timestamp": point[2], **dict(zip(TREND_FIELDS, point[3:], strict=True))}
            for point in self.points
        ]


@dataclass(frozen=True)
class QueuePage:
    """``total`` open candidates in the queue, ``available`` passing the
    filters, ``items`` the page (``{"candidate": ReviewCandidate,
    "timestamp": ms}``)."""

    total: int
    available: int
    items: list[dict]
    etag: str


@dataclass(frozen=True)
class RevisionHistory:
    """What Redis holds of one revision's history. ``entries``: the kept
    members (lists, layout in the module docstring); ``floor``: the position
    of the last avoided verdict before the oldest kept one (None: none);
    ``meta``: the history-meta hash; ``row``: the revision's
    RevisionStatistics row from the view (None when absent)."""

    scope_id: str
    artifact_id: str
    revision: int
    as_of_position: int
    review_threshold: int | None
    row: dict | None
    entries: list[list]
    floor: int | None
    meta: dict[str, str]
    etag: str

    @property
    def total(self) -> int:
        """Observations ever applied to the history (kept or not)."""
        return int(self.meta.get("total", 0))

    @property
    def open_candidates(self) -> dict[int | None, str]:
        """Run name → candidate_id of the revision's open review candidates."""
        runs: dict[int | None, str] = {}
        for name, value in self.meta.items():
            if name.startswith("c:"):
                start = value.split("|", 1)[0]
                runs[int(start) if start else None] = name[2:]
        return runs

    def verdicts(self) -> list[dict]:
        """The kept observations with their runs (:func:`with_runs`), oldest first."""
        return with_runs(self.entries, self.floor)

    def runs(self, verdicts: list[dict] | None = None) -> list[dict]:
        """The runs of the kept observations (:func:`runs_of`)."""
        verdicts = self.verdicts() if verdicts is None else verdicts
        return runs_of(verdicts, self.review_threshold, self.floor, truncated=self.total > len(self.entries), open_candidates=self.open_candidates)


def with_runs(entries: Iterable[list], floor: int | None = None) -> list[dict]:
    """History members (lists) as dicts, oldest first (by position; at one
    position the selection before its verdict), each with ``run``: the name
    of the run it belongs to (contract §8) — the position of the avoided
    verdict that opened it, None for the run at the start of the history.
    An avoided verdict opens its own run (and so does the selection of its
    outcome); every other observation belongs to the run of the last avoided
    verdict before its position, or to ``floor`` (the last avoided verdict
    before the kept ones). A selection's
    ``verdict`` is its outcome's terminal verdict among the kept ones
    (None: unknown, contract §7); a verdict's is its own event."""
    rows = [
        {
            "task_outcome_position": entry[0], "event": entry[1], "task_outcome_id": entry[2],
            "failure_ref": None if entry[3] is None else {"item_kind": entry[3], "item_index": entry[4], "item_digest": entry[5]},
            "observation": entry[6],
        }
        for entry in entries
    ]
    rows.sort(key=lambda row: (row["task_outcome_position"], EVENT_ORDER.get(row["event"], 2), row["task_outcome_id"], row["observation"]))
    terminal = {row["task_outcome_id"]: row["event"] for row in rows if row["event"] != "selected"}
    current = floor
    for row in rows:
        if row["event"] == "avoided":
            current = row["task_outcome_position"]
        row["verdict"] = terminal.get(row["task_outcome_id"]) if row["event"] == "selected" else row["event"]
        # A selection whose outcome was avoided goes with its verdict, into the run that verdict opens.
        row["run"] = row["task_outcome_position"] if row["event"] == "selected" and row["verdict"] == "avoided" else current
    return rows


def runs_of(verdicts: list[dict], threshold: int | None, floor: int | None = None, truncated: bool = False,
            open_candidates: dict[int | None, str] | None = None) -> list[dict]:
    """The runs of ``verdicts`` (:func:`with_runs`), oldest first: name
    (``run_start_position``), ``recurred`` (its recurred verdicts among the
    kept ones), first and last position, ``reaches_threshold`` (recurred ≥
    ``threshold``), ``current`` (the revision's last run), ``complete``
    (every observation of the run is kept: false for the oldest run of a
    truncated history) and ``review_candidate`` (the id of its open review
    candidate, or None)."""
    open_candidates = open_candidates or {}
    runs: dict[int | None, dict] = {}
    kept_avoided = {row["task_outcome_position"] for row in verdicts if row["event"] == "avoided"}
    for row in verdicts:
        run = runs.setdefault(row["run"], {
            "run_start_position": row["run"], "recurred": 0, "first_position": row["task_outcome_position"],
            "last_position": row["task_outcome_position"],
        })
        run["last_position"] = row["task_outcome_position"]
        run["recurred"] += row["event"] == "recurred"
    ordered = list(runs.values())
    for index, run in enumerate(ordered):
        start = run["run_start_position"]
        run["reaches_threshold"] = threshold is not None and run["recurred"] >= threshold
        run["current"] = index == len(ordered) - 1
        run["complete"] = not truncated or start in kept_avoided
        run["review_candidate"] = open_candidates.get(start)
    return ordered


def page_etag(total: int, available: int, records: dict[str, bytes]) -> str:
    """Entity tag of a ``GET /scopes`` page: sha256 over the number of
    scopes, the number passing the filters and every (scope id, record) of
    the page."""
    digest = hashlib.sha256(b"%d\x00%d\x00" % (total, available))
    for scope_id, raw in records.items():
        digest.update(scope_id.encode() + b"\x00" + raw + b"\x00")
    return '"' + digest.hexdigest()[:32] + '"'


__all__ = [
    "DEFAULT_HISTORY_LIMIT", "DEFAULT_TREND_LIMIT", "FollowerView", "Keys", "Located", "ReadModels", "RevisionHistory",
    "ScopePage", "TrendPage", "QueuePage", "page_etag", "runs_of", "with_runs",
]
