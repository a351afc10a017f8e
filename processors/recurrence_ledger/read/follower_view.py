"""The view as the view follower writes it (``recurrence_ledger.read.follower``):
``RedisView``'s writing code behind a guard, so that a follower never puts
back an older row than the one Redis holds, whoever wrote it (a worker
writing the view after its commits, or the follower itself replaying after
a restart).
"""

from __future__ import annotations

import orjson

from recurrence_ledger.read.projection import RedisView, PendingWrite
from recurrence_ledger.read.records import pad
from recurrence_ledger.read.scripts import run_call, scripts


#: The fields the guard compares (``guarded_write.lua`` gets them as
#: ARGV, it spells none): a scope record's position and a revision row's
#: version, both published by the ledger and growing with every record of
#: their key (``recurrence_ledger.ledger.records``).
POSITION_FIELD = "as_of_position"
VERSION_FIELD = "version"


class FollowerView(RedisView):
    """``RedisView`` whose scope writes are guarded: a scope's keys are
    replaced only when the record's ``as_of_position`` is ≥ the stored one,
    a revision row only when its ``version`` (published by the ledger,
    ``recurrence_ledger.ledger.statistics.row_version``) is ≥ the stored
    row's (a row without one, written before record revision 4, counts 0).
    Both grow with every record of the key in publication order, so an
    older record never replaces a newer one,
    whoever wrote the newer one. A record equal on that measure is written
    (the later read wins). Each scope is one Lua script (``guarded_write``:
    atomic, one round trip) writing exactly the keys and values
    ``RedisView._write`` writes (fields prepared by ``RedisView._prepare``),
    then — when it wrote the scope — the scope set and index as
    ``RedisView._index`` does (their own slot; guarded by position too). Everything else (pending records, back-off,
    ``submit``/``flush``) is RedisView's."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._guarded = scripts(self._client).guarded_write
        #: Scope records and revision rows left out by the guard since creation.
        self.stale_skipped = 0

    def _write(self, scope_id: str, pending: PendingWrite, check_namespace: bool = False) -> None:
        layout = self.layout
        write = pending.scope
        payload: dict = {"position_field": POSITION_FIELD, "version_field": VERSION_FIELD, "scope": None, "rows": []}
        record = None
        if write is not None:
            record = orjson.loads(write.fields["record"])
            payload["scope"] = {
                "pos": pad(record[POSITION_FIELD]),
                "fields": [item for name, value in write.fields.items() for item in (name, value.decode() if isinstance(value, bytes) else value)],
                "top": [item for member_, score in write.top.items() for item in (score, member_)],
                "review": list(write.review),
            }
        for member_, value in pending.revisions.items():
            row = orjson.loads(value)
            payload["rows"].append([member_, value.decode(), row.get(VERSION_FIELD, 0)])
        existed = True
        if check_namespace and write is None:
            existed = bool(self._client.exists(layout.scopes))
        wrote, rows = run_call(
            self._client, self._guarded, keys=[layout.scope(scope_id), layout.top(scope_id), layout.review(scope_id), layout.revisions(scope_id)],
            args=[orjson.dumps(payload)],
        )
        if record is not None and wrote:
            # After the scope's keys (a slot of their own), the scope set and
            # index: idempotent, and never over a newer record's entries.
            existed = self._index(scope_id, record)
        self.stale_skipped += (write is not None and not wrote) + len(pending.revisions) - rows
        if check_namespace and not existed and self._wrote and not self._needs_rebuild:
            self._needs_rebuild = True
        if write is not None and wrote:
            self._wrote = True
