"""The Kafka worker: decode → core → send, with exactly-once outputs.

A read-process-write loop in the style of Kafka Streams with
``processing.guarantee=exactly_once_v2``, on confluent-kafka, built from
the runtime's parts:

- one consumer in the application's consumer group subscribes to every input
  topic of contract §1 with the *range* assignor, so partition p of every
  input topic lands on the same worker (co-partitioning by scope_id);
- each assigned partition p is a ``task.Task``: a ``LedgerProcessor`` over a
  ``store.ChangelogStore`` whose changelog is partition p of the compacted
  ``<app_id>-ledger-state-changelog``. On assignment the partition is
  paused and its store restored in the main loop (``recovery.Recovery``),
  then resumed. With ``state_dir`` the store is a ``rocks_store.RocksStore``
  (RocksDB, one directory per partition, locked): it records the changelog
  offset it reflects after each committed transaction, and recovery reads
  only the changelog's tail after it; a revoked partition's store is closed;
- a record the core fails on (or whose outputs are too large for Kafka) is
  rolled back on its own (``Task.rollback``): the partition's store returns to
  the last checkpoint and the batch's earlier records of that partition are
  applied again; the record goes to dead-letter; nothing else is undone
  (dead letters are counted by reason and logged at each progress report);
- every ``commit_interval_ms`` at most — sooner when the input is drained
  (``pacing.Pacer``) — a checkpoint (``checkpoint.Checkpoint``): one
  Kafka transaction carries the batch's outputs (to partition p of each
  output topic), the view records (``recurrence-statistics``,
  ``revision-statistics``: at most one per changed key, contract §8,
  ``LedgerProcessor.end_batch``), the changelog records and the consumed
  offsets (``send_offsets_to_transaction``, KIP-447).

So a crash anywhere leaves either everything of a batch or nothing of it
visible to ``read_committed`` consumers: no duplicate and no lost match,
observation, review candidate or statistics record, and the state recovered
from the changelog is exactly the state that produced the committed outputs.

The Redis view is not written from here, and nothing of the read side is
imported: :func:`run_worker` takes a :class:`Companion` — something run
beside the loop in the same process, started when the worker is built and
finished when its loop ends. ``recurrence_ledger.cli.beside`` passes a view
follower (its own consumer of the committed view topics, in a thread), so
the ledger never waits on Redis and the read side can run apart
(``view follow``). Records are decoded and outputs encoded by
``recurrence_ledger.kafka.records``; the configuration and the client
settings are ``recurrence_ledger.runtime.worker_config``'s.

Why not Faust tables or quixstreams here: docs/kafka.md, "Why not quixstreams".

Each partition's state records the Unicode version it was built with
(contract §10, ``recurrence_ledger.runtime.unicode_pin``): a worker on a
runtime with another version refuses to start unless told to accept it.
"""

from __future__ import annotations

import gc
import logging
import signal
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from recurrence_ledger import catalogue
from recurrence_ledger.catalogue import DEAD_LETTER
from recurrence_ledger.ledger.deadletter import read_at
from recurrence_ledger.ledger.intake import Coordinates
from recurrence_ledger.runtime.catch_up import CatchUp, NotCaughtUp
from recurrence_ledger.runtime.checkpoint import Checkpoint, CheckpointAborted, RestartRequired
from recurrence_ledger.store.base import PartitionStore, StoreError
from recurrence_ledger.store.memory import ChangelogStore
from recurrence_ledger.runtime.faults import FaultInjector, RuntimeHooks
from recurrence_ledger.runtime.metrics import BatchStats, WorkerMetrics
from recurrence_ledger.runtime.pacing import Pacer
from recurrence_ledger.kafka.records import CoreFailure, OutputRecord, Outputs, process_contribution, process_message
from recurrence_ledger.runtime.recovery import Recovery
from recurrence_ledger.runtime.stages import Stage, repartition_partition
from recurrence_ledger.runtime.state_limit import StateLimit
from recurrence_ledger.runtime.task import PatternTask, Task
from recurrence_ledger.runtime.worker_config import WorkerConfig, input_consumer_config, output_producer_config, prepare_topics
from recurrence_ledger.serde import codec
from recurrence_ledger.settings import STOP_SIGNALS, configure_logging, settings

