"""Journal files to Kafka and topics back to files (contract §1, §9, §11).

:func:`publish_journal` is the producer side of a journal file
(``docs/journals.md``): each line becomes one record keyed by its scope_id,
on ``source-journal`` (a SourceEvent envelope) or on the per-kind input
topics. :func:`export_topic` reads a whole topic back into the embedded
runner's file format (contract §11: one canonical JSON value per line), so
a Kafka run can be compared byte for byte with an embedded run.

Partitioning: records are partitioned with librdkafka's ``murmur2_random``
partitioner, the Java client's (and aiokafka's / Faust's) default. The
librdkafka default (``consistent_random``, CRC32) puts the same key on a
different partition, which would split a scope's inputs and outputs across
partitions when the worker produces with a Java-compatible client
(contract §1, co-partitioning).
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.embedded.journal import journal_lines  # the journal-file reader: kafka may import embedded, not the reverse
from recurrence_ledger.embedded.output import file_progress
from recurrence_ledger.kafka.client_config import Bootstrap, consumer_config, producer_config
from recurrence_ledger.kafka.kafka_admin import is_transient
from recurrence_ledger.ledger.intake import BadRecord, check_size, decode_journal_line, decode_json, validate
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.serde.codec import AVRO, FIXED, JSON, Codec
from recurrence_ledger.catalogue import BY_NAME, CANDIDATE_SETS, INPUT_TOPICS, SOURCE_JOURNAL

#: The publisher's own producer settings, beyond those of every producer of
#: the package (``client_config.producer_config``: idempotent, ``acks=all``).
PUBLISH_SETTINGS: dict[str, Any] = {
    "partitioner": "murmur2_random",
    # Never let a typo'd topic be auto-created with the broker's default
    # partition count (it would not be co-partitioned).
    "allow.auto.create.topics": False,
    # A delivery that cannot complete fails within a minute, not five.
    "message.timeout.ms": 60_000,
}
#: Seconds publish_journal / publish_raw wait in flush() for outstanding deliveries.
FLUSH_TIMEOUT_S = 90.0
#: Seconds a metadata request may take.
METADATA_TIMEOUT_S = 10.0
#: Consumer group id required by librdkafka to build a consumer. Readers
#: only ``assign`` partitions and never commit, so no group is joined and no
#: offsets are stored under this id.
READER_GROUP_ID = "recurrence-ledger-export"
_SOURCE_KINDS = tuple(name for name in INPUT_TOPICS if name != SOURCE_JOURNAL)


class PublishError(RecurrenceLedgerError, RuntimeError):
    """Some records of a publish were not delivered. ``failures`` lists
    ``(0-based journal line number or None, physical topic, error text)``
    (the message counts lines from 1, as an editor does); the other records
    were flushed before this was raised."""

    def __init__(self, message: str, failures: list[tuple[int | None, str, str]]):
        super().__init__(message)
        self.failures = failures


class UndecodableRecord(RecurrenceLedgerError, ValueError):
    """A record read back from a topic that its codec's ``decode_value``
    (``recurrence_ledger.serde.codec``) rejects (or a tombstone).
    ``reason`` is the contract §9 reason code."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str, message: str):
        super().__init__(f"{topic}[{partition}]@{offset}: {reason}: {message}")
        self.topic, self.partition, self.offset, self.reason = topic, partition, offset, reason


@dataclass
class PublishSummary:
    """What :func:`publish_journal` delivered. ``records``: records acknowledged
    by the broker; ``raw``: of those, journal lines published as their raw
    bytes (not JSON, no usable scope_id, or not a valid event); ``topics``:
    records per logical topic name; ``seconds``: wall time of the whole
    publish, flush included."""

    records: int = 0
    raw: int = 0
    topics: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


class Prepared(NamedTuple):
    """One journal line ready to produce: the logical ``topic``, the record
    ``key`` (UTF-8 scope_id or None) and ``value`` bytes; ``raw`` is True when
    the value is the line itself."""

    topic: str
    key: bytes | None
    value: bytes
    raw: bool


