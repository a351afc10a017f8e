"""The Kafka worker: decode → core → send, with exactly-once outputs.

A read-process-write loop in the style of Kafka Streams with
``processing.guarantee=exactly_once_v2``, on confluent-kafka:

- one consumer in the application's consumer group subscribes to every input
  topic of contract §1 with the *range* assignor, so partition p of every
  input topic lands on the same worker (co-partitioning by scope_id);
- each assigned partition p is a *task* with its own ``LedgerProcessor`` over
  a ``ChangelogStore``: a dict restored, on assignment, from partition p of a
  compacted changelog topic (``<app_id>-ledger-state-changelog``) read with
  ``read_committed``;
- every ``commit_interval_ms`` one Kafka transaction carries the batch's
  output records (to partition p of each output topic), the state changes
  (changelog records) and the consumed offsets
  (``send_offsets_to_transaction`` with the consumer's group metadata, KIP-447);
- ledger facts are produced as each record is applied; the view records
  (``recurrence-statistics``, ``revision-statistics``) once per transaction
  and task, at most one per changed key (contract §8,
  ``LedgerProcessor.end_batch``), just before the changelog is collected.

So a crash anywhere leaves either everything of a batch or nothing of it
visible to ``read_committed`` consumers: no duplicate and no lost match,
observation, review candidate or statistics record, and the state recovered
from the changelog is exactly the state that produced the committed outputs.

Why not Faust tables here: faust-streaming's ``exactly_once`` sends records to
topics the app does not itself consume outside the transaction
(faust-streaming/faust#177, #517, open), and in ``at_least_once`` a crash
between a table's changelog write and the output send can lose outputs or
half-apply an event. Owning the transaction keeps
state, outputs and offsets atomic.

Each partition's state records the Unicode version it was built with
(contract §10, ``recurrence_ledger.runtime.unicode_pin``): a worker on a
runtime with another version refuses to start unless told to accept it.

The statistics and revision-statistics records of each committed
transaction are then projected into Redis (``recurrence_ledger.view``); Redis being
down never stops the ledger.
"""

from __future__ import annotations

from recurrence_ledger.errors import RecurrenceLedgerError

import logging
import os
import signal
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from recurrence_ledger.ledger.intake import BadRecord, Coordinates, dead_letter, ingest
from recurrence_ledger.ledger.processor import Emit, LedgerConfig, LedgerProcessor
from recurrence_ledger.settings import DEFAULT_APP_ID, ENV_BOOTSTRAP_SERVERS, settings
from recurrence_ledger.topics.catalogue import DEAD_LETTER, DEFAULT_MAX_OUTPUT_BYTES, MAX_MESSAGE_BYTES, REVISION_STATISTICS, STATISTICS
from recurrence_ledger.runtime.client_config import Bootstrap, client_config
from recurrence_ledger.ledger.state import UnicodeVersionChanged, pin_unicode_version
from recurrence_ledger.runtime.metrics import WorkerMetrics
from recurrence_ledger.schemas import codec
from recurrence_ledger.topics import catalogue

if TYPE_CHECKING:
    from recurrence_ledger.schemas.registry import RegistrySettings

log = logging.getLogger("recurrence_ledger.worker")

_DELETED = object()
#: Seconds one commit may block before the process exits for a restart.
COMMIT_WATCHDOG_S = 120.0
#: Largest record the worker produces (bytes); topics get max.message.bytes to match.
#: Exit code of a batch run (``exit_when_idle_s``) that stopped with input
#: partitions of its group not caught up (``NotCaughtUp``).
NOT_CAUGHT_UP_EXIT = 4
#: Seconds a batch run waits, idle, for the group to catch up by default.
DEFAULT_MAX_WAIT_CAUGHT_UP_S = 120.0
#: Seconds between two checks of the group's committed offsets while idle.
CAUGHT_UP_CHECK_S = 1.0


class FaultInjector:
    """Test hook: ``RL_FAULT_INJECT="point:n,…"`` makes the process SIGKILL
    itself the n-th time it reaches ``point`` — consumed (a batch polled,
    nothing processed), produced (outputs produced, before the changelog and
    offsets), offsets_sent (before commit_transaction), committed (after the
    commit, before the Redis view), restoring (while restoring state). Unset
    in production: ``hit`` is then a dict lookup."""

    def __init__(self, spec: str | None):
        self.remaining: dict[str, int] = {}
        for item in filter(None, (spec or "").split(",")):
            point, _, count = item.partition(":")
            self.remaining[point] = int(count or 1)

    def hit(self, point: str) -> None:
        """Count one arrival at ``point``; SIGKILL this process on the n-th."""
        if point in self.remaining:
            self.remaining[point] -= 1
            if self.remaining[point] == 0:
                log.warning("fault injection: SIGKILL at %s", point)
                os.kill(os.getpid(), signal.SIGKILL)

    def break_core(self, processor: LedgerProcessor) -> None:
        """``core_error:n``: the n-th applied event raises after the core
        changed its state (a simulated core bug, to test the rewind)."""
        if "core_error" not in self.remaining:
            return
        finish = processor._finish_scope

        def failing(*args: Any) -> None:
            finish(*args)
            self.remaining["core_error"] -= 1
            if self.remaining["core_error"] == 0:
                raise RuntimeError("fault injection: core_error")

        processor._finish_scope = failing  # type: ignore[method-assign]


