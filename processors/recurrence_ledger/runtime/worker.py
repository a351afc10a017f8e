"""The Kafka worker: decode → core → send, with exactly-once outputs.

A read-process-write loop in the style of Kafka Streams with
``processing.guarantee=exactly_once_v2``, on confluent-kafka, built from
the runtime's parts:

- one consumer in the application's consumer group subscribes to every input
  topic of contract §1 with the *range* assignor, so partition p of every
  input topic lands on the same worker (co-partitioning by scope_id);
- each assigned partition p is a :class:`Task`: a ``LedgerProcessor`` over a
  ``store.ChangelogStore`` whose changelog is partition p of the compacted
  ``<app_id>-ledger-state-changelog``. On assignment the partition is
  paused and its store restored in the main loop (``recovery.Recovery``),
  then resumed;
- a record the core fails on (or whose outputs are too large for Kafka) is
  rolled back on its own (``Task.apply``): the partition's store returns to
  the last checkpoint and the batch's earlier records of that partition are
  applied again; the record goes to dead-letter; nothing else is undone;
- every ``commit_interval_ms`` a checkpoint (``checkpoint.Checkpoint``): one
  Kafka transaction carries the batch's outputs (to partition p of each
  output topic), the view records (``recurrence-statistics``,
  ``revision-statistics``: at most one per changed key, contract §8,
  ``LedgerProcessor.end_batch``), the changelog records and the consumed
  offsets (``send_offsets_to_transaction``, KIP-447).

So a crash anywhere leaves either everything of a batch or nothing of it
visible to ``read_committed`` consumers: no duplicate and no lost match,
observation, review candidate or statistics record, and the state recovered
from the changelog is exactly the state that produced the committed outputs.

The Redis view is not written from here: with a Redis URL the process also
runs a view follower (``follower.ViewFollower``, its own consumer of the
committed view topics, in a thread), so the ledger never waits on Redis and
the read side can run apart (``view follow``).

Why not Faust tables here: faust-streaming's ``exactly_once`` sends records to
topics the app does not itself consume outside the transaction
(faust-streaming/faust#177, #517, open), and in ``at_least_once`` a crash
between a table's changelog write and the output send can lose outputs or
half-apply an event. Owning the transaction keeps state, outputs and offsets
atomic. Why not quixstreams: docs/architecture.md, "Runtime".

Each partition's state records the Unicode version it was built with
(contract §10, ``recurrence_ledger.runtime.unicode_pin``): a worker on a
runtime with another version refuses to start unless told to accept it.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from recurrence_ledger import policy
from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.ledger.intake import BadRecord, Coordinates, dead_letter, ingest
from recurrence_ledger.ledger.processor import Emit, LedgerConfig, LedgerProcessor
from recurrence_ledger.ledger.state import UnicodeVersionChanged, pin_unicode_version
from recurrence_ledger.runtime.catch_up import CatchUp, NotCaughtUp
from recurrence_ledger.runtime.checkpoint import Checkpoint, CheckpointAborted
from recurrence_ledger.redact import redact_url, redacted_repr
from recurrence_ledger.runtime.client_config import Bootstrap, client_config
from recurrence_ledger.runtime.faults import FaultInjector, RuntimeHooks
from recurrence_ledger.runtime.metrics import WorkerMetrics
from recurrence_ledger.runtime.recovery import Recovery
from recurrence_ledger.runtime.store import ChangelogStore
from recurrence_ledger.serde import codec
from recurrence_ledger.settings import DEFAULT_APP_ID, DEFAULT_MAX_WAIT_CAUGHT_UP_S, ENV_BOOTSTRAP_SERVERS, settings
from recurrence_ledger import catalogue
from recurrence_ledger.catalogue import DEAD_LETTER, DEFAULT_MAX_OUTPUT_BYTES, MAX_MESSAGE_BYTES, STATISTICS

if TYPE_CHECKING:
    from recurrence_ledger.read.follower import ViewFollower
    from recurrence_ledger.serde.registry import RegistrySettings

log = logging.getLogger("recurrence_ledger.worker")

#: Dead-letter reasons of input records the worker rolled back and parked:
#: their state changes were undone, so nothing (replay included) applies them.
ROLLED_BACK_REASONS = ("internal_error", "oversized_output")
#: Seconds one commit may block before the process exits for a restart.
COMMIT_WATCHDOG_S = 120.0
#: Seconds a stopping worker gives its in-process view follower to apply
#: what the last transactions committed.
FOLLOWER_DRAIN_S = 60.0


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
    - ``redis_url``: run a view follower into this Redis in the same
      process (None: none; ``view follow`` may run apart). Its password is
      redacted in ``repr``.
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
      (``recurrence_ledger.serde.registry``); None: the fixed ids.
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
    commit_interval_ms: int = policy.COMMIT_INTERVAL_MS.default
    max_batch: int = policy.MAX_BATCH.default
    exit_when_idle_s: float | None = None
    max_wait_caught_up_s: float = DEFAULT_MAX_WAIT_CAUGHT_UP_S
    static_membership: bool = True
    session_timeout_ms: int = 10_000
    redis_url: str | None = None  # may hold a password: redacted in repr
    create_partitions: int | None = None
    metrics_port: int | None = None
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    ledger: LedgerConfig = field(default_factory=LedgerConfig)
    schema_registry: RegistrySettings | None = None  # its repr redacts credentials
    accept_unicode_change: bool = False

    def __repr__(self) -> str:
        return redacted_repr(self)

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
    """One assigned partition: its store, processor, pending offsets, and
    the records applied since the last checkpoint (to re-apply them after
    a rollback). ``ready`` is False until its store is restored."""

    def __init__(self, partition: int, config: LedgerConfig):
        self.partition = partition
        self.store = ChangelogStore()
        self.processor = LedgerProcessor(self.store, config)
        self.offsets: dict[str, int] = {}  # physical input topic → next offset to commit
        self.applied: list[Message] = []
        self.ready = False

    def rollback(self, reapply: Callable[[Message], Any]) -> int:
        """Undo the record that just failed: return the store and the
        processor to the rollback point (the last checkpoint, or the last
        rollback), apply the records applied since then again with
        ``reapply`` (their outputs are already produced and must be
        discarded), and make that state the new rollback point — so each
        record of a batch is re-applied at most once however many fail.
        Returns the number of records re-applied."""
        self.store.rollback()
        self.processor.rolled_back()
        for message in self.applied:
            reapply(message)
        reapplied = len(self.applied)
        self.mark()
        return reapplied

    def mark(self) -> None:
        """Make the current state the rollback point (pending changes and
        view marks kept for the next checkpoint)."""
        self.store.mark()
        self.processor.mark()
        self.applied.clear()

    def checkpointed(self) -> None:
        """The checkpoint committed this task's changes and offsets."""
        self.store.flushed()
        self.processor.mark()
        self.applied.clear()
        self.offsets.clear()


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