log = logging.getLogger("recurrence_ledger.worker")

class Companion(Protocol):
    """Something a worker process runs beside its loop (the read side's
    in-process view follower, ``recurrence_ledger.cli.beside``).
    :func:`run_worker` calls :meth:`start` once the worker is built (an
    exception stops the run before anything is consumed) and
    :meth:`finish` when the loop has ended, before ``run_worker`` returns or
    raises."""

    def start(self) -> None:
        """Start beside the worker (e.g. a thread); return at once."""

    def finish(self, clean: bool) -> None:
        """The worker's loop ended: ``clean`` after a stop or a finished
        batch run (one that gave up NotCaughtUp too: what it committed is
        right, only incomplete), False when it failed. Returns once done
        (bounded: the process exits after it)."""


class LedgerWorker:
    """The read-process-write loop described in the module docstring.

    ``hooks``: the runtime's hooks (``faults.RuntimeHooks``); by default a
    ``FaultInjector`` from ``RL_FAULT_INJECT`` (inactive when unset)."""

    def __init__(self, config: WorkerConfig, hooks: RuntimeHooks | None = None):
        self.config = config
        prefix = config.topic_prefix
        self.inputs = [catalogue.physical(name, prefix) for name in catalogue.INPUT_TOPICS]
        self.repartition = catalogue.physical(catalogue.PATTERN_REPARTITION, prefix)
        self.codec = codec.make_codec(config.schema_registry)
        if config.output_format == codec.AVRO:  # a registry that refuses our schemas stops the worker here
            written = (*catalogue.OUTPUT_TOPICS, *catalogue.INTERNAL_TOPICS)
            self.codec.prepare({catalogue.physical(name, prefix): catalogue.BY_NAME[name].schema for name in written})
        self.outputs = Outputs(config.output_format, self.codec, prefix, config.max_output_bytes)
        self.state_limit = StateLimit(config.max_state_bytes)  # runtime.state_limit
        self.running = True
        self.records_in = 0
        self._dead_letters: Counter[str] = Counter()  # by reason since the last report, and the first one's words
        self._first_dead_letter = ""
        self.hooks = hooks if hooks is not None else FaultInjector(settings().fault_inject)
        # Static membership: the same instance id names the consumer's
        # group.instance.id and the transactional.id, so a restarted
        # instance gets its partitions back at once (no rebalance) and fences
        # its previous incarnation on both (worker_config.output_producer_config).
        self.consumer = Consumer(input_consumer_config(
            config.bootstrap, config.group_id, config.instance_id if config.static_membership else None, config.session_timeout_ms))
        self.producer = Producer(output_producer_config(config))
        self.checkpoint = Checkpoint(self.producer, self.consumer.consumer_group_metadata, self.hooks, track_changelog=config.state_dir is not None)
        # changelog topic → (topic id, delete.retention.ms), looked up once
        self._changelog_identity: dict[str, tuple[str | None, int | None]] = {}
        # The two sub-topologies (contract §23.5): the scope stage on the
        # inputs, the pattern stage on the repartition topic; each its own
        # tasks, changelog and recovery, driven by the same loop.
        self.scope_stage = Stage("scope", self.inputs, config.changelog_topic, Task, Recovery(
            config.bootstrap, config.group_id, config.changelog_topic, self.hooks,
            consumed=lambda number: self._consumed(self.inputs, number), reseed=self._reseeder(config.changelog_topic)))
        self.pattern_stage = Stage("pattern", [self.repartition], config.pattern_changelog_topic, PatternTask, Recovery(
            config.bootstrap, config.group_id, config.pattern_changelog_topic, self.hooks,
            consumed=lambda number: self._consumed([self.repartition], number), reseed=self._reseeder(config.pattern_changelog_topic)))
        self.stages = (self.scope_stage, self.pattern_stage)
        self._stage_of = {topic: stage for stage in self.stages for topic in stage.inputs}
        #: The scope stage's tasks (partition → Task).
        self.tasks: dict[int, Task] = self.scope_stage.tasks
        self._repartition_count: int | None = None  # partitions of the repartition topic, looked up once
        self.metrics = WorkerMetrics(config.process)
        self._batch = BatchStats()  # the open transaction's metrics, until it commits
        self._last_activity = time.monotonic()
        self.checkpoint.watch()
        self._catch_up = CatchUp(self.consumer, [*self.inputs, self.repartition], config.bootstrap, config.group_id, config.exit_when_idle_s, config.max_wait_caught_up_s)
        self._unready: dict[tuple[str, int], int] = {}  # first offset per partition polled while restoring
        # Records consumed since the last checkpoint (with or without
        # outputs: their offsets must be committed either way).
        self._batch_open = False

    # -- lifecycle ----------------------------------------------------------------
    def run(self) -> None:
        """Process until stopped (SIGTERM/SIGINT) or, with
        ``exit_when_idle_s``, idle that long with every input and repartition
        partition of the group caught up (``catch_up.CatchUp``). Commits the open transaction on the way out. Raises
        NotCaughtUp when a batch run gives up waiting for the group to catch
        up (after ``max_wait_caught_up_s`` without progress), and
        UnicodeVersionChanged when a restored partition was built on another
        Unicode version (before any of its records is processed), and
        checkpoint.RestartRequired when a Kafka client cannot go on in this
        process (the CLI exits with RESTART_EXIT)."""
        self.checkpoint.init_transactions()
        self.consumer.subscribe([*self.inputs, self.repartition], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        last_report = last_lag = self._last_activity = time.monotonic()
        batch_started = 0.0
        reported = reported_commits = 0
        interval = self.config.commit_interval_ms / 1000
        pacer = Pacer(interval, self.config.max_batch)
        clean = False
        try:
            while self.running:
                if self.recovering:
                    self._recover_step()
                # While a transaction is open, poll briefly and commit once it
                # is `interval` old (latency ≈ interval, not interval plus a
                # full poll wait); when idle, wait up to `interval` for input.
                if self.recovering:
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
                    try:
                        for message in messages:
                            self._handle(message)
                    except CheckpointAborted as aborted:  # the open transaction failed before its commit
                        self._rewind(aborted)
                    for (topic, number), offset in self._unready.items():
                        self.consumer.seek(TopicPartition(topic, number, offset))
                    self._unready.clear()
                if now - last_lag >= 2:
                    self.metrics.update_lag(self.consumer)
                    last_lag = now
                if now - last_report >= 10:
                    rate = (self.records_in - reported) / (now - last_report)
                    log.info("processed %d records (%.0f/s) in %d transactions (%.0f/s); partitions %s, pattern partitions %s",
                             self.records_in, rate, pacer.commits, (pacer.commits - reported_commits) / (now - last_report),
                             sorted(self.tasks), sorted(self.pattern_stage.tasks))
                    last_report, reported, reported_commits = now, self.records_in, pacer.commits
                    self._report_dead_letters()
                # The batch is due after processing it, not before: at the
                # interval (a backlog's 2,000-record chunks take longer than
                # it, and each must be followed by its commit), or earlier
                # once the input is drained (pacing.Pacer).
                if self._batch_open and pacer.due(time.monotonic() - batch_started, len(messages)):
                    committing = time.thread_time()
                    self._commit()
                    pacer.committed(time.thread_time() - committing)
                idle = self.config.exit_when_idle_s
                if (idle is not None and now - self._last_activity >= idle and not self._batch_open
                        and not self.recovering and self._catch_up.done(now)):
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
                    except RestartRequired as error:  # the broker aborts it on its own at the timeout
                        log.warning("could not abort the open transaction: %s", error)
            self.consumer.close()
            for stage in self.stages:
                self._close_stores(stage, list(stage.tasks))
            self.producer.flush(10)
            for stage in self.stages:
                stage.recovery.close()
            self._catch_up.close()
            self._report_dead_letters()
            log.info("stopped after %d records read (input and repartition topics); GC pauses: %s", self.records_in, self.metrics.describe_gc())
        if self._catch_up.not_caught_up is not None:
            raise self._catch_up.not_caught_up

    def stop(self, *_: Any) -> None:
        """Ask the loop to finish after the current batch."""
        self.running = False

    @property
    def recovering(self) -> bool:
        """True while a store of either stage is being restored."""
        return any(stage.recovery.recovering for stage in self.stages)

    # -- records --------------------------------------------------------------------
    def _handle(self, message: Message) -> None:
        error = message.error()
        if error is not None:
            if error.fatal():  # e.g. FENCED_INSTANCE_ID: another process runs with this instance id
                raise KafkaException(error)
            if error.code() == KafkaError._FATAL:
                # The consumer itself is in librdkafka's fatal state (seen after a broker restart fenced its
                # static membership; the event's own fatal() is False): it will never fetch again.
                raise RestartRequired(f"the consumer reports a fatal error ({error}): exiting for a restart")
            if error.code() != KafkaError._PARTITION_EOF:
                log.warning("consume error: %s", error)
            return
        task = self._stage_of[message.topic()].tasks.get(message.partition())
        if task is None:  # a record of a partition revoked in this batch
            return
        if not task.ready:  # fetched before the pause took effect: read it again once restored
            self._unready.setdefault((message.topic(), message.partition()), message.offset())
            return
        self.records_in += 1
        self.metrics.record(message.topic())
        kind, timestamp = message.timestamp()
        if kind != TIMESTAMP_NOT_AVAILABLE:
            self._batch.timestamps.append(timestamp / 1000)
        records, failure = self._apply(task, message)
        if failure is not None:
            # Undo this record alone, then park it in dead-letter.
            reason, text = failure
            reapplied = task.rollback(self._reapply(task))
            log.warning("%s[%d]@%d rolled back (%s: %s; %d earlier records of the batch re-applied) and dead-lettered",
                        message.topic(), message.partition(), message.offset(), reason, text[:200], reapplied)
            records = [self.outputs.rolled_back(message, reason, text)]
        else:
            task.applied.append(message)
        for record in records:
            self._send(record, task.partition)
            if record.emit.topic == DEAD_LETTER:
                letter = record.emit.value
                self.metrics.dead_letters.labels(letter["reason"]).inc()
                self._dead_letters[letter["reason"]] += 1
                self._first_dead_letter = self._first_dead_letter or f"{read_at(letter)} {letter['reason']}: {letter['message'][:200]}"
        task.offsets[message.topic()] = message.offset() + 1

    def _report_dead_letters(self) -> None:
        """Log the records dead-lettered since the last report, by reason, and the first of them (contract §9: never dropped silently)."""
        if self._dead_letters:
            log.warning("dead-lettered %d input records (%s); the first: %s", sum(self._dead_letters.values()),
                        ", ".join(f"{reason} {count}" for reason, count in sorted(self._dead_letters.items())), self._first_dead_letter)
            self._dead_letters.clear()
            self._first_dead_letter = ""

    def _apply(self, task: Task, message: Message) -> tuple[list[OutputRecord], tuple[str, str] | None]:
        """Decode, apply and encode one record: ``(records, None)``, or
        ``([], (reason, message))`` when the record must be rolled back
        (the core or a hook raised: ``internal_error``; an output, or a
        watched state record, too large: ``oversized_output``)."""
        try:
            emits = self._process(task, message)
            # Injected core errors (tests) hit input records only: a parked
            # input record is what the fault tests account for.
            if self.hooks.active and not isinstance(task, PatternTask):
                self.hooks.applied(Coordinates(message.topic(), message.partition(), message.offset(), None))
        except CoreFailure as failure:
            return [], ("internal_error", str(failure)[:1000])
        except (codec.RegistryError, KafkaException, StoreError):
            raise
        except Exception as error:  # a hook failing the record: handled like the core failing on it
            return [], ("internal_error", f"{type(error).__name__}: {error}"[:1000])
        records = self.outputs.records(emits, message.key())
        oversized = self.outputs.oversized(records) or self.state_limit.check(self._stage_of[message.topic()].changelog_topic, task)
        return ([], ("oversized_output", oversized)) if oversized is not None else (records, None)

    def _process(self, task: Task, message: Message) -> list:
        """One record through its stage's processor: a source event through
        the ledger, a contribution through the pattern stage (§23.5)."""
        if isinstance(task, PatternTask):
            return process_contribution(task.processor, message, self.codec)
        return process_message(task.processor, message, self.config.topic_prefix, self.codec)

    def _reapply(self, task: Task) -> Callable[[Message], Any]:
        def reapply(message: Message) -> None:
            self._process(task, message)
        return reapply

    def _send(self, record: OutputRecord, partition: int) -> None:
        # Outputs go to the input's partition: a scope's outputs stay
        # co-partitioned with its inputs whatever partitioner producers use.
        self.checkpoint.produce(record.topic, record.key, record.value, partition)
        self._batch.output(record.emit.topic, record.emit.value)

    # -- checkpoints ------------------------------------------------------------------
    def _publish_views(self) -> None:
        """The transaction's view records (contract §8): each task's
        ``end_batch``, produced before its changelog is collected, so the
        ``published`` state they update commits with them; and each scope
        task's pattern contributions (contract §23.5), to the repartition
        topic's partition of their key, in the same transaction."""
        for task in self.tasks.values():
            if task.ready:
                for record in self.outputs.records(task.processor.end_batch(), None):
                    self._send(record, task.partition)
                for record in self.outputs.records(task.processor.contributions(), None):
                    self._send(record, repartition_partition(record.key, self._repartitions()))
        for task in self.pattern_stage.tasks.values():
            if task.ready:
                for record in self.outputs.records(task.processor.end_batch(), None):
                    self._send(record, task.partition)

    def _repartitions(self) -> int:
        """The repartition topic's partition count (looked up once: a
        topic's count never shrinks, and the worker checked it at start)."""
        if self._repartition_count is None:
            metadata = self.consumer.list_topics(self.repartition, timeout=10)
            self._repartition_count = len(metadata.topics[self.repartition].partitions)
        return self._repartition_count

    def _commit(self) -> None:
        """View records, then changelog records + offsets + commit,
        atomically with the outputs already produced in this transaction
        (``checkpoint.Checkpoint.commit``; on CheckpointAborted the worker
        rewinds: state restored from the changelog, consumer positions reset
        to the committed offsets, so the batch is processed again)."""
        started = time.monotonic()
        try:
            self._publish_views()
            self.hooks.at("produced")
            tasks = [(stage, task) for stage in self.stages for task in stage.tasks.values() if task.ready]
            changelog = [(stage.changelog_topic, task.partition, key, value) for stage, task in tasks for key, value in task.store.changes()]
            offsets = [TopicPartition(topic, task.partition, offset) for _, task in tasks for topic, offset in task.offsets.items()]
            if (too_large := self.state_limit.over(changelog)) is not None:  # Kafka would refuse the transaction, every time
                self.checkpoint.abort(too_large)
                raise CheckpointAborted(KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, too_large)))
            delivered = self.checkpoint.commit(changelog, offsets)
        except CheckpointAborted as aborted:
            self._rewind(aborted)
            return
        finally:
            self.metrics.checkpoint.observe(time.monotonic() - started)
        self._batch_open = False
        self.state_limit.clear()
        for stage, task in tasks:  # a StoreError here stops the worker: the transaction is committed, the restart restores its tail
            task.checkpointed(delivered.get((stage.changelog_topic, task.partition)))
        self.hooks.at("stored")
        # What survives a checkpoint is almost all state (acyclic JSON values, freed by reference counting): out of the
        # cyclic collector's generations, so a full collection never scans the whole store again (they paused the loop
        # for 170 ms at 24k events, growing with the state: the tail of publish → visible latency, BENCHMARKS.md).
        # Cyclic garbage alive at a checkpoint is not collected afterwards; the loop creates none that outlives a batch.
        gc.freeze()
        self._batch.committed(self.metrics, time.time())

    def _rewind(self, aborted: CheckpointAborted) -> None:
        """Back to the last committed transaction after ``aborted``: every
        task restored again from the changelog, consumer positions at the
        committed offsets (so no record polled since, restoring or not, is
        sought again)."""
        log.warning("%s: rewinding to the last commit", aborted)
        self._unready.clear()
        self._batch.clear()
        self._batch_open = False
        assignment = self.consumer.assignment()
        try:
            positions = self.consumer.committed(assignment, timeout=30)
        except KafkaException as error:  # e.g. the group coordinator still moving after a broker restart
            raise RestartRequired(f"cannot read the committed offsets to rewind to ({error.args[0]}): exiting for a restart") from error
        for committed in positions:
            offset = committed.offset if committed.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(committed.topic, committed.partition, offset))
        for stage in self.stages:
            numbers = sorted(stage.tasks)
            self._close_stores(stage, numbers)
            self._start_tasks(stage, numbers, [tp for tp in assignment if tp.topic in stage.inputs])

    # -- rebalance and recovery ---------------------------------------------------------
    def _start_tasks(self, stage: Stage, numbers: list[int], partitions: list[TopicPartition]) -> None:
        """Fresh tasks of ``stage`` for ``numbers``, their input
        ``partitions`` paused until the stores are restored in the main
        loop (``_recover_step``)."""
        if partitions:
            self.consumer.pause(partitions)
        for number in numbers:
            task = stage.task_class(number, self.config.ledger, self._open_store(stage.changelog_topic, number))
            stage.tasks[number] = task
            stage.recovery.add(number, task.store)

    def _open_store(self, changelog_topic: str, number: int) -> PartitionStore:
        """The store of partition ``number`` of ``changelog_topic``: in
        memory, or with ``state_dir`` its RocksDB store (opened and checked:
        ``store.rocksdb.open_store``)."""
        if self.config.state_dir is None:
            return ChangelogStore()
        from recurrence_ledger.kafka.kafka_admin import topic_identity
        from recurrence_ledger.store.rocksdb import DEFAULT_DELETE_RETENTION_MS, open_store

        if changelog_topic not in self._changelog_identity:
            self._changelog_identity[changelog_topic] = topic_identity(self.config.bootstrap, changelog_topic)
            if self._changelog_identity[changelog_topic][0] is None:
                log.warning("the topic id of %s is unknown: local stores cannot be checked against it and restore the whole changelog",
                            changelog_topic)
        topic_id, retention = self._changelog_identity[changelog_topic]
        store = open_store(self.config.state_dir, changelog_topic, number, topic_id, retention or DEFAULT_DELETE_RETENTION_MS)
        if changelog_topic == self.config.changelog_topic:
            log.info("partition %d: state store %s (%s)", number, store.path,
                     f"restoring the whole changelog: {store.wiped}" if store.restore_from() is None else f"restoring from changelog offset {store.restore_from()}")
        else:  # worded apart: the scope stage's lines are what operators (and tests) count
            log.info("pattern task %d: state store %s (%s)", number, store.path,
                     f"reads all of {changelog_topic}: {store.wiped}" if store.restore_from() is None else f"reads {changelog_topic} from {store.restore_from()}")
        return store

    def _consumed(self, topics: list[str], number: int) -> dict[str, int]:
        """The group's committed offsets of partition ``number`` of a
        stage's input ``topics`` beyond offset 0 (``{topic: offset}``):
        records were processed into state (``changelog_guard``). Not
        compared with the partition's start: the worker commits an input
        offset only with the changelog of the records before it, so an
        offset at the start of an input whose processed records were
        deleted since (DeleteRecords up to the committed offsets to free
        disk, or retention passing them while the group was stopped) still
        says state existed — counting only offsets beyond the start let a
        deleted changelog be created again empty and run on. Called from
        the main loop (recovery), never from a rebalance callback."""
        committed = self.consumer.committed([TopicPartition(topic, number) for topic in topics], timeout=30)
        return {partition.topic: partition.offset for partition in committed if partition.offset > 0}

    def _reseeder(self, changelog_topic: str) -> Callable[[int, PartitionStore, int], int] | None:
        """With ``--reseed-changelog``, what writes partition ``number``'s
        intact local store back to its empty ``changelog_topic`` (each
        stage's own: ``runtime.reseed``) and returns the changelog's new end
        offset; None without it."""
        if not self.config.reseed_changelog:
            return None

        def reseed(number: int, store: PartitionStore, end: int) -> int:
            from recurrence_ledger.runtime.reseed import reseed_changelog

            return reseed_changelog(self.config.bootstrap, changelog_topic, number, store, end)
        return reseed

    def _close_stores(self, stage: Stage, numbers: list[int]) -> None:
        """Close the stores of ``stage``'s tasks ``numbers`` (their last checkpoint stays on disk)."""
        for number in numbers:
            task = stage.tasks.get(number)
            if task is not None:
                task.store.close()

    def _recover_step(self) -> None:
        """Restore for a slice of time; pin and resume finished partitions."""
        self._last_activity = time.monotonic()
        for stage in self.stages:
            for number, restored, seconds in stage.recovery.step():
                task = stage.tasks.get(number)
                if task is None:
                    continue
                task.pin_unicode(self.config.accept_unicode_change, stage.changelog_topic)
                task.pin_holdout(self.config.accept_holdout_change, stage.changelog_topic)
                task.mark()
                task.ready = True
                self.consumer.resume([tp for tp in self.consumer.assignment() if tp.partition == number and tp.topic in stage.inputs])
                if stage is self.scope_stage:
                    log.info("partition %d restored: %d state records in %.2f s", number, restored, seconds)
                else:
                    log.info("pattern task %d ready: %d state records read in %.2f s", number, restored, seconds)
        if not self.recovering:
            gc.freeze()  # the restored state: see _commit

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Assign here, then pause at once: nothing is fetched for a partition
        # before its store is restored (quixstreams' Application._on_assign
        # does the same).
        consumer.assign(partitions)
        for stage in self.stages:
            mine = [tp for tp in partitions if tp.topic in stage.inputs]
            numbers = sorted({tp.partition for tp in mine} - set(stage.tasks))
            self._start_tasks(stage, numbers, [tp for tp in mine if tp.partition in numbers])
            what = "partitions" if stage is self.scope_stage else "pattern tasks"
            log.info("assigned %s %s: restoring %s in the main loop", what, sorted({tp.partition for tp in mine}), numbers)
        self._last_activity = time.monotonic()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._batch_open:
            self._commit()
        for stage in self.stages:
            for number in {tp.partition for tp in partitions if tp.topic in stage.inputs}:
                self._close_stores(stage, [number])
                stage.tasks.pop(number, None)
                stage.recovery.discard(number)
        log.info("revoked partitions %s", sorted({(tp.topic, tp.partition) for tp in partitions}))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Lost (not revoked): another member may own them already; our open
        # transaction must not commit their offsets.
        self.checkpoint.abort("partitions lost")
        self._batch.clear()
        self._batch_open = False
        for stage in self.stages:
            for number in list(stage.tasks):
                stage.recovery.discard(number)
            self._close_stores(stage, list(stage.tasks))
            stage.tasks.clear()
        log.warning("partitions lost %s: state dropped, will restore on reassignment", sorted({tp.partition for tp in partitions}))