@dataclass(frozen=True)
class PartitionLag:
    """An input partition whose committed offset (of the group) is short of
    its end: ``committed`` (-1: none), ``end`` (the end offset a
    read_committed consumer sees), ``owner`` (who holds it, as far as the
    group coordinator says)."""

    topic: str
    partition: int
    committed: int
    end: int
    owner: str

    def __str__(self) -> str:
        committed = "none" if self.committed < 0 else str(self.committed)
        return f"{self.topic}[{self.partition}] (committed {committed}, end {self.end}, lag ≤ {self.end - max(self.committed, 0)}; {self.owner})"


class NotCaughtUp(RecurrenceLedgerError):
    """A batch run (``exit_when_idle_s``) stopped while input partitions of
    its group were not processed to their end: the outputs are incomplete."""

    def __init__(self, lagging: list[PartitionLag], waited_s: float):
        self.lagging = lagging
        self.partitions = sorted({(lag.topic, lag.partition) for lag in lagging})
        super().__init__(
            f"not caught up after waiting {waited_s:.0f} s without progress: {len(lagging)} input partition(s) of the group "
            f"have records beyond their committed offset: " + "; ".join(map(str, lagging))
        )


class ChangelogStore(MutableMapping):
    """The core's state for one partition: a dict that remembers which keys
    changed since the last commit, so they can be written to the changelog
    inside the same transaction as the outputs they produced.

    Keys are the core's tuples; on the changelog they are canonical JSON
    arrays (``orjson.dumps(list(key))``), values JSON, deletions tombstones.
    """

    def __init__(self) -> None:
        self.data: dict[tuple, Any] = {}
        self.dirty: dict[tuple, Any] = {}

    def __getitem__(self, key: tuple) -> Any:
        return self.data[key]

    def __setitem__(self, key: tuple, value: Any) -> None:
        self.data[key] = value
        self.dirty[key] = value

    def __delitem__(self, key: tuple) -> None:
        del self.data[key]
        self.dirty[key] = _DELETED

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def get(self, key: tuple, default: Any = None) -> Any:  # hot path: skip the ABC's try/except
        return self.data.get(key, default)

    def changes(self) -> list[tuple[bytes, bytes | None]]:
        """Changelog records for every key changed since ``dirty`` was last
        cleared (the caller clears it once they are all produced)."""
        return [
            (orjson.dumps(list(key)), None if value is _DELETED else orjson.dumps(value))
            for key, value in self.dirty.items()
        ]

    def restore(self, key: bytes, value: bytes | None) -> None:
        """Apply one changelog record (recovery)."""
        parts = tuple(orjson.loads(key))
        if value is None:
            self.data.pop(parts, None)
        else:
            self.data[parts] = orjson.loads(value)


@dataclass(frozen=True)
class WorkerConfig:
    """How one worker process runs.

    - ``bootstrap``: Kafka bootstrap servers, or a
      ``client_config.KafkaConnection`` (bootstrap + security settings).
    - ``app_id``: with the topic prefix, the consumer group id and the
      changelog topic's name (``<prefix><app_id>-ledger-state-changelog``);
      all workers of one deployment share it.
    - ``instance_id``: stable per worker instance; the transactional id is
      ``<group id>-<instance_id>``, so a restarted instance fences its
      previous incarnation and aborts its open transaction at once.
    - ``topic_prefix``: deployment prefix of every topic (contract §1).
    - ``output_format``: "avro" (Confluent-framed) or "json".
    - ``commit_interval_ms``: how often a transaction is committed.
    - ``exit_when_idle_s``: a batch run: stop after this many seconds without
      input, but only once every input partition of the group (not just this
      member's) has its committed offset at its end ("caught up"); None runs
      forever.
    - ``max_wait_caught_up_s``: how long a batch run, idle, waits for the
      group to catch up (the partitions of a killed member come to this one
      when its session times out) while no committed offset of the group
      advances; then ``run`` raises ``NotCaughtUp`` (exit code 4).
    - ``static_membership``: join the group as a static member (KIP-345,
      ``group.instance.id`` = ``instance_id``): a restarted instance takes its
      partitions back at once, without a rebalance; a stopped one keeps them
      until ``session_timeout_ms`` passes (it sends no LeaveGroup).
    - ``session_timeout_ms``: the consumer's ``session.timeout.ms``.
    - ``redis_url``: the Redis view (None: no projection).
    - ``create_partitions``: create missing catalogue topics with this many
      partitions before starting (None: they must exist).
    - ``metrics_port``: serve Prometheus metrics on 127.0.0.1:<port>/metrics.
    - ``max_output_bytes``: largest output value (bytes, as encoded) the
      worker produces. An input record whose outputs include a larger one is
      not applied: the transaction is rewound and the record goes to
      dead-letter as ``oversized_output`` (Kafka would refuse the output,
      and every restart would fail on it again). Default: the producer's
      message.max.bytes (16 MiB) less 64 KiB for the key and record overhead.
    - ``schema_registry``: frame Avro values with a Schema Registry's ids
      (``recurrence_ledger.schemas.registry``); None: the fixed ids.
    - ``accept_unicode_change``: start even when a partition's state was
      built on another Unicode version than this runtime's, and record this
      runtime's (contract §10; without it the worker refuses to start,
      ``recurrence_ledger.runtime.unicode_pin``).
    """

    bootstrap: Bootstrap
    app_id: str = DEFAULT_APP_ID
    instance_id: str = field(default_factory=lambda: settings().worker_instance_id)
    topic_prefix: str = ""
    output_format: str = codec.AVRO
    commit_interval_ms: int = 100
    max_batch: int = 2_000
    exit_when_idle_s: float | None = None
    max_wait_caught_up_s: float = DEFAULT_MAX_WAIT_CAUGHT_UP_S
    static_membership: bool = True
    session_timeout_ms: int = 10_000
    redis_url: str | None = None
    create_partitions: int | None = None
    metrics_port: int | None = None
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    ledger: LedgerConfig = field(default_factory=LedgerConfig)
    schema_registry: RegistrySettings | None = None
    accept_unicode_change: bool = False

    @property
    def group_id(self) -> str:
        """Consumer group id: the prefixed app_id (Kafka Streams' application.id)."""
        return catalogue.physical(self.app_id, self.topic_prefix)

    @property
    def changelog_name(self) -> str:
        """Logical name of the state changelog topic."""
        return catalogue.changelog_name(self.app_id)

    @property
    def changelog_topic(self) -> str:
        """Physical name of the state changelog topic (compacted)."""
        return catalogue.physical(self.changelog_name, self.topic_prefix)


