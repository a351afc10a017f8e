"""contract §9 (rev. 3): how the worker reads a Kafka record value, by its
first bytes — JSON, a Confluent frame, or neither (``bad_magic_byte``,
naming the byte seen) — and what JSON that is not an object is
(``wrong_type`` on a per-kind topic, ``invalid_envelope`` on
source-journal, like a journal line), on the golden vectors of
tests/ledger/golden_vectors.json, through the worker's decode path
without a broker. tests/e2e/test_value_classes.py publishes the issue's
two values on a real broker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recurrence_ledger.ledger.intake import BadRecord, is_json_value
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.serde import codec
from tests.badinput import corpus

VECTORS = json.loads((Path(__file__).parents[1] / "ledger" / "golden_vectors.json").read_text(encoding="utf-8"))["kafka_values"]["vectors"]


def value_of(vector: dict) -> bytes:
    """The record value bytes of a kafka_values vector."""
    if "value_hex" in vector:
        return bytes.fromhex(vector["value_hex"])
    if "value_repeat" in vector:
        text, count = vector["value_repeat"]
        return (text * count).encode()
    return vector["value"].encode()


def name(vector: dict) -> str:
    return f"{vector['topic']}:{value_of(vector)[:12]!r}"


@pytest.mark.parametrize("vector", VECTORS, ids=name)
def test_a_value_is_classified_by_its_first_bytes(vector):
    with pytest.raises(BadRecord) as bad:
        codec.decode_source(vector["topic"], value_of(vector))
    assert bad.value.reason == vector["reason"]
    if vector["message"] is not None:
        assert bad.value.message == vector["message"]


@pytest.mark.parametrize("vector", VECTORS, ids=name)
def test_each_value_is_one_dead_letter_with_its_reason(vector):
    raw = value_of(vector)
    [letter] = corpus.kafka_ingest(LedgerProcessor(), vector["topic"], corpus.KEY, raw)
    assert letter.value["reason"] == vector["reason"]
    assert corpus.raw_of(letter.value) == raw


@pytest.mark.parametrize("first", [bytes([byte]) for byte in range(256)], ids=lambda b: f"0x{b[0]:02x}")
def test_every_first_byte_has_one_class(first):
    """JSON for the bytes a JSON value starts with (after JSON whitespace),
    a frame for 0x00, bad_magic_byte naming the byte for the rest."""
    raw = first + b"\x00\x00\x00\x01 rest"
    if first in (b" ", b"\t", b"\n", b"\r"):
        assert is_json_value(first + b"[]") is True
        assert is_json_value(first * 3) is True  # JSON whitespace only: malformed_json when decoded
    elif first == b"\x00":
        assert is_json_value(raw) is False
    elif first in b'{["-0123456789tfn':
        assert is_json_value(raw) is True
    else:
        with pytest.raises(BadRecord) as bad:
            is_json_value(raw)
        assert (bad.value.reason, bad.value.message) == (
            "bad_magic_byte", f"value is neither JSON nor a Confluent-framed Avro record (first byte 0x{first[0]:02x})")


def test_a_utf8_bom_makes_any_value_json():
    assert is_json_value(b"\xef\xbb\xbf\x07") is True
    with pytest.raises(BadRecord) as bad:
        codec.decode_source("task-outcomes", b"\xef\xbb\xbf\x07")
    assert bad.value.reason == "malformed_json"