def run_worker(config: WorkerConfig, companion: Companion | None = None) -> None:
    """Prepare the topics and run one worker until SIGTERM/SIGINT/SIGHUP (or idle
    timeout), with ``companion`` beside its loop (:class:`Companion`: e.g.
    ``cli.beside``'s view follower, which gets up to 15 s on the way out to
    apply what was committed). Raises CoPartitionError before consuming
    anything when the topics are not co-partitioned, NotCaughtUp when a
    batch run gives up waiting for its group, and UnicodeVersionChanged when
    an assigned partition's state was built on another Unicode version
    (before any of its records is processed)."""
    configure_logging(config.process)
    partitions = prepare_topics(config)
    worker = LedgerWorker(config)
    worker.metrics.watch_gc()
    if config.metrics_port:
        worker.metrics.serve(config.metrics_port, config.metrics_host)
    for number in STOP_SIGNALS:
        signal.signal(number, worker.stop)
    log.info("worker %s of group %s: %d partitions, inputs %s", config.instance_id, config.group_id, partitions, worker.inputs)
    if companion is not None:
        companion.start()
    clean = False
    try:
        worker.run()
        clean = True
    except NotCaughtUp:
        clean = True  # what was committed is right, only incomplete: the view should show it
        raise
    finally:
        if companion is not None:
            companion.finish(clean)
