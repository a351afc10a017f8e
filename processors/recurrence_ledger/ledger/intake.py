"""contract §9: from a decoded record to the core, and bad input to dead-letter.

Shared by the embedded runner and the Kafka worker so that both reject the
same records with the same reason codes. Byte decoding of Avro lives in the
shell (``recurrence_ledger.serde.codec``); JSON text is decoded here because it is a pure
function of the bytes.

Reason codes (machine-readable, stable):

=====================  ==========================================================
reason                 meaning
=====================  ==========================================================
malformed_json         not UTF-8, not JSON, NaN/Infinity, too deeply nested, or
                       an object with a repeated key
invalid_envelope       a journal line or source-journal JSON value that is not
                       ``{"topic": str, "value": {…}}``
unknown_topic          the record names no input topic of contract §1
missing_field          a required field is absent
unexpected_field       a field the schema does not know
wrong_type             a field of the wrong JSON/Avro type; (Kafka) a per-kind
                       value that is JSON but not an object
too_long               a string or list over its bound (recurrence_ledger.ledger.models MAX_*)
invalid_value          a value outside its enum/range/pattern or a §3 field rule;
                       a JSON integer outside the signed 64-bit range
identity_conflict      same identity, different content (§3; first version stands)
position_conflict      journal position already used in the scope (§3)
too_many_pending       an admission candidate (or a review decision) that would
                       wait in a scope already holding ``max_pending_candidates``
                       waiting ones
already_decided        a review decision for a candidate that already has one
                       (§18; the first decision stands)
unknown_candidate      a review decision whose candidate was not published before
                       the provenance horizon, the end of a journal file, or its
                       own journal position (§18)
key_mismatch           Kafka key differs from the value's scope_id (§1)
bad_magic_byte         (Kafka) neither JSON nor a Confluent frame (magic byte 0,
                       then a 4-byte schema id): the message names the byte seen
unknown_schema_id      Avro frame names a schema id this deployment does not know
schema_mismatch        (Schema Registry) the frame's writer schema does not
                       resolve to the topic's schema (Avro schema resolution)
undecodable_avro       Avro body does not decode with the named schema
oversized_record       the raw record exceeds the accepted record size
internal_error         the core raised; the record is parked, the worker goes on
oversized_output       (worker) an output of the record would exceed the worker's
                       max_output_bytes; the record is parked, not applied
=====================  ==========================================================
"""

from __future__ import annotations

from recurrence_ledger.errors import RecurrenceLedgerError

import base64
import json
from typing import Any

from pydantic import ValidationError

from recurrence_ledger.ledger.deadletter import (  # noqa: F401 - the shell's names, defined with the record
    MAX_DEAD_LETTER_MESSAGE,
    MAX_DEAD_LETTER_RAW,
    Coordinates,
    dead_letter,
    record_size,
)
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger.results import Emit
from recurrence_ledger.catalogue import BY_NAME, REVIEW_DECISIONS, SOURCE_JOURNAL
from recurrence_ledger.ledger.models import SOURCE_KINDS, Value

#: Largest record accepted (bytes). Kafka's default message.max.bytes is ~1 MiB.
MAX_RECORD_BYTES = 1_048_576
#: The UTF-8 byte-order mark (U+FEFF), ignored at the start of a JSON record
#: value and of a journal file (contract §9 rev. 2).
BOM = b"\xef\xbb\xbf"
#: The signed 64-bit range (Avro long): a JSON integer outside it is
#: ``invalid_value`` (contract §19 rev. 3), decided without converting it.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: Digits of the longest integer in that range (2**63 has 19); CPython
#: converts at least 640 digits under any ``sys.set_int_max_str_digits``.
_INT64_DIGITS = 19
#: JSON's insignificant whitespace (RFC 8259 §2).
JSON_WHITESPACE = b" \t\n\r"
#: The bytes a JSON text can start with after its whitespace: an object,
#: an array, a string, a number, true, false or null (RFC 8259).
JSON_FIRST_BYTES = frozenset(b'{["-0123456789tfn')
#: A Confluent wire-format frame: magic byte 0, then a 4-byte schema id.
FRAME_MAGIC, FRAME_HEADER_BYTES = 0, 5
_FRAME_BYTE = bytes([FRAME_MAGIC])


