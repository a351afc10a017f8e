"""contract §9 under fuzzing (hypothesis, bounded for CI: a few seconds).

Arbitrary bytes, byte-mutated valid records (bit flips, truncations,
insertions of hostile tokens, deletions, repeated slices) and structurally
mutated ones (a field replaced by a hostile value, removed or added, a list
repeated past its bound; then Avro when it still fits, else JSON) go into
the journal decoder and the worker's decoder for every input topic. The decoders raise nothing but
BadRecord; ingesting never raises and returns emits the worker can produce;
and a processor fed rejected fuzz before the valid records publishes exactly
what a clean processor publishes for them.
"""

from __future__ import annotations

import json
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recurrence_ledger.ledger.intake import BadRecord, Coordinates, decode_journal_line, ingest_journal_line
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.processor import Emit, LedgerProcessor
from recurrence_ledger.catalogue import DEAD_LETTER
from recurrence_ledger.ledger import models
from recurrence_ledger.ledger.records import DeadLetter
from recurrence_ledger.serde import codec
from tests.badinput import corpus
from tests.badinput.corpus import KEY, SOURCE_JOURNAL
from recurrence_ledger.catalogue import INPUT_TOPICS

VALID = corpus.valid_lines()
RECORDS = [json.loads(line) for line in VALID]

#: Valid seeds per input topic, as they travel on it: Avro frames and JSON.
FRAMES: dict[str, list[bytes]] = defaultdict(list)
for _line, _record in zip(VALID, RECORDS, strict=True):
    FRAMES[SOURCE_JOURNAL] += [corpus.publish_form(_line)[1], _line]
    _schema = models.SOURCE_KINDS[_record["topic"]].__name__  # the Avro record of the kind has the model's name
    FRAMES[_record["topic"]] += [codec.encode(_schema, _record["value"]), corpus.jline(_record["value"])]
assert set(FRAMES) == set(INPUT_TOPICS)

