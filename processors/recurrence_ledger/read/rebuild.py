"""The Redis view rebuilt from the committed view topics.

The compacted ``recurrence-statistics``, ``revision-statistics`` and
``signature-patterns`` topics (contract §1, §8, §23) are the source of the
Redis view (``recurrence_ledger.read.projection``,
``recurrence_ledger.read.patterns``); this module reads them to their end
(through the runtime's ``read_raw``) and backs ``recurrence-ledger view
rebuild`` and ``rebuild``. The view itself knows only Redis; the read models
of the history are rebuilt by :func:`rebuild_read_models`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import orjson

from pydantic import ValidationError

from recurrence_ledger import catalogue
from recurrence_ledger.ledger.intake import BadRecord
from recurrence_ledger.ledger.records import SignaturePattern
from recurrence_ledger.kafka.kafka_io import read_raw
from recurrence_ledger.serde.codec import FIXED, Codec
from recurrence_ledger.catalogue import REVISION_STATISTICS, SIGNATURE_PATTERNS, STATISTICS
from recurrence_ledger.kafka.client_config import Bootstrap
from recurrence_ledger.read.follower import decode
from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.read.layout import mark_layout
from recurrence_ledger.read.records import READ_MODEL_TOPICS, AppliedCounts, Located
from recurrence_ledger.read.patterns import PatternView
from recurrence_ledger.read.projection import RedisView, PendingWrite, revision_member

log = logging.getLogger(__name__)


def read_statistics_topic(bootstrap: str, topic_prefix: str = "", timeout: float = 30, codec: Codec = FIXED) -> dict[str, dict]:
    """The last ScopeStatistics record per scope in the physical
    ``topic_prefix + "recurrence-statistics"`` topic (contract §1, §8).

    The topic is read to its end with ``recurrence_ledger.kafka.kafka_io.read_raw``
    (read_committed, every partition from the beginning, no group offsets);
    values are decoded with ``codec.decode_value(raw, ("ScopeStatistics",))``
    (``recurrence_ledger.serde.codec``); a tombstone removes its key's scope; an
    undecodable record is logged and skipped.

    Raises what ``read_raw`` raises: LookupError when the topic does not
    exist, TimeoutError when the end is not reached within ``timeout``
    seconds, KafkaException on a broker error.
    """
    topic = topic_prefix + STATISTICS
    latest: dict[str, dict] = {}
    for record in read_raw(bootstrap, topic, timeout):
        if record.value is None:
            if record.key is not None:
                latest.pop(record.key.decode("utf-8", "replace"), None)
            continue
        try:
            value = codec.decode_value(record.value, ("ScopeStatistics",))
        except BadRecord as error:
            log.warning("%s[%d]@%d skipped: %s (%s)", topic, record.partition, record.offset, error.message, error.reason)
            continue
        latest[value["scope_id"]] = value
    return latest


def read_revision_statistics_topic(
    bootstrap: str, topic_prefix: str = "", timeout: float = 30, codec: Codec = FIXED
) -> dict[str, dict[str, dict]]:
    """The last RevisionStatistics record per revision in the physical
    ``topic_prefix + "revision-statistics"`` topic, as
    ``scope_id -> {revision_member(artifact_ref) -> record}``.

    Read like :func:`read_statistics_topic` (``read_raw``: read_committed,
    every partition to its end, no group offsets; a revision's records all
    share a key, hence a partition, so the last one read is its current
    row); values decoded with ``codec.decode_value(raw,
    ("RevisionStatistics",))``. A tombstone removes the revision its key
    names (``recurrence_ledger.ledger.statistics.revision_key``: canonical JSON of
    ``{"artifact_ref", "scope_id"}``); an undecodable record or key is
    logged and skipped.

    Raises what ``read_raw`` raises: LookupError when the topic does not
    exist, TimeoutError when the end is not reached within ``timeout``
    seconds, KafkaException on a broker error.
    """
    topic = topic_prefix + REVISION_STATISTICS
    latest: dict[tuple[str, str], dict] = {}
    for record in read_raw(bootstrap, topic, timeout):
        if record.value is None:
            try:
                key = orjson.loads(record.key or b"")
                latest.pop((key["scope_id"], revision_member(key["artifact_ref"])), None)
            except (orjson.JSONDecodeError, KeyError, TypeError):
                log.warning("%s[%d]@%d: tombstone with an unreadable key skipped", topic, record.partition, record.offset)
            continue
        try:
            value = codec.decode_value(record.value, ("RevisionStatistics",))
            where = (value["scope_id"], revision_member(value["artifact_ref"]))
        except BadRecord as error:
            log.warning("%s[%d]@%d skipped: %s (%s)", topic, record.partition, record.offset, error.message, error.reason)
            continue
        except (KeyError, TypeError):
            log.warning("%s[%d]@%d skipped: no scope_id or artifact_ref", topic, record.partition, record.offset)
            continue
        latest[where] = value
    by_scope: dict[str, dict[str, dict]] = {}
    for (scope_id, member_), value in latest.items():
        by_scope.setdefault(scope_id, {})[member_] = value
    return by_scope


def read_patterns_topic(bootstrap: str, topic_prefix: str = "", timeout: float = 30, codec: Codec = FIXED) -> list[dict]:
    """The last SignaturePattern record per (group, signature_key) in the
    physical ``topic_prefix + "signature-patterns"`` topic (contract
    §23.3), read like :func:`read_statistics_topic` (a key's records share a
    partition: the last one read is its current value); a tombstone removes
    its key's pattern, an undecodable record is logged and skipped. Raises
    what ``read_raw`` raises."""
    topic = topic_prefix + SIGNATURE_PATTERNS
    latest: dict[bytes | None, dict] = {}
    for record in read_raw(bootstrap, topic, timeout):
        if record.value is None:
            latest.pop(record.key, None)
            continue
        try:
            latest[record.key] = codec.decode_value(record.value, ("SignaturePattern",))
        except BadRecord as error:
            log.warning("%s[%d]@%d skipped: %s (%s)", topic, record.partition, record.offset, error.message, error.reason)
    return list(latest.values())


def write_layout_and_patterns(view: RedisView, patterns: list[dict]) -> int:
    """After ``view`` was cleared for a rebuild: its key layout's marker
    (``recurrence_ledger.read.layout``) and every group's signature
    ``patterns`` (SignaturePattern values, contract §23.3;
    ``recurrence_ledger.read.patterns.PatternView``) — what a cleared view
    needs besides its scopes for the follower and ``GET /patterns`` to go
    on. Returns the number of patterns written. Raises redis errors."""
    mark_layout(view._client, view.layout)
    return PatternView(view._client, view.namespace).apply(patterns)


def rebuild_from_topic(view: RedisView, bootstrap: str, topic_prefix: str = "", timeout: float = 30, codec: Codec = FIXED) -> int:
    """Rebuild ``view`` from the compacted ``recurrence-statistics`` topic
    (contract §1, §8), ``revision-statistics`` topic and
    ``signature-patterns`` topic (§23.3): read the three physical topics
    whole (``read_statistics_topic``, ``read_revision_statistics_topic``,
    :func:`read_patterns_topic`), then clear the namespace and write the
    last record of every scope together with the last row of each of its
    revisions, one MULTI/EXEC per scope, and every group's patterns
    (``recurrence_ledger.read.patterns.PatternView``); returns the number
    of scopes with a statistics record written. Backs ``recurrence-ledger
    view rebuild``.

    Clearing deletes the keys of layout 1 too, and the key layout's marker
    is written (``recurrence_ledger.read.layout``): this is the upgrade of a
    view written by a version before layout 2 (docs/upgrading.md).

    The namespace is cleared only once the topics have been read and every
    record prepared, so dashboards see it empty only while the writes run. A
    topic record that is not a valid ScopeStatistics / RevisionStatistics /
    SignaturePattern is logged and skipped. Records still pending in the view (submitted by its
    owner, so not older than what was published) are flushed afterwards and
    win. Raises what ``read_statistics_topic`` raises — LookupError also
    when the ``revision-statistics`` topic is missing (workers create it on
    start) — with nothing cleared then, and redis errors: unlike ``submit``,
    a rebuild must tell its caller it failed. A missing
    ``signature-patterns`` topic (a deployment not upgraded to contract §23
    with ``topics create`` yet) is only a warning: no patterns to project.
    """
    started = time.monotonic()
    latest = read_statistics_topic(bootstrap, topic_prefix, timeout, codec)
    revisions = read_revision_statistics_topic(bootstrap, topic_prefix, timeout, codec)
    valid = []
    try:
        patterns = read_patterns_topic(bootstrap, topic_prefix, timeout, codec)
    except LookupError:  # a deployment from before contract §23 (no `topics create` since): no patterns to project
        log.warning("%s%s does not exist: the view is rebuilt without signature patterns (`recurrence-ledger topics create` creates it)",
                    topic_prefix, SIGNATURE_PATTERNS)
        patterns = []
    for record in patterns:
        try:
            SignaturePattern.model_validate(record)
        except ValueError as error:
            log.warning("%s%s: pattern skipped: %s", topic_prefix, SIGNATURE_PATTERNS, str(error)[:500])
            continue
        valid.append(record)
    prepared: dict[str, PendingWrite] = {}
    for scope_id, record in latest.items():
        try:
            prepared[scope_id] = PendingWrite(scope=view._prepare(record))
        except ValueError as error:
            log.warning("%s%s: record of scope %r skipped: %s", topic_prefix, STATISTICS, scope_id, str(error)[:500])
    rows = 0
    for scope_id, by_member in revisions.items():
        for member_, record in by_member.items():
            try:
                value = view._prepare_revision(record)
            except ValueError as error:
                log.warning(
                    "%s%s: row of %r %s skipped: %s", topic_prefix, REVISION_STATISTICS, scope_id, member_, str(error)[:500]
                )
                continue
            prepared.setdefault(scope_id, PendingWrite()).revisions[member_] = value
            rows += 1
    view.clear()
    for scope_id, pending in prepared.items():
        view._write(scope_id, pending)
    written = write_layout_and_patterns(view, valid)
    view._needs_rebuild = False
    view._succeeded()
    view.flush()
    scopes = sum(1 for pending in prepared.values() if pending.scope is not None)
    log.info(
        "Redis view %s rebuilt from %s%s, %s%s and %s%s: %d scope(s), %d revision row(s), %d signature pattern(s) in %.2f s",
        view.namespace,
        topic_prefix,
        STATISTICS,
        topic_prefix,
        REVISION_STATISTICS,
        topic_prefix,
        SIGNATURE_PATTERNS,
        scopes,
        rows,
        written,
        time.monotonic() - started,
    )
    return scopes


#: Records per MULTI/EXEC when a rebuild applies the topics.
REBUILD_CHUNK = 5000


# ----------------------------------------------------------------- rebuilding


@dataclass(frozen=True)
class RebuildSummary:
    """What :func:`rebuild_read_models` applied."""

    observations: int
    candidates: int
    trend_points: int
    skipped: int
    seconds: float
    review_statuses: int = 0


def rebuild_read_models(models: ReadModels, bootstrap: Bootstrap, topic_prefix: str = "", timeout: float = 60, codec: Codec = FIXED) -> RebuildSummary:
    """Recreate the read models of ``models`` from the topics: read
    ``recurrence-observations``, ``review-candidates``, ``review-status``
    and ``recurrence-statistics`` whole (``read_raw``: read_committed, every
    partition to its end), then clear the read models and apply every
    record through ``ReadModels.apply``, each partition in offset order —
    what a follower that read them all holds, ``follow-applied`` offsets
    included (so a follower behind them skips what the rebuild applied).

    The trend is rebuilt from the ScopeStatistics records the compacted
    topic still holds: the last record of each scope always, older ones
    only until compaction removes them (``min.compaction.lag.ms`` keeps
    them for that long). Records that do not decode or validate are logged
    and skipped. Raises what ``read_raw`` raises (nothing is cleared then)
    and redis errors. Stop the follower while it runs."""
    started = time.monotonic()
    records: list[Located] = []
    skipped = 0
    for name in READ_MODEL_TOPICS:
        physical_topic = catalogue.physical(name, topic_prefix)
        for raw in read_raw(bootstrap, physical_topic, timeout):
            try:
                record = decode(name, raw.partition, raw.offset, raw.timestamp, raw.value, codec)
            except (BadRecord, ValidationError, ValueError, KeyError) as error:
                skipped += 1
                log.warning("%s[%d]@%d skipped: %s", physical_topic, raw.partition, raw.offset, str(error)[:300])
                continue
            if record is not None:
                records.append(record)
    models.clear()
    records.sort(key=lambda record: (record.topic, record.partition, record.offset))
    total = AppliedCounts()
    for start in range(0, len(records), REBUILD_CHUNK):  # one MULTI/EXEC per chunk, not one for the whole topic
        counts = models.apply(records[start : start + REBUILD_CHUNK])
        total.observations += counts.observations
        total.candidates += counts.candidates
        total.trend_points += counts.trend_points
        total.review_statuses += counts.review_statuses
    summary = RebuildSummary(total.observations, total.candidates, total.trend_points, skipped, time.monotonic() - started, total.review_statuses)
    log.info("read models %s rebuilt: %s", models.keys.namespace, summary)
    return summary
