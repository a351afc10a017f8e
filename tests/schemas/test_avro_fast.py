"""The generated Avro writers and readers (``serde.avro_fast``) against
fastavro, byte for byte: every output record of the tests/cases journals
and of a small workload, every input record, and the bad-input corpus's
Avro frames (decoded to the same value, or refused by both)."""

from __future__ import annotations

import io
import json
import random

import fastavro
import orjson
import pytest

from recurrence_ledger import catalogue
from recurrence_ledger.ledger.intake import BadRecord, decode_journal_line, validate
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.serde import avro, avro_fast, codec
from recurrence_ledger.workload import Workload, generate_journal
from tests.badinput import corpus
from tests.conftest import CASES


def _fastavro_body(name: str, value: dict) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, avro.parsed_schema(name), avro.with_branches(name, value), strict=True)
    return buffer.getvalue()


def _fastavro_value(name: str, body: bytes) -> dict:
    stream = io.BytesIO(body)
    value = fastavro.schemaless_reader(stream, avro.parsed_schema(name))
    if stream.tell() != len(body):
        raise ValueError("trailing bytes")
    return value


def _journal_lines() -> list[bytes]:
    lines = [line for path in sorted(CASES.glob("*.jsonl")) for line in path.read_bytes().splitlines() if line.strip()]
    workload = Workload(scopes=3, outcomes_per_scope=150, heads_per_scope=6, handoffs=3)
    return lines + [orjson.dumps(record) for record in generate_journal(workload)]


def _events_and_outputs() -> tuple[list[tuple[str, dict]], list[tuple[str, dict]]]:
    processor = LedgerProcessor({})
    events, outputs = [], []
    for number, line in enumerate(_journal_lines()):
        try:
            kind, value = decode_journal_line(line)
            event = validate(kind, value)
        except BadRecord:
            continue
        events.append((kind, event))
        result = processor.apply(kind, event)
        outputs += [(catalogue.BY_NAME[emit.topic].schema, emit.value) for emit in result.emits]
        if number % 50 == 0:
            outputs += [(catalogue.BY_NAME[emit.topic].schema, emit.value) for emit in processor.end_batch()]
    outputs += [(catalogue.BY_NAME[emit.topic].schema, emit.value) for emit in processor.end_batch()]
    return events, outputs


EVENTS, OUTPUTS = _events_and_outputs()


def test_every_output_record_is_fastavros_bytes():
    names = set()
    for name, value in OUTPUTS:
        assert avro._fast_writer(name) is not None, name
        fast = avro._fast_writer(name)(value)
        assert fast == _fastavro_body(name, value), name
        assert avro._fast_reader(name)(fast) == _fastavro_value(name, fast)
        names.add(name)
    assert {"RecurrenceMatch", "RecurrenceObservation", "ScopeStatistics", "RevisionStatistics"} <= names


def test_every_input_record_reads_as_fastavro_reads_it():
    for kind, event in EVENTS:
        name = catalogue.BY_NAME[kind].schema
        body = _fastavro_body(name, event)
        assert avro._fast_writer(name)(event) == body
        assert avro._fast_reader(name)(body) == _fastavro_value(name, body) == event
        envelope = _fastavro_body("SourceEvent", {"topic": kind, "value": event})
        assert avro._fast_reader("SourceEvent")(envelope) == _fastavro_value("SourceEvent", envelope)


def test_corpus_frames_decode_as_with_fastavro_alone():
    """Hostile Avro frames: the same value, or both refuse the body."""
    checked = 0
    for entry in corpus.KAFKA_ENTRIES:
        raw = entry.value
        if not raw or raw[:1] != b"\x00" or len(raw) < 5:
            continue
        try:
            schema, writer, body = codec.unframe(raw)
        except BadRecord:
            continue
        if schema != writer:
            continue
        checked += 1
        try:
            expected = _fastavro_value(writer, body)
        except Exception:  # noqa: BLE001 - fastavro refuses: the generated reader must too
            with pytest.raises(Exception):  # noqa: B017
                avro._fast_reader(writer)(body)
            continue
        assert avro.decode(writer, body) == expected
    assert checked > 20


def test_mutated_bodies_never_read_differently():
    """Bit flips and truncations of valid bodies: whatever the generated
    reader returns, fastavro returns too (it may refuse more)."""
    generator = random.Random(23)
    bodies = [("SourceEvent", _fastavro_body("SourceEvent", {"topic": kind, "value": event})) for kind, event in EVENTS[:200]]
    bodies += [(name, _fastavro_body(name, value)) for name, value in OUTPUTS[:200]]
    for name, body in bodies:
        for _ in range(5):
            mutated = bytearray(body)
            if generator.random() < 0.3:
                mutated = mutated[:generator.randrange(len(mutated))]
            else:
                mutated[generator.randrange(len(mutated))] ^= 1 << generator.randrange(8)
            try:
                fast = avro._fast_reader(name)(bytes(mutated))
            except Exception:  # noqa: BLE001 - refused: fastavro decides in avro.decode
                continue
            assert fast == _fastavro_value(name, bytes(mutated))


@pytest.mark.parametrize("number", [0, 1, -1, 63, -64, 64, 4095, 4096, 2**31, -(2**31), 2**63 - 1, -(2**63)])
def test_longs(number):
    body = avro_fast.write_long(number)
    assert body == _fastavro_body_long(number)
    assert avro_fast.read_long(body, 0) == (number, len(body))


def _fastavro_body_long(number: int) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, "long", number)
    return buffer.getvalue()


def test_values_the_generated_writer_refuses_go_to_fastavro():
    """A bool for a long, an extra field, a value out of range: encode gives
    fastavro's result (its bytes, or its error)."""
    name, value = next((name, value) for name, value in OUTPUTS if name == "RecurrenceObservation")
    with pytest.raises(Exception):  # noqa: B017
        avro._fast_writer(name)({**value, "extra": 1})
    with pytest.raises(ValueError):
        avro.encode(name, {**value, "extra": 1})
    odd = {**value, "task_outcome_position": True}
    with pytest.raises(TypeError):
        avro._fast_writer(name)(odd)
    assert avro.encode(name, odd) == _fastavro_body(name, odd)
    with pytest.raises(Exception):  # noqa: B017
        avro.encode(name, {**value, "task_outcome_position": 2**63})
    assert json.loads(avro.schema_json(name))["name"].endswith(name)