#: Byte strings that tend to matter to JSON and Avro decoders.
TOKENS = [b"\x00", b"\xff", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":",
          b"NaN", b"-Infinity", b"1e999", b"99999999999999999999", b"-1", b"null", b"true", b"\\ud800", b"\x01\x00\x00\x00",
          b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", "\u200b".encode(), b"9" * 5000]

FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutation_of(draw, seeds: list[bytes]) -> bytes:
    """A seed with 1–4 random mutations."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        operation = draw(st.sampled_from(["flip", "truncate", "insert", "token", "delete", "repeat", "set"]))
        if operation == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif operation == "truncate":
            del data[at:]
        elif operation == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif operation == "token":
            data[at:at] = draw(st.sampled_from(TOKENS))
        elif operation == "delete":
            del data[at:at + draw(st.integers(1, 16))]
        elif operation == "repeat":
            data[at:at] = data[at:at + draw(st.integers(1, 64))] * draw(st.integers(1, 3))
        elif operation == "set" and at < len(data):
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


#: Values that break a field: wrong types, out-of-range numbers (NaN and
#: infinities included), control, format, separator and surrogate characters.
HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.text(st.characters(categories=["Cc", "Cf", "Cs", "Zs", "Zl", "Zp", "Mn", "Po"]), max_size=8),
    st.sampled_from(["", "failed", "experience", "handoff", "task_outcome", "handoff_receipt", "exact", "verified"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=2),
)


def paths(value, prefix: tuple = ()) -> list[tuple]:
    """Every path to a node of a JSON value (the root is ``()``)."""
    found = [prefix]
    if isinstance(value, dict):
        for name, item in value.items():
            found += paths(item, (*prefix, name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


@st.composite
def structured_mutation_of(draw, records: list[dict]) -> dict:
    """A valid record (decoded) with 1–3 structural changes: a node replaced
    by a hostile value, a key deleted or added, a list repeated past its
    bound."""
    record = json.loads(json.dumps(draw(st.sampled_from(records))))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(record)))
        if not path:
            continue
        last, parent = path[-1], record
        for part in path[:-1]:
            parent = parent[part]
        operation = draw(st.sampled_from(["set", "set", "delete", "add", "repeat"]))
        if operation == "set":
            parent[last] = draw(HOSTILE_VALUES)
        elif operation == "delete" and isinstance(parent, dict):
            del parent[last]
        elif operation == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(HOSTILE_VALUES)
        elif operation == "repeat" and isinstance(parent[last], list) and parent[last]:
            parent[last] = parent[last] * draw(st.sampled_from([2, 65, 257, 1025]))
    return record


def journal_structured() -> st.SearchStrategy[bytes]:
    return structured_mutation_of(RECORDS).map(lambda record: json.dumps(record).encode())


def on_the_wire(topic: str, record: dict) -> bytes:
    """A structurally mutated journal record as it would travel on
    ``topic``: Avro when it still fits the schema, else JSON."""
    value = record if topic == SOURCE_JOURNAL else record.get("value")
    schema = models.SOURCE_KINDS[topic].__name__ if topic != SOURCE_JOURNAL else "SourceEvent"
    try:
        return codec.encode(schema, value)
    except Exception:  # noqa: BLE001 — fastavro raises many types; no longer fits Avro: a JSON producer sends it
        return json.dumps(value).encode()


def anything(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, a byte-mutated seed, or (for journal lines) a
    structurally mutated record."""
    strategies = [st.binary(max_size=256), mutation_of(seeds), mutation_of(seeds)]
    if seeds is VALID:
        strategies += [journal_structured(), journal_structured()]
    return st.one_of(strategies)


def kafka_record() -> st.SearchStrategy[tuple[str, bytes]]:
    def for_topic(topic: str) -> st.SearchStrategy[tuple[str, bytes]]:
        records = RECORDS if topic == SOURCE_JOURNAL else [r for r in RECORDS if r["topic"] == topic]
        structured = structured_mutation_of(records).map(lambda record: on_the_wire(topic, record))
        return st.tuples(st.just(topic), st.one_of(anything(FRAMES[topic]), structured, structured))

    return st.sampled_from(INPUT_TOPICS).flatmap(for_topic)


def check_emits(emits: list[Emit]) -> None:
    """Emits are Emit tuples the worker can produce: every value encodes
    (Avro, its topic's schema); a dead letter is a valid DeadLetter."""
    assert isinstance(emits, list)
    for emit in emits:
        assert isinstance(emit, Emit)
        corpus.wire_size(emit)
        if emit.topic == DEAD_LETTER:
            DeadLetter.model_validate(emit.value)


def rejected_alone(emits: list[Emit]) -> bool:
    return len(emits) == 1 and emits[0].topic == DEAD_LETTER


@FUZZ
@given(anything(VALID))
def test_journal_decoder_raises_only_bad_record_and_ingest_never_raises(raw: bytes):
    try:
        decode_journal_line(raw)
    except BadRecord as bad:
        assert bad.reason and bad.message
    processor = LedgerProcessor(validate_outputs=True)
    for offset, line in enumerate(VALID[:3]):
        ingest_journal_line(processor, line, Coordinates(SOURCE_JOURNAL, None, offset, None))
    check_emits(ingest_journal_line(processor, raw, Coordinates(SOURCE_JOURNAL, None, 3, None)))


@FUZZ
@given(kafka_record())
def test_worker_decoder_raises_only_bad_record_for_every_input_topic(record: tuple[str, bytes]):
    topic, raw = record
    try:
        codec.decode_source(topic, raw)
    except BadRecord as bad:
        assert bad.reason and bad.message
    processor = LedgerProcessor(validate_outputs=True)
    for offset, line in enumerate(VALID[:3]):
        corpus.kafka_ingest(processor, SOURCE_JOURNAL, *corpus.publish_form(line), 0, offset)
    check_emits(corpus.kafka_ingest(processor, topic, KEY, raw, 0, 3))


def run_valid(processor: LedgerProcessor, out: dict[str, list[bytes]]) -> None:
    for offset, line in enumerate(VALID):
        for emit in ingest_journal_line(processor, line, Coordinates(SOURCE_JOURNAL, None, 1000 + offset, None)):
            out[emit.topic].append(canonical_json(emit.value))
    for emit in processor.flush():
        out[emit.topic].append(canonical_json(emit.value))


CLEAN: dict[str, list[bytes]] = defaultdict(list)
run_valid(LedgerProcessor(), CLEAN)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(anything(VALID).map(lambda raw: (None, raw)), kafka_record()), min_size=1, max_size=12))
def test_rejected_fuzz_leaves_no_trace(fuzz: list[tuple[str | None, bytes]]):
    """Given a processor that rejected fuzzed records (journal lines, and
    records of every Kafka input topic), when the valid records follow, then
    it publishes exactly what a clean processor publishes for them. Fuzz
    that happens to be a valid event is left out: it would rightly change
    the outputs."""
    processor = LedgerProcessor(validate_outputs=True)
    for offset, (topic, raw) in enumerate(fuzz):
        if topic is None:
            alone = ingest_journal_line(LedgerProcessor(), raw, Coordinates(SOURCE_JOURNAL, None, 0, None))
            emits = ingest_journal_line(processor, raw, Coordinates(SOURCE_JOURNAL, None, offset, None)) if rejected_alone(alone) else None
        else:
            alone = corpus.kafka_ingest(LedgerProcessor(), topic, KEY, raw)
            emits = corpus.kafka_ingest(processor, topic, KEY, raw, 0, offset) if rejected_alone(alone) else None
        if emits is not None:
            assert rejected_alone(emits)
            assert emits[0].value["reason"] == alone[0].value["reason"]
    out: dict[str, list[bytes]] = defaultdict(list)
    run_valid(processor, out)
    assert out == CLEAN
