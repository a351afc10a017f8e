"""The view follower: the Redis view and the history's read models, fed from
the committed topics.

A consumer in its own group, ``<prefix><app_id>-view``, reads with
``isolation.level=read_committed`` (it never sees a record of an aborted or
open transaction) the view topics ``recurrence-statistics``,
``revision-statistics``, ``review-status`` and ``signature-patterns`` and
the ledger topics ``recurrence-observations`` and ``review-candidates``
(contract §1, §18, §23), and for each batch it polled:

1. writes the latest ScopeStatistics / RevisionStatistics record per key of
   the batch into the view (``recurrence_ledger.read.follower_view.FollowerView``:
   ``RedisView``'s writing code behind a guard that never puts back an older
   row than the stored one, whoever wrote it — another follower, or this
   one replaying), and the batch's signature patterns into their groups'
   hashes (``recurrence_ledger.read.patterns.PatternView``, guarded alike);
2. applies the batch to the read models (``ReadModels.apply``: verdict
   history, trend, the review queue with each candidate's review status;
   atomic per call on a single Redis, per scope on Redis Cluster, each
   partition's records applied once thanks to the ``applied`` offsets kept
   in Redis, per scope and for the cross-scope review keys);
3. commits the batch's offsets to its group — only once both writes
   succeeded. So delivery is at-least-once into idempotent writes: a
   follower killed between 2 and 3 reads the batch again and changes
   nothing.

While Redis does not answer, the follower pauses its partitions (it stays in
its group), retries with a back-off of up to 30 s, and resumes where it
stopped; nothing is lost because nothing was committed. A record that does
not decode or validate is logged, counted in
``recurrence_ledger_view_skipped_total`` and skipped (the worker validated
it when it produced it; a foreign record on an output topic is not the
view's to fix).

It runs alone (``recurrence-ledger view follow``, until SIGTERM, or
``--exit-when-idle``), or inside a worker started with a Redis URL (in a
thread, ``recurrence_ledger.cli.beside``; drained when the worker stops).

Metrics (``--metrics-port``, Prometheus text on ``--metrics-host``, 127.0.0.1 by default):

| metric | type | labels | meaning |
| --- | --- | --- | --- |
| ``recurrence_ledger_view_records_total`` | counter | topic | records applied to Redis |
| ``recurrence_ledger_view_skipped_total`` | counter | topic | records skipped (undecodable or invalid) |
| ``recurrence_ledger_view_lag`` | gauge | topic, partition | high watermark − position per assigned partition: how far the view is behind the ledger |
| ``recurrence_ledger_view_last_applied_timestamp_seconds`` | gauge | | Kafka timestamp of the newest record applied |
| ``recurrence_ledger_view_redis_up`` | gauge | | 1 when the last write succeeded, 0 while Redis is down |
| ``recurrence_ledger_view_batch_seconds`` | histogram | | one batch: Redis writes and offset commit |
| ``recurrence_ledger_view_unknown_selections`` | gauge | reason | unknown selections with that contract §17 reason, summed over every scope of the view (eleven series) |
| ``recurrence_ledger_view_<figure>`` | gauge | | one per ScopeStatistics figure marked ``total`` (``recurrence_ledger.read.totals.TOTAL_FIELDS``, from the model), summed over the scopes; the help text is the field's description |
| ``recurrence_ledger_view_critical_recurrences`` | gauge | ``scope`` | recurred verdicts of critical revisions (contract §22), one series per scope that has any |
| ``recurrence_ledger_view_effects`` | gauge | ``verdict`` | revisions of every scope whose effect verdict is this one (contract §21.4: helps, harms, undecided, insufficient); ``RecurrenceLedgerLessonHarms`` fires on ``harms`` |
| ``recurrence_ledger_view_totals_timestamp_seconds`` | gauge | | when the gauges above were last read from Redis |

The unknown selections, the ``<figure>`` gauges and the timestamp are totals of the whole view (``recurrence_ledger.read.totals``),
read from Redis at start and then at most every :data:`TOTALS_INTERVAL_S`
while ScopeStatistics records arrive, at least every
:data:`TOTALS_IDLE_INTERVAL_S`, so they include what other followers (or a
rebuild) wrote and survive a restart; only a follower that serves its
metrics reads them. Every follower of a deployment reports the same totals:
aggregate them with ``max``, not ``sum``.
| ``recurrence_ledger_reviews`` | gauge | namespace, status | review candidates of every scope by review status (open, superseded, approved, rejected; contract §18): ``status="open"`` are the open reviews |
| ``recurrence_ledger_review_oldest_open_timestamp_seconds`` | gauge | namespace | Kafka timestamp of the oldest open candidate's record (NaN while none is open): its age is ``time()`` minus it |
| ``recurrence_ledger_review_repairs`` | gauge | namespace, status | ReviewStatus rows by repair status (pending, held, recurring, failed) |
| ``recurrence_ledger_review_decision_seconds`` | histogram | namespace | time to decision: the candidate record's Kafka timestamp to the decision's ``decided_at``, once per decided candidate this follower filed, not again when Redis lost the view and it is read again |

The review gauges are read back from the read models after each batch
(and when the follower starts), so every follower of a namespace (the
``namespace`` label: the Redis namespace, one per deployment) shows the
same numbers, and a restart loses none.

``recurrence_ledger.read.rebuild.rebuild_read_models`` recreates the read
models from the topics through the same scripts.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from pydantic import ValidationError

from recurrence_ledger import catalogue, policy
from recurrence_ledger.ledger.intake import BadRecord
from recurrence_ledger.ledger.records import (
    RecurrenceObservation, ReviewCandidate, ReviewStatus, RevisionStatistics, ScopeStatistics, SignaturePattern,
)
from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS
from recurrence_ledger.read.follower_view import FollowerView
from recurrence_ledger.read.layout import check_layout
from recurrence_ledger.policy import DEFAULT_HISTORY_LIMIT, DEFAULT_TREND_LIMIT
from recurrence_ledger.read.history import REPAIR_STATUSES, REVIEW_STATUSES, ReadModels
from recurrence_ledger.read.patterns import PatternView
from recurrence_ledger.read.records import Located
from recurrence_ledger.read.review_metrics import DECISION_BUCKETS_S, ReviewMetricsMixin, rfc3339_seconds  # noqa: F401 (re-exported)
from recurrence_ledger.read.totals import EFFECT_VERDICTS, FIELD_DESCRIPTIONS, TOTAL_FIELDS, ViewTotals, view_totals
from recurrence_ledger.kafka.client_config import Bootstrap, consumer_config
from recurrence_ledger.kafka.kafka_admin import admin_client, list_offsets
from recurrence_ledger.kafka.kafka_io import require_topics
from recurrence_ledger.serde.codec import FIXED, Codec
from recurrence_ledger.settings import DEFAULT_APP_ID, DEFAULT_METRICS_HOST, STOP_SIGNALS
from recurrence_ledger.catalogue import OBSERVATIONS, REVIEW_CANDIDATES, REVIEW_STATUS, REVISION_STATISTICS, SIGNATURE_PATTERNS, STATISTICS
from recurrence_ledger.redact import redact_url, redacted_repr
from recurrence_ledger.read.projection import REDIS_DOWN_ERRORS
from recurrence_ledger.read import positions
from recurrence_ledger.read.keys import default_namespace

if TYPE_CHECKING:
    from recurrence_ledger.serde.registry import RegistrySettings

log = logging.getLogger("recurrence_ledger.follower")

#: Seconds without a new record after which a draining follower stops.
DRAIN_IDLE_S = 1.0
#: What a follower logs when Redis lost the view while a batch was written (``ViewPositions.record`` refused its positions).
LOST_MIDWAY = ("Redis lost the view while a batch was written into it (restarted empty?): the view is read again from the beginning, but the "
               "histories, trends and review queue may lack records from before: stop the followers and run `recurrence-ledger view rebuild`")

#: The topics the follower reads, with the schema and model of their values (``catalogue.FOLLOWED_TOPICS``).
#: ReviewStatus rows (contract §18) feed the review queue's status (``recurrence_ledger.read.records``).
FOLLOWED: dict[str, tuple[str, Any]] = {
    STATISTICS: ("ScopeStatistics", ScopeStatistics),
    REVISION_STATISTICS: ("RevisionStatistics", RevisionStatistics),
    REVIEW_STATUS: ("ReviewStatus", ReviewStatus),
    OBSERVATIONS: ("RecurrenceObservation", RecurrenceObservation),
    REVIEW_CANDIDATES: ("ReviewCandidate", ReviewCandidate),
    SIGNATURE_PATTERNS: ("SignaturePattern", SignaturePattern),
}
#: Longest wait between two attempts while Redis is down (seconds).
MAX_BACKOFF_S = 30.0
#: How long a follower killed without leaving its group stays a member (ms).
SESSION_TIMEOUT_MS = 10_000
#: Seconds between two reads of the view's totals while ScopeStatistics
#: records arrive, and at most without any (the gauges of the module docstring).
TOTALS_INTERVAL_S = 10.0
TOTALS_IDLE_INTERVAL_S = 60.0


def totals_due(last_read: float | None, now: float, statistics_applied: bool) -> bool:
    """Whether a follower reads the view's totals again at ``now``
    (``time.monotonic()`` seconds): when it never read them (``last_read``
    None), :data:`TOTALS_INTERVAL_S` after the last read once it applied
    ScopeStatistics records since (``statistics_applied``), and
    :data:`TOTALS_IDLE_INTERVAL_S` after it otherwise (other followers, or a
    rebuild, may have written the view)."""
    if last_read is None:
        return True
    return now - last_read >= (TOTALS_INTERVAL_S if statistics_applied else TOTALS_IDLE_INTERVAL_S)
def view_group(app_id: str, topic_prefix: str = "") -> str:
    """The follower's consumer group: ``<prefix><app_id>-view``."""
    return catalogue.view_follower_group(app_id, topic_prefix)