class RawRecord(NamedTuple):
    """A record as read from a partition: value bytes undecoded (None for a
    tombstone); ``timestamp`` its Kafka timestamp in ms (-1 when the broker
    has none)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int = -1


def _scope_key(line: bytes) -> bytes | None:
    """The UTF-8 scope_id of a journal line that is not a valid event, when
    one can be read (a non-empty string at ``value.scope_id``); else None."""
    try:
        envelope = decode_json(line)
    except BadRecord:
        return None
    value = envelope.get("value") if isinstance(envelope, dict) else None
    scope_id = value.get("scope_id") if isinstance(value, dict) else None
    if not isinstance(scope_id, str) or not scope_id:
        return None
    try:
        return scope_id.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a \ud800 escape
        return None


def prepare_line(line: bytes, fmt: str = AVRO, per_kind: bool = False, codec: Codec = FIXED, topic_prefix: str = "") -> Prepared:
    """Turn one journal line (without its end of line) into a record.

    A line that decodes and validates as its event kind (the same
    ``recurrence_ledger.ledger.intake`` checks the worker applies) is published as
    its validated value, keyed by scope_id: on ``source-journal`` as the
    SourceEvent ``{"topic": kind, "value": value}``, or with ``per_kind`` on
    the kind's own topic as that kind's record; ``fmt`` is "avro" (framed by
    ``codec``, for the topic under ``topic_prefix``) or "json" (canonical JSON).

    Any other line — not JSON, not an envelope, an unknown kind, a value
    that fails validation or does not encode — is published unchanged on
    ``source-journal`` (whose record format is the journal line, even with
    ``per_kind``: on a per-kind topic the envelope itself would be read as
    the event), keyed by its scope_id when one can be read, so that the
    worker dead-letters it with the raw bytes of the embedded runner's
    dead letter (contract §9, §11) and, for a line starting with ``{``, the
    same reason code. (``recurrence_ledger.serde.codec`` reads any other value as an Avro
    frame, so e.g. a line ``oops`` is ``bad_magic_byte`` on Kafka but
    ``malformed_json`` in the embedded runner.)
    """
    try:
        kind, value = decode_journal_line(line)
        return prepare_event(kind, validate(kind, value), fmt, per_kind, codec, topic_prefix)
    except (BadRecord, ValueError, TypeError, UnicodeEncodeError):
        return Prepared(SOURCE_JOURNAL, _scope_key(line), line, True)


def prepare_event(kind: str, event: dict, fmt: str = AVRO, per_kind: bool = False, codec: Codec = FIXED, topic_prefix: str = "") -> Prepared:
    """The record of one validated event (``intake.validate``'s canonical
    form) of input topic ``kind``, keyed by its UTF-8 scope_id (contract
    §1): on ``source-journal`` the SourceEvent ``{"topic": kind, "value":
    event}``, or with ``per_kind`` the event on its kind's own topic;
    ``fmt`` "avro" (framed by ``codec`` for the topic under
    ``topic_prefix``) or "json" (canonical JSON). Shared by
    :func:`prepare_line` and the client library's ``Publisher``.

    Raises ValueError/TypeError when the value does not encode,
    UnicodeEncodeError for a scope_id with a lone surrogate, RegistryError
    when a Schema Registry refuses or does not answer."""
    key = event["scope_id"].encode("utf-8")
    if per_kind:
        return Prepared(kind, key, codec.encode(BY_NAME[kind].schema, event, fmt, topic=topic_prefix + kind), False)
    envelope = {"topic": kind, "value": event}
    return Prepared(SOURCE_JOURNAL, key, codec.encode("SourceEvent", envelope, fmt, topic=topic_prefix + SOURCE_JOURNAL), False)


def publisher_config(bootstrap: Bootstrap) -> dict[str, Any]:
    """The configuration of the producer that publishes source events:
    ``producer_config`` with :data:`PUBLISH_SETTINGS`."""
    return producer_config(bootstrap, settings=PUBLISH_SETTINGS)


def require_topics(client: Producer | Consumer, physical_topics: Iterable[str]) -> dict[str, int]:
    """Partition count of each topic; raises LookupError for a missing one.
    Unfiltered metadata: a named request would auto-create the topic."""
    metadata = client.list_topics(timeout=METADATA_TIMEOUT_S)
    counts: dict[str, int] = {}
    missing = []
    for name in physical_topics:
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None:
            missing.append(name)
        else:
            counts[name] = len(topic.partitions)
    if missing:
        raise LookupError(f"topics do not exist (create them first: recurrence-ledger topics create): {', '.join(missing)}")
    return counts


def produce(producer: Producer, topic: str, key: bytes | None, value: bytes | None,
            partition: int | None = None, on_delivery: Callable | None = None, serve: bool = True) -> None:
    """The one produce path of the package: ``producer.produce`` (to
    ``partition``, or the producer's partitioner when None), waiting for
    room when librdkafka's local queue is full (BufferError: serve delivery
    reports for 0.1 s, try again), then serve ready events without
    blocking (``poll(0)``) so delivery reports never pile up — unless
    ``serve`` is False (a caller producing many records in a row that
    serves them itself every so often: ``poll(0)`` costs about as much as
    the produce)."""
    extra: dict[str, Any] = {}
    if partition is not None:
        extra["partition"] = partition
    if on_delivery is not None:
        extra["on_delivery"] = on_delivery
    while True:
        try:
            producer.produce(topic, value=value, key=key, **extra)
            break
        except BufferError:  # local queue full: serve delivery reports, retry
            producer.poll(0.1)
    if serve:
        producer.poll(0)


def publish_journal(
    bootstrap: str,
    journal: Path,
    *,
    fmt: str = AVRO,
    per_kind: bool = False,
    topic_prefix: str = "",
    show_progress: bool = True,
    codec: Codec = FIXED,
) -> PublishSummary:
    """Publish every non-blank line of ``journal`` (JSON Lines,
    ``{"topic": kind, "value": {...}}``, contract §1/§11) in file order, one
    record per line, keyed by the value's scope_id (UTF-8), to
    ``topic_prefix + "source-journal"`` — or with ``per_kind`` to each
    kind's topic (see :func:`prepare_line` for the value and for lines that
    are published raw). ``fmt``: "avro" (framed by ``codec``) or "json".

    Uses an idempotent producer (:func:`publisher_config`) and shows a rich
    progress bar (bytes of the file) on stderr unless ``show_progress`` is
    False. Returns a PublishSummary once every record is acknowledged.

    Raises ValueError for an unknown ``fmt``, OSError when the journal
    cannot be read, LookupError when a target topic does not exist (topics
    are never auto-created), and PublishError when any record could not be
    delivered (e.g. larger than the broker's message.max.bytes; a line over
    the record limit, ``intake.MAX_RECORD_BYTES``, is not sent) or is still
    undelivered after FLUSH_TIMEOUT_S seconds; RegistryError when a Schema
    Registry refuses our schemas or does not answer.
    """
    if fmt not in (AVRO, JSON):
        raise ValueError(f"fmt must be {AVRO!r} or {JSON!r}, not {fmt!r}")
    started = time.monotonic()
    producer = Producer(publisher_config(bootstrap))
    targets = (SOURCE_JOURNAL, *(_SOURCE_KINDS if per_kind else ()))
    require_topics(producer, [topic_prefix + name for name in targets])
    summary = PublishSummary(topics={name: 0 for name in targets})
    failures: list[tuple[int | None, str, str]] = []

    def delivered(number: int, logical_topic: str, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append((number, message.topic(), error.str()))
        else:
            summary.records += 1
            summary.topics[logical_topic] += 1

    size = journal.stat().st_size
    with open(journal, "rb") as handle, file_progress(show_progress) as progress:
        task = progress.add_task(f"publish {journal.name}", total=size)
        for number, line in journal_lines(handle):
            try:  # a line over the record limit (only its first bytes read, when far over) is never sent
                check_size(line)
            except BadRecord as error:
                failures.append((number, topic_prefix + SOURCE_JOURNAL, f"{error.reason}: {error.message}"))
                continue
            record = prepare_line(line, fmt, per_kind, codec, topic_prefix)
            summary.raw += record.raw
            try:
                produce(producer, topic_prefix + record.topic, record.key, record.value,
                        on_delivery=functools.partial(delivered, number, record.topic))
            except KafkaException as error:  # refused locally, e.g. MSG_SIZE_TOO_LARGE
                failures.append((number, topic_prefix + record.topic, error.args[0].str()))
            if number % 512 == 0:
                producer.poll(0)
                progress.update(task, completed=handle.tell())
        remaining = producer.flush(FLUSH_TIMEOUT_S)
        progress.update(task, completed=size)
    summary.seconds = time.monotonic() - started
    if remaining:
        failures.append((None, topic_prefix + SOURCE_JOURNAL, f"{remaining} records still undelivered after {FLUSH_TIMEOUT_S:.0f} s"))
    if failures:
        first = "; ".join(f"{'' if n is None else f'line {n + 1}: '}{topic}: {text}" for n, topic, text in failures[:3])
        raise PublishError(f"{len(failures)} records of {journal} were not delivered ({first})", failures)
    return summary


def publish_raw(bootstrap: str, physical_topic: str, key: bytes | None, value: bytes | None) -> tuple[int, int]:
    """Produce one record with exactly these key and value bytes (None = null;
    a null value is a tombstone) to ``physical_topic`` and flush. Returns its
    ``(partition, offset)``. For poison records in tests and operations.

    Raises LookupError when the topic does not exist, PublishError when the
    record is not delivered within FLUSH_TIMEOUT_S seconds.
    """
    producer = Producer(publisher_config(bootstrap))
    require_topics(producer, [physical_topic])
    report: list[tuple[KafkaError | None, Message]] = []
    try:
        produce(producer, physical_topic, key, value, on_delivery=lambda error, message: report.append((error, message)))
    except KafkaException as error:
        raise PublishError(f"{physical_topic}: {error.args[0].str()}", [(None, physical_topic, error.args[0].str())]) from None
    producer.flush(FLUSH_TIMEOUT_S)
    if not report or report[0][0] is not None:
        text = "not delivered in time" if not report else report[0][0].str()
        raise PublishError(f"{physical_topic}: {text}", [(None, physical_topic, text)])
    return report[0][1].partition(), report[0][1].offset()


def watermarks(consumer: Consumer, partition: TopicPartition, deadline: float) -> tuple[int, int]:
    """``(low, high)`` offsets of a partition as this consumer's isolation
    level sees them (for read_committed, high is the last stable offset).
    Retries the transient errors of a partition whose leader is still
    loading it (kafka_admin.is_transient) until ``deadline``."""
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=max(0.1, deadline - time.monotonic()), cached=False)
        except KafkaException as error:
            if not is_transient(error.args[0]) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def read_raw(bootstrap: str, physical_topic: str, timeout: float = 30.0, only_key: bytes | None = None) -> list[RawRecord]:
    """Every committed record of ``physical_topic``, partitions ascending,
    each in offset order, undecoded — or with ``only_key``, only the records
    with that key (the others are read and dropped).

    Reads with ``isolation.level=read_committed`` (records of aborted or
    open transactions are never returned) by assigning every partition at
    its beginning: no consumer group is joined and no offset is committed.
    Stops when each partition's position reaches its end as seen at the
    start — the last stable offset, which ``get_watermark_offsets`` returns
    for a read_committed consumer. The position is compared, not the last
    record's offset, because transaction markers (control records) occupy
    offsets without being delivered. Records produced after the start are
    not returned, nor those from the first record of a transaction still
    open at the start (the last stable offset) onwards.

    ``timeout`` is in seconds for the whole read. Raises LookupError when the
    topic does not exist, TimeoutError when the end is not reached in time
    (a partition never reaches its end, e.g. the broker is gone),
    KafkaException on a non-transient consumer error.
    """
    deadline = time.monotonic() + timeout
    consumer = Consumer(consumer_config(bootstrap, READER_GROUP_ID, {
        "client.id": f"{READER_GROUP_ID}-{uuid.uuid4().hex[:8]}",
        "enable.auto.offset.store": False,
        "fetch.wait.max.ms": 100,
    }))
    try:
        partitions = require_topics(consumer, [physical_topic])[physical_topic]
        ends: dict[int, int] = {}
        for partition in range(partitions):
            low, high = watermarks(consumer, TopicPartition(physical_topic, partition), deadline)
            if high > low:
                ends[partition] = high
        records: dict[int, list[RawRecord]] = {partition: [] for partition in ends}
        if ends:
            consumer.assign([TopicPartition(physical_topic, partition, OFFSET_BEGINNING) for partition in ends])
        pending = dict(ends)
        polled = 0
        while pending:
            if time.monotonic() >= deadline:
                positions = {tp.partition: tp.offset for tp in consumer.position([TopicPartition(physical_topic, p) for p in pending])}
                raise TimeoutError(
                    f"{physical_topic}: end not reached in {timeout:.0f} s (partition: position/end "
                    + ", ".join(f"{p}: {positions.get(p)}/{end}" for p, end in sorted(pending.items())) + ")"
                )
            message = consumer.poll(min(0.2, max(0.01, deadline - time.monotonic())))
            near_end = message is None
            if message is not None:
                error = message.error()
                if error:
                    # Connection drops and leader moves are retried by
                    # librdkafka itself; the deadline bounds the wait.
                    if error.code() in (KafkaError._PARTITION_EOF, KafkaError._TRANSPORT) or (is_transient(error) and not error.fatal()):
                        continue
                    raise KafkaException(error)
                partition, offset = message.partition(), message.offset()
                if partition in pending and offset < pending[partition] and (only_key is None or message.key() == only_key):
                    records[partition].append(RawRecord(partition, offset, message.key(), message.value(), message.timestamp()[1]))
                polled += 1
                near_end = offset + 1 >= ends.get(partition, 0) or polled % 1024 == 0
            if near_end:
                for tp in consumer.position([TopicPartition(physical_topic, p) for p in pending]):
                    if tp.offset >= pending[tp.partition]:
                        del pending[tp.partition]
    finally:
        consumer.close()
    return [record for partition in sorted(records) for record in records[partition]]


def read_topic(
    bootstrap: str, logical_topic: str, *, topic_prefix: str = "", timeout: float = 30.0, codec: Codec = FIXED
) -> list[tuple[int, int, bytes | None, dict]]:
    """``(partition, offset, key, value)`` of every committed record of the
    catalogue topic ``logical_topic`` (physical name ``topic_prefix +
    logical_topic``), in :func:`read_raw` order, each value decoded with
    ``codec.decode_value`` (framed Avro of the topic's schema, or JSON).

    Raises KeyError for a topic outside the catalogue, UndecodableRecord (a
    ValueError) for a value that does not decode or a tombstone, and what
    :func:`read_raw` raises, RegistryError when a Schema Registry does not
    answer.
    """
    schema = BY_NAME[logical_topic].schema
    physical_topic = topic_prefix + logical_topic
    return [(record.partition, record.offset, record.key, _decoded(physical_topic, record, schema, codec))
            for record in read_raw(bootstrap, physical_topic, timeout)]


def _decoded(physical_topic: str, record: RawRecord, schema: str, codec: Codec) -> dict:
    """``record``'s value decoded with ``codec.decode_value`` as ``schema``.
    Raises UndecodableRecord for a tombstone or a value that does not decode."""
    if record.value is None:
        raise UndecodableRecord(physical_topic, record.partition, record.offset, "missing_field", "tombstone (null value)")
    try:
        return codec.decode_value(record.value, (schema,))
    except BadRecord as bad:
        raise UndecodableRecord(physical_topic, record.partition, record.offset, bad.reason, bad.message) from None


def read_candidate_sets(
    bootstrap: str, wanted: Iterable[tuple[str, str]] | None = None, *, topic_prefix: str = "", timeout: float = 30.0,
    codec: Codec = FIXED,
) -> list[dict]:
    """The committed CandidateSet records (contract §6) of ``candidate-sets``
    whose ``(scope_id, candidate_set_digest)`` is in ``wanted`` (every one
    when None). Records are picked by their key (``matching.candidate_set_key``)
    before their value — a whole scope_heads set — is decoded. Raises what
    :func:`read_topic` raises."""
    from recurrence_ledger.ledger.matching import candidate_set_key

    keys = None if wanted is None else {candidate_set_key(scope_id, digest).encode("utf-8") for scope_id, digest in wanted}
    physical_topic = topic_prefix + CANDIDATE_SETS
    return [_decoded(physical_topic, record, BY_NAME[CANDIDATE_SETS].schema, codec)
            for record in read_raw(bootstrap, physical_topic, timeout) if keys is None or record.key in keys]


def export_topic(
    bootstrap: str, logical_topic: str, out: Path, *, topic_prefix: str = "", timeout: float = 30.0, codec: Codec = FIXED
) -> int:
    """Write every committed record value of ``logical_topic`` to ``out`` in
    the embedded runner's format (contract §11): one
    ``canonical_json(value)`` line per record, partitions ascending, each in
    offset order (so for a one-partition topic, publication order). Creates
    ``out``'s directory if needed. Returns the number of records.

    Raises what :func:`read_topic` raises (nothing is written then), and
    OSError when ``out`` cannot be written.
    """
    records = read_topic(bootstrap, logical_topic, topic_prefix=topic_prefix, timeout=timeout, codec=codec)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as handle:
        for _, _, _, value in records:
            handle.write(canonical_json(value) + b"\n")
    return len(records)
