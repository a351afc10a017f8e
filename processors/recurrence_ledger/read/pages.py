"""What the readers of the history's read models get
(``recurrence_ledger.read.history.ReadModels``): the pages of the scope
index, the trend and the review queue, a revision's stored history, and the
runs of its verdicts (contract §8). Pure: no Redis here.

Member lists are in the layout of ``recurrence_ledger.read.keys``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from recurrence_ledger.read.records import TREND_FIELDS

#: Order of the events of one task outcome at one position: the selection before its verdict.
EVENT_ORDER = {"selected": 0, "recurred": 1, "avoided": 1}


def etag(digest: "hashlib._Hash") -> str:
    """The entity tag of a page from the sha256 of what it shows: the first
    32 hex digits, quoted."""
    return '"' + digest.hexdigest()[:32] + '"'


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
    """Trend points (member lists), oldest first; ``total`` points ever
    applied, ``retained`` kept; ``next_from_position`` the
    ``from_position`` of the next page (None: this was the last)."""

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
    """``total`` candidates of every scope passing the status filter,
    ``available`` passing every filter, ``counts`` the candidates of the
    scope (of every scope without one) by status (open, superseded,
    approved, rejected), ``items`` the page (``{"candidate":
    ReviewCandidate, "timestamp": ms, "status": ReviewStatus dict or None
    when none was applied yet}``)."""

    total: int
    available: int
    counts: dict[str, int]
    items: list[dict]
    etag: str


@dataclass(frozen=True)
class CandidateEntry:
    """One review candidate as the read models hold it: its queue ``item``
    (``{"candidate", "timestamp"}``), its last ReviewStatus (None: none
    applied yet) and its scope's ``as_of_position`` (None when the view does
    not hold the scope)."""

    item: dict
    status: dict | None
    as_of_position: int | None
    etag: str


@dataclass(frozen=True)
class ReviewGauges:
    """The review queue in numbers, for the follower's metrics: candidates
    of every scope by status, the Kafka timestamp (ms) of the oldest open
    one (None: none open) and the ReviewStatus rows by repair status."""

    statuses: dict[str, int]
    oldest_open_ms: int | None
    repairs: dict[str, int]


@dataclass(frozen=True)
class RevisionHistory:
    """What Redis holds of one revision's history. ``entries``: the kept
    members (lists); ``floor``: the position of the last avoided verdict
    before the oldest kept one (None: none); ``meta``: the history-meta
    hash; ``scope``: the fields of the scope's hash the reader asked for
    (text or None); ``row``: the revision's RevisionStatistics row from the view (None
    when absent), whose ``runs_reaching_threshold`` names the runs the
    ledger decided reach the review threshold."""

    scope_id: str
    artifact_id: str
    revision: int
    as_of_position: int
    scope: dict[str, str | None]
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
        """The runs of the kept observations (:func:`runs_of`), marked as
        the revision's row says (none reaches the threshold without a row,
        or with one written before record revision 5)."""
        verdicts = self.verdicts() if verdicts is None else verdicts
        reaching = (self.row or {}).get("runs_reaching_threshold", [])
        return runs_of(verdicts, reaching, truncated=self.total > len(self.entries), open_candidates=self.open_candidates)


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


def runs_of(verdicts: list[dict], reaching: Iterable[int | None] = (), truncated: bool = False,
            open_candidates: dict[int | None, str] | None = None) -> list[dict]:
    """The runs of ``verdicts`` (:func:`with_runs`) grouped by name, oldest
    first: name (``run_start_position``), ``recurred`` (its recurred
    verdicts among the kept ones), first and last position,
    ``reaches_threshold`` (its name is in ``reaching``: the ledger's
    RevisionStatistics ``runs_reaching_threshold``, never a threshold of the
    reader's), ``current`` (the revision's last run), ``complete``
    (every observation of the run is kept: false for the oldest run of a
    truncated history) and ``review_candidate`` (the id of its open review
    candidate, or None)."""
    open_candidates = open_candidates or {}
    reaching = set(reaching)
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
        run["reaches_threshold"] = start in reaching
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
    return etag(digest)