def emit_key(emit: Emit, raw_key: bytes | None) -> bytes | None:
    """Record key of an output: the emit's key (UTF-8), or the input's key
    for a dead letter or an emit without one."""
    return raw_key if emit.topic == DEAD_LETTER or emit.key is None else emit.key.encode("utf-8")


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


class LedgerWorker:
    """The read-process-write loop described in the module docstring.

    ``hooks``: the runtime's hooks (``faults.RuntimeHooks``); by default a
    ``FaultInjector`` from ``RL_FAULT_INJECT`` (inactive when unset)."""

    def __init__(self, config: WorkerConfig, hooks: RuntimeHooks | None = None):
        self.config = config
        prefix = config.topic_prefix
        self.inputs = [catalogue.physical(name, prefix) for name in catalogue.INPUT_TOPICS]
        self.outputs = {name: catalogue.physical(name, prefix) for name in catalogue.OUTPUT_TOPICS}
        self.codec = codec.make_codec(config.schema_registry)
        if config.output_format == codec.AVRO:  # a registry that refuses our schemas stops the worker here
            self.codec.prepare({self.outputs[name]: catalogue.BY_NAME[name].schema for name in catalogue.OUTPUT_TOPICS})
        self.tasks: dict[int, Task] = {}
        self.running = True
        self.records_in = 0
        self.hooks = hooks if hooks is not None else FaultInjector(settings().fault_inject)
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
        self.checkpoint = Checkpoint(self.producer, self.consumer.consumer_group_metadata, self.hooks)
        self.recovery = Recovery(config.bootstrap, config.group_id, config.changelog_topic, self.hooks)
        self.metrics = WorkerMetrics()
        # The batch's ScopeStatistics (for the pending-outcomes gauge), input
        # timestamps (latency histogram) and output counts, until it commits.
        self._pending_stats: list[dict] = []
        self._batch_timestamps: list[float] = []
        self._batch_outputs: dict[str, int] = {}
        self._last_activity = time.monotonic()
        self._committing_since: float | None = None
        threading.Thread(target=self._watchdog, name="commit-watchdog", daemon=True).start()
        self._catch_up = CatchUp(self)
        self._unready: dict[tuple[str, int], int] = {}  # first offset per partition polled while restoring
        # Records consumed since the last checkpoint (with or without
        # outputs: their offsets must be committed either way).
        self._batch_open = False
        self.not_caught_up: NotCaughtUp | None = None

    # -- lifecycle ----------------------------------------------------------------
    def run(self) -> None:
        """Process until stopped (SIGTERM/SIGINT) or, with
        ``exit_when_idle_s``, idle that long with every input partition of the
        group caught up. Commits the open transaction on the way out. Raises
        NotCaughtUp when a batch run gives up waiting for the group to catch
        up (after ``max_wait_caught_up_s`` without progress), and
        UnicodeVersionChanged when a restored partition was built on another
        Unicode version (before any of its records is processed)."""
        self.producer.init_transactions(30)
        self.consumer.subscribe(self.inputs, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        last_report = last_lag = self._last_activity = time.monotonic()
        batch_started = 0.0
        reported = 0
        interval = self.config.commit_interval_ms / 1000
        clean = False
        try:
            while self.running:
                if self.recovery.recovering:
                    self._recover_step()
                # While a transaction is open, poll briefly and commit once it
                # is `interval` old (latency ≈ interval, not interval plus a
                # full poll wait); when idle, wait up to `interval` for input.
                if self.recovery.recovering:
                    wait = 0.0
                elif self._batch_open:
                    wait = max(0.0, min(0.005, interval - (time.monotonic() - batch_started)))
                else:
                    wait = interval
                # poll() returns at the first record; consume() would wait
                # out its whole timeout unless max_batch records came (≈ +50 ms
                # median publish → output at 1,000 events/s). Then take what
                # is already fetched, without waiting.
                first = self.consumer.poll(wait)
                messages = [] if first is None else [first]
                if first is not None and self.config.max_batch > 1:
                    messages += self.consumer.consume(num_messages=self.config.max_batch - 1, timeout=0)
                now = time.monotonic()
                if messages:
                    self._last_activity = now
                    if not self._batch_open:
                        batch_started, self._batch_open = now, True
                    self.hooks.at("consumed")
                    for message in messages:
                        self._handle(message)
                    for (topic, number), offset in self._unready.items():
                        self.consumer.seek(TopicPartition(topic, number, offset))
                    self._unready.clear()
                if now - last_lag >= 2:
                    self._update_lag()
                    last_lag = now
                if now - last_report >= 10:
                    rate = (self.records_in - reported) / (now - last_report)
                    log.info("processed %d records (%.0f/s); partitions %s", self.records_in, rate, sorted(self.tasks))
                    last_report, reported = now, self.records_in
                # The batch is due by the clock after processing it, not
                # before: a backlog's 2,000-record batches take longer than
                # the interval, and each must be followed by its commit.
                if self._batch_open and time.monotonic() - batch_started >= interval:
                    self._commit()
                idle = self.config.exit_when_idle_s
                if (idle is not None and now - self._last_activity >= idle and not self._batch_open
                        and not self.recovery.recovering and self._catch_up.done(now)):
                    break
            clean = True
        finally:
            if self._batch_open:
                if clean:
                    self._commit()
                else:
                    # Never let close() → on_revoke commit a half-done batch.
                    self._batch_open = False
                    try:
                        self.checkpoint.abort("stopping on an error")
                    except KafkaException as error:  # the broker aborts it on its own at the timeout
                        log.warning("could not abort the open transaction: %s", error)
            self.consumer.close()
            self.producer.flush(10)
            self.recovery.close()
            self._catch_up.close()
            log.info("stopped after %d records; GC pauses: %s", self.records_in, self.metrics.describe_gc())
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
        if not task.ready:  # fetched before the pause took effect: read it again once restored
            self._unready.setdefault((message.topic(), message.partition()), message.offset())
            return
        self.records_in += 1
        self.metrics.records.labels(message.topic()).inc()
        kind, timestamp = message.timestamp()
        if kind != TIMESTAMP_NOT_AVAILABLE:
            self._batch_timestamps.append(timestamp / 1000)
        emits, values, failure = self._apply(task, message)
        if failure is not None:
            # Undo this record alone, then park it in dead-letter.
            reason, text = failure
            reapplied = task.rollback(self._reapply(task))
            log.warning("%s[%d]@%d rolled back (%s: %s; %d earlier records of the batch re-applied) and dead-lettered",
                        message.topic(), message.partition(), message.offset(), reason, text[:200], reapplied)
            emit = dead_letter(Coordinates(message.topic(), message.partition(), message.offset(), (message.key() or b"").decode("utf-8", "replace")),
                               message.value() or b"", reason, text)
            emits, values = [emit], [encode_emit(emit, self.config.output_format, self.codec, self.config.topic_prefix)]
        else:
            task.applied.append(message)
        for emit, value in zip(emits, values):
            self._send(emit, task.partition, message.key(), value)
            if emit.topic == DEAD_LETTER:
                self.metrics.dead_letters.labels(emit.value["reason"]).inc()
        task.offsets[message.topic()] = message.offset() + 1

    def _apply(self, task: Task, message: Message) -> tuple[list[Emit], list[bytes], tuple[str, str] | None]:
        """Decode, apply and encode one record: ``(emits, values, None)``, or
        ``([], [], (reason, message))`` when the record must be rolled back
        (the core or a hook raised: ``internal_error``; an output too large:
        ``oversized_output``)."""
        try:
            emits = process_message(task.processor, message, self.config.topic_prefix, self.codec)
            if self.hooks.active:
                self.hooks.applied(Coordinates(message.topic(), message.partition(), message.offset(), None))
        except CoreFailure as failure:
            return [], [], ("internal_error", str(failure)[:1000])
        except (codec.RegistryError, KafkaException):
            raise
        except Exception as error:  # a hook failing the record: handled like the core failing on it
            return [], [], ("internal_error", f"{type(error).__name__}: {error}"[:1000])
        values = [encode_emit(emit, self.config.output_format, self.codec, self.config.topic_prefix) for emit in emits]
        for emit, value in zip(emits, values):
            if len(value) > self.config.max_output_bytes:
                return [], [], ("oversized_output", (
                    f"its {emit.topic} output is {len(value)} bytes; the worker's limit is "
                    f"{self.config.max_output_bytes} (max_output_bytes)"))
        return emits, values, None

    def _reapply(self, task: Task) -> Callable[[Message], Any]:
        def reapply(message: Message) -> None:
            process_message(task.processor, message, self.config.topic_prefix, self.codec)
        return reapply

    def _send(self, emit: Emit, partition: int, raw_key: bytes | None, value: bytes) -> None:
        # Outputs go to the input's partition: a scope's outputs stay
        # co-partitioned with its inputs whatever partitioner producers use.
        self.checkpoint.produce(self.outputs[emit.topic], emit_key(emit, raw_key), value, partition)
        self._batch_outputs[emit.topic] = self._batch_outputs.get(emit.topic, 0) + 1
        if emit.topic == STATISTICS:
            self._pending_stats.append(emit.value)

    # -- checkpoints ------------------------------------------------------------------
    def _publish_views(self) -> None:
        """The transaction's view records (contract §8): each task's
        ``end_batch``, produced before its changelog is collected, so the
        ``published`` state they update commits with them."""
        for task in self.tasks.values():
            if task.ready:
                for emit in task.processor.end_batch():
                    self._send(emit, task.partition, None, encode_emit(emit, self.config.output_format, self.codec, self.config.topic_prefix))

    def _commit(self) -> None:
        """View records, then changelog records + offsets + commit,
        atomically with the outputs already produced in this transaction
        (``checkpoint.Checkpoint.commit``; on CheckpointAborted the worker
        rewinds: state restored from the changelog, consumer positions reset
        to the committed offsets, so the batch is processed again)."""
        started = time.monotonic()
        self._publish_views()
        self.hooks.at("produced")
        tasks = [task for task in self.tasks.values() if task.ready]
        changelog = [(self.config.changelog_topic, task.partition, key, value) for task in tasks for key, value in task.store.changes()]
        offsets = [TopicPartition(topic, task.partition, offset) for task in tasks for topic, offset in task.offsets.items()]
        self._committing_since = time.monotonic()
        try:
            self.checkpoint.commit(changelog, offsets)
        except CheckpointAborted as aborted:
            log.warning("%s: rewinding to the last commit", aborted)
            self._rewind()
            return
        finally:
            self.metrics.checkpoint.observe(time.monotonic() - started)
            self._committing_since = None
        self._batch_open = False
        for task in tasks:
            task.checkpointed()
        # What survives a checkpoint is almost all state (acyclic JSON
        # values, freed by reference counting when replaced): move it out of
        # the cyclic collector's generations, so a full collection never
        # scans the whole store again. Full collections of a grown store
        # paused the loop for 170 ms at 24k events (and growing with the
        # state) — the tail of publish → visible latency (BENCHMARKS.md,
        # "Latency"). Cyclic garbage still alive at a checkpoint is not
        # collected afterwards; the loop creates none that outlives a batch.
        gc.freeze()
        committed_at = time.time()
        for timestamp in self._batch_timestamps:
            self.metrics.latency.observe(max(0.0, committed_at - timestamp))
        for topic, count in self._batch_outputs.items():
            self.metrics.outputs.labels(topic).inc(count)
        self.metrics.statistics(self._pending_stats)
        self._batch_timestamps, self._batch_outputs, self._pending_stats = [], {}, []

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

    def _rewind(self) -> None:
        """Back to the last committed transaction (after an abort): every
        task restored again from the changelog, consumer positions at the
        committed offsets."""
        self._batch_timestamps, self._batch_outputs, self._pending_stats = [], {}, []
        self._batch_open = False
        assignment = self.consumer.assignment()
        for committed in self.consumer.committed(assignment, timeout=30):
            offset = committed.offset if committed.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(committed.topic, committed.partition, offset))
        self._start_tasks(sorted(self.tasks), assignment)

    # -- rebalance and recovery ---------------------------------------------------------
    def _start_tasks(self, numbers: list[int], partitions: list[TopicPartition]) -> None:
        """Fresh tasks for ``numbers``, their input ``partitions`` paused
        until the stores are restored in the main loop (``_recover_step``)."""
        if partitions:
            self.consumer.pause(partitions)
        for number in numbers:
            task = Task(number, self.config.ledger)
            self.tasks[number] = task
            self.recovery.add(number, task.store)

    def _recover_step(self) -> None:
        """Restore for a slice of time; pin and resume finished partitions."""
        self._last_activity = time.monotonic()
        for number, restored, seconds in self.recovery.step():
            task = self.tasks.get(number)
            if task is None:
                continue
            self._pin_unicode(task)
            task.mark()
            task.ready = True
            self.consumer.resume([tp for tp in self.consumer.assignment() if tp.partition == number])
            log.info("partition %d restored: %d state records in %.2f s", number, restored, seconds)
        if not self.recovery.recovering:
            gc.freeze()  # the restored state: see _commit

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Assign here, then pause at once: nothing is fetched for a partition
        # before its store is restored (quixstreams' Application._on_assign
        # does the same).
        consumer.assign(partitions)
        numbers = sorted({tp.partition for tp in partitions} - set(self.tasks))
        self._start_tasks(numbers, [tp for tp in partitions if tp.partition in numbers])
        self._last_activity = time.monotonic()
        log.info("assigned partitions %s: restoring %s in the main loop", sorted({tp.partition for tp in partitions}), numbers)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._batch_open:
            self._commit()
        for number in {tp.partition for tp in partitions}:
            self.tasks.pop(number, None)
            self.recovery.discard(number)
        log.info("revoked partitions %s", sorted({tp.partition for tp in partitions}))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Lost (not revoked): another member may own them already; our open
        # transaction must not commit their offsets.
        self.checkpoint.abort("partitions lost")
        self._batch_timestamps, self._batch_outputs, self._pending_stats = [], {}, []
        self._batch_open = False
        for number in list(self.tasks):
            self.recovery.discard(number)
        self.tasks.clear()
        log.warning("partitions lost %s: state dropped, will restore on reassignment", sorted({tp.partition for tp in partitions}))

    def _pin_unicode(self, task: Task) -> None:
        """contract §10: check the Unicode version recorded in the restored
        state against this runtime's, and record it (a new partition, or one
        restored from a changelog written before the pin existed). Raises
        UnicodeVersionChanged — from the main loop, so the worker stops
        before it processes anything — unless accept_unicode_change."""
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
        from recurrence_ledger.serde.registry import registry_settings

        config = replace(config, schema_registry=registry_settings(env.schema_registry_url))
    return replace(config, **{name: value for name, value in overrides.items() if value is not None})