@dataclass(frozen=True)
class FollowerConfig:
    """How one follower runs. ``history_limit`` / ``trend_limit``: verdicts kept per revision and
    trend points per scope; ``exit_when_idle_s``: stop after this many
    seconds without a record (tests, batch jobs); ``metrics_port``: serve Prometheus metrics on ``metrics_host``."""

    bootstrap: Bootstrap
    redis_url: str
    app_id: str = DEFAULT_APP_ID
    topic_prefix: str = ""
    history_limit: int = DEFAULT_HISTORY_LIMIT
    trend_limit: int = DEFAULT_TREND_LIMIT
    max_batch: int = policy.MAX_BATCH.default
    exit_when_idle_s: float | None = None
    metrics_port: int | None = None
    metrics_host: str = DEFAULT_METRICS_HOST
    schema_registry: RegistrySettings | None = None

    def __repr__(self) -> str:  # the Redis URL may hold a password
        return redacted_repr(self)

    @property
    def group_id(self) -> str:
        return view_group(self.app_id, self.topic_prefix)

    @property
    def namespace(self) -> str:
        return default_namespace(self.topic_prefix)


class FollowerMetrics(ReviewMetricsMixin):
    """The follower's metrics in their own registry (module docstring; the
    review ones: ``recurrence_ledger.read.review_metrics``)."""

    def __init__(self, namespace: str = "rl") -> None:
        self.namespace = namespace
        self.registry = CollectorRegistry()
        self.records = Counter("recurrence_ledger_view_records", "Records applied to the Redis view and read models.", ["topic"], registry=self.registry)
        self.skipped = Counter("recurrence_ledger_view_skipped", "Records skipped: undecodable or invalid.", ["topic"], registry=self.registry)
        self.lag = Gauge("recurrence_ledger_view_lag", "High watermark minus position of the view follower.", ["topic", "partition"], registry=self.registry)
        self.last_applied = Gauge(
            "recurrence_ledger_view_last_applied_timestamp_seconds", "Kafka timestamp of the newest record applied.", registry=self.registry
        )
        self.redis_up = Gauge("recurrence_ledger_view_redis_up", "1 when the last Redis write succeeded.", registry=self.registry)
        self.batch = Histogram(
            "recurrence_ledger_view_batch_seconds", "One batch: Redis writes and offset commit.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=self.registry,
        )
        self.unknown = Gauge(
            "recurrence_ledger_view_unknown_selections", "Unknown selections with this contract §17 reason, over every scope of the view.",
            ["reason"], registry=self.registry,
        )
        #: One gauge per figure of ``TOTAL_FIELDS``, named and described by the record model.
        self.totals = {
            name: Gauge(f"recurrence_ledger_view_{name}", f"{FIELD_DESCRIPTIONS[name]} Summed over every scope.", registry=self.registry)
            for name in TOTAL_FIELDS
        }
        self.critical_recurrences = Gauge(
            "recurrence_ledger_view_critical_recurrences",
            "Recurred verdicts of critical revisions in this scope (contract §22: recurred_by_severity.critical); only scopes with one.",
            ["scope"], registry=self.registry,
        )
        self.effects = Gauge("recurrence_ledger_view_effects", "Revisions of every scope whose effect verdict (§21.4) is this one.", ["verdict"],
                             registry=self.registry)
        self.totals_read = Gauge(
            "recurrence_ledger_view_totals_timestamp_seconds", "When the view's totals were last read from Redis.", registry=self.registry
        )
        self.reviews = Gauge(
            "recurrence_ledger_reviews", "Review candidates of every scope by review status (contract §18).", ["namespace", "status"], registry=self.registry,
        )
        self.oldest_open = Gauge(
            "recurrence_ledger_review_oldest_open_timestamp_seconds", "Kafka timestamp of the oldest open review candidate (NaN: none open).",
            ["namespace"], registry=self.registry,
        )
        self.repairs = Gauge(
            "recurrence_ledger_review_repairs", "Review status rows by repair status (contract §18).", ["namespace", "status"], registry=self.registry,
        )
        self.decision = Histogram(
            "recurrence_ledger_review_decision_seconds", "Time to decision: candidate record timestamp to decided_at.", ["namespace"],
            buckets=DECISION_BUCKETS_S, registry=self.registry,
        )
        for topic in FOLLOWED:
            self.records.labels(topic)
            self.skipped.labels(topic)
        for reason in UNKNOWN_REASONS:
            self.unknown.labels(reason)
        for verdict in EFFECT_VERDICTS:
            self.effects.labels(verdict)
        for status in REVIEW_STATUSES:
            self.reviews.labels(namespace, status)
        for status in REPAIR_STATUSES:
            self.repairs.labels(namespace, status)
        self.oldest_open.labels(namespace).set(math.nan)
        self.decision.labels(namespace)
        self.redis_up.set(1)

    def set_totals(self, totals: ViewTotals) -> None:
        """Set the view's gauges to ``totals`` (read at the current time)."""
        for reason, count in totals.unknown_reasons.items():
            self.unknown.labels(reason).set(count)
        for name, total in totals.sums.items():
            self.totals[name].set(total)
        for scope_id, count in totals.critical_recurrences.items():
            self.critical_recurrences.labels(scope_id).set(count)
        for verdict, count in totals.effects.items():
            self.effects.labels(verdict).set(count)
        self.totals_read.set(time.time())

    def serve(self, port: int, address: str = DEFAULT_METRICS_HOST) -> None:
        start_http_server(port, addr=address, registry=self.registry)


