"""State recovery out of the rebalance callback.

When partitions are assigned, the worker pauses them at once (in the
``on_assign`` callback) and registers their stores here; the main loop then
calls :meth:`Recovery.step` between two polls of its consumer until every
registered partition is restored, and resumes each partition as soon as its
store is. A long restore therefore never blocks inside ``on_assign`` — where
it could outlast ``max.poll.interval.ms`` and make the group evict the
member (quixstreams' ``RecoveryManager`` and Kafka Streams' restoring
tasks work the same way: paused input, restore in the poll loop).

One assign-only consumer (never joins a group; its ``group.id`` is
``<group>-restore``, which the ``topics acls`` worker role covers) reads
the changelog partitions with ``isolation.level=read_committed`` from the
beginning to their end (``enable.partition.eof``): records of an aborted or
open transaction are never restored.

A store with a local checkpoint (``store.rocksdb``, ``--state-dir``)
is read from one past its checkpoint instead: only the changelog's tail.
Before a partition is read, its changelog's watermarks and the group's
committed input offsets of that partition decide where to start, whether
a local store is wiped first, and whether the worker must refuse to run
because the changelog lost state the offsets say existed
(``changelog_guard.plan_restore``: ``ChangelogLost``, the local store kept
as it is). quixstreams' ``RecoveryPartition.has_invalid_offset`` checks a
local offset against the watermarks the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition


from recurrence_ledger.kafka.client_config import Bootstrap, consumer_config
from recurrence_ledger.runtime.changelog_guard import ChangelogLost, RestorePlan, plan_restore
from recurrence_ledger.runtime.checkpoint import RestartRequired
from recurrence_ledger.runtime.faults import RuntimeHooks
from recurrence_ledger.store.base import PartitionStore

log = logging.getLogger("recurrence_ledger.worker")

#: Seconds one :meth:`Recovery.step` may spend restoring before it returns
#: to the poll loop.
STEP_BUDGET_S = 0.5
#: Consumer error codes a restore waits out (librdkafka reconnects by itself).
TRANSIENT = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE, KafkaError._TIMED_OUT})
#: Seconds planning a restore may keep failing on transient errors before
#: the worker exits for a restart.
PLAN_RETRY_S = 120.0
#: Seconds to wait for a changelog partition's watermarks.
WATERMARK_TIMEOUT_S = 10.0


class Recovery:
    """Partitions whose stores are being restored (module docstring).

    ``bootstrap``: the Kafka connection; ``group_id``: the worker's group
    (the restore consumer uses ``<group_id>-restore``); ``changelog_topic``:
    the physical changelog topic. ``consumed``: partition number → the
    group's committed input offsets of that partition beyond offset 0
    (``{topic: offset}``; default: none, as in a new
    deployment). ``reseed``: when given, ``reseed(partition, store, end)``
    writes an intact local store back to its empty changelog partition
    (end offset ``end``) instead of refusing, and returns the new end
    (``runtime.reseed``). ``consumer_factory`` is injectable for tests."""

    def __init__(self, bootstrap: Bootstrap, group_id: str, changelog_topic: str, hooks: RuntimeHooks | None = None,
                 consumer_factory: Callable[[dict], Consumer] = Consumer,
                 consumed: Callable[[int], dict[str, int]] = lambda number: {},
                 reseed: Callable[[int, PartitionStore, int], int] | None = None):
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.changelog_topic = changelog_topic
        self.hooks = hooks or RuntimeHooks()
        self.consumer_factory = consumer_factory
        self.consumed = consumed
        self.reseed = reseed
        self.pending: dict[int, PartitionStore] = {}
        self.restored: dict[int, int] = {}  #: records restored so far, per pending partition
        self.started: dict[int, float] = {}
        self._unplaced: set[int] = set()  #: pending partitions not assigned to the restore consumer yet
        self._consumer: Consumer | None = None
        self._plan_failing_since: float | None = None

    @property
    def recovering(self) -> bool:
        """True while a registered partition is not restored yet."""
        return bool(self.pending)

    def add(self, partition: int, store: PartitionStore) -> None:
        """Register a store to restore from changelog partition
        ``partition``, from ``store.restore_from()`` (None: the beginning)."""
        self.discard(partition)
        self.pending[partition] = store
        self.restored[partition] = 0
        self.started[partition] = time.monotonic()
        self._unplaced.add(partition)

    def discard(self, partition: int) -> None:
        """Stop restoring ``partition`` (revoked or lost)."""
        if self.pending.pop(partition, None) is not None:
            self.restored.pop(partition, None)
            self.started.pop(partition, None)
            if partition in self._unplaced:
                self._unplaced.discard(partition)
            elif self._consumer is not None:
                self._consumer.incremental_unassign([TopicPartition(self.changelog_topic, partition)])

    def step(self, budget_s: float = STEP_BUDGET_S) -> list[tuple[int, int, float]]:
        """Restore for up to ``budget_s`` seconds. Returns the partitions
        finished in this step as ``(partition, records restored, seconds
        since registered)``. Raises KafkaException on a consumer error other
        than end of partition or a transient one (:data:`TRANSIENT`, logged),
        ``checkpoint.RestartRequired`` on a fatal one, and
        ``changelog_guard.ChangelogLost`` when a
        partition's changelog lost state its committed offsets say existed
        (nothing of it restored, its local store untouched)."""
        if not self.pending:
            return []
        consumer = self._restore_consumer()
        finished: list[tuple[int, int, float]] = []
        if self._unplaced:
            finished += self._place(consumer)
        deadline = time.monotonic() + budget_s
        while self.pending and time.monotonic() < deadline:
            message = consumer.poll(min(0.1, max(0.0, deadline - time.monotonic())))
            if message is None:
                continue
            number = message.partition()
            error = message.error()
            if error is not None:
                if error.code() in TRANSIENT:  # the broker restarting: librdkafka reconnects and fetches again
                    log.warning("restoring state: %s (retrying)", error)
                    continue
                if error.fatal():
                    raise RestartRequired(f"the restore consumer failed fatally ({error}): exiting for a restart")
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                if number in self.pending:
                    finished.append(self._finish(number, message.offset()))
                continue
            store = self.pending.get(number)
            if store is None:  # discarded while in flight
                continue
            store.restore(message.key(), message.value(), message.offset())
            self.restored[number] += 1
            self.hooks.at("restoring")
        return finished

    def close(self) -> None:
        """Close the restore consumer (if one was opened)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- internals -------------------------------------------------------------
    def _finish(self, number: int, end: int | None = None) -> tuple[int, int, float]:
        self.pending[number].restored(end)
        count, seconds = self.restored[number], time.monotonic() - self.started[number]
        self.discard(number)
        return number, count, seconds

    def _place(self, consumer: Consumer) -> list[tuple[int, int, float]]:
        """Assign the unplaced partitions to the restore consumer at their
        stores' offsets (checked against the watermarks, module docstring);
        returns those with nothing to restore, finished."""
        # Every partition is planned before any is touched: a refusal
        # (ChangelogLost) leaves every store and assignment as it was.
        try:
            plans = {number: self._plan(consumer, number) for number in sorted(self._unplaced)}
        except KafkaException as error:
            # The watermarks or the committed offsets could not be read (a
            # broker restarting): plan again at the next step, for up to
            # PLAN_RETRY_S, then exit for a restart.
            if not error.args[0].retriable() and error.args[0].code() not in TRANSIENT:
                raise
            now = time.monotonic()
            self._plan_failing_since = self._plan_failing_since or now
            if now - self._plan_failing_since > PLAN_RETRY_S:
                raise RestartRequired(f"cannot plan the state restore ({error.args[0]}): exiting for a restart") from error
            log.warning("planning the state restore: %s (retrying)", error.args[0])
            return []
        self._plan_failing_since = None
        assign: list[TopicPartition] = []
        finished: list[tuple[int, int, float]] = []
        for number, (plan, high) in plans.items():
            store = self.pending[number]
            if plan.wipe is not None:
                store.reset(plan.wipe)
            if plan.done:  # nothing after the checkpoint (_finish forgets it, unassigned)
                finished.append(self._finish(number, high))
                continue
            self._unplaced.discard(number)
            assign.append(TopicPartition(self.changelog_topic, number, OFFSET_BEGINNING if plan.start is None else plan.start))
        if assign:
            consumer.incremental_assign(assign)
        return finished

    def _plan(self, consumer: Consumer, number: int) -> tuple[RestorePlan, int]:
        """Partition ``number``'s restore plan and its changelog's high
        watermark (``changelog_guard.plan_restore``: an empty changelog is
        done at once, without waiting for the restore consumer's
        end-of-partition event)."""
        store = self.pending[number]
        start = store.restore_from()
        consumed = self.consumed(number)
        # Once restored, the store reflects the group's committed offsets
        # (a reseed compares them with a clean store's: store.rocksdb).
        store.reflects(consumed, whole=True)
        kept = store.kept_checkpoint is not None
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(self.changelog_topic, number), timeout=WATERMARK_TIMEOUT_S)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
            # The changelog topic was deleted while the worker ran (it
            # creates it at start): as lost as an empty one, never a raw
            # error and exit 1 — and nothing to reseed into.
            plan_restore(partition=number, changelog_topic=self.changelog_topic, group_id=self.group_id, consumed=consumed,
                         low=0, high=0, local_from=start, kept_checkpoint=store.kept_checkpoint,
                         kept_reason=store.wiped if kept else None, reseed_hint=kept or start is not None)
            if start is None and not consumed and not kept:
                # Nothing of this partition's state existed: the restore
                # consumer reads the topic from its start, as the other
                # partitions' plans decide (one of them may refuse).
                return RestorePlan(None), 0
            raise

        try:
            return plan_restore(partition=number, changelog_topic=self.changelog_topic, group_id=self.group_id, consumed=consumed,
                                low=low, high=high, local_from=start, kept_checkpoint=store.kept_checkpoint,
                                kept_reason=store.wiped if kept else None, reseed_hint=kept or start is not None), high
        except ChangelogLost as lost:
            if self.reseed is None:
                raise
            why = store.reseed_refusal(consumed) if high == low else f"the changelog is not empty (offsets {low}–{high})"
            if why is not None:
                raise ChangelogLost(f"{lost}; --reseed-changelog cannot reseed it: {why}", number) from None
            end = self.reseed(number, store, high)
            return RestorePlan(end, done=True), end

    def _restore_consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self.consumer_factory(consumer_config(self.bootstrap, f"{self.group_id}-restore", {
                "enable.partition.eof": True,
                # Do not let the broker hold the last fetch for 500 ms: the
                # end of the partition is what recovery waits for.
                "fetch.wait.max.ms": 10,
            }))
            # Each changelog partition is read from its store's offset
            # (_place); an empty one finishes through its end-of-partition
            # event.
        return self._consumer