class Task:
    """One assigned partition: its store, processor and pending offsets."""

    def __init__(self, partition: int, config: LedgerConfig):
        self.partition = partition
        self.store = ChangelogStore()
        self.processor = LedgerProcessor(self.store, config)
        self.offsets: dict[str, int] = {}  # physical input topic → next offset to commit


class CoreFailure(RecurrenceLedgerError):
    """The core raised on a record: its state may be half-applied, so the
    caller must not commit it (the worker rewinds and parks the record)."""

    def __init__(self, coordinates: Coordinates, raw: bytes, error: Exception):
        super().__init__(f"{type(error).__name__}: {error}")
        self.coordinates = coordinates
        self.raw = raw


def process_message(processor: LedgerProcessor, message: Message, topic_prefix: str, wire: codec.Codec = codec.FIXED) -> list[Emit]:
    """Decode one input record and apply it: the whole shell of contract §9.

    Returns the emits, or one dead-letter emit for a record without a key
    (or one that is not the UTF-8 bytes of the value's scope_id), one that
    does not decode (with ``wire``) or validate. Raises CoreFailure when the
    core itself raised — a bug, after which the processor's state cannot be
    trusted — and RegistryError when a Schema Registry does not answer.
    """
    physical_topic = message.topic()
    raw = message.value()
    raw_key = message.key()
    try:
        key = raw_key.decode("utf-8") if raw_key is not None else None
    except UnicodeDecodeError:
        key = raw_key.decode("utf-8", "replace")
        coordinates = Coordinates(physical_topic, message.partition(), message.offset(), key)
        return [dead_letter(coordinates, raw or b"", "key_mismatch", "record key is not UTF-8, so it cannot be a scope_id (contract §1)")]
    coordinates = Coordinates(physical_topic, message.partition(), message.offset(), key)
    try:
        if raw_key is None:
            raise BadRecord("key_mismatch", "record has no key; the key must be its scope_id (contract §1)")
        kind, value = wire.decode_source(catalogue.logical(physical_topic, topic_prefix), raw)
        return ingest(processor, kind, value, raw, coordinates)
    except BadRecord as bad:
        return [dead_letter(coordinates, raw or b"", bad.reason, bad.message)]
    except codec.RegistryError:
        raise  # the Schema Registry is unreachable: not the record's fault, never dead-letter it
    except Exception as error:
        log.exception("internal error on %s[%d]@%d", physical_topic, message.partition(), message.offset())
        raise CoreFailure(coordinates, raw or b"", error) from error


def encode_emit(emit: Emit, output_format: str, wire: codec.Codec = codec.FIXED, topic_prefix: str = "") -> bytes:
    """The wire value of an output record (Avro framed by ``wire``, or JSON)."""
    return wire.encode(catalogue.BY_NAME[emit.topic].schema, emit.value, output_format, topic=catalogue.physical(emit.topic, topic_prefix))


def input_consumer_config(bootstrap: Bootstrap, group_id: str, instance_id: str | None = None, session_timeout_ms: int = 10_000) -> dict:
    """The worker's consumer settings for the input topics (also the
    benchmark's passthrough baseline, so both read the same way). With
    ``instance_id``, a static member (KIP-345 ``group.instance.id``)."""
    static = {"group.instance.id": instance_id} if instance_id else {}
    return {
        **client_config(bootstrap),
        "group.id": group_id,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        # Range assigns partition p of every subscribed topic to the same
        # member: co-partitioning (contract §1).
        "partition.assignment.strategy": "range",
        "enable.partition.eof": False,
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": min(1_000, session_timeout_ms // 3),
        **static,
    }


class _Rewind(Exception):
    """Internal: abort the open transaction and rewind."""


