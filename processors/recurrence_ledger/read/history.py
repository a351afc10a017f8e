"""Read models of the history (operators see history, not just a snapshot):
each revision's verdict history with its runs (contract §8), each scope's
trend, the review queue across scopes, and the scope index of ``GET
/scopes?sort=…`` — kept in Redis beside the view (``recurrence_ledger.read.projection``)
by the view follower (``recurrence_ledger.read.follower``) and rebuilt
from the topics by ``recurrence-ledger view rebuild``.

Like the view, they are never a source of truth: every one is derived from
the ledger topics (``recurrence-observations``, ``review-candidates``) and
the ``recurrence-statistics`` and ``review-status`` view topics, and can be
dropped and rebuilt.

Redis key layout: ``recurrence_ledger.read.keys`` (the one owner of every key name).

The review queue holds every review candidate, filed by its ReviewStatus
(contract §18, from the compacted ``review-status`` view): ``open`` until
the worker publishes another status for it (``superseded``, ``approved``,
``rejected``); the same whichever of the two topics is applied first. A
revision's history also knows, for each run, the candidate of the run
while no avoided verdict of its revision has a position after the run's
start (``run_start_position``; null: any avoided verdict), in the same
way in any order of the topics.

Exactly-once application (``recurrence_ledger.read.records``): the records
of each batch of one partition of one topic are applied by one Lua script
per scope (and, for the review topics, one for the cross-scope review keys:
each script stays in one Redis Cluster slot), which skips the records below
the partition's offset in its ``applied`` hash and moves it past them in the
same atomic step. So a follower that applied a batch, or a part of it, and
died before committing its consumer offsets (at-least-once) applies nothing
twice: counts and trims stay exact. A rebuild applies every record of the topics through the same
scripts, so it recreates exactly what a follower that read them all holds.

Scope and revision rows of the view itself are written by the follower
through ``recurrence_ledger.read.follower_view.FollowerView``. What the
reads return is in ``recurrence_ledger.read.pages``; the Lua scripts in
``recurrence_ledger.read.scripts``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import get_args

import orjson
import redis

from recurrence_ledger.ledger.models import RepairState, ReviewState
from recurrence_ledger.policy import DEFAULT_HISTORY_LIMIT, DEFAULT_TREND_LIMIT
from recurrence_ledger.read.keys import REVIEW_FILTERS, SCOPE_SORTS, Keys
from recurrence_ledger.read.pages import CandidateEntry, QueuePage, ReviewGauges, RevisionHistory, ScopePage, TrendPage, etag
from recurrence_ledger.read.projection import revision_member, scope_index
from recurrence_ledger.read.records import AppliedCounts, Located, apply_records
from recurrence_ledger.read.scripts import run_read_only, scripts

#: The statuses of a review candidate (contract §18), in the order counts are given.
REVIEW_STATUSES: tuple[str, ...] = get_args(ReviewState)
#: The statuses of a repair (contract §18).
REPAIR_STATUSES: tuple[str, ...] = get_args(RepairState)


class ReadModels:
    """Writes and reads the read models of one namespace (layout in
    ``recurrence_ledger.read.keys``) on a redis-py client
    (``decode_responses`` either way). ``history_limit`` / ``trend_limit``:
    verdicts kept per revision, points kept per scope (≥ 1). Not
    thread-safe for writes (one follower owns them); reads are. Raises
    ValueError for a limit < 1."""

    def __init__(self, client: redis.Redis, namespace: str, history_limit: int = DEFAULT_HISTORY_LIMIT, trend_limit: int = DEFAULT_TREND_LIMIT):
        if history_limit < 1 or trend_limit < 1:
            raise ValueError("history_limit and trend_limit must be ≥ 1")
        self.client = client
        self.keys = Keys(namespace)
        self.history_limit = history_limit
        self.trend_limit = trend_limit
        scripts(client)  # registered once per client, before any thread reads

    # -- writes

    def apply(self, records: Iterable[Located]) -> AppliedCounts:
        """Apply RecurrenceObservation, ReviewCandidate, ReviewStatus and
        ScopeStatistics records (other topics are ignored), each partition's in offset
        order, in one round trip (one Lua script per scope, topic partition
        and chunk, and one per topic partition and chunk for the cross-scope
        review keys; ``recurrence_ledger.read.records.apply_records``).
        Records below a partition's offset in a script's ``applied`` hash are
        skipped. Returns what was applied; raises redis errors (then, on a
        single Redis, nothing or everything of the call was applied; on Redis
        Cluster a part may be, which applying the records again completes)."""
        return apply_records(self.client, self.keys, records, self.history_limit, self.trend_limit)

    def clear(self) -> int:
        """Delete every read-model key of the namespace (SCAN, UNLINK in
        batches; the view's keys and the scope index stay); returns the
        number deleted."""
        pattern = self.keys.read_model_pattern()
        deleted = 0
        batch: list = []
        for key in self.client.scan_iter(match=self.keys.glob(), count=1000):
            if pattern.fullmatch(_text(key)):
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
        kinds = {"history": 0, "trend": 0, "review_queue": 0, "applied": 0, "keys": 0}
        for key in self.client.scan_iter(match=self.keys.glob(), count=1000):
            kind = self.keys.read_model_kind(_text(key))
            if kind is None:
                continue
            kinds["keys"] += 1
            kinds[kind] += self.client.memory_usage(key, samples=0) or 0
        return kinds

    # -- reads

    def history(self, scope_id: str, artifact_id: str, revision: int, scope_fields: tuple[str, ...] = ()) -> RevisionHistory | None:
        """The revision's history as stored, with the revision's view row
        (which names the runs reaching the review threshold) and the
        ``scope_fields`` the caller asks of the scope's hash (text or None
        each, in ``RevisionHistory.scope``), or None when the view does
        not hold the scope. Two round trips: one MULTI/EXEC for the scope,
        the row, the kept verdicts and the meta hash, then the position of
        the last avoided verdict before the oldest kept one."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=True)
        pipe.hmget(keys.scope(scope_id), "as_of_position", *scope_fields)
        pipe.hget(keys.revisions(scope_id), revision_member({"family": "experience", "artifact_id": artifact_id, "revision": revision}))
        pipe.zrange(keys.history(scope_id, artifact_id, revision), 0, -1)
        pipe.hgetall(keys.history_meta(scope_id, artifact_id, revision))
        (as_of, *asked), row, members, meta = pipe.execute()
        if as_of is None:
            return None
        entries = [orjson.loads(member_) for member_ in members]
        floor = None
        if entries:
            lowest = min(entry[0] for entry in entries)
            below = self.client.zrevrangebyscore(keys.avoided(scope_id, artifact_id, revision), f"({lowest}", "-inf", start=0, num=1)
            floor = int(below[0]) if below else None
        meta = {_text(name): _text(value) for name, value in meta.items()}
        digest = hashlib.sha256(b"%s\x00%s\x00" % (_bytes(as_of), _bytes(row or b"none")))
        for value in asked:
            digest.update(_bytes(value or b"none") + b"\x00")
        for member_ in members:
            digest.update(_bytes(member_) + b"\x00")
        for name in sorted(meta):
            digest.update(f"{name}={meta[name]}\x00".encode())
        digest.update(b"floor=%s" % str(floor).encode())
        return RevisionHistory(
            scope_id=scope_id, artifact_id=artifact_id, revision=revision, as_of_position=int(as_of),
            scope={name: None if value is None else _text(value) for name, value in zip(scope_fields, asked, strict=True)},
            row=orjson.loads(row) if row is not None else None,
            entries=entries, floor=floor, meta=meta, etag=etag(digest),
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
        pipe.hget(keys.trend_meta(scope_id), "total")
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
        return TrendPage(scope_id, int(as_of), int(total or 0), retained, points, next_from, etag(digest))

    def review_queue(self, scope_id: str | None, surface: str | None, offset: int, limit: int, status: str = "open") -> QueuePage:
        """The review candidates whose status passes ``status`` (one of
        ``recurrence_ledger.read.keys.REVIEW_FILTERS``: open, superseded,
        approved, rejected, decided, all), oldest first by their record's
        Kafka timestamp (ties by candidate_id), of one scope and/or one
        repair_surface (None: all), rows ``offset`` to ``offset + limit``,
        each with its ReviewStatus; ``available`` counts those passing the
        filters, ``counts`` the scope's (or every scope's) candidates by
        status. One MULTI/EXEC for the ids and the counts (of one slot: the
        scope's keys, or the namespace's), one for the page; for one scope,
        the count of every scope's first. Raises KeyError for an unknown
        ``status``."""
        keys = self.keys
        if status not in REVIEW_FILTERS:
            raise KeyError(status)
        def filtered(name: str) -> str:
            return keys.scope_queue(scope_id, name) if scope_id is not None else keys.queue(name)

        pipe = self.client.pipeline(transaction=True)
        if scope_id is None:
            pipe.zcard(keys.queue(status))
        else:
            every_scope = self.client.zcard(keys.queue(status))
        for name in REVIEW_STATUSES:
            pipe.zcard(filtered(name))
        if surface is not None:
            pipe.zrange(filtered(status), 0, -1)  # one surface: filtered below
        else:
            pipe.zcard(filtered(status))
            pipe.zrange(filtered(status), offset, offset + limit - 1)
        results = pipe.execute()
        if scope_id is not None:
            results.insert(0, every_scope)
        total, counts = results[0], dict(zip(REVIEW_STATUSES, results[1 : 1 + len(REVIEW_STATUSES)], strict=True))
        ids = results[-1]
        items = self._items(ids)
        if surface is not None:
            kept = [item for item in items if item["candidate"]["repair_surface"] == surface]
            available, page = len(kept), kept[offset : offset + limit]
        else:
            available, page = results[-2], items
        digest = hashlib.sha256(b"%d\x00%d\x00" % (total, available) + orjson.dumps(counts))
        for item in page:
            digest.update(orjson.dumps(item) + b"\x00")
        return QueuePage(total, available, counts, page, etag(digest))

    def _items(self, ids: list) -> list[dict]:
        """The queue items of ``ids`` with their ReviewStatus rows, in order
        (ids without an item left out)."""
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=True)
        pipe.hmget(self.keys.queue_items, ids)
        pipe.hmget(self.keys.review_status, ids)
        raw_items, raw_statuses = pipe.execute()
        items = [
            {**orjson.loads(item), "status": orjson.loads(row) if row is not None else None}
            for item, row in zip(raw_items, raw_statuses, strict=True) if item is not None
        ]
        return self._with_severity(items)

    def _with_severity(self, items: list[dict]) -> list[dict]:
        """Each item with ``severity``: its revision's (contract §22), from
        the scope's revision row in the view (None: unrated, or no row yet).
        One pipelined round trip, not a transaction: the rows of several
        scopes are in several slots of a Redis Cluster."""
        if not items:
            return items
        pipe = self.client.pipeline(transaction=False)
        for item in items:
            candidate = item["candidate"]
            pipe.hget(self.keys.revisions(candidate["scope_id"]), revision_member(candidate["artifact_ref"]))
        for item, row in zip(items, pipe.execute(), strict=True):
            item["severity"] = orjson.loads(row).get("severity") if row is not None else None
        return items

    def review_candidate(self, candidate_id: str) -> CandidateEntry | None:
        """One review candidate (of any scope: candidate ids are digests
        of their scope, contract §8) with its ReviewStatus and its scope's
        ``as_of_position``, or None when the read models hold no such
        candidate. Its ``etag`` digests everything the entry shows: the
        item, the status, the scope's position and the item's severity (its
        revision's row, contract §22: a severity that changes changes the
        tag). Three round trips."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(self.keys.queue_items, candidate_id)
        pipe.hget(self.keys.review_status, candidate_id)
        raw_item, raw_status = pipe.execute()
        if raw_item is None:
            return None
        item = self._with_severity([orjson.loads(raw_item)])[0]
        as_of = self.client.hget(self.keys.scope(item["candidate"]["scope_id"]), "as_of_position")
        digest = hashlib.sha256(_bytes(raw_item) + b"\x00" + _bytes(raw_status or b"none") + b"\x00" + _bytes(as_of or b"none")
                                + b"\x00" + orjson.dumps(item["severity"]))
        return CandidateEntry(
            item=item, status=orjson.loads(raw_status) if raw_status is not None else None,
            as_of_position=int(as_of) if as_of is not None else None, etag=etag(digest),
        )

    def review_gauges(self) -> ReviewGauges:
        """The review queue in numbers (``ReviewGauges``), in one MULTI/EXEC."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=True)
        for name in REVIEW_STATUSES:
            pipe.zcard(keys.queue(name))
        pipe.zrange(keys.queue("open"), 0, 0, withscores=True)
        pipe.hgetall(keys.review_repairs)
        *cards, oldest, repairs = pipe.execute()
        stored = {_text(name): int(value) for name, value in repairs.items()}
        return ReviewGauges(
            statuses=dict(zip(REVIEW_STATUSES, cards, strict=True)),
            oldest_open_ms=int(oldest[0][1]) if oldest else None,
            repairs={name: stored.get(name, 0) for name in REPAIR_STATUSES},
        )

    def scope_page(self, sort: str, text: str | None, needs_review: bool | None, offset: int, limit: int) -> ScopePage:
        """One page of ``GET /scopes``: the scope ids in ``sort`` order
        (:data:`recurrence_ledger.read.keys.SCOPE_SORTS`) whose id contains
        ``text`` (None: any) and whose ``needing_review`` is > 0 (True) or 0
        (False) (None: any), rows ``offset`` to ``offset + limit``, with
        their stored records.

        Reads the scope index, never every scope's hash: without a filter
        one ZRANGE of the page; with one, a read-only Lua script walks the
        sort's index in Redis and sends back only the page (a scope id
        substring: the whole index, O(scopes); needs_review alone: until the
        page is full, its count from the needing_review index); then the
        page's records in one pipeline. When the index does not hold every
        scope (a view written before it existed), the records of every scope
        are read and sorted here, as ``GET /scopes`` did before (``indexed``
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
        result = run_read_only(
            self.client, scripts(self.client).scope_page, [keys.scope_index(sort), keys.scope_index("needing_review")], [flag, text or "", offset, limit]
        )
        return self._page(total, int(result[0]), [_text(member_) for member_ in result[1:]], indexed=True)

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


__all__ = ["DEFAULT_HISTORY_LIMIT", "DEFAULT_TREND_LIMIT", "REPAIR_STATUSES", "REVIEW_STATUSES", "ReadModels"]
