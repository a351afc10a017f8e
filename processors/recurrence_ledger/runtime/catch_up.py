"""A batch run's exit condition: the whole consumer group caught up
(docs/operating.md, "Batch runs").

A worker started with ``exit_when_idle_s`` stops only when every partition
of every topic the group reads — the input topics and the pattern stage's
repartition topic (contract §23.5) — has the group's committed offset at
its end, and no transaction is still open on any of them: not just the
partitions assigned to this member, so a member that was given only some
partitions (the others still held by a killed member until its session
times out) does not exit as if the job were done, and a member does not
exit while another member's transaction (or a killed member's, until the
broker aborts it) may still add counts to a repartition partition it
owns. When it gives up waiting it raises :class:`NotCaughtUp` naming the
partitions, their lag and holder.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from enum import Enum

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.kafka.client_config import Bootstrap, consumer_config
from recurrence_ledger.kafka.kafka_admin import admin_client, list_offsets

log = logging.getLogger("recurrence_ledger.worker")

#: Exit code of a batch run (``exit_when_idle_s``) that stopped with input
#: partitions of its group not caught up (``NotCaughtUp``).
NOT_CAUGHT_UP_EXIT = 4
#: Seconds between two checks of the group's committed offsets while idle.
CAUGHT_UP_CHECK_S = 1.0


class Drained(Enum):
    """What the offsets alone say of one partition (:func:`drained`)."""

    #: Nothing to read beyond the group's position: caught up.
    YES = "yes"
    #: A transaction is open on the partition (its last stable offset is
    #: short of its end): whatever it holds may still become records, so
    #: the partition is not caught up until it commits or is aborted.
    OPEN_TRANSACTION = "open transaction"
    #: Records or control markers lie beyond the group's position: a
    #: read_committed reader must look whether any of them is a record.
    READ = "read"


def drained(committed: int, low: int, stable_end: int, end: int) -> Drained:
    """Whether a partition is drained by its group, from its offsets:
    ``committed`` (the group's committed offset, -1: none — then the group
    starts at ``low``, auto.offset.reset=earliest), ``low`` (the log start
    offset), ``stable_end`` (the last stable offset: the end a
    read_committed reader sees) and ``end`` (the high watermark: the end a
    read_uncommitted reader sees). All offsets are Kafka offsets (ints).

    Position at or past ``end``: :attr:`Drained.YES`. Otherwise, a
    ``stable_end`` short of ``end`` means an open transaction (a live
    member's batch in the middle of its commit, or a killed member's batch
    until the broker aborts it at ``transaction.timeout.ms``):
    :attr:`Drained.OPEN_TRANSACTION` — the last stable offset alone would
    call the partition caught up while that transaction may still commit
    records into it. Else :attr:`Drained.READ`: what lies between position
    and end may be only commit markers (the committed offset of a
    transactional topic stops short of the end by the marker, KAFKA-6607)
    or aborted records."""
    position = committed if committed >= 0 else low
    if position >= end:
        return Drained.YES
    if stable_end < end:
        return Drained.OPEN_TRANSACTION
    return Drained.READ


@dataclass(frozen=True)
class PartitionLag:
    """A partition the group reads whose committed offset (of the group) is
    short of its end: ``committed`` (-1: none), ``end`` (the partition's
    high watermark), ``owner`` (who holds it, as far as the group
    coordinator says), ``open_transaction`` (a transaction is still open on
    it: its last stable offset is short of ``end``)."""

    topic: str
    partition: int
    committed: int
    end: int
    owner: str
    open_transaction: bool = False

    def __str__(self) -> str:
        committed = "none" if self.committed < 0 else str(self.committed)
        pending = "; a transaction still open on it" if self.open_transaction else ""
        return (f"{self.topic}[{self.partition}] (committed {committed}, end {self.end}, lag ≤ {self.end - max(self.committed, 0)}"
                f"{pending}; {self.owner})")


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


class CatchUp:
    """A batch run's exit condition (``exit_when_idle_s``): every partition
    of every topic the group reads (``inputs``: the input topics and the
    repartition topic) is caught up by the group, not just this member's
    assignment, so that a member that was given only some partitions (the
    others still held by a killed member until its session times out) does
    not exit as if the job were done.

    A partition is caught up when no transaction is open on it and a
    ``read_committed`` reader positioned at the group's committed offset
    finds no record before the end. The offsets are compared first
    (:func:`drained`: committed ≥ high watermark: done; last stable offset
    short of the high watermark: an open transaction, not done); otherwise a
    probe consumer reads from the committed offset, because the committed
    offset of a transactional input stops short of the end by the commit
    marker (KAFKA-6607, librdkafka#2539: the worker commits ``offset + 1``
    of the last record, not a position past the marker), and aborted
    records are not records either. EOF before a record: caught up.

    The open transaction matters for the repartition topic, which the
    group writes itself (contract §23.5): while another member commits its
    last batch, the markers reach its partitions one by one, and a killed
    member's batch stays open until the broker aborts it — both hold the
    last stable offset back, so a check of it alone would let the member
    owning a repartition partition exit before counts written to it become
    readable, and nobody would consume them. The group is caught up only
    when the inputs and the repartition topic are both drained, like a
    batch run of a two-stage topology that ends when every stage has
    consumed everything upstream stages wrote.

    While idle but not caught up the worker keeps consuming (the partitions
    come to it on the next rebalance); after ``max_wait_s`` during which no
    committed offset of the group advanced, it gives up: :attr:`not_caught_up`
    names the partitions, their lag and their holder, and
    ``LedgerWorker.run`` raises it.

    ``consumer``: the worker's own (the group's committed offsets, its
    member id); ``inputs``: the physical input topics; ``bootstrap`` and
    ``group_id``: the worker's; ``idle_s``: its ``exit_when_idle_s`` (for
    the log line); ``max_wait_s``: its ``max_wait_caught_up_s``."""

    def __init__(self, consumer: Consumer, inputs: list[str], bootstrap: Bootstrap, group_id: str, idle_s: float | None, max_wait_s: float):
        self.consumer = consumer
        self.inputs = inputs
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.idle_s = idle_s
        self.max_wait_s = max_wait_s
        self.not_caught_up: NotCaughtUp | None = None
        self.next_check = 0.0
        self.waiting_since: float | None = None
        self.progress: int | None = None
        self.reported: list[tuple[str, int]] | None = None
        self._probe: Consumer | None = None
        self._admin: AdminClient | None = None

    def done(self, now: float) -> bool:
        """True when the loop should stop: caught up, or given up (then
        :attr:`not_caught_up` is set). Checks at most every CAUGHT_UP_CHECK_S."""
        if now < self.next_check:
            return False
        self.next_check = now + CAUGHT_UP_CHECK_S
        try:
            lagging, progress = self.lagging()
        except (KafkaException, TimeoutError) as error:  # a ListOffsets future not answered in time is a TimeoutError
            log.warning("cannot tell whether group %s is caught up: %s", self.group_id, error)
            lagging, progress = None, self.progress
        if lagging == []:
            log.info("idle for %.1f s and caught up (every input and repartition partition of group %s is committed to its end, no transaction open on it): stopping",
                     self.idle_s, self.group_id)
            return True
        if self.waiting_since is None or progress != self.progress:
            self.waiting_since, self.progress = now, progress
        if lagging is None:
            return False
        keys = [(lag.topic, lag.partition) for lag in lagging]
        waited = now - self.waiting_since
        if waited >= self.max_wait_s:
            self.not_caught_up = NotCaughtUp(self.with_owners(lagging), waited)
            log.error("%s", self.not_caught_up)
            return True
        if keys != self.reported:
            self.reported = keys
            log.warning("idle, but not caught up: waiting up to %.0f s without progress for %s",
                        self.max_wait_s, "; ".join(map(str, self.with_owners(lagging))))
        return False

    def lagging(self) -> tuple[list[PartitionLag], int]:
        """The partitions the group reads that are not caught up, and the
        sum of the group's committed offsets (to see progress)."""
        probe = self._probe_consumer()
        metadata = probe.list_topics(timeout=10)  # unfiltered: a named request could auto-create a topic
        partitions = [TopicPartition(topic, number) for topic in self.inputs for number in sorted(metadata.topics[topic].partitions)]
        committed = {(tp.topic, tp.partition): tp.offset for tp in self.consumer.committed(partitions, timeout=10)}
        # The end offsets come from the admin client (the worker's own
        # consumer would queue each request behind its long-polling fetch).
        # The last stable offsets first: a transaction that commits between
        # the two requests then reads as still open (not caught up), never
        # the other way round.
        admin = self._admin_client()
        stable = list_offsets(admin, partitions, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
        ends = list_offsets(admin, partitions, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
        unstarted = [tp for tp in partitions if committed[(tp.topic, tp.partition)] < 0]
        lows = list_offsets(admin, unstarted, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED) if unstarted else {}
        lagging: dict[tuple[str, int], PartitionLag] = {}
        to_read: dict[tuple[str, int], int] = {}
        for key, offset in committed.items():
            state = drained(offset, lows.get(key, 0), stable[key], ends[key])
            if state is Drained.OPEN_TRANSACTION:
                lagging[key] = PartitionLag(*key, offset, ends[key], "", open_transaction=True)
            elif state is Drained.READ:
                to_read[key] = max(offset, lows.get(key, 0))
                lagging[key] = PartitionLag(*key, offset, ends[key], "")
        readable = self._readable(to_read) if to_read else set()
        done = set(to_read) - readable
        progress = sum(max(offset, 0) for offset in committed.values())
        return [lag for key, lag in sorted(lagging.items()) if key not in done], progress

    def _admin_client(self) -> AdminClient:
        """This worker's admin client for the group's offsets and members."""
        if self._admin is None:
            self._admin = admin_client(self.bootstrap)
        return self._admin

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
            # Never joins nor commits under its group: assign() only.
            self._probe = Consumer(consumer_config(self.bootstrap, f"{self.group_id}-catch-up-probe", {
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
            }))
        return self._probe

    def with_owners(self, lagging: list[PartitionLag]) -> list[PartitionLag]:
        """``lagging`` with who holds each partition, from the group
        coordinator (best effort: a failure says so)."""
        owners: dict[tuple[str, int], str] = {}
        default = "not assigned to any member (the group is rebalancing)"
        try:
            me = self.consumer.memberid()
            group = self._admin_client().describe_consumer_groups([self.group_id], request_timeout=10)[self.group_id].result(timeout=15)
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
