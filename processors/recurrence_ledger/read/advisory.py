"""The recall-time advisory (``POST /advisories``): what the ledger
published about each of a few Experience revisions of one scope, read at
the moment a platform is about to hand them to an agent.

Every answer comes from records the ledger published — the revision's
RevisionStatistics row (contract §14, §17, §22: ``needs_review``,
``terminal_recurred_streak``, ``severity``, ``binding_suspect``,
``low_yield``, the unknown selections by reason, the runs reaching the
review threshold) and the ReviewStatus rows of its review candidates
(contract §18: status, decision, fix revision, repair) — as the view
follower keeps them in Redis (``recurrence_ledger.read.keys``). Nothing
here decides a ledger rule: the only thing computed is which candidate ids
to look up, with the ledger's own definition of a candidate id
(``recurrence_ledger.ledger.streaks.review_candidate_id``, contract §8)
from the run names the row publishes. The one-line ``advice`` words those
published fields for a recall ranker or a human (:func:`advice`).

The same reading splits a scope's revisions needing review by their
newest candidate's status — waiting for a decision, decided, no candidate
(:func:`review_split`, for ``GET /scopes/{scope}/review-candidates`` and the
dashboard): "needing review" counts revisions whose streak holds the
review threshold, decided or not.

What the ledger does not publish, and the advisory therefore cannot say:
whether a revision without a review candidate is still its artifact's head
(the heads are ledger state, contract §3; a revision is known superseded
here only through a ReviewStatus ``superseded`` with its ``fix_revision``).

Two pipelined round trips on the API's event loop (``redis.asyncio``),
every command in the scope's or the namespace's Redis Cluster slot
(:func:`read_advisory`).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import TypeVar

import orjson
import redis

from recurrence_ledger.ledger.fields import field_catalogue
from recurrence_ledger.ledger.records import UnknownReasons
from recurrence_ledger.ledger.streaks import review_candidate_id
from recurrence_ledger.read.connect import AsyncClusterClient, AsyncSingleClient
from recurrence_ledger.read.keys import Keys
from recurrence_ledger.read.projection import revision_member
from recurrence_ledger.wording import counted

#: Most artifact refs one advisory request may ask about.
MAX_ADVISORY_REFS = 64

#: Candidate ids kept computed (:func:`candidate_ids`): an id is a digest
#: of its scope, revision, signature key and run, the same every time.
CANDIDATE_ID_CACHE = 16384
#: Stored RevisionStatistics rows kept parsed (:func:`stored_row`), and
#: advisories of known revisions kept written (:func:`advisory_json`).
ROW_CACHE = 4096

T = TypeVar("T")

#: The unknown reasons that make a binding suspect (contract §17), with
#: their titles (``check not run``, …), from the record's field catalogue.
SUSPECT_REASON_TITLES: dict[str, str] = {
    name: entry["title"] for name, entry in field_catalogue(UnknownReasons).items() if entry.get("suspect")
}


@dataclass(frozen=True)
class ScopeAdvisory:
    """The advisory of one request: ``scope_id``; ``as_of_position`` of the
    scope's hash (None when the view does not hold the scope: ``known``
    false); ``advisories`` one per asked ref, in the order asked: its
    :func:`advise_ref` dict, or that dict's JSON (an ``orjson.Fragment``,
    which ``orjson.dumps`` writes as it is: :func:`advisory_json`)."""

    scope_id: str
    known: bool
    as_of_position: int | None
    advisories: list[dict | orjson.Fragment]


async def read_advisory(client: AsyncSingleClient | AsyncClusterClient, keys: Keys, scope_id: str, refs: list[dict]) -> ScopeAdvisory:
    """The advisory of ``refs`` (ArtifactRef dicts, at most
    :data:`MAX_ADVISORY_REFS` — the caller bounds them) in ``scope_id``,
    read through ``client`` (``recurrence_ledger.read.reader.ViewReader.async_client``);
    its ``advisories`` are written JSON (:func:`advisory_json`). Two
    pipelined round trips, plain pipelines (no MULTI: every value read is
    one the ledger published whole, and an advisory is a hint read at one
    moment): the scope's position and the asked rows (the scope's slot),
    then — only when a row names a run reaching the review threshold — the
    candidates' ReviewStatus rows (the namespace's slot) and whether the
    scope's review read model holds each candidate (its ``t:`` field, the
    scope's slot). Raises ``redis.RedisError`` when Redis does not
    answer."""
    members = [revision_member(ref) for ref in refs]
    pipe = await client.pipeline()
    pipe.hget(keys.scope(scope_id), "as_of_position")
    if members:
        pipe.hmget(keys.revisions(scope_id), members)
    results = await pipe.execute()
    as_of = results[0]
    stored = results[1] if members else []
    candidates, every = candidate_ids(scope_id, [(ref, stored_row(raw) if raw is not None else None) for ref, raw in zip(refs, stored, strict=True)])
    held: dict[str, tuple[str, bytes | None]] = {}
    if every:
        pipe = await client.pipeline()
        read_candidates(pipe, keys, scope_id, every)
        held = {cid: (cid, raw) for cid, raw in held_statuses(every, *await pipe.execute()).items()}
    advisories = [
        advisory_json(ref["family"], ref["artifact_id"], ref["revision"], raw, status) if raw is not None else advise_ref(ref, None, None)
        for ref, raw, status in zip(refs, stored, newest_of(candidates, held), strict=True)
    ]
    return ScopeAdvisory(scope_id=scope_id, known=as_of is not None, as_of_position=int(as_of) if as_of is not None else None, advisories=advisories)


@functools.lru_cache(maxsize=ROW_CACHE)
def stored_row(raw: bytes) -> dict:
    """The RevisionStatistics row stored as ``raw`` (canonical JSON),
    parsed once per distinct bytes (the ledger validated it before it
    published it, contract §8). Shared: never to be changed."""
    return orjson.loads(raw)


@functools.lru_cache(maxsize=ROW_CACHE)
def advisory_json(family: str, artifact_id: str, revision: int, raw_row: bytes, status: tuple[str, bytes | None] | None) -> orjson.Fragment:
    """The advisory of one ref (:func:`advise_ref`) written as JSON, once
    per distinct stored row (``raw_row``) and ReviewStatus of its newest
    candidate (``status``: the candidate id and its stored ReviewStatus,
    None for one published without a ReviewStatus yet; None without a
    candidate): an advisory is a function of them alone."""
    ref = {"family": family, "artifact_id": artifact_id, "revision": revision}
    return orjson.Fragment(orjson.dumps(advise_ref(ref, stored_row(raw_row), review_status(*status) if status is not None else None)))


def newest_candidates(client: redis.Redis, keys: Keys, scope_id: str, revisions: list[tuple[dict, dict | None]]) -> list[dict | None]:
    """For each ``(ArtifactRef, RevisionStatistics row or None)``, the
    ReviewStatus of the revision's newest review candidate the read models
    hold (a candidate published without a ReviewStatus yet: ``open``), or
    None (:func:`candidate_ids`, :func:`held_statuses`,
    :func:`newest_of`); one pipelined round trip, only when a row names a
    run."""
    candidates, every = candidate_ids(scope_id, revisions)
    statuses: dict[str, dict] = {}
    if every:
        pipe = client.pipeline(transaction=False)
        read_candidates(pipe, keys, scope_id, every)
        statuses = {cid: review_status(cid, raw) for cid, raw in held_statuses(every, *pipe.execute()).items()}
    return newest_of(candidates, statuses)


def candidate_ids(scope_id: str, revisions: list[tuple[dict, dict | None]]) -> tuple[list[list[str]], list[str]]:
    """For each ``(ArtifactRef, RevisionStatistics row or None)``, the ids
    of the review candidates of the runs the row names
    (``runs_reaching_threshold``), oldest run first, by the ledger's
    candidate id (contract §8); and every id among them, sorted."""
    candidates: list[list[str]] = []
    for ref, row in revisions:
        runs = row.get("runs_reaching_threshold", ()) if row is not None else ()
        candidates.append([_candidate_id(scope_id, ref["family"], ref["artifact_id"], ref["revision"], row["signature_key"], run) for run in runs]
                          if runs else [])
    return candidates, sorted({cid for cids in candidates for cid in cids})


@functools.lru_cache(maxsize=CANDIDATE_ID_CACHE)
def _candidate_id(scope_id: str, family: str, artifact_id: str, revision: int, signature_key: str, run: int | None) -> str:
    return review_candidate_id(scope_id, {"family": family, "artifact_id": artifact_id, "revision": revision}, signature_key, run)


def read_candidates(pipe, keys: Keys, scope_id: str, every: list[str]) -> None:  # noqa: ANN001 - a redis-py pipeline, blocking or asyncio
    """Queue on ``pipe`` the two reads :func:`held_statuses` takes, for
    the candidate ids ``every`` of ``scope_id``: their ReviewStatus rows
    (the namespace's slot), then their ``t:`` fields in the scope's review
    read model (the scope's slot)."""
    pipe.hmget(keys.review_status, every)
    pipe.hmget(keys.review_state(scope_id), [f"t:{cid}" for cid in every])


def held_statuses(every: list[str], raw_statuses: list[bytes | None], applied: list[bytes | None]) -> dict[str, bytes | None]:
    """Each candidate id of ``every`` the read models hold → its stored
    ReviewStatus row (``raw_statuses``), or None when it has none but its
    ``t:`` field in the scope's review read model (``applied``) says it
    was published (:func:`review_status` reads either)."""
    return {cid: raw for cid, raw, known in zip(every, raw_statuses, applied, strict=True) if raw is not None or known is not None}


def review_status(candidate_id: str, raw: bytes | None) -> dict:
    """The ReviewStatus of a candidate the read models hold: its stored
    row ``raw``, or — None: published, no ReviewStatus applied yet — an
    ``open`` one (contract §18)."""
    if raw is not None:
        return orjson.loads(raw)
    return {"candidate_id": candidate_id, "status": "open", "decision": None, "fix_revision": None, "repair": None}


def newest_of(candidates: list[list[str]], statuses: dict[str, T]) -> list[T | None]:
    """For each revision's candidate ids (:func:`candidate_ids`), the
    status of its newest candidate with one (``statuses``:
    what :func:`held_statuses` gives, or what is derived from it), or None."""
    found = []
    for cids in candidates:
        known = [statuses[cid] for cid in cids if cid in statuses]
        found.append(known[-1] if known else None)
    return found


#: The review statuses of a candidate (contract §18) by the part of "needing review" they fall in
#: (:func:`review_split`): open and superseded ones wait for a decision (the inbox lists both).
SPLIT_OF_STATUS: dict[str, str] = {"open": "waiting", "superseded": "waiting", "approved": "decided", "rejected": "decided"}


def review_split(client: redis.Redis, keys: Keys, scope_id: str) -> tuple[dict[str, int], bytes] | None:
    """The scope's revisions needing review (their rows' ``needs_review``,
    the ledger's decision) split by their newest review candidate:
    ``waiting`` (open or superseded: the inbox lists it), ``decided``
    (approved or rejected), ``no_candidate`` (none: a repair surface other
    than experience_content publishes none, contract §8); with a digest of
    everything the split was read from (for an entity tag). None when the
    view does not hold the scope. Two round trips at most."""
    pipe = client.pipeline(transaction=False)
    pipe.hget(keys.scope(scope_id), "as_of_position")
    pipe.hgetall(keys.revisions(scope_id))
    as_of, stored = pipe.execute()
    if as_of is None:
        return None
    rows = [orjson.loads(value) for _, value in sorted(stored.items())]
    needing = [(row["artifact_ref"], row) for row in rows if row.get("needs_review")]
    split = {"waiting": 0, "decided": 0, "no_candidate": 0}
    tag = hashlib.sha256()
    for (ref, _), status in zip(needing, newest_candidates(client, keys, scope_id, needing), strict=True):
        part = SPLIT_OF_STATUS[status["status"]] if status is not None else "no_candidate"
        split[part] += 1
        tag.update(orjson.dumps([ref, part]))
    return split, tag.digest()


def _ref(ref: dict) -> dict:
    """The ArtifactRef dict in its canonical field set."""
    return {"family": ref["family"], "artifact_id": ref["artifact_id"], "revision": ref["revision"]}


def review_of(status: dict | None) -> dict | None:
    """The ``review`` part of an advisory from a candidate's ReviewStatus
    row (None without a candidate): ``candidate_id``, ``status`` (open,
    superseded, approved, rejected), ``streak`` (the candidate's),
    ``decision`` (approved / rejected or None), ``reviewer``,
    ``fix_revision`` and ``repair_status`` (pending, held, recurring,
    failed; None without a repair)."""
    if status is None:
        return None
    decision = status.get("decision") or {}
    repair = status.get("repair") or {}
    return {
        "candidate_id": status["candidate_id"],
        "status": status["status"],
        "streak": status.get("streak"),
        "decision": decision.get("decision"),
        "reviewer": decision.get("reviewer"),
        "fix_revision": status.get("fix_revision"),
        "repair_status": repair.get("status"),
    }


def advise_ref(ref: dict, row: dict | None, status: dict | None) -> dict:
    """One ref's advisory from its RevisionStatistics ``row`` (None: the
    view holds none — no selection, verdict or ambiguous match yet) and the
    ReviewStatus of its newest candidate (None: none). Keys: see
    ``recurrence_ledger.api.schemas.RefAdvisory``."""
    review = review_of(status)
    superseded_by = review["fix_revision"] if review is not None and review["status"] == "superseded" else None
    effect = (row or {}).get("effect") or {}
    return {
        "artifact_ref": _ref(ref),
        "known": row is not None,
        "head": False if superseded_by is not None else None,
        "superseded_by": superseded_by,
        "needs_review": bool(row and row.get("needs_review")),
        "terminal_recurred_streak": row["terminal_recurred_streak"] if row else 0,
        "severity": row.get("severity") if row else None,
        "binding_suspect": bool(row and row.get("binding_suspect")),
        "low_yield": bool(row and row.get("low_yield")),
        "selected": row["selected"] if row else 0,
        "yield": row.get("yield") if row else None,
        "verdict": effect.get("verdict"),
        "probability_helps": effect.get("probability_helps"),
        "review": review,
        "advice": advice(ref, row, review),
    }


def _revision(ref: dict | None) -> str:
    return f"r{ref['revision']}" if ref else "a later revision"


def advice(ref: dict, row: dict | None, review: dict | None) -> str:
    """A one-line reading of the published fields for a recall ranker or a
    human, most pressing first, the parts joined by ``; ``: superseded
    (``superseded by r3``), a decided review and its repair, a harmful
    effect, a run of recurrences and its review, a suspect binding (the
    largest suspect unknown reason, ``its bound check: check not run in 5
    of 5 selections``), a low yield; ``no warning`` when none applies."""
    if ref.get("family") != "experience":
        return "not an Experience revision: the ledger keeps no figures for it"
    if row is None:
        return "unknown to the ledger: no selection or verdict recorded for this revision yet"
    parts: list[str] = []
    critical = row.get("severity") == "critical"
    if review is not None and review["status"] == "superseded":
        parts.append(f"superseded by {_revision(review['fix_revision'])}")
    elif review is not None and review["status"] == "approved":
        repair = review["repair_status"] or "pending"
        parts.append(f"review approved a fix ({_revision(review['fix_revision'])}, repair {repair})")
    effect = row.get("effect") or {}
    if effect.get("verdict") == "harms":
        parts.append(f"withholding it did better: harms (P(helps) = {effect.get('probability_helps')})")
    streak = row.get("terminal_recurred_streak", 0)
    if row.get("needs_review"):
        waiting = ""
        if review is not None and review["status"] == "open":
            waiting = ", waiting for review"
        elif review is not None and review["status"] == "rejected":
            waiting = ", review rejected the candidate"
        elif review is None:
            waiting = ", needs review (no review candidate)"
        parts.append(f"{streak} recurrences in a row{waiting}")
    elif streak:
        parts.append(f"recurred {counted(streak, 'time')} since its last avoided verdict")
    if row.get("binding_suspect"):
        reasons = row.get("unknown_reasons") or {}
        name = max(SUSPECT_REASON_TITLES, key=lambda reason: reasons.get(reason, 0))
        parts.append(f"its bound check proves nothing: {SUSPECT_REASON_TITLES[name]} in {reasons.get(name, 0)} of {row.get('selected', 0)} selections")
    if row.get("low_yield"):
        parts.append(f"low yield {row.get('yield')} ({row.get('avoided', 0)} avoided, {row.get('recurred', 0)} recurred)")
    if effect.get("verdict") == "helps":
        parts.append(f"helps (P(helps) = {effect.get('probability_helps')})")
    if not parts:
        parts.append("no warning")
    line = "; ".join(parts)
    return f"critical: {line}" if critical and parts != ["no warning"] else line
