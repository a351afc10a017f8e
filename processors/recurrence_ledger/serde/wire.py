"""Record values on the wire (contract §1, §9): the :class:`Codec` interface,
the Confluent frame and the fixed-id codec.

Avro values are framed in the Confluent Schema Registry wire format so that
standard consumers can read them: byte 0 is the magic byte 0, bytes 1–4 the
schema id (big-endian), then the schemaless Avro body. Where the schema id
comes from is the :class:`Codec`'s business:

- :class:`FixedIdCodec` (the default, :data:`FIXED`): the fixed table
  ``recurrence_ledger.catalogue.SCHEMA_IDS``, no registry — the
  embedded quick start and local runs;
- ``recurrence_ledger.serde.registry.RegistryCodec``: ids assigned by a
  Schema Registry (confluent-kafka's ``AvroSerializer`` /
  ``AvroDeserializer``), so that producers and consumers using the standard
  Confluent serializers interoperate (docs/kafka.md, "Schema Registry").

JSON is accepted on input as an option for simple producers: a value whose
first byte that is not JSON whitespace starts a JSON value, or that starts
with a UTF-8 byte-order mark, is JSON (the same shapes as the Avro records;
the BOM is ignored; ``intake.is_json_value``, contract §9). Output
values are Avro by default, or canonical JSON when a deployment asks for it.
Both codecs share these rules; they differ only in how an Avro value is
framed and read.

``recurrence_ledger.serde.codec`` is the seam the rest of the package
imports: these names, and the choice of a deployment's codec
(``make_codec``). This module imports nothing of the registry, so the
registry codec can build on it.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.ledger.intake import (
    FRAME_HEADER_BYTES, FRAME_MAGIC, BadRecord, check_size, decode_json_value, envelope_event, is_json_value,
)
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.serde import avro
from recurrence_ledger.catalogue import BY_NAME, PREVIOUS_SCHEMA_IDS, SCHEMA_BY_ID, SCHEMA_IDS, SOURCE_JOURNAL

#: The Confluent frame: magic byte, then the schema id (big-endian); the
#: intake classifies values by the same magic byte (``intake.FRAME_MAGIC``).
MAGIC = FRAME_MAGIC
_HEADER = struct.Struct(">bI")
assert _HEADER.size == FRAME_HEADER_BYTES
AVRO, JSON = "avro", "json"


class RegistryError(RecurrenceLedgerError, RuntimeError):
    """The Schema Registry did not answer, or refused a request (an output
    schema it will not register, or one that is not registered when
    auto-registration is off). Not a bad record: nothing is dead-lettered
    for it; the caller stops (a worker exits, to be restarted)."""


def frame(schema: str, body: bytes) -> bytes:
    """Confluent wire-format frame of an Avro ``body`` under ``schema``'s
    fixed id."""
    return frame_id(SCHEMA_IDS[schema], body)


def frame_id(schema_id: int, body: bytes) -> bytes:
    """Confluent wire-format frame of an Avro ``body`` under ``schema_id``."""
    return _HEADER.pack(MAGIC, schema_id) + body


def schema_id_of(raw: bytes) -> int:
    """The schema id of a Confluent-framed value.

    Raises BadRecord(bad_magic_byte) for anything else.
    """
    if len(raw) < _HEADER.size or raw[0] != MAGIC:
        raise BadRecord("bad_magic_byte", "value is neither JSON nor a Confluent-framed Avro record (magic byte 0)")
    return _HEADER.unpack_from(raw)[1]


def unframe(raw: bytes) -> tuple[str, str, bytes]:
    """``(record name, writer schema, Avro body)`` of a value framed with a
    fixed id: the writer schema is the record's current schema, or for the
    id of an earlier form of it (``PREVIOUS_SCHEMA_IDS``) that form's schema
    file (the body is then read with the current schema, as a Schema
    Registry reader resolves a writer's schema to its own).

    Raises BadRecord(bad_magic_byte | unknown_schema_id).
    """
    schema_id = schema_id_of(raw)
    schema = SCHEMA_BY_ID.get(schema_id)
    writer = schema
    if schema is None and schema_id in PREVIOUS_SCHEMA_IDS:
        schema, writer = PREVIOUS_SCHEMA_IDS[schema_id]
    if schema is None:
        raise BadRecord("unknown_schema_id", f"schema id {schema_id} is not one this deployment knows "
                                             "(values framed with a Schema Registry's ids are read with --schema-registry-url)")
    return schema, writer, raw[_HEADER.size:]


class Codec(ABC):
    """How record values are encoded and decoded: JSON, the size limit and
    the ``source-journal`` envelope here; the Avro framing in subclasses."""

    def encode(self, schema: str, value: dict, fmt: str = AVRO, *, topic: str | None = None) -> bytes:
        """Encode ``value`` (a record dict) as a framed Avro value of
        ``schema`` for the physical ``topic``, or as canonical JSON when
        ``fmt`` is "json". Raises ValueError/TypeError when the value does
        not fit the schema, RegistryError (registry codec) when the schema
        cannot be registered or looked up."""
        if fmt == JSON:
            return canonical_json(value)
        return self._encode_avro(schema, value, topic)

    def encoder(self, schema: str, fmt: str = AVRO, *, topic: str | None = None) -> Callable[[dict], bytes]:
        """:meth:`encode` of ``schema`` for ``topic`` in ``fmt`` as one
        function of the value, with what can be looked up once looked up
        (the fixed-id codec's frame header): what a worker uses for every
        output record of a topic. Raises what :meth:`encode` raises."""
        if fmt == JSON:
            return canonical_json
        return lambda value: self._encode_avro(schema, value, topic)

    def decode_value(self, raw: bytes, expected: tuple[str, ...]) -> dict:
        """Decode a framed Avro or JSON value; Avro must be readable as one
        of the schemas ``expected``.

        Raises BadRecord(malformed_json | oversized_record | bad_magic_byte |
        unknown_schema_id | schema_mismatch | undecodable_avro |
        invalid_envelope | wrong_type | invalid_value), RegistryError
        (registry codec) when the registry
        does not answer.
        """
        check_size(raw)
        if is_json_value(raw):  # by its first bytes (contract §9)
            return decode_json_value(raw, expected)
        return self._decode_avro(raw, expected)

    def decode_source(self, logical_topic: str, raw: bytes | None) -> tuple[str, Any]:
        """``(event kind topic, value)`` of one input record (contract §1).

        On ``source-journal`` the value is a SourceEvent envelope
        ``{"topic": kind, "value": event}`` (Avro or JSON); on a per-kind topic it
        is the event itself. Raises BadRecord as :meth:`decode_value`, plus
        ``unknown_topic`` and ``missing_field`` (a null value: a tombstone is not
        an event).
        """
        if raw is None:
            raise BadRecord("missing_field", "record has no value (tombstone)")
        if logical_topic == SOURCE_JOURNAL:
            kind, value = envelope_event(self.decode_value(raw, ("SourceEvent",)), "a source-journal value")
            if kind == SOURCE_JOURNAL or kind not in BY_NAME or BY_NAME[kind].direction != "in":
                raise BadRecord("unknown_topic", f"unknown event kind {kind[:100]!r}")
            return kind, value
        return logical_topic, self.decode_value(raw, (BY_NAME[logical_topic].schema,))

    def prepare(self, schemas_by_topic: dict[str, str]) -> dict[str, int]:
        """Make sure every ``physical topic -> schema`` pair can be encoded
        before any record is (a worker checks its outputs at start). Returns
        the schema id each topic's values will carry."""
        return {topic: SCHEMA_IDS[schema] for topic, schema in schemas_by_topic.items()}

    @abstractmethod
    def _encode_avro(self, schema: str, value: dict, topic: str | None) -> bytes:
        """The framed Avro value."""

    @abstractmethod
    def _decode_avro(self, raw: bytes, expected: tuple[str, ...]) -> dict:
        """The value of a framed Avro record (not JSON, size checked)."""


class FixedIdCodec(Codec):
    """Schema ids from the fixed table ``catalogue.SCHEMA_IDS``, no registry:
    a frame's id names the schema its body was written with, which must be
    one of the expected ones (byte-for-byte our ``.avsc``)."""

    def _encode_avro(self, schema: str, value: dict, topic: str | None) -> bytes:
        return frame(schema, avro.encode(schema, value))

    def encoder(self, schema: str, fmt: str = AVRO, *, topic: str | None = None) -> Callable[[dict], bytes]:
        """:meth:`Codec.encoder`, the frame header of ``schema``'s fixed id made once."""
        if fmt == JSON:
            return canonical_json
        header = _HEADER.pack(MAGIC, SCHEMA_IDS[schema])
        return lambda value: header + avro.encode(schema, value)

    def _decode_avro(self, raw: bytes, expected: tuple[str, ...]) -> dict:
        schema, writer, body = unframe(raw)
        if schema not in expected:
            raise BadRecord("unknown_schema_id", f"schema {schema} (fixed id {schema_id_of(raw)}) does not belong on this topic (expected "
                                                 f"{', '.join(expected)}; values framed with a Schema Registry's ids are read with --schema-registry-url)")
        try:
            return avro.decode(writer, body, reader=schema)
        except Exception as error:  # fastavro raises many types on hostile bytes
            raise BadRecord("undecodable_avro", f"Avro body does not decode as {schema}: {type(error).__name__}: {error}"[:500]) from None


#: The fixed-id codec (stateless; shared).
FIXED = FixedIdCodec()
