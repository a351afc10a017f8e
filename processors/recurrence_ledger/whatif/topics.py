"""The deployment's input topics as the input of a policy replay (contract
§20): every input topic of the catalogue, from the beginning of each
partition to its end when the replay starts, ``read_committed``.

The reader joins no consumer group and commits nothing: librdkafka wants a
``group.id`` (:data:`READER_GROUP`), but the consumer only ``assign`` s
partitions and never commits, so the group never exists on the broker.
Records are decoded and applied exactly as the worker does
(``runtime.worker.process_message``: key check, codec, intake, dead
letters).

Order (contract §10: "the order of ``source-journal``, or per-kind topics
whose arrival order happens to match the journal"): partition by partition
(scopes never share one across partitions, contract §1, so each scope's
events keep their order); within a partition, one topic's records in offset
order, several topics' merged by record timestamp (the order they were
published), ties in catalogue order. A worker reads per-kind topics in the
order they arrive, which nothing records; ``source-journal`` is exact.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from recurrence_ledger import catalogue
from recurrence_ledger.embedded.output import stderr_console
from recurrence_ledger.ledger.intake import dead_letter
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger.results import Emit
from recurrence_ledger.kafka.client_config import Bootstrap, bootstrap_of, consumer_config
from recurrence_ledger.kafka.kafka_admin import is_transient
from recurrence_ledger.kafka.kafka_io import require_topics, watermarks
from recurrence_ledger.kafka.records import CoreFailure, process_message
from recurrence_ledger.serde.codec import FIXED, Codec

#: The ``group.id`` librdkafka requires of a consumer; never joined, never
#: committed (assign only), so no such group appears on the broker.
READER_GROUP = "recurrence-ledger-what-if"
#: Seconds the reader may go without a record before it gives up.
STALL_TIMEOUT_S = 60.0
#: Records held for one topic-partition while another's earlier records are
#: still coming: above it the partition is paused.
MAX_QUEUED = 5_000


@dataclass
class TopicRange:
    """One input topic-partition: ``[low, end)`` offsets, ``end`` the last
    stable offset when the replay started."""

    topic: str
    partition: int
    low: int
    end: int


@dataclass
class TopicsInput:
    """The input topics of the deployment with prefix ``topic_prefix`` on
    ``bootstrap`` (a bootstrap string or ``KafkaConnection``), values
    decoded with ``codec``. :meth:`open` finds the ranges (LookupError
    naming every missing input topic); :meth:`records` yields the records
    in replay order."""

    bootstrap: Bootstrap
    topic_prefix: str = ""
    codec: Codec = FIXED
    ranges: list[TopicRange] = field(default_factory=list)
    _consumer: Consumer | None = None

    @property
    def total(self) -> int:
        """Offsets to read (transaction markers included): the known end."""
        return sum(r.end - r.low for r in self.ranges)

    def describe(self) -> dict:
        """The input as the report names it."""
        topics: dict[str, int] = {}
        for r in self.ranges:
            topics[r.topic] = topics.get(r.topic, 0) + r.end - r.low
        return {"kind": "topics", "bootstrap": bootstrap_of(self.bootstrap), "topic_prefix": self.topic_prefix, "offsets": topics}

    def open(self, timeout: float = 30.0) -> TopicsInput:
        """Create the reader and find every partition's range. Raises
        LookupError when an input topic does not exist (nothing is ever
        created), KafkaException when the broker refuses."""
        self._consumer = Consumer(consumer_config(self.bootstrap, READER_GROUP, {
            "client.id": f"{READER_GROUP}-{uuid.uuid4().hex[:8]}",
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
        }))
        names = [catalogue.physical(name, self.topic_prefix) for name in catalogue.INPUT_TOPICS]
        try:
            counts = require_topics(self._consumer, names)
        except LookupError as error:
            self.close()
            raise LookupError(f"{error} — is the topic prefix {self.topic_prefix!r} the deployment's?") from None
        deadline = time.monotonic() + timeout
        for name in names:
            for partition in range(counts[name]):
                low, high = watermarks(self._consumer, TopicPartition(name, partition), deadline)
                self.ranges.append(TopicRange(name, partition, low, high))
        return self

    def close(self) -> None:
        """Close the reader (it never committed anything)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def records(self, show_progress: bool = True) -> Iterator[Callable[[LedgerProcessor], list[Emit]]]:
        """For every record in replay order (module docstring), a function
        that applies it to a processor as the worker does and returns the
        emits (a dead letter for a bad record or a core failure). Shows a
        progress bar of records read against the known end on stderr."""
        assert self._consumer is not None, "open() first"
        with Progress(
            TextColumn("what-if", style="bold", markup=False), BarColumn(), MofNCompleteColumn(), TextColumn("records of the topics' end", markup=False),
            TimeElapsedColumn(), TimeRemainingColumn(), console=stderr_console(), transient=True, disable=not show_progress,
        ) as progress:
            task = progress.add_task("what-if", total=self.total)
            read = 0
            for partition in sorted({r.partition for r in self.ranges}):
                for message in self._partition(partition):
                    read += 1
                    yield lambda processor, message=message: self._apply(processor, message)
                    if read % 256 == 0:
                        progress.update(task, completed=read)
            progress.update(task, completed=self.total)

    def _apply(self, processor: LedgerProcessor, message: Message) -> list[Emit]:
        try:
            return process_message(processor, message, self.topic_prefix, self.codec)
        except CoreFailure as failure:
            return [dead_letter(failure.coordinates, failure.raw, "internal_error", str(failure))]

    def _partition(self, partition: int) -> Iterator[Message]:
        """Partition ``partition`` of every input topic, merged (module
        docstring)."""
        consumer = self._consumer
        order = {catalogue.physical(name, self.topic_prefix): index for index, name in enumerate(catalogue.INPUT_TOPICS)}
        ranges = {r.topic: r for r in self.ranges if r.partition == partition and r.end > r.low}
        if not ranges:
            return
        queues: dict[str, deque[Message]] = {topic: deque() for topic in ranges}
        reading = set(ranges)  # not yet read to their end
        paused: set[str] = set()
        consumer.assign([TopicPartition(topic, partition, r.low) for topic, r in ranges.items()])
        last_record = time.monotonic()
        try:
            while queues:
                while any(topic in reading and not queues[topic] for topic in queues):
                    batch = consumer.consume(num_messages=1_000, timeout=0.2)
                    for message in batch:
                        error = message.error()
                        if error is not None:
                            if error.code() in (KafkaError._PARTITION_EOF, KafkaError._TRANSPORT) or (is_transient(error) and not error.fatal()):
                                continue
                            raise KafkaException(error)
                        topic = message.topic()
                        if topic in reading and message.offset() < ranges[topic].end:
                            queues[topic].append(message)
                            last_record = time.monotonic()
                            if message.offset() + 1 >= ranges[topic].end:
                                reading.discard(topic)
                    if not batch or len(batch) < 1_000:
                        self._reached_end(partition, ranges, reading)
                    self._pace(partition, queues, paused)
                    if reading and time.monotonic() - last_record > STALL_TIMEOUT_S:
                        raise TimeoutError(f"no record of partition {partition} of {sorted(reading)} in {STALL_TIMEOUT_S:.0f} s before its end")
                for topic in [topic for topic, queue in queues.items() if not queue and topic not in reading]:
                    del queues[topic]
                if queues:
                    topic = min(queues, key=lambda name: (queues[name][0].timestamp()[1], order[name], queues[name][0].offset()))
                    yield queues[topic].popleft()
        finally:
            consumer.unassign()

    def _reached_end(self, partition: int, ranges: dict[str, TopicRange], reading: set[str]) -> None:
        """Mark the topics whose position reached their end (the last
        offsets may be transaction markers, which are never delivered)."""
        if reading:
            for tp in self._consumer.position([TopicPartition(topic, partition) for topic in reading]):
                if tp.offset >= ranges[tp.topic].end:
                    reading.discard(tp.topic)

    def _pace(self, partition: int, queues: dict[str, deque], paused: set[str]) -> None:
        """Pause a topic-partition holding MAX_QUEUED records, resume it
        once it is drained to a tenth of that."""
        for topic, queue in queues.items():
            if topic not in paused and len(queue) >= MAX_QUEUED:
                self._consumer.pause([TopicPartition(topic, partition)])
                paused.add(topic)
            elif topic in paused and len(queue) <= MAX_QUEUED // 10:
                self._consumer.resume([TopicPartition(topic, partition)])
                paused.discard(topic)
