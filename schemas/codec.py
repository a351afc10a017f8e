"""Record values on the wire (contract §1, §9).

Avro values are framed in the Confluent Schema Registry wire format so that
standard consumers can read them: byte 0 is the magic byte 0, bytes 1–4 the
schema id (big-endian), then the schemaless Avro body. Schema ids are the
fixed table ``recurrence_ledger.topics.catalogue.SCHEMA_IDS``.

JSON is accepted on input as an option for simple producers: a value whose
first byte is ``{`` is JSON (the same shapes as the Avro records). Output
values are Avro by default, or canonical JSON when a deployment asks for it.
"""

from __future__ import annotations

import struct
from typing import Any

from recurrence_ledger.ledger.intake import MAX_RECORD_BYTES, BadRecord, decode_json
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.schemas import avro
from recurrence_ledger.topics.catalogue import BY_NAME, PREVIOUS_SCHEMA_IDS, SCHEMA_BY_ID, SCHEMA_IDS, SOURCE_JOURNAL

MAGIC = 0
_HEADER = struct.Struct(">bI")
AVRO, JSON = "avro", "json"


def frame(schema: str, body: bytes) -> bytes:
    """Confluent wire-format frame of an Avro ``body`` under ``schema``."""
    return _HEADER.pack(MAGIC, SCHEMA_IDS[schema]) + body


def encode(schema: str, value: dict, fmt: str = AVRO) -> bytes:
    """Encode ``value`` (a record dict) as a framed Avro value, or as
    canonical JSON when ``fmt`` is "json". Raises ValueError/TypeError when
    the value does not fit the schema."""
    if fmt == JSON:
        return canonical_json(value)
    return frame(schema, avro.encode(schema, value))


def unframe(raw: bytes) -> tuple[str, str, bytes]:
    """``(record name, writer schema, Avro body)`` of a framed value: the
    writer schema is the record's current schema, or for the id of an
    earlier form of it (``PREVIOUS_SCHEMA_IDS``) that form's schema file.

    Raises BadRecord(bad_magic_byte | unknown_schema_id).
    """
    if len(raw) < _HEADER.size or raw[0] != MAGIC:
        raise BadRecord("bad_magic_byte", "value is neither JSON nor a Confluent-framed Avro record (magic byte 0)")
    _, schema_id = _HEADER.unpack_from(raw)
    schema = SCHEMA_BY_ID.get(schema_id)
    writer = schema
    if schema is None and schema_id in PREVIOUS_SCHEMA_IDS:
        schema, writer = PREVIOUS_SCHEMA_IDS[schema_id]
    if schema is None:
        raise BadRecord("unknown_schema_id", f"schema id {schema_id} is not one this deployment knows")
    return schema, writer, raw[_HEADER.size:]


def decode_value(raw: bytes, expected: tuple[str, ...]) -> dict:
    """Decode a framed Avro or JSON value; for Avro the frame's schema must be
    one of ``expected``.

    Raises BadRecord(malformed_json | oversized_record | bad_magic_byte |
    unknown_schema_id | undecodable_avro | invalid_envelope).
    """
    if len(raw) > MAX_RECORD_BYTES:
        raise BadRecord("oversized_record", f"record is {len(raw)} bytes; the limit is {MAX_RECORD_BYTES}")
    if raw[:1] == b"{":
        value = decode_json(raw)
        if not isinstance(value, dict):
            raise BadRecord("invalid_envelope", "a JSON value must be an object")
        return value
    schema, writer, body = unframe(raw)
    if schema not in expected:
        raise BadRecord("unknown_schema_id", f"schema {schema} does not belong on this topic (expected {', '.join(expected)})")
    try:
        return avro.decode(writer, body)
    except Exception as error:  # fastavro raises many types on hostile bytes
        raise BadRecord("undecodable_avro", f"Avro body does not decode as {schema}: {type(error).__name__}: {error}"[:500]) from None


def decode_source(logical_topic: str, raw: bytes | None) -> tuple[str, Any]:
    """``(event kind topic, value)`` of one input record (contract §1).

    On ``source-journal`` the value is a SourceEvent envelope
    ``{"topic": kind, "value": event}`` (Avro or JSON); on a per-kind topic it
    is the event itself. Raises BadRecord as :func:`decode_value`, plus
    ``unknown_topic`` and ``missing_field`` (a null value: a tombstone is not
    an event).
    """
    if raw is None:
        raise BadRecord("missing_field", "record has no value (tombstone)")
    if logical_topic == SOURCE_JOURNAL:
        envelope = decode_value(raw, ("SourceEvent",))
        if set(envelope) != {"topic", "value"} or not isinstance(envelope.get("topic"), str):
            raise BadRecord("invalid_envelope", 'a source-journal value is {"topic": "<input topic>", "value": {...}}')
        kind = envelope["topic"]
        if kind == SOURCE_JOURNAL or kind not in BY_NAME or BY_NAME[kind].direction != "in":
            raise BadRecord("unknown_topic", f"unknown event kind {kind[:100]!r}")
        return kind, envelope["value"]
    return logical_topic, decode_value(raw, (BY_NAME[logical_topic].schema,))