class LedgerWorker:
    """The read-process-write loop described in the module docstring."""

    def __init__(self, config: WorkerConfig, view: Any = None):
        self.config = config
        self.view = view
        prefix = config.topic_prefix
        self.inputs = [catalogue.physical(name, prefix) for name in catalogue.INPUT_TOPICS]
        self.outputs = {name: catalogue.physical(name, prefix) for name in catalogue.OUTPUT_TOPICS}
        self.codec = codec.make_codec(config.schema_registry)
        if config.output_format == codec.AVRO:  # a registry that refuses our schemas stops the worker here
            self.codec.prepare({self.outputs[name]: catalogue.BY_NAME[name].schema for name in catalogue.OUTPUT_TOPICS})
        self.tasks: dict[int, Task] = {}
        self.running = True
        self.records_in = 0
        # Static membership: the same instance id names the consumer's
        # group.instance.id and (below) the transactional.id, so a restarted
        # instance gets its partitions back at once (no rebalance) and fences
        # its previous incarnation on both: the broker refuses the old
        # consumer (FENCED_INSTANCE_ID) and the old producer (epoch bump).
        self.consumer = Consumer(input_consumer_config(
            config.bootstrap, config.group_id, config.instance_id if config.static_membership else None, config.session_timeout_ms))
        self.producer = Producer(
            {
                **client_config(config.bootstrap),
                "transactional.id": f"{config.group_id}-{config.instance_id}",
                "transaction.timeout.ms": 30_000,
                "linger.ms": 5,
                # Large state records (a scope's heads, a long streak run) and
                # RecurrenceMatches over thousands of heads: the changelog and
                # ledger topics are created with max.message.bytes to match.
                "message.max.bytes": MAX_MESSAGE_BYTES,
                "compression.type": "lz4",
            }
        )
        # Records for the Redis view, held until their transaction commits
        # (the view never shows uncommitted data): ScopeStatistics and
        # RevisionStatistics, each in publication order.
        self._pending_stats: list[dict] = []
        self._pending_revisions: list[dict] = []
        self._in_transaction = False
        self._last_activity = time.monotonic()
        self.faults = FaultInjector(settings().fault_inject)
        self.metrics = WorkerMetrics()
        self._batch_timestamps: list[float] = []
        self._parked: dict[tuple[str, int, int], tuple[str, str]] = {}  # where -> (reason, message)
        self._committing_since: float | None = None
        threading.Thread(target=self._watchdog, name="commit-watchdog", daemon=True).start()
        self._batch_outputs: dict[str, int] = {}
        self._catch_up = _CatchUp(self)
        self.not_caught_up: NotCaughtUp | None = None

    # -- lifecycle ----------------------------------------------------------------
    def run(self) -> None:
        """Process until stopped (SIGTERM/SIGINT) or, with
        ``exit_when_idle_s``, idle that long with every input partition of the
        group caught up. Commits the open transaction on the way out. Raises
        NotCaughtUp when a batch run gives up waiting for the group to catch
        up (after ``max_wait_caught_up_s`` without progress)."""
        self.producer.init_transactions(30)
        self.consumer.subscribe(self.inputs, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        last_report = last_lag = self._last_activity = time.monotonic()
        transaction_started = 0.0
        reported = 0
        interval = self.config.commit_interval_ms / 1000
        clean = False
        try:
            while self.running:
                # While a transaction is open, poll briefly and commit once it
                # is `interval` old (latency ≈ interval, not interval plus a
                # full poll wait); when idle, wait up to `interval` for input.
                wait = max(0.0, min(0.005, interval - (time.monotonic() - transaction_started))) if self._in_transaction else interval
                messages = self.consumer.consume(num_messages=self.config.max_batch, timeout=wait)
                now = time.monotonic()
                if messages:
                    self._last_activity = now
                    if not self._in_transaction:
                        transaction_started = now
                    self._begin()
                    self.faults.hit("consumed")
                    try:
                        for message in messages:
                            self._handle(message)
                    except _Rewind:
                        self._abort_and_rewind("the core failed on a record")
                        continue
                if now - last_lag >= 2:
                    self._update_lag()
                    last_lag = now
                if now - last_report >= 10:
                    rate = (self.records_in - reported) / (now - last_report)
                    log.info("processed %d records (%.0f/s); partitions %s", self.records_in, rate, sorted(self.tasks))
                    last_report, reported = now, self.records_in
                if self._in_transaction and now - transaction_started >= interval:
                    self._commit()
                elif not messages and self.view is not None and self.view.pending:
                    self.view.flush(force=False)  # catch up after a Redis outage; respects its back-off
                idle = self.config.exit_when_idle_s
                if idle is not None and now - self._last_activity >= idle and not self._in_transaction and self._catch_up.done(now):
                    break
            clean = True
        finally:
            if self._in_transaction:
                if clean:
                    self._commit()
                else:
                    # Never let close() → on_revoke commit a half-done batch.
                    self._in_transaction = False
                    try:
                        self.producer.abort_transaction(10)
                    except KafkaException as error:  # the broker aborts it on its own at the timeout
                        log.warning("could not abort the open transaction: %s", error)
            self.consumer.close()
            self.producer.flush(10)
            if self.view is not None:
                self.view.flush()
            self._catch_up.close()
            log.info("stopped after %d records", self.records_in)
        if self.not_caught_up is not None:
            raise self.not_caught_up

    def _update_lag(self) -> None:
        """Consumer lag per assigned input partition (cached watermarks)."""
        for tp in self.consumer.position(self.consumer.assignment()):
            try:
                _, high = self.consumer.get_watermark_offsets(tp, cached=True)
            except KafkaException:
                continue
            if high >= 0 and tp.offset >= 0:
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, high - tp.offset))

    def stop(self, *_: Any) -> None:
        """Ask the loop to finish after the current batch."""
        self.running = False

    # -- records --------------------------------------------------------------------
    def _handle(self, message: Message) -> None:
        error = message.error()
        if error is not None:
            if error.fatal():  # e.g. FENCED_INSTANCE_ID: another process runs with this instance id
                raise KafkaException(error)
            if error.code() != KafkaError._PARTITION_EOF:
                log.warning("consume error: %s", error)
            return
        task = self.tasks.get(message.partition())
        if task is None:  # a record of a partition revoked in this batch
            return
        where = (message.topic(), message.partition(), message.offset())
        if where in self._parked:
            # Parked after the core failed on it, or after its outputs did not
            # fit in Kafka: dead-letter it without applying it again (the
            # state was rewound to before it).
            reason, text = self._parked[where]
            emit = dead_letter(Coordinates(*where, (message.key() or b"").decode("utf-8", "replace")), message.value() or b"", reason, text)
            self._send(emit, task.partition, message.key(), encode_emit(emit, self.config.output_format, self.codec, self.config.topic_prefix))
            self.metrics.dead_letters.labels(reason).inc()
            task.offsets[message.topic()] = message.offset() + 1
            return
        self.records_in += 1
        self.metrics.records.labels(message.topic()).inc()
        kind, timestamp = message.timestamp()
        if kind != TIMESTAMP_NOT_AVAILABLE:
            self._batch_timestamps.append(timestamp / 1000)
        try:
            emits = process_message(task.processor, message, self.config.topic_prefix, self.codec)
        except CoreFailure as failure:
            # Never commit a half-applied record: abort, rewind to the last
            # commit, and dead-letter this record when it comes round again.
            self._parked[where] = ("internal_error", str(failure)[:1000])
            raise _Rewind() from failure
        values = [encode_emit(emit, self.config.output_format, self.codec, self.config.topic_prefix) for emit in emits]
        for emit, value in zip(emits, values):
            if len(value) > self.config.max_output_bytes:
                # Its state change is already applied: rewind, then park it.
                self._parked[where] = ("oversized_output", (
                    f"its {emit.topic} output is {len(value)} bytes; the worker's limit is "
                    f"{self.config.max_output_bytes} (max_output_bytes)"))
                raise _Rewind()
        for emit, value in zip(emits, values):
            self._send(emit, task.partition, message.key(), value)
            self._batch_outputs[emit.topic] = self._batch_outputs.get(emit.topic, 0) + 1
            if emit.topic == DEAD_LETTER:
                self.metrics.dead_letters.labels(emit.value["reason"]).inc()
        task.offsets[message.topic()] = message.offset() + 1

    def _send(self, emit: Emit, partition: int, raw_key: bytes | None, value: bytes) -> None:
        # Outputs go to the input's partition: a scope's outputs stay
        # co-partitioned with its inputs whatever partitioner producers use.
        key = raw_key if emit.topic == DEAD_LETTER or emit.key is None else emit.key.encode("utf-8")
        self._produce(self.outputs[emit.topic], key, value, partition)
        if emit.topic == STATISTICS:
            self._pending_stats.append(emit.value)
        elif emit.topic == REVISION_STATISTICS:
            self._pending_revisions.append(emit.value)
        self.producer.poll(0)

    # -- transactions -------------------------------------------------------------------
    def _begin(self) -> None:
        if not self._in_transaction:
            self.producer.begin_transaction()
            self._in_transaction = True

    def _produce(self, topic: str, key: bytes | None, value: bytes | None, partition: int) -> None:
        """produce(), waiting for room when the local queue is full."""
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, partition=partition)
                return
            except BufferError:
                self.producer.poll(0.1)

    def _publish_views(self) -> None:
        """The transaction's view records (contract §8): each task's
        ``end_batch``, produced before its changelog is collected, so the
        ``published`` state they update commits with them."""
        for task in self.tasks.values():
            for emit in task.processor.end_batch():
                self._send(emit, task.partition, None, encode_emit(emit, self.config.output_format, self.codec, self.config.topic_prefix))
                self._batch_outputs[emit.topic] = self._batch_outputs.get(emit.topic, 0) + 1

    def _commit(self) -> None:
        """View records, then changelog records + offsets + commit,
        atomically with the outputs already produced in this transaction.

        Error handling follows the transactional producer's classes
        (librdkafka/confluent-kafka): a retriable error (e.g. the broker is
        restarting) retries for up to a minute; an abortable one, or one
        still failing after that, aborts the transaction and rewinds — state
        restored from the changelog, consumer positions reset to the
        committed offsets — so the batch is processed again; a fatal one
        (fenced by a newer instance) raises, and so does a failing abort.
        """
        self._publish_views()
        self.faults.hit("produced")
        self._committing_since = time.monotonic()
        try:
            self._commit_once()
        finally:
            self._committing_since = None

    def _commit_once(self) -> None:
        offsets = []
        for task in self.tasks.values():
            for key, value in task.store.changes():
                self._produce(self.config.changelog_topic, key, value, task.partition)
            task.store.dirty.clear()
            offsets += [TopicPartition(topic, task.partition, offset) for topic, offset in task.offsets.items()]
            task.offsets.clear()
        try:
            if offsets:
                self._retrying(lambda: self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 10))
            self.faults.hit("offsets_sent")
            self._retrying(lambda: self.producer.commit_transaction(10))
        except KafkaException as error:
            kafka_error = error.args[0]
            if kafka_error.fatal():
                raise
            # Abortable, or still failing after the retry budget: give the
            # batch up and process it again from the last commit.
            self._abort_and_rewind(f"transaction not committed ({kafka_error})")
            return
        self._in_transaction = False
        self.faults.hit("committed")
        committed_at = time.time()
        for timestamp in self._batch_timestamps:
            self.metrics.latency.observe(max(0.0, committed_at - timestamp))
        for topic, count in self._batch_outputs.items():
            self.metrics.outputs.labels(topic).inc(count)
        self.metrics.statistics(self._pending_stats)
        self._batch_timestamps, self._batch_outputs = [], {}
        if self.view is not None and (self._pending_stats or self._pending_revisions):
            self.view.submit(self._pending_stats, revisions=self._pending_revisions)
        self._pending_stats, self._pending_revisions = [], []

    @staticmethod
    def _retrying(operation: Callable[[], Any], budget_s: float = 60.0) -> None:
        """Run a transactional operation, retrying retriable errors (e.g. a
        broker restarting) for up to ``budget_s`` seconds; then re-raise."""
        deadline = time.monotonic() + budget_s
        attempt = 0
        while True:
            try:
                operation()
                return
            except KafkaException as error:
                attempt += 1
                if not error.args[0].retriable() or time.monotonic() >= deadline:
                    raise
                log.warning("retriable transaction error (%s): retrying", error.args[0])
                time.sleep(min(0.2 * attempt, 2.0))

    def _watchdog(self) -> None:
        """Exit (code 3) when one commit has been blocked for
        COMMIT_WATCHDOG_S: seen once in ~8 broker-restart runs, librdkafka's
        commit_transaction did not return after its timeout. The open
        transaction is aborted by the broker, so a supervisor's restart keeps
        outputs exactly once (tests/e2e/test_faults.py)."""
        while True:
            time.sleep(1.0)
            since = self._committing_since
            if since is not None and time.monotonic() - since > COMMIT_WATCHDOG_S:
                log.critical("a transaction commit has been blocked for %.0f s: exiting for a restart", COMMIT_WATCHDOG_S)
                os._exit(3)

    def _abort_and_rewind(self, why: str) -> None:
        log.warning("%s: aborting and rewinding to the last commit", why)
        self.producer.abort_transaction(30)
        self._in_transaction = False
        self._rewind()

    def _rewind(self) -> None:
        """Back to the last committed transaction: fresh state from the
        changelog, consumer positions at the committed offsets."""
        self._pending_stats, self._pending_revisions = [], []
        self._batch_timestamps, self._batch_outputs = [], {}
        assignment = self.consumer.assignment()
        for committed in self.consumer.committed(assignment, timeout=30):
            offset = committed.offset if committed.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(committed.topic, committed.partition, offset))
        for number in list(self.tasks):
            task = Task(number, self.config.ledger)
            self._restore(task)
            self._pin_unicode(task)
            self.tasks[number] = task

    # -- rebalance ---------------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = sorted({tp.partition for tp in partitions})
        started = self._last_activity = time.monotonic()
        for number in numbers:
            if number not in self.tasks:
                task = Task(number, self.config.ledger)
                self.faults.break_core(task.processor)
                restored = self._restore(task)
                self._pin_unicode(task)
                self.tasks[number] = task
                log.info("partition %d assigned: %d state records restored", number, restored)
        log.info("assigned partitions %s (restore %.2f s)", numbers, time.monotonic() - started)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._in_transaction:
            self._commit()
        for number in {tp.partition for tp in partitions}:
            self.tasks.pop(number, None)
        log.info("revoked partitions %s", sorted({tp.partition for tp in partitions}))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Lost (not revoked): another member may own them already; our open
        # transaction must not commit their offsets.
        if self._in_transaction:
            self.producer.abort_transaction(30)
            self._in_transaction = False
            self._pending_stats, self._pending_revisions = [], []
        self.tasks.clear()
        log.warning("partitions lost %s: state dropped, will restore on reassignment", sorted({tp.partition for tp in partitions}))

    def _pin_unicode(self, task: Task) -> None:
        """contract §10: check the Unicode version recorded in the restored
        state against this runtime's, and record it (a new partition, or one
        restored from a changelog written before the pin existed). Raises
        UnicodeVersionChanged — out of the consumer's poll, so the worker
        stops before it processes anything — unless accept_unicode_change."""
        try:
            previous = pin_unicode_version(task.store, self.config.accept_unicode_change)
        except UnicodeVersionChanged as error:
            raise UnicodeVersionChanged(
                error.recorded, error.runtime, f"partition {task.partition} of {self.config.changelog_topic}",
            ) from None
        if previous is not None and previous != unicodedata.unidata_version:
            log.warning(
                "partition %d: state built with Unicode %s, this runtime has Unicode %s: accepted "
                "(--accept-unicode-change), recording Unicode %s", task.partition, previous,
                unicodedata.unidata_version, unicodedata.unidata_version,
            )

    def _restore(self, task: Task) -> int:
        """Read partition ``task.partition`` of the changelog to its end
        (read_committed) into the task's store."""
        restore = Consumer(
            {
                **client_config(self.config.bootstrap),
                "group.id": f"{self.config.group_id}-restore",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                # Do not let the broker hold the last fetch for 500 ms: the
                # end of the partition is what recovery waits for.
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            tp = TopicPartition(self.config.changelog_topic, task.partition)
            low, high = restore.get_watermark_offsets(tp, timeout=10)
            if high <= low:
                return 0
            restore.assign([TopicPartition(self.config.changelog_topic, task.partition, OFFSET_BEGINNING)])
            count = 0
            while True:
                message = restore.poll(1.0)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise KafkaException(message.error())
                task.store.restore(message.key(), message.value())
                count += 1
                self.faults.hit("restoring")
            return count
        finally:
            restore.close()


class _CatchUp:
    """A batch run's exit condition (``exit_when_idle_s``): every partition
    of every input topic is caught up by the group, not just this member's
    assignment, so that a member that was given only some partitions (the
    others still held by a killed member until its session times out) does
    not exit as if the job were done.

    A partition is caught up when a ``read_committed`` reader positioned at
    the group's committed offset finds no record before the end. The offsets
    are compared first (committed ≥ end offset: done); otherwise a probe
    consumer reads from the committed offset, because the committed offset
    of a transactional input stops short of the end by the commit marker
    (KAFKA-6607, librdkafka#2539: the worker commits ``offset + 1`` of the
    last record, not a position past the marker), and aborted records are
    not records either. EOF before a record: caught up.

    While idle but not caught up the worker keeps consuming (the partitions
    come to it on the next rebalance); after ``max_wait_caught_up_s`` during
    which no committed offset of the group advanced, it gives up and
    ``LedgerWorker.run`` raises NotCaughtUp naming the partitions, their lag
    and their holder."""

    def __init__(self, worker: LedgerWorker):
        self.worker = worker
        self.next_check = 0.0
        self.waiting_since: float | None = None
        self.progress: int | None = None
        self.reported: list[tuple[str, int]] | None = None
        self._probe: Consumer | None = None

    def done(self, now: float) -> bool:
        """True when the loop should stop: caught up, or given up (then
        ``worker.not_caught_up`` is set). Checks at most every CAUGHT_UP_CHECK_S."""
        if now < self.next_check:
            return False
        self.next_check = now + CAUGHT_UP_CHECK_S
        config = self.worker.config
        try:
            lagging, progress = self.lagging()
        except KafkaException as error:
            log.warning("cannot tell whether group %s is caught up: %s", config.group_id, error)
            lagging, progress = None, self.progress
        if lagging == []:
            log.info("idle for %.1f s and caught up (every input partition of group %s is committed to its end): stopping",
                     config.exit_when_idle_s, config.group_id)
            return True
        if self.waiting_since is None or progress != self.progress:
            self.waiting_since, self.progress = now, progress
        if lagging is None:
            return False
        keys = [(lag.topic, lag.partition) for lag in lagging]
        waited = now - self.waiting_since
        if waited >= config.max_wait_caught_up_s:
            self.worker.not_caught_up = NotCaughtUp(self.with_owners(lagging), waited)
            log.error("%s", self.worker.not_caught_up)
            return True
        if keys != self.reported:
            self.reported = keys
            log.warning("idle, but not caught up: waiting up to %.0f s without progress for %s",
                        config.max_wait_caught_up_s, "; ".join(map(str, self.with_owners(lagging))))
        return False

    def lagging(self) -> tuple[list[PartitionLag], int]:
        """The input partitions not caught up, and the sum of the group's
        committed offsets (to see progress)."""
        # The end offsets come from the probe: on the worker's own consumer
        # each request waits behind its long-polling fetch (fetch.wait.max.ms).
        probe = self._probe_consumer()
        metadata = probe.list_topics(timeout=10)  # unfiltered: a named request could auto-create a topic
        partitions = [TopicPartition(topic, number) for topic in self.worker.inputs for number in sorted(metadata.topics[topic].partitions)]
        candidates: dict[tuple[str, int], tuple[int, int]] = {}
        progress = 0
        for tp in self.worker.consumer.committed(partitions, timeout=10):
            low, high = probe.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10, cached=False)
            start = tp.offset if tp.offset >= 0 else low  # auto.offset.reset=earliest
            progress += max(tp.offset, 0)
            if start < high:
                candidates[(tp.topic, tp.partition)] = (tp.offset, high)
        readable = self._readable({key: max(committed, 0) for key, (committed, _) in candidates.items()}) if candidates else set()
        lagging = [PartitionLag(topic, number, *candidates[(topic, number)], "") for topic, number in sorted(readable)]
        return lagging, progress

    def _readable(self, starts: dict[tuple[str, int], int]) -> set[tuple[str, int]]:
        """The partitions where a read_committed reader at ``starts`` gets a
        record before the end (or no answer within 10 s)."""
        probe = self._probe_consumer()
        pending, readable = set(starts), set()
        probe.assign([TopicPartition(topic, number, offset if offset > 0 else OFFSET_BEGINNING) for (topic, number), offset in starts.items()])
        deadline = time.monotonic() + 10
        try:
            while pending and time.monotonic() < deadline:
                message = probe.poll(0.5)
                if message is None:
                    continue
                key = (message.topic(), message.partition())
                if message.error() is None:
                    readable.add(key)
                elif message.error().code() != KafkaError._PARTITION_EOF:
                    log.warning("catch-up probe: %s", message.error())
                    continue
                pending.discard(key)
        finally:
            probe.unassign()
        return readable | pending

    def _probe_consumer(self) -> Consumer:
        """A read_committed consumer of this worker's own (assign only)."""
        if self._probe is None:
            self._probe = Consumer({
                **client_config(self.worker.config.bootstrap),
                "group.id": f"{self.worker.config.group_id}-catch-up-probe",  # never joins nor commits: assign() only
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
            })
        return self._probe

    def with_owners(self, lagging: list[PartitionLag]) -> list[PartitionLag]:
        """``lagging`` with who holds each partition, from the group
        coordinator (best effort: a failure says so)."""
        from confluent_kafka.admin import AdminClient

        config = self.worker.config
        owners: dict[tuple[str, int], str] = {}
        default = "not assigned to any member (the group is rebalancing)"
        try:
            me = self.worker.consumer.memberid()
            admin = AdminClient(client_config(config.bootstrap))
            group = admin.describe_consumer_groups([config.group_id], request_timeout=10)[config.group_id].result(timeout=15)
            for member in group.members:
                if member.member_id == me:
                    who = "assigned to this member, but no progress"
                else:
                    who = (f"not assigned to this member: held by member {member.group_instance_id or member.member_id} "
                           f"({member.client_id}@{member.host}) until it stops or its session times out")
                for tp in member.assignment.topic_partitions if member.assignment else ():
                    owners[(tp.topic, tp.partition)] = who
        except Exception as error:  # noqa: BLE001 - only the message's detail depends on it
            default = f"holder unknown ({error})"
        return [replace(lag, owner=owners.get((lag.topic, lag.partition), default)) for lag in lagging]

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None


def prepare_topics(config: WorkerConfig) -> int:
    """Refuse to start unless the input topics are co-partitioned; create
    missing output topics and the changelog with the same partition count;
    check they all agree. Returns the partition count. With
    ``config.create_partitions`` set, missing catalogue topics are first
    created with that many partitions (a fresh deployment).

    Raises ``recurrence_ledger.runtime.kafka_admin.CoPartitionError`` with every topic's
    count when they differ or an input topic is missing.
    """
    from recurrence_ledger.runtime.kafka_admin import check_copartitioned, create_topics

    prefix = config.topic_prefix
    if config.create_partitions:
        create_topics(config.bootstrap, config.create_partitions, prefix)
    inputs = [catalogue.physical(name, prefix) for name in catalogue.INPUT_TOPICS]
    partitions = check_copartitioned(config.bootstrap, inputs)
    changelog_config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1", "max.message.bytes": str(MAX_MESSAGE_BYTES)}
    create_topics(config.bootstrap, partitions, prefix, extra=[(config.changelog_name, changelog_config)])
    outputs = [catalogue.physical(name, prefix) for name in catalogue.OUTPUT_TOPICS]
    return check_copartitioned(config.bootstrap, [*inputs, *outputs, config.changelog_topic])


def worker_config_from_env(ledger: LedgerConfig | None = None, **overrides: Any) -> WorkerConfig:
    """WorkerConfig from the process settings (KAFKA_BOOTSTRAP_SERVERS,
    REDIS_URL, RL_TOPIC_PREFIX, RL_APP_ID, RL_INSTANCE_ID,
    SCHEMA_REGISTRY_URL, RL_ACCEPT_UNICODE_CHANGE; see
    ``recurrence_ledger.settings``), then ``overrides`` (None values
    ignored). Raises ValueError when no bootstrap servers are configured."""
    env = settings()
    if not env.bootstrap_servers:
        raise ValueError(f"{ENV_BOOTSTRAP_SERVERS} is not set")
    config = WorkerConfig(
        bootstrap=env.bootstrap_servers,
        app_id=env.app_id,
        instance_id=env.worker_instance_id,
        topic_prefix=env.topic_prefix,
        redis_url=env.redis_url,
        ledger=ledger or LedgerConfig(),
        accept_unicode_change=env.accept_unicode_change,
    )
    if env.schema_registry_url:
        from recurrence_ledger.schemas.registry import registry_settings

        config = replace(config, schema_registry=registry_settings(env.schema_registry_url))
    return replace(config, **{name: value for name, value in overrides.items() if value is not None})


def run_worker(config: WorkerConfig) -> None:
    """Prepare the topics and run one worker until SIGTERM/SIGINT (or idle
    timeout). Raises CoPartitionError before consuming anything when the
    topics are not co-partitioned, and UnicodeVersionChanged when an
    assigned partition's state was built on another Unicode version (before
    any of its records is processed)."""
    logging.basicConfig(level=settings().log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    partitions = prepare_topics(config)
    view = None
    if config.redis_url:
        from recurrence_ledger.view import RedisView, default_namespace

        view = RedisView(config.redis_url, namespace=default_namespace(config.topic_prefix), review_threshold=config.ledger.review_threshold, ca_file=settings().redis_ca_file)
    worker = LedgerWorker(config, view)
    if config.metrics_port:
        worker.metrics.serve(config.metrics_port)
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    log.info("worker %s of group %s: %d partitions, inputs %s", config.instance_id, config.group_id, partitions, worker.inputs)
    worker.run()

