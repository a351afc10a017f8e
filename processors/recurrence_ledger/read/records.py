"""Applying records to the read models of the history
(``recurrence_ledger.read.history``): the decoded records with their Kafka
coordinates, the members they become, and the Lua calls that apply them.

Each batch of one partition of one topic is applied by one script
(``recurrence_ledger.read.scripts``: ``apply_observations``,
``apply_candidates``, ``apply_review_status``, ``apply_trend``), which skips the records below the
partition's ``follow-applied`` offset and moves it past the batch in the same
atomic step, so a record is applied once however often it is read. Every key
a script touches is built by ``recurrence_ledger.read.keys.Keys`` and passed
in (keys module: "The keys the Lua scripts get").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson
import redis

from recurrence_ledger.catalogue import OBSERVATIONS, REVIEW_CANDIDATES, REVIEW_STATUS, STATISTICS
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.read.keys import Keys
from recurrence_ledger.read.scripts import scripts

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


@dataclass
class AppliedCounts:
    """Records a call applied (the others were already applied).
    ``decisions``: for each review candidate whose first decision the call
    filed (a ReviewStatus row decided it, or a candidate came whose stored
    row was decided), the candidate record's Kafka timestamp (ms) and the
    decision's ``decided_at`` — what the time to decision is measured from."""

    observations: int = 0
    candidates: int = 0
    trend_points: int = 0
    review_statuses: int = 0
    decisions: list[tuple[int, str]] = field(default_factory=list)
    by_partition: dict[str, int] = field(default_factory=dict)


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
        "o": record.offset, "h": keys.history(scope_id, artifact_id, revision),
        "m": keys.history_meta(scope_id, artifact_id, revision), "a": keys.avoided(scope_id, artifact_id, revision),
        "s": position, "pp": pad(position), "mem": history_member(value), "e": value["event"], "sig": value["signature_key"],
    }


def candidate_entry(keys: Keys, record: Located) -> dict:
    """The ``apply_candidates`` entry of a ReviewCandidate."""
    value = record.value
    ref = value["artifact_ref"]
    scope_id, artifact_id, revision = value["scope_id"], ref["artifact_id"], ref["revision"]
    start = value["run_start_position"]
    return {
        "o": record.offset, "id": value["candidate_id"], "ts": record.timestamp, "sq": keys.scope_queue_prefix(scope_id),
        "m": keys.history_meta(scope_id, artifact_id, revision), "a": keys.avoided(scope_id, artifact_id, revision),
        "start": "" if start is None else pad(start), "surface": value["repair_surface"],
        "item": orjson.dumps({"candidate": value, "timestamp": record.timestamp}).decode(),
    }


def review_status_entry(keys: Keys, record: Located) -> dict:
    """The ``apply_review_status`` entry of a ReviewStatus record (contract §18)."""
    value = record.value
    repair = value.get("repair")
    return {
        "o": record.offset, "id": value["candidate_id"], "sq": keys.scope_queue_prefix(value["scope_id"]), "status": value["status"],
        "repair": repair["status"] if repair else "", "row": canonical_json(value).decode(),
    }


def trend_entry(keys: Keys, record: Located) -> dict:
    """The ``apply_trend`` entry of a ScopeStatistics record."""
    scope_id = record.value["scope_id"]
    return {"o": record.offset, "k": keys.trend(scope_id), "s": record.value["as_of_position"], "mem": trend_member(record), "scope": scope_id}


def apply_records(client: redis.Redis, keys: Keys, records: Iterable[Located], history_limit: int, trend_limit: int) -> AppliedCounts:
    """Apply RecurrenceObservation, ReviewCandidate, ReviewStatus and
    ScopeStatistics ``records`` (:data:`READ_MODEL_TOPICS`; other topics are
    ignored) to the read models of ``keys``'
    namespace, each partition's in offset order, in one MULTI/EXEC (one
    script call per topic partition and chunk of :data:`APPLY_CHUNK`),
    keeping ``history_limit`` verdicts per revision and ``trend_limit``
    points per scope. Records below a partition's ``follow-applied`` offset
    are skipped. Returns what was applied; raises redis errors (then nothing
    or everything of the call was applied)."""
    groups: dict[tuple[str, int], list[Located]] = {}
    for record in records:
        if record.topic in READ_MODEL_TOPICS:
            groups.setdefault((record.topic, record.partition), []).append(record)
    counts = AppliedCounts()
    if not groups:
        return counts
    registered = scripts(client)
    pipe = client.pipeline(transaction=True)
    calls: list[str] = []
    for (topic, partition), group in sorted(groups.items()):
        group.sort(key=lambda record: record.offset)
        applied_field = keys.applied_field(topic, partition)
        for start in range(0, len(group), APPLY_CHUNK):
            chunk = group[start : start + APPLY_CHUNK]
            if topic == OBSERVATIONS:
                entries = [entry for entry in (observation_entry(keys, record) for record in chunk) if entry is not None]
                registered.apply_observations(keys=[keys.applied], args=[applied_field, history_limit, orjson.dumps(entries)], client=pipe)
            elif topic == REVIEW_CANDIDATES:
                entries = [candidate_entry(keys, record) for record in chunk]
                registered.apply_candidates(
                    keys=[keys.applied, keys.queue_items, keys.review_status], args=[applied_field, keys.queue_prefix, orjson.dumps(entries)], client=pipe,
                )
            elif topic == REVIEW_STATUS:
                entries = [review_status_entry(keys, record) for record in chunk]
                registered.apply_review_status(
                    keys=[keys.applied, keys.queue_items, keys.review_status, keys.review_repairs],
                    args=[applied_field, keys.queue_prefix, orjson.dumps(entries)], client=pipe,
                )
            else:
                entries = [trend_entry(keys, record) for record in chunk]
                registered.apply_trend(keys=[keys.applied, keys.trend_totals], args=[applied_field, trend_limit, orjson.dumps(entries)], client=pipe)
            calls.append(topic)
    for topic, applied in zip(calls, pipe.execute(), strict=True):
        if topic == OBSERVATIONS:
            counts.observations += applied
        elif topic in (REVIEW_CANDIDATES, REVIEW_STATUS):
            number, measured = int(applied[0]), applied[1:]
            if topic == REVIEW_CANDIDATES:
                counts.candidates += number
            else:
                counts.review_statuses += number
            counts.decisions += [(int(measured[i]), _text(measured[i + 1])) for i in range(0, len(measured), 2)]
        else:
            counts.trend_points += applied
    return counts


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
