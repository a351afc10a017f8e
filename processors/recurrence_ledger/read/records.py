"""Applying records to the read models of the history
(``recurrence_ledger.read.history``): the decoded records with their Kafka
coordinates, the members they become, and the Lua calls that apply them.

The records of each batch of one partition of one topic are applied per
scope, by one script per scope (``recurrence_ledger.read.scripts``:
``apply_observations``, ``apply_scope_candidates``,
``apply_scope_review_status``, ``apply_trend``), which skips the records
below the partition's offset in the scope's ``applied`` hash and moves it
past them in the same atomic step; the review topics also go into the
cross-scope review keys by one script per batch (``apply_candidates``,
``apply_review_status``), with the namespace's ``follow-applied`` offsets.
Each script touches the keys of one slot only (a scope's, or the
namespace's: Redis Cluster), and each is exactly-once by itself, so a
record is applied once to each of them however often it is read, and in
whatever order or however partly a batch's scripts ran before. Every key a
script touches is built by ``recurrence_ledger.read.keys.Keys`` and passed
in (keys module: "The keys the Lua scripts get").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import orjson
import redis

from recurrence_ledger.catalogue import OBSERVATIONS, REVIEW_CANDIDATES, REVIEW_STATUS, STATISTICS
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.read.keys import Keys
from recurrence_ledger.read.scripts import Call, run_calls, scripts

#: The topics whose records the read models are built from.
READ_MODEL_TOPICS: tuple[str, ...] = (OBSERVATIONS, REVIEW_CANDIDATES, REVIEW_STATUS, STATISTICS)
#: Records per Lua call when a rebuild applies a whole topic.
APPLY_CHUNK = 500
#: The counters of a trend point, in the order of its member after the Kafka coordinates.
TREND_FIELDS: tuple[str, ...] = (
    "as_of_position", "selected", "recurred", "avoided", "unknown", "unlinked_handoff_citations", "pending_outcomes",
    "needing_review", "repeat_failure_rate",
)


def pad(position: int) -> str:
    """A position as 19 digits: positions (≤ 2^63 − 1) compare as text."""
    return f"{position:019d}"


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
    ``recurrence_ledger.read.keys``)."""
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