def start_follower(config: WorkerConfig) -> tuple[ViewFollower, threading.Thread]:
    """The in-process view follower of a worker with a Redis URL: a
    ``follower.ViewFollower`` (own consumer group ``<prefix><app_id>-view``)
    running in a daemon thread. An error in it is logged; the ledger goes on."""
    from recurrence_ledger.read.follower import FollowerConfig, ViewFollower

    assert config.redis_url is not None
    follower = ViewFollower(
        FollowerConfig(bootstrap=config.bootstrap, redis_url=config.redis_url, app_id=config.app_id, topic_prefix=config.topic_prefix,
                       review_threshold=config.ledger.review_threshold, schema_registry=config.schema_registry),
        codec.make_codec(config.schema_registry),
    )

    def follow() -> None:
        try:
            follower.run()
        except Exception:  # noqa: BLE001 - the read side must never stop the ledger
            log.exception("the view follower stopped on an error; the ledger goes on (run `view follow` to catch the view up)")

    thread = threading.Thread(target=follow, name="view-follower", daemon=True)
    thread.start()
    log.info("view follower in this process: %s into %s (group %s)", sorted(follower.topics), redact_url(config.redis_url), follower.config.group_id)
    return follower, thread


def run_worker(config: WorkerConfig) -> None:
    """Prepare the topics and run one worker until SIGTERM/SIGINT (or idle
    timeout), with its view follower when ``config.redis_url`` is set (on
    the way out the follower gets up to FOLLOWER_DRAIN_S to apply what was
    committed). Raises CoPartitionError before consuming anything when the
    topics are not co-partitioned, and UnicodeVersionChanged when an
    assigned partition's state was built on another Unicode version (before
    any of its records is processed)."""
    logging.basicConfig(level=settings().log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    partitions = prepare_topics(config)
    worker = LedgerWorker(config)
    worker.metrics.watch_gc()
    if config.metrics_port:
        worker.metrics.serve(config.metrics_port)
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    log.info("worker %s of group %s: %d partitions, inputs %s", config.instance_id, config.group_id, partitions, worker.inputs)
    follower = start_follower(config) if config.redis_url else None
    clean = False
    try:
        worker.run()
        clean = True
    except NotCaughtUp:
        clean = True  # what was committed is right, only incomplete: the view should show it
        raise
    finally:
        if follower is not None:
            view, thread = follower
            if clean and not view.redis_ok:
                log.warning("Redis is down: not waiting for the view follower; the view is behind the ledger until a follower catches up")
            elif clean:  # a stop or a finished batch: let the view catch up with what was committed
                view.drain()
                thread.join(FOLLOWER_DRAIN_S)
                if thread.is_alive():
                    log.warning("the view follower did not catch up within %.0f s (is Redis down?); the view is behind the ledger", FOLLOWER_DRAIN_S)
            view.stop()
            thread.join(5.0)
