"""Kafka records in and out of the core: the shell of contract §9 around
``LedgerProcessor``, shared by the worker and replay.

- in: :func:`process_message` decodes one consumed record (key, value
  through the deployment's codec) and applies it, turning a bad record into
  its dead-letter emit and a failure of the core into :class:`CoreFailure`;
  :func:`process_contribution` does the same for a record of the pattern
  stage's repartition topic (contract §23.5);
- out: :class:`Outputs` turns the core's emits into the records a producer
  sends — physical topic (the deployment's prefix), key (:func:`emit_key`:
  the emit's scope key, or the input's own key for a dead letter), value
  (:func:`encode_emit`: Avro framed by the codec, or canonical JSON) — and
  holds them to the worker's size limit; :meth:`Outputs.rolled_back` is the
  dead-letter record of an input record the worker rolled back.

No header is written: the record key and value carry everything (contract §1).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import NamedTuple

from confluent_kafka import Message
from pydantic import ValidationError

from recurrence_ledger import catalogue
from recurrence_ledger.catalogue import DEAD_LETTER
from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.ledger.intake import BadRecord, Coordinates, dead_letter, ingest
from recurrence_ledger.ledger.patterns import PatternStage
from recurrence_ledger.ledger.processor import Emit, LedgerProcessor
from recurrence_ledger.ledger.records import PatternContribution
from recurrence_ledger.store.base import StoreError
from recurrence_ledger.serde import codec

log = logging.getLogger("recurrence_ledger.worker")

#: Dead-letter reasons of input records the worker rolled back and parked:
#: their state changes were undone, so nothing (replay included) applies them.
ROLLED_BACK_REASONS = ("internal_error", "oversized_output")


class CoreFailure(RecurrenceLedgerError):
    """The core raised on a record: its state may be half-applied, so the
    caller must not commit it (the worker rewinds and parks the record)."""

    def __init__(self, coordinates: Coordinates, raw: bytes, error: Exception):
        super().__init__(f"{type(error).__name__}: {error}")
        self.coordinates = coordinates
        self.raw = raw


def process_message(processor: LedgerProcessor, message: Message, topic_prefix: str, wire: codec.Codec = codec.FIXED) -> list[Emit]:
    """Decode one input record and apply it: the whole shell of contract §9
    (:func:`ingest_record` on the message's topic, key and value).

    Returns the emits, or one dead-letter emit for a bad record. Raises
    CoreFailure when the core itself raised — a bug, after which the
    processor's state cannot be trusted — and RegistryError when a Schema
    Registry does not answer.
    """
    physical_topic = message.topic()
    raw = message.value()
    raw_key = message.key()
    key = raw_key.decode("utf-8", "replace") if raw_key is not None else None
    coordinates = Coordinates(physical_topic, message.partition(), message.offset(), key)
    try:
        return ingest_record(processor, catalogue.logical(physical_topic, topic_prefix), raw_key, raw, coordinates, wire)
    except (codec.RegistryError, StoreError):
        raise  # the Schema Registry is unreachable, the local store failed: not the record's fault, never dead-letter it
    except Exception as error:
        log.exception("internal error on %s[%d]@%d", physical_topic, message.partition(), message.offset())
        raise CoreFailure(coordinates, raw or b"", error) from error


def ingest_record(processor: LedgerProcessor, logical_topic: str, raw_key: bytes | None, raw: bytes | None,
                  coordinates: Coordinates, wire: codec.Codec = codec.FIXED) -> list[Emit]:
    """How the worker reads one input record (contract §1, §9): the value
    first — decoded with ``wire`` and validated, so a bad value gets the
    reason the embedded runner gives the same bytes as a journal line,
    whatever its key (``publish`` sends a line it cannot read without a
    key) — then the key: none, not UTF-8, or not the value's scope_id is
    ``key_mismatch``. Returns the emits of ``processor``, or one dead-letter
    emit at ``coordinates`` (whose key is the key as text). Raises what the
    codec raises for a Schema Registry that does not answer, and whatever
    the core raises (a bug)."""
    try:
        kind, value = wire.decode_source(logical_topic, raw)
    except BadRecord as bad:
        return [dead_letter(coordinates, raw or b"", bad.reason, bad.message)]
    key_error = None
    if raw_key is None:
        key_error = "record has no key; the key must be its scope_id (contract §1)"
    else:
        try:
            raw_key.decode("utf-8")
        except UnicodeDecodeError:
            key_error = "record key is not UTF-8, so it cannot be a scope_id (contract §1)"
    return ingest(processor, kind, value, raw or b"", coordinates, key_error=key_error)


def process_contribution(stage: PatternStage, message: Message, wire: codec.Codec = codec.FIXED) -> list[Emit]:
    """Decode one record of the repartition topic (a PatternContribution,
    contract §23.5) and apply it to the pattern ``stage``. Returns the
    emits (a PatternCandidate when the threshold is reached), or one
    dead-letter emit for a record that does not decode or validate (the
    worker writes this topic itself, so that is a bug or a foreign writer).
    Raises CoreFailure when the stage raised, RegistryError and StoreError
    like :func:`process_message`."""
    raw = message.value()
    key = (message.key() or b"").decode("utf-8", "replace")
    coordinates = Coordinates(message.topic(), message.partition(), message.offset(), key)
    try:
        value = PatternContribution.model_validate(wire.decode_value(raw or b"", ("PatternContribution",))).model_dump(mode="json")
    except BadRecord as bad:
        return [dead_letter(coordinates, raw or b"", bad.reason, bad.message)]
    except ValidationError as error:
        return [dead_letter(coordinates, raw or b"", "invalid_value", f"not a PatternContribution: {error}"[:1000])]
    try:
        return stage.apply(value)
    except StoreError:
        raise
    except Exception as error:
        log.exception("internal error on %s[%d]@%d", message.topic(), message.partition(), message.offset())
        raise CoreFailure(coordinates, raw or b"", error) from error


def emit_key(emit: Emit, raw_key: bytes | None) -> bytes | None:
    """Record key of an output: the emit's key (UTF-8), or the input's key
    for a dead letter or an emit without one."""
    return raw_key if emit.topic == DEAD_LETTER or emit.key is None else emit.key.encode("utf-8")


def encode_emit(emit: Emit, output_format: str, wire: codec.Codec = codec.FIXED, topic_prefix: str = "") -> bytes:
    """The wire value of an output record (Avro framed by ``wire``, or JSON)."""
    return wire.encode(catalogue.BY_NAME[emit.topic].schema, emit.value, output_format, topic=catalogue.physical(emit.topic, topic_prefix))


class OutputRecord(NamedTuple):
    """One record to produce: the ``emit`` it encodes, its physical
    ``topic``, ``key`` and ``value`` bytes."""

    emit: Emit
    topic: str
    key: bytes | None
    value: bytes


class Outputs:
    """How a deployment's emits become records: ``output_format`` ("avro"
    or "json") with ``wire`` (the deployment's codec), topics under
    ``topic_prefix``, values held to ``max_output_bytes`` (bytes, as
    encoded) by :meth:`oversized`."""

    def __init__(self, output_format: str, wire: codec.Codec, topic_prefix: str, max_output_bytes: int):
        self.output_format = output_format
        self.wire = wire
        self.topic_prefix = topic_prefix
        self.max_output_bytes = max_output_bytes
        #: logical output topic → (physical topic, its encoder): looked up once per topic
        self._topics: dict[str, tuple[str, Callable[[dict], bytes]]] = {}

    def _topic(self, topic: str) -> tuple[str, Callable[[dict], bytes]]:
        found = self._topics.get(topic)
        if found is None:
            physical = catalogue.physical(topic, self.topic_prefix)
            found = self._topics[topic] = (physical, self.wire.encoder(catalogue.BY_NAME[topic].schema, self.output_format, topic=physical))
        return found

    def record(self, emit: Emit, raw_key: bytes | None) -> OutputRecord:
        """The record of ``emit`` caused by an input record keyed ``raw_key``
        (None for a view record, which is keyed by its emit): the bytes
        :func:`encode_emit` gives. Raises what ``Codec.encode`` raises."""
        physical, encoder = self._topic(emit.topic)
        return OutputRecord(emit, physical, emit_key(emit, raw_key), encoder(emit.value))

    def records(self, emits: Iterable[Emit], raw_key: bytes | None) -> list[OutputRecord]:
        """:meth:`record` of each emit, in order."""
        return [self.record(emit, raw_key) for emit in emits]

    def oversized(self, records: Iterable[OutputRecord]) -> str | None:
        """Why ``records`` cannot be produced — the first value over
        ``max_output_bytes`` (Kafka would refuse it, and every restart would
        fail on it again) — or None when they all fit."""
        for record in records:
            if len(record.value) > self.max_output_bytes:
                return (f"its {record.emit.topic} output is {len(record.value)} bytes; the worker's limit is "
                        f"{self.max_output_bytes} (max_output_bytes)")
        return None

    def rolled_back(self, message: Message, reason: str, text: str) -> OutputRecord:
        """The dead-letter record of ``message``, rolled back for ``reason``
        (one of :data:`ROLLED_BACK_REASONS`, explained by ``text``): its
        coordinates, key (as text, undecodable bytes replaced) and raw value.
        Dead letters are not held to the size limit (their raw value is
        truncated by ``intake.dead_letter``)."""
        key = (message.key() or b"").decode("utf-8", "replace")
        emit = dead_letter(Coordinates(message.topic(), message.partition(), message.offset(), key), message.value() or b"", reason, text)
        return self.record(emit, message.key())
