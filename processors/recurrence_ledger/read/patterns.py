"""The Redis projection of the signature patterns (contract §23.3): the
compacted ``signature-patterns`` view, one hash per pattern group.

Each group's patterns live in the group's own key
(``recurrence_ledger.read.keys.Keys.group_patterns``: field =
signature_key, value = the record as canonical JSON), so a read of group G
touches G's key only and can never return a pattern — or a scope — of
another group (§23.1): a SignaturePattern names only scopes of its own
group, and the key holds only records whose ``group`` is G.

Written by the view follower (``recurrence_ledger.read.follower``) after
each batch and by ``view rebuild`` from the topic; a write never replaces
a pattern with one of fewer recurred verdicts (``lua/apply_patterns.lua``:
each record the pattern stage publishes for a key has more than the one
before), so a replay, a rebalance or a rebuild racing the follower puts
back nothing older. Read by the API (``GET /patterns?group=``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.patterns import pattern_rank
from recurrence_ledger.ledger.records import SignaturePattern
from recurrence_ledger.read.keys import Keys
from recurrence_ledger.read.pages import etag
from recurrence_ledger.read.scripts import Call, run_calls, scripts

#: Patterns per script call when a group's patterns are written (a rebuild
#: of a group with many signatures sends several calls).
PATTERN_CHUNK = 500


@dataclass(frozen=True)
class PatternPage:
    """One pattern group's patterns as the API serves them: ``total`` in
    the group, ``available`` those with at least the asked scope_count,
    ``rows`` the page of them in :func:`~recurrence_ledger.ledger.patterns.pattern_rank`
    order (SignaturePattern dicts), ``etag`` the entity tag of everything
    the page shows."""

    group: str
    total: int
    available: int
    rows: list[dict]
    etag: str


class PatternView:
    """The signature patterns of one Redis namespace (module docstring) on
    ``client`` (a redis-py client of a single Redis or Redis Cluster,
    decoding responses or not)."""

    def __init__(self, client, namespace: str):  # noqa: ANN001 - a redis-py client (single Redis or cluster)
        self.client = client
        self.keys = Keys(namespace)

    def apply(self, records: Iterable[dict]) -> int:
        """Write SignaturePattern records (contract §23.3 dicts, each
        validated), in publication order: the last per (group,
        signature_key), one script call per group (and chunk), in one round
        trip (``read.scripts.run_calls``); returns the patterns written (a
        pattern with fewer recurred verdicts than the stored one is left
        out). Raises pydantic's ValidationError for an invalid record
        (before anything is written) and redis errors."""
        latest: dict[tuple[str, str], dict] = {}
        for record in records:
            SignaturePattern.model_validate(record)
            latest[(record["group"], record["signature_key"])] = record
        by_group: dict[str, list] = {}
        for (group, signature_key), record in latest.items():
            by_group.setdefault(group, []).append((signature_key, canonical_json(record).decode(), record["recurred"]))
        script = scripts(self.client).apply_patterns
        calls: list[Call] = []
        for group, rows in sorted(by_group.items()):
            for start in range(0, len(rows), PATTERN_CHUNK):
                args = [item for row in rows[start : start + PATTERN_CHUNK] for item in row]
                calls.append((script, [self.keys.group_patterns(group)], args))
        return sum(int(written) for written in run_calls(self.client, calls))

    def group(self, group: str, min_scopes: int = 1, offset: int = 0, limit: int | None = None) -> PatternPage:
        """The patterns of ``group`` only (one HVALS of its key) with
        ``scope_count`` ≥ ``min_scopes``, rows ``offset`` to ``offset +
        limit`` (None: all) in ``pattern_rank`` order. A group the view does
        not hold has none. Raises redis errors."""
        rows = [orjson.loads(value) for value in self.client.hvals(self.keys.group_patterns(group))]
        rows.sort(key=pattern_rank)
        kept = [row for row in rows if row["scope_count"] >= min_scopes]
        page = kept[offset:] if limit is None else kept[offset : offset + limit]
        digest = hashlib.sha256(b"%d\x00%d\x00%d\x00%d\x00" % (len(rows), len(kept), offset, -1 if limit is None else limit))
        for row in page:
            digest.update(canonical_json(row) + b"\x00")
        return PatternPage(group, len(rows), len(kept), page, etag(digest))