class Decision(NamedTuple):
    """A review candidate's first decision, as a call filed it (a
    ReviewStatus row decided it, or a candidate came whose stored row was
    decided): the record that filed it — its logical ``topic``,
    ``partition`` and ``offset`` — the candidate record's Kafka
    ``timestamp_ms`` and the decision's ``decided_at``: what the time to
    decision is measured from."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    decided_at: str


@dataclass
class AppliedCounts:
    """Records a call applied (the others were already applied), and the
    :class:`Decision` of each review candidate whose first decision the
    call filed."""

    observations: int = 0
    candidates: int = 0
    trend_points: int = 0
    review_statuses: int = 0
    decisions: list[Decision] = field(default_factory=list)


def observation_entry(keys: Keys, record: Located) -> dict | None:
    """The ``apply_observations`` entry of a RecurrenceObservation; None for
    an observation of anything but an Experience revision (contract §7:
    there are none; it would have no history)."""
    value = record.value
    ref = value["artifact_ref"]
    if ref.get("family") != "experience":
        return None
    scope_id, artifact_id, revision = value["scope_id"], ref["artifact_id"], ref["revision"]
    position = value["task_outcome_position"]
    return {
        "offset": record.offset, "history_key": keys.history(scope_id, artifact_id, revision),
        "history_meta_key": keys.history_meta(scope_id, artifact_id, revision),
        "avoided_key": keys.avoided(scope_id, artifact_id, revision), "task_outcome_position": position,
        "padded_position": pad(position), "member": history_member(value), "event": value["event"],
        "signature_key": value["signature_key"],
    }


def candidate_entry(record: Located) -> dict:
    """The ``apply_candidates`` entry of a ReviewCandidate (the cross-scope keys)."""
    value = record.value
    return {
        "offset": record.offset, "candidate_id": value["candidate_id"], "timestamp": record.timestamp,
        "item": orjson.dumps({"candidate": value, "timestamp": record.timestamp}).decode(),
    }


def scope_candidate_entry(keys: Keys, record: Located) -> dict:
    """The ``apply_scope_candidates`` entry of a ReviewCandidate (its scope's keys)."""
    value = record.value
    ref = value["artifact_ref"]
    scope_id, artifact_id, revision = value["scope_id"], ref["artifact_id"], ref["revision"]
    start = value["run_start_position"]
    return {
        "offset": record.offset, "candidate_id": value["candidate_id"], "timestamp": record.timestamp,
        "history_meta_key": keys.history_meta(scope_id, artifact_id, revision),
        "avoided_key": keys.avoided(scope_id, artifact_id, revision),
        "run_start_position": "" if start is None else pad(start), "repair_surface": value["repair_surface"],
    }


def review_status_entry(record: Located) -> dict:
    """The ``apply_review_status`` entry of a ReviewStatus record (contract §18; the cross-scope keys)."""
    value = record.value
    repair = value.get("repair")
    return {
        "offset": record.offset, "candidate_id": value["candidate_id"], "status": value["status"],
        "repair_status": repair["status"] if repair else "", "row": canonical_json(value).decode(),
    }


def trend_entry(record: Located) -> dict:
    """The ``apply_trend`` entry of a ScopeStatistics record."""
    return {"offset": record.offset, "as_of_position": record.value["as_of_position"], "member": trend_member(record)}


def scope_review_status_entry(record: Located) -> dict:
    """The ``apply_scope_review_status`` entry of a ReviewStatus record (its scope's keys)."""
    return {"offset": record.offset, "candidate_id": record.value["candidate_id"], "status": record.value["status"]}


def _by_scope(chunk: list[Located]) -> dict[str, list[Located]]:
    """The records of ``chunk`` by scope id, each scope's in the chunk's order."""
    grouped: dict[str, list[Located]] = {}
    for record in chunk:
        grouped.setdefault(record.value["scope_id"], []).append(record)
    return grouped


def script_calls(keys: Keys, topic: str, applied_field: str, chunk: list[Located], registered, history_limit: int, trend_limit: int) -> list[tuple[str, Call]]:  # noqa: ANN001
    """The script calls of one chunk of one partition, each tagged with what
    its reply counts (``""``: nothing): one per scope, and for the review
    topics one for the cross-scope keys first."""
    calls: list[tuple[str, Call]] = []
    if topic == REVIEW_CANDIDATES:
        entries = [candidate_entry(record) for record in chunk]
        calls.append(("candidates", (registered.apply_candidates, [keys.applied, keys.queue_items, keys.review_status],
                                     [applied_field, keys.queue_prefix, orjson.dumps(entries)])))
    elif topic == REVIEW_STATUS:
        entries = [review_status_entry(record) for record in chunk]
        calls.append(("review_statuses", (registered.apply_review_status, [keys.applied, keys.queue_items, keys.review_status, keys.review_repairs],
                                          [applied_field, keys.queue_prefix, orjson.dumps(entries)])))
    for scope_id, records in _by_scope(chunk).items():
        applied, state = keys.scope_applied(scope_id), keys.review_state(scope_id)
        if topic == OBSERVATIONS:
            entries = [entry for entry in (observation_entry(keys, record) for record in records) if entry is not None]
            calls.append(("observations", (registered.apply_observations, [applied], [applied_field, history_limit, orjson.dumps(entries)])))
        elif topic == REVIEW_CANDIDATES:
            entries = [scope_candidate_entry(keys, record) for record in records]
            calls.append(("", (registered.apply_scope_candidates, [applied, state], [applied_field, keys.scope_queue_prefix(scope_id), orjson.dumps(entries)])))
        elif topic == REVIEW_STATUS:
            entries = [scope_review_status_entry(record) for record in records]
            calls.append(("", (registered.apply_scope_review_status, [applied, state],
                               [applied_field, keys.scope_queue_prefix(scope_id), orjson.dumps(entries)])))
        else:
            entries = [trend_entry(record) for record in records]
            calls.append(("trend_points", (registered.apply_trend, [applied, keys.trend_meta(scope_id), keys.trend(scope_id)],
                                           [applied_field, trend_limit, orjson.dumps(entries)])))
    return calls


def apply_records(client: redis.Redis, keys: Keys, records: Iterable[Located], history_limit: int, trend_limit: int) -> AppliedCounts:
    """Apply RecurrenceObservation, ReviewCandidate, ReviewStatus and
    ScopeStatistics ``records`` (:data:`READ_MODEL_TOPICS`; other topics are
    ignored) to the read models of ``keys``' namespace, each partition's in
    offset order, in one round trip (``recurrence_ledger.read.scripts.run_calls``:
    one MULTI/EXEC on a single Redis; on Redis Cluster one pipeline of
    scripts, each atomic): per topic partition and chunk of
    :data:`APPLY_CHUNK`, one script per scope and one for the cross-scope
    review keys, keeping ``history_limit`` verdicts per revision and
    ``trend_limit`` points per scope. Records below a partition's offset in
    a script's ``applied`` hash are skipped by it. Returns what was applied
    (the review records counted by the cross-scope scripts); raises redis
    errors (then, on a single Redis, nothing or everything of the call was
    applied; on Redis Cluster, a part may have been, which applying the
    records again completes without applying anything twice)."""
    groups: dict[tuple[str, int], list[Located]] = {}
    for record in records:
        if record.topic in READ_MODEL_TOPICS:
            groups.setdefault((record.topic, record.partition), []).append(record)
    counts = AppliedCounts()
    if not groups:
        return counts
    registered = scripts(client)
    calls: list[tuple[str, Call]] = []
    partitions: list[tuple[str, int]] = []  # of each call
    for (topic, partition), group in sorted(groups.items()):
        group.sort(key=lambda record: record.offset)
        applied_field = keys.applied_field(topic, partition)
        for start in range(0, len(group), APPLY_CHUNK):
            calls += script_calls(keys, topic, applied_field, group[start : start + APPLY_CHUNK], registered, history_limit, trend_limit)
            partitions += [(topic, partition)] * (len(calls) - len(partitions))
    for (counted, _), (topic, partition), applied in zip(calls, partitions, run_calls(client, [call for _, call in calls]), strict=True):
        if counted in ("candidates", "review_statuses"):
            number, measured = int(applied[0]), applied[1:]
            setattr(counts, counted, getattr(counts, counted) + number)
            counts.decisions += [Decision(topic, partition, int(measured[i]), int(measured[i + 1]), _text(measured[i + 2]))
                                 for i in range(0, len(measured), 3)]
        elif counted:
            setattr(counts, counted, getattr(counts, counted) + int(applied))
    return counts


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
