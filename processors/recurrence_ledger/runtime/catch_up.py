"""A batch run's exit condition: the whole consumer group caught up
(docs/operating.md, "Batch runs").

A worker started with ``exit_when_idle_s`` stops only when every partition
of every input topic has the group's committed offset at its end — not just
the partitions assigned to this member, so a member that was given only
some partitions (the others still held by a killed member until its session
times out) does not exit as if the job were done. When it gives up waiting
it raises :class:`NotCaughtUp` naming the partitions, their lag and holder.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.kafka.client_config import Bootstrap, client_config, consumer_config

log = logging.getLogger("recurrence_ledger.worker")

#: Exit code of a batch run (``exit_when_idle_s``) that stopped with input
#: partitions of its group not caught up (``NotCaughtUp``).
NOT_CAUGHT_UP_EXIT = 4
#: Seconds between two checks of the group's committed offsets while idle.
CAUGHT_UP_CHECK_S = 1.0


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


class CatchUp:
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

    def done(self, now: float) -> bool:
        """True when the loop should stop: caught up, or given up (then
        :attr:`not_caught_up` is set). Checks at most every CAUGHT_UP_CHECK_S."""
        if now < self.next_check:
            return False
        self.next_check = now + CAUGHT_UP_CHECK_S
        try:
            lagging, progress = self.lagging()
        except KafkaException as error:
            log.warning("cannot tell whether group %s is caught up: %s", self.group_id, error)
            lagging, progress = None, self.progress
        if lagging == []:
            log.info("idle for %.1f s and caught up (every input partition of group %s is committed to its end): stopping",
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
        """The input partitions not caught up, and the sum of the group's
        committed offsets (to see progress)."""
        # The end offsets come from the probe: on the worker's own consumer
        # each request waits behind its long-polling fetch (fetch.wait.max.ms).
        probe = self._probe_consumer()
        metadata = probe.list_topics(timeout=10)  # unfiltered: a named request could auto-create a topic
        partitions = [TopicPartition(topic, number) for topic in self.inputs for number in sorted(metadata.topics[topic].partitions)]
        candidates: dict[tuple[str, int], tuple[int, int]] = {}
        progress = 0
        for tp in self.consumer.committed(partitions, timeout=10):
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
            # Never joins nor commits under its group: assign() only.
            self._probe = Consumer(consumer_config(self.bootstrap, f"{self.group_id}-catch-up-probe", {
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
            }))
        return self._probe

    def with_owners(self, lagging: list[PartitionLag]) -> list[PartitionLag]:
        """``lagging`` with who holds each partition, from the group
        coordinator (best effort: a failure says so)."""
        from confluent_kafka.admin import AdminClient

        owners: dict[tuple[str, int], str] = {}
        default = "not assigned to any member (the group is rebalancing)"
        try:
            me = self.consumer.memberid()
            admin = AdminClient(client_config(self.bootstrap))
            group = admin.describe_consumer_groups([self.group_id], request_timeout=10)[self.group_id].result(timeout=15)
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