def decode(message_topic: str, partition: int, offset: int, timestamp: int, raw: bytes | None, codec: Codec) -> Located | None:
    """A followed record as a :class:`Located` (logical topic), validated
    with its model; None for a tombstone. Raises BadRecord /
    pydantic.ValidationError for a record that does not decode or
    validate."""
    if raw is None:
        return None
    schema, model = FOLLOWED[message_topic]
    value = codec.decode_value(raw, (schema,))
    model.model_validate(value)
    return Located(message_topic, partition, offset, timestamp, value)


class ViewFollower:
    """The loop described in the module docstring."""

    def __init__(self, config: FollowerConfig, codec: Codec = FIXED):
        self.config = config
        self.codec = codec
        self.topics = {catalogue.physical(name, config.topic_prefix): name for name in FOLLOWED}
        self.physical = {name: physical for physical, name in self.topics.items()}
        self.view = FollowerView(config.redis_url, namespace=config.namespace)
        self.models = ReadModels(self.view._client, config.namespace, config.history_limit, config.trend_limit)
        self.patterns = PatternView(self.view._client, config.namespace)
        self.metrics = FollowerMetrics(config.namespace)
        self.consumer = Consumer(consumer_config(config.bootstrap, config.group_id, {
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 1_000,
            "max.poll.interval.ms": 300_000,
        }))
        self.running = True
        self.redis_ok = True
        self.applied = 0
        self.idle_exit_s = config.exit_when_idle_s
        self.draining = False
        self._admin: AdminClient | None = None  # for _read_to_end, made when first draining
        #: Read the view's totals into the gauges (only when they are served).
        self.totals_enabled = config.metrics_port is not None
        self._totals_at: float | None = None  # time.monotonic() of the last read; None: never read
        self._statistics_since_totals = False
        self._layout_checked = False
        self.positions = positions.ViewPositions(self.view._client, self.models.keys)  # :meth:`_rewind`
        self.read_again: dict[tuple[str, int], int] = {}  # (topic, partition) → where it was when read again: decisions below are not observed again

    def stop(self, *_: Any) -> None:
        """Finish the current batch, then stop."""
        self.running = False

    def drain(self, idle_s: float = DRAIN_IDLE_S) -> None:
        """Stop once nothing new arrived for ``idle_s`` seconds (after being
        assigned) and every assigned partition is read to its end: what was
        committed before the call is then applied (an idle second alone is
        no proof: a fetch or a rebalance can pause a follower still behind).
        The worker calls it when it stops, for its in-process follower."""
        self.idle_exit_s = idle_s
        self.draining = True

    def run(self) -> None:
        """Follow until :meth:`stop` (SIGTERM) or idle for
        ``exit_when_idle_s``. Raises LookupError when a followed topic does
        not exist, and ``recurrence_ledger.read.layout.LayoutError`` (before
        writing anything) when Redis holds the view in another key layout."""
        require_topics(self.consumer, list(self.topics))
        try:
            self.metrics.show_reviews(self.models)
        except REDIS_DOWN_ERRORS as error:  # shown after the first batch written
            log.warning("review gauges not read (%s: %s)", type(error).__name__, error)
        self.consumer.subscribe(list(self.topics), on_assign=self._forget, on_revoke=self._forget)
        last_activity = last_lag = time.monotonic()
        assigned_once = False
        try:
            while self.running:
                messages = self.consumer.consume(num_messages=self.config.max_batch, timeout=0.5)
                now = time.monotonic()
                records = [message for message in messages if self._usable(message)]
                if records:
                    started = time.monotonic()
                    written = self._apply(records)
                    if written is None:
                        break
                    self._commit(written)
                    self.metrics.batch.observe(time.monotonic() - started)
                    last_activity = now
                if not assigned_once and self.consumer.assignment():
                    # Idle time counts from the first assignment: a follower
                    # (a draining one above all) whose partitions come late
                    # must not take its first empty poll for idleness.
                    assigned_once, last_activity = True, now
                if now - last_lag >= 2 or not records:
                    if self._update_lag():  # reading again from here on: idle time counts from now, after the check's round trips
                        last_activity = time.monotonic()
                    last_lag = now
                if self.totals_enabled:
                    self.refresh_totals(now)
                idle = self.idle_exit_s
                if idle is not None and assigned_once and now - last_activity >= idle and (not self.draining or self._read_to_end()):
                    log.info("idle for %.1f s: stopping%s", idle, " (the worker stopped; the view has what it committed)" if self.draining else "")
                    break
        finally:
            self.consumer.close()
            self.view.close()
            log.info("view follower stopped after %d records", self.applied)

    @staticmethod
    def _usable(message: Message) -> bool:
        error = message.error()
        if error is None:
            return True
        if error.code() != KafkaError._PARTITION_EOF:
            if error.fatal():
                raise KafkaException(error)
            log.warning("consumer error: %s", error)
        return False

    def _decode(self, messages: Iterable[Message]) -> list[Located]:
        located = []
        for message in messages:
            topic = self.topics[message.topic()]
            try:
                record = decode(topic, message.partition(), message.offset(), message.timestamp()[1], message.value(), self.codec)
            except (BadRecord, ValidationError, ValueError, KeyError) as error:
                self.metrics.skipped.labels(topic).inc()
                log.warning("%s[%d]@%d skipped: %s", message.topic(), message.partition(), message.offset(), str(error)[:300])
                continue
            if record is not None:
                located.append(record)
        return located

    def _apply(self, messages: list[Message]) -> list[Message] | None:
        """Write one batch into Redis, retrying while Redis is down (the
        partitions paused meanwhile), after reading again from Redis's
        position the partitions whose records since it lost
        (``recurrence_ledger.read.positions``). Returns the messages written,
        whose offsets to commit; None when stopped before they were."""
        backoff, paused, submitted, batch = 0.5, False, False, None
        try:
            while True:
                try:
                    if not self._layout_checked:
                        check_layout(self.view._client, self.view.layout)  # LayoutError: stop, saying what to run
                        self._layout_checked = True
                    if batch is None:
                        messages = self._read_lost_again(messages)
                        batch = self._decode(messages)
                        statistics = [record.value for record in batch if record.topic == STATISTICS]
                        revisions = [record.value for record in batch if record.topic == REVISION_STATISTICS]
                        patterns = [record.value for record in batch if record.topic == SIGNATURE_PATTERNS]
                        self._statistics_since_totals |= bool(statistics)
                    if not submitted:  # after the layout check: a refused layout gets nothing written beside it
                        submitted = True  # submit keeps the records pending on a Redis error (it never raises for Redis)
                        if statistics or revisions:
                            self.view.submit(statistics, revisions=revisions)
                    if self.view.pending:
                        self.view.flush(force=True)
                        if self.view.pending:
                            raise redis_down("the view's records were not written")
                    self.patterns.apply(patterns)  # guarded: writing them again after an outage changes nothing
                    counts = self.models.apply(batch)
                    written = {(self.topics[topic], partition): end for (topic, partition), end in positions.ends(messages).items()}
                    if not self.positions.record(written):  # Redis lost the view while it was written: look again
                        log.error(LOST_MIDWAY)
                        batch, submitted = None, False
                        continue
                    self.metrics.show_reviews(self.models)
                    break
                except REDIS_DOWN_ERRORS as error:
                    if self.redis_ok:
                        log.warning("Redis is down (%s: %s): pausing, offsets not committed, retrying", type(error).__name__, error)
                    self.redis_ok = False
                    self.metrics.redis_up.set(0)
                    if not paused:
                        self.consumer.pause(self.consumer.assignment())
                        paused = True
                    deadline = time.monotonic() + backoff
                    while self.running and time.monotonic() < deadline:
                        self.consumer.poll(min(0.2, backoff))  # stays in the group; paused partitions deliver nothing
                    if not self.running:
                        return None
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
        finally:
            if paused:
                self.consumer.resume(self.consumer.assignment())
        if not self.redis_ok:
            log.info("Redis is back: batch written")
        self.redis_ok = True
        self.metrics.redis_up.set(1)
        self.metrics.decided(counts, self.read_again)
        for record in batch:
            self.metrics.records.labels(record.topic).inc()
        if batch:
            self.metrics.last_applied.set(max(record.timestamp for record in batch) / 1000)
        self.applied += len(batch)
        return messages

    def _read_lost_again(self, messages: list[Message]) -> list[Message]:
        """``messages`` without those of the partitions Redis lost records of (:meth:`_rewind`)."""
        where = [(self.topics[message.topic()], message.partition()) for message in messages]
        lost = self._rewind(set(where))
        return [message for message, key in zip(messages, where, strict=True) if key not in lost]

    def _forget(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """A rebalance: what this follower recorded of these partitions may be behind what another wrote since."""
        self.positions.forget((self.topics[tp.topic], tp.partition) for tp in partitions)

    def _rewind(self, partitions: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """Of ``partitions`` (``(logical topic, partition)``), those whose
        records Redis lost: its recorded position is below what this
        follower recorded there, or the group's committed offset — both
        written only after Redis took the batch
        (``recurrence_ledger.read.positions``), or it is gone. The consumer
        reads them again from Redis's position. Raises what redis-py raises."""
        unknown = [TopicPartition(self.physical[topic], partition) for topic, partition in partitions if (topic, partition) not in self.positions.expected]
        try:
            committed = self.consumer.committed(unknown, timeout=5) if unknown else []
        except KafkaException as error:  # asked again next time; meanwhile what this follower recorded itself counts
            log.warning("committed offsets not read (%s)", error.args[0])
            committed = []
        self.positions.expected.update({(self.topics[tp.topic], tp.partition): max(tp.offset, 0) for tp in committed})
        lost = self.positions.lost(partitions)
        self._layout_checked &= not lost  # an empty Redis lost its layout marker too: written again with the next batch
        for (topic, partition), (offset, was) in lost.items():
            self.read_again[topic, partition] = max(was, self.read_again.get((topic, partition), 0))
            log.warning("Redis holds the view of %s[%d] up to offset %d only, not %d (restarted from an older snapshot, or empty?): reading it again from there",
                        topic, partition, offset, was)
            try:
                self.consumer.seek(TopicPartition(self.physical[topic], partition, offset))
            except KafkaException as error:  # no longer ours: its next owner finds the same position
                log.warning("%s[%d] not read again here (%s)", topic, partition, error.args[0])
        return set(lost)

    def refresh_totals(self, now: float | None = None, force: bool = False) -> bool:
        """Read the view's totals (``recurrence_ledger.read.totals``) into
        the gauges when due — never read yet, :data:`TOTALS_INTERVAL_S`
        after the last read once ScopeStatistics records were applied,
        :data:`TOTALS_IDLE_INTERVAL_S` otherwise — or with ``force``. True
        when they were read. Never raises because of Redis: the gauges keep
        their values and the next call tries again."""
        now = time.monotonic() if now is None else now
        if not force and not totals_due(self._totals_at, now, self._statistics_since_totals):
            return False
        self._totals_at = now
        try:
            totals = view_totals(self.view._client, self.view.layout)
        except REDIS_DOWN_ERRORS as error:
            log.debug("the view's totals were not read: %s", error)
            return False
        self._statistics_since_totals = False
        self.metrics.set_totals(totals)
        return True

    def _commit(self, messages: list[Message]) -> None:
        """Commit the offsets after the batch (synchronously). A commit the
        group refuses (a rebalance took the partition away) is logged: the
        next owner reads the batch again and the idempotent writes change
        nothing."""
        if not messages:  # every partition of the batch is read again (_read_lost_again)
            return
        try:
            self.consumer.commit(offsets=[TopicPartition(topic, partition, offset) for (topic, partition), offset in positions.ends(messages).items()], asynchronous=False)
        except KafkaException as error:
            log.warning("offset commit refused (%s): the batch will be read again, changing nothing", error.args[0])

    def _read_to_end(self) -> bool:
        """Whether every assigned partition's position (the group's committed
        offset where nothing was consumed yet) is at its high watermark as
        the broker says now (``kafka_admin.list_offsets``: one request, not
        the cached value); False while the broker cannot say. read_committed
        skips transaction markers: a partition whose last transaction was
        applied has its position at the watermark."""
        try:
            positions = {(tp.topic, tp.partition): tp.offset for tp in self.consumer.position(self.consumer.assignment())}
            unstarted = [TopicPartition(*key) for key, offset in positions.items() if offset < 0]
            for tp in self.consumer.committed(unstarted, timeout=5) if unstarted else ():
                positions[(tp.topic, tp.partition)] = tp.offset
            if self._admin is None:
                self._admin = admin_client(self.config.bootstrap)
            highs = list_offsets(self._admin, [TopicPartition(*key) for key in positions], OffsetSpec.latest(), timeout=5)
        except (KafkaException, TimeoutError):
            return False
        return all(high <= 0 or positions[key] >= high for key, high in highs.items())

    def _update_lag(self) -> bool:
        """Set the lag gauges, and read again what Redis lost of the
        assigned partitions while nothing arrived (:meth:`_rewind`; a
        Redis restarted from an older snapshot while the follower was
        idle). True when a partition is read again."""
        try:
            assigned = self.consumer.position(self.consumer.assignment())
        except KafkaException:
            return False
        partitions = set()
        for tp in assigned:
            try:
                _, high = self.consumer.get_watermark_offsets(tp, cached=True)
            except KafkaException:
                continue
            if high >= 0:
                position = tp.offset if tp.offset >= 0 else None
                if position is None:
                    committed = self.consumer.committed([TopicPartition(tp.topic, tp.partition)], timeout=5)[0].offset
                    position = committed if committed >= 0 else 0
                self.metrics.lag.labels(self.topics[tp.topic], str(tp.partition)).set(max(0, high - position))
                partitions.add((self.topics[tp.topic], tp.partition))
        try:
            return bool(self._rewind(partitions))
        except REDIS_DOWN_ERRORS:  # the next batch waits for Redis, and looks again
            return False


def redis_down(message: str) -> Exception:
    import redis
    return redis.exceptions.ConnectionError(message)


def run_follower(config: FollowerConfig, codec: Codec = FIXED) -> int:
    """Run one follower until SIGTERM/SIGINT/SIGHUP or idle; returns the records
    applied. Raises LookupError when a followed topic does not exist."""
    follower = ViewFollower(config, codec)
    if config.metrics_port:
        follower.metrics.serve(config.metrics_port, config.metrics_host)
    for number in STOP_SIGNALS:
        signal.signal(number, follower.stop)
    log.info("view follower of group %s: %s into %s (namespace %s)", config.group_id, sorted(follower.topics), redact_url(config.redis_url), config.namespace)
    follower.run()
    return follower.applied