class BadRecord(RecurrenceLedgerError):
    """A record that goes to dead-letter: ``reason`` is a code from the table
    in this module's docstring, ``message`` is for humans."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def _no_constants(name: str) -> Any:
    raise BadRecord("malformed_json", f"JSON constant {name} is not allowed")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        for name, _ in pairs:
            if name in seen:
                raise BadRecord("malformed_json", f"object repeats the key {name!r}")
            seen.add(name)
    return result


class _OutOfRange(Exception):
    """An integer literal outside the signed 64-bit range (decode_json)."""


def _int64(literal: str) -> int:
    if len(literal) - literal.startswith("-") <= _INT64_DIGITS:
        number = int(literal)
        if INT64_MIN <= number <= INT64_MAX:
            return number
    raise _OutOfRange(literal)


#: The strict decoder, built once (a ``json.loads`` with hooks builds one per call).
_STRICT = json.JSONDecoder(parse_constant=_no_constants, object_pairs_hook=_unique_keys, parse_int=_int64)


def check_size(raw: bytes) -> None:
    """Raises BadRecord(oversized_record) when the record ``raw`` was read
    from is over :data:`MAX_RECORD_BYTES` (its size named: a
    ``deadletter.CutRecord``'s whole size)."""
    if len(raw) > MAX_RECORD_BYTES:
        raise BadRecord("oversized_record", f"record is {record_size(raw)} bytes; the limit is {MAX_RECORD_BYTES}")


def decode_json(raw: bytes) -> Any:
    """Strict JSON decoding of one record's bytes. A UTF-8 byte-order mark
    at the start is ignored (contract §9); anywhere else it is text.

    An integer outside the signed 64-bit range is ``invalid_value`` however
    many digits it has (contract §19 rev. 3): integer literals are checked
    by their digits and never converted when longer than 19, so the reason
    does not depend on CPython's integer string conversion limit
    (``sys.set_int_max_str_digits``, ``PYTHONINTMAXSTRDIGITS``). A text that
    is not valid JSON is ``malformed_json`` even when it also holds such an
    integer.

    Raises BadRecord(malformed_json | oversized_record | invalid_value).
    """
    check_size(raw)
    if raw.startswith(BOM):
        raw = raw[len(BOM):]  # contract §9 (rev. 2): one leading byte-order mark is ignored (RFC 8259 allows it)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadRecord("malformed_json", f"not UTF-8: {error}") from None
    try:
        return _STRICT.decode(text)
    except json.JSONDecodeError as error:
        raise BadRecord("malformed_json", f"not JSON: {error}") from None
    except RecursionError:
        raise BadRecord("malformed_json", "JSON nested too deeply") from None
    except _OutOfRange:
        pass
    # An integer outside the range: the whole text decides between
    # malformed_json and invalid_value (rare, so decoded a second time).
    out_of_range: list[str] = []

    def note_int(literal: str) -> int:
        try:
            return _int64(literal)
        except _OutOfRange:
            out_of_range.append(literal)
            return 0  # never seen: the record is rejected below

    try:
        json.loads(text, parse_constant=_no_constants, object_pairs_hook=_unique_keys, parse_int=note_int)
    except json.JSONDecodeError as error:
        raise BadRecord("malformed_json", f"not JSON: {error}") from None
    except RecursionError:
        raise BadRecord("malformed_json", "JSON nested too deeply") from None
    literal = out_of_range[0]
    shown = literal if len(literal) <= 40 else f"of {len(literal) - literal.startswith('-')} digits"
    raise BadRecord("invalid_value", f"the integer {shown} is outside the signed 64-bit range")


def is_json_value(raw: bytes) -> bool:
    """How a Kafka record value is read (contract §9), from its first bytes:
    True when it is JSON text — it starts with a UTF-8 byte-order mark, or
    its first byte that is not JSON whitespace starts a JSON value (``{``,
    ``[``, ``"``, a digit, ``-``, ``t``, ``f``, ``n``), or it is JSON
    whitespace only — and False when it is a Confluent frame (byte 0 is the
    magic byte 0 and the 4-byte schema id follows). A pure function of the
    bytes.

    Raises BadRecord(bad_magic_byte) for anything else, naming the byte seen.
    """
    if raw.startswith(BOM):
        return True
    if raw[:1] == _FRAME_BYTE:
        if len(raw) < FRAME_HEADER_BYTES:
            raise BadRecord("bad_magic_byte", f"value of {len(raw)} bytes starts with the magic byte 0x00 but is shorter "
                                              f"than a Confluent frame header ({FRAME_HEADER_BYTES} bytes)")
        return False
    if not raw:
        raise BadRecord("bad_magic_byte", "value is empty: neither JSON nor a Confluent-framed Avro record")
    text = raw.lstrip(JSON_WHITESPACE)
    if not text or text[0] in JSON_FIRST_BYTES:
        return True
    where = "first byte" if len(text) == len(raw) else f"first byte after {len(raw) - len(text)} bytes of whitespace"
    raise BadRecord("bad_magic_byte", f"value is neither JSON nor a Confluent-framed Avro record ({where} 0x{text[0]:02x})")


#: JSON type names for messages.
_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "true or false", type(None): "null"}


def decode_json_value(raw: bytes, expected: tuple[str, ...]) -> dict:
    """The object of a JSON Kafka record value read as one of the schemas
    ``expected`` (:func:`decode_json`). A JSON value that is not an object is
    ``invalid_envelope`` on source-journal (``expected`` holds its
    SourceEvent schema; like a journal line) and ``wrong_type`` elsewhere:
    JSON, but not an event object.

    Raises BadRecord(malformed_json | oversized_record | invalid_value |
    invalid_envelope | wrong_type).
    """
    value = decode_json(raw)
    if isinstance(value, dict):
        return value
    kind = _JSON_TYPES[type(value)]
    if BY_NAME[SOURCE_JOURNAL].schema in expected:
        raise BadRecord("invalid_envelope", f'a source-journal value is {{"topic": "<input topic>", "value": {{...}}}}, not {kind}')
    raise BadRecord("wrong_type", f"the value is JSON but {kind}, not an event object")


def envelope_event(envelope: Any, what: str) -> tuple[str, dict]:
    """``(topic, value)`` of an event envelope ``{"topic": "<input topic>",
    "value": {...}}`` — a journal line's, or a ``source-journal`` record's —
    named ``what`` in the message ("a journal record"). The topic is not
    checked here.

    Raises BadRecord(invalid_envelope) for any other shape, a value that is
    not a JSON object included (contract §9).
    """
    shape = f'{what} is {{"topic": "<input topic>", "value": {{...}}}}'
    if not isinstance(envelope, dict) or set(envelope) != {"topic", "value"} or not isinstance(envelope["topic"], str):
        raise BadRecord("invalid_envelope", shape)
    if not isinstance(envelope["value"], dict):
        raise BadRecord("invalid_envelope", f"{shape}: its value is {_JSON_TYPES[type(envelope['value'])]}, not an event object")
    return envelope["topic"], envelope["value"]


def decode_journal_line(raw: bytes) -> tuple[str, Any]:
    """Split one journal line (``docs/journals.md`` format; also the JSON
    form of a ``source-journal`` record) into ``(topic, value)``.

    Raises BadRecord(malformed_json | invalid_envelope | unknown_topic);
    ``invalid_envelope`` too when the value is not a JSON object
    (:func:`envelope_event`).
    """
    topic, value = envelope_event(decode_json(raw), "a journal record")
    if topic not in SOURCE_KINDS:
        raise BadRecord("unknown_topic", f"unknown input topic {topic[:100]!r}")
    return topic, value


_TYPE_REASONS = {
    "missing": "missing_field",
    "extra_forbidden": "unexpected_field",
    "string_too_long": "too_long",
    "too_long": "too_long",
}


def _reason(error: dict) -> str:
    kind = error["type"]
    if kind in _TYPE_REASONS:
        return _TYPE_REASONS[kind]
    if kind == "literal_error" and not isinstance(error.get("input"), str):
        return "wrong_type"  # every enum of the contract is a string
    if kind.endswith("_type") or kind in ("is_instance_of", "int_from_float", "model_attributes_type", "union_tag_invalid"):
        return "wrong_type"
    return "invalid_value"


def parse(topic: str, value: Any) -> Value:
    """Validate a decoded value as the event kind of input ``topic`` and
    return the model instance (``recurrence_ledger.ledger.models``).

    The value is checked once, by its pydantic model (the one statement of
    the contract §3 rules), which also gives the dead-letter reason and
    message. The client library (``recurrence_ledger.client``) refuses an
    event with the same reason before it is sent.

    Raises BadRecord(unknown_topic | missing_field | unexpected_field |
    wrong_type | too_long | invalid_value) using the first pydantic error.
    """
    model = SOURCE_KINDS.get(topic)
    if model is None:
        raise BadRecord("unknown_topic", f"unknown input topic {topic[:100]!r}")
    try:
        return model.model_validate(value)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        location = ".".join(str(part) for part in first["loc"]) or "(record)"
        raise BadRecord(_reason(first), f"{model.__name__}.{location}: {first['msg']}") from None


def validate(topic: str, value: Any) -> dict:
    """The canonical form of a decoded value of input ``topic`` (the model's
    JSON dump of :func:`parse`, every field present) — what
    ``LedgerProcessor.apply`` takes. Raises BadRecord as :func:`parse`."""
    return parse(topic, value).model_dump(mode="json")


def origin(coordinates: Coordinates, raw: bytes) -> dict:
    """Where a record was read and its bytes (base64), as JSON: what the
    core keeps with a review decision that waits for its candidate, to
    dead-letter it later as ``unknown_candidate`` or ``already_decided``
    (contract §18) with its own coordinates."""
    return {**coordinates._asdict(), "raw": base64.b64encode(raw).decode("ascii")}


def ingest(processor: LedgerProcessor, topic: str, value: Any, raw: bytes, coordinates: Coordinates,
           key_error: str | None = None) -> list[Emit]:
    """Validate a decoded record, apply it, and turn every failure into one
    dead-letter emit. Never raises for bad input: the caller goes on with
    the next record (contract §9).

    ``coordinates.key``, when set (Kafka), must equal the value's scope_id so
    that one scope stays on one partition (contract §1). ``key_error``: the
    record's key cannot be a scope_id at all (Kafka: none, or not UTF-8),
    said in these words; it is ``key_mismatch`` once the value validates,
    so a bad value gets its own reason on every path.
    """
    try:
        event = validate(topic, value)
        if key_error is not None:
            raise BadRecord("key_mismatch", key_error)
        if coordinates.key is not None and coordinates.key != event["scope_id"]:
            raise BadRecord("key_mismatch", f"record key {coordinates.key[:100]!r} is not its scope_id {event['scope_id'][:100]!r}")
        result = processor.apply(topic, event, origin(coordinates, raw) if topic == REVIEW_DECISIONS else None)
    except BadRecord as bad:
        return [dead_letter(coordinates, raw, bad.reason, bad.message)]
    if result.rejection is not None:
        return [dead_letter(coordinates, raw, result.rejection.reason, result.rejection.message)]
    return result.emits


def ingest_journal_line(processor: LedgerProcessor, raw: bytes, coordinates: Coordinates) -> list[Emit]:
    """Decode one journal / source-journal JSON record and ``ingest`` it."""
    try:
        topic, value = decode_journal_line(raw)
    except BadRecord as bad:
        return [dead_letter(coordinates, raw, bad.reason, bad.message)]
    return ingest(processor, topic, value, raw, coordinates)
