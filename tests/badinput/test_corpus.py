"""contract §9 on the bad-input corpus, without a broker: every bad record,
set between the valid records of the minimum case, yields exactly one dead
letter with its specific reason code, and the valid records' outputs are
those of the valid records alone. Hostile records that are valid are not
dead-lettered and match as contract §4 says.

Journal entries go through the embedded path (``ingest_journal_line``, and
``run_journal`` on one file holding the whole corpus); Kafka entries and
journal lines read from ``source-journal`` go through the worker's decode
path (``recurrence_ledger.serde.codec.decode_source`` then ``intake.ingest``). Known defects
are ``xfail(strict=True)`` with the defect in the reason (see corpus.py).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
from recurrence_ledger.ledger.normalize import canonical_json, normalize
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.catalogue import LEDGER_TOPICS as FACT_TOPICS, OUTPUT_TOPICS, VIEW_TOPICS
from recurrence_ledger.ledger.records import DeadLetter
from tests.badinput import corpus
from tests.badinput.corpus import (
    CORPUS,
    HOSTILE_VALID_CUES,
    HOSTILE_VALID_REPLAYS,
    JOURNAL,
    JOURNAL_ENTRIES,
    KAFKA_ENTRIES,
    SOURCE_JOURNAL,
    Entry,
)
from tests.conftest import final_views
from tests.journal import Ledger, check, experience, outcome

VALID = corpus.valid_lines()


def params(entries: list[Entry], path: str) -> list:
    """pytest params, the known defects of ``path`` marked xfail(strict)."""
    return [
        pytest.param(entry, id=entry.id, marks=[pytest.mark.xfail(strict=True, reason=entry.defects[path])] if path in entry.defects else [])
        for entry in entries
    ]


GAPS = {entry.id: corpus.gap(entry, index) for entries in (JOURNAL_ENTRIES, KAFKA_ENTRIES) for index, entry in enumerate(entries)}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def ledger_outputs(out: dict[str, list[dict]]) -> dict[str, list[bytes] | dict[tuple, bytes]]:
    """Ledger facts as canonical JSON in publication order; views as their
    final value per key (contract §10: intermediate view records depend on
    batching)."""
    facts = {topic: [canonical_json(value) for value in out[topic]] for topic in FACT_TOPICS}
    views = {topic: {key: canonical_json(value) for key, value in final_views(topic, out[topic]).items()} for topic in VIEW_TOPICS}
    return {**facts, **views}


def embedded_run(lines: list[bytes]) -> dict[str, list[dict]]:
    """Journal lines through ingest_journal_line (offset = line index), then
    the end of the journal."""
    processor = LedgerProcessor(validate_outputs=True)
    out: dict[str, list[dict]] = defaultdict(list)
    for offset, line in enumerate(lines):
        for emit in ingest_journal_line(processor, line, Coordinates(SOURCE_JOURNAL, None, offset, None)):
            out[emit.topic].append(emit.value)
    for emit in [*processor.flush(), *processor.end_batch()]:
        out[emit.topic].append(emit.value)
    return out


def kafka_run(records: list[tuple[str, bytes | None, bytes | None]]) -> tuple[dict[str, list[dict]], list]:
    """``(topic, key, value)`` records through the worker's decode path, in
    order; source-journal records get consecutive offsets of partition 0,
    per-kind ones offset 0. Returns the values per output topic and the
    emits (to check they can be produced)."""
    processor = LedgerProcessor(validate_outputs=True)
    out: dict[str, list[dict]] = defaultdict(list)
    emits = []
    offsets: dict[str, int] = defaultdict(int)
    for topic, key, value in records:
        for emit in corpus.kafka_ingest(processor, topic, key, value, 0, offsets[topic]):
            out[emit.topic].append(emit.value)
            emits.append(emit)
        offsets[topic] += 1
    for emit in processor.end_batch():  # one transaction
        out[emit.topic].append(emit.value)
        emits.append(emit)
    return out, emits


def valid_kafka_records() -> list[tuple[str, bytes, bytes]]:
    return [(SOURCE_JOURNAL, *corpus.publish_form(line)) for line in VALID]


CLEAN_EMBEDDED = ledger_outputs(embedded_run(VALID))
CLEAN_KAFKA = ledger_outputs(kafka_run(valid_kafka_records())[0])


def assert_one_dead_letter(dead_letters: list[dict], *, topic: str, partition, offset: int, key, raw: bytes | None,
                           reason: str) -> None:
    assert [d["reason"] for d in dead_letters] == [reason], [d["message"] for d in dead_letters]
    [dead] = dead_letters
    assert (dead["topic"], dead["partition"], dead["offset"], dead["key"]) == (topic, partition, offset, key)
    assert corpus.raw_of(dead) == corpus.kept_raw(raw)
    assert dead["message"]
    if len(raw or b"") > len(corpus.kept_raw(raw)):
        assert "truncated" in dead["message"]
    DeadLetter.model_validate(dead)


# --------------------------------------------------------------------- the corpus itself


def test_corpus_has_40_distinct_records_and_every_input_reason_code():
    assert len(CORPUS) >= 40
    table = corpus.reason_codes_from_input()
    assert {entry.expected_reason for entry in CORPUS} <= table
    # Every code that input can cause is asserted by at least one entry that
    # passes on its own path (embedded for journal lines, decode for Kafka).
    passing = {entry.expected_reason for entry in CORPUS if ("embedded" if entry.target == JOURNAL else "decode") not in entry.defects}
    assert table <= passing
    assert {entry.target for entry in KAFKA_ENTRIES} >= {SOURCE_JOURNAL, "task-outcomes", "experience-revisions",
                                                          "handoff-revisions", "handoff-receipts"}
    assert all(entry.target == JOURNAL and entry.key is None for entry in JOURNAL_ENTRIES)


def test_the_clean_kafka_path_equals_the_embedded_runner():
    assert CLEAN_KAFKA == CLEAN_EMBEDDED
    assert CLEAN_EMBEDDED["recurrence-observations"]


# --------------------------------------------------------------------- journal entries, embedded path


@pytest.mark.parametrize("entry", params(JOURNAL_ENTRIES, "embedded"))
def test_journal_entry_between_valid_records(entry: Entry):
    at = GAPS[entry.id]
    out = embedded_run([*VALID[:at], entry.value, *VALID[at:]])
    assert_one_dead_letter(out["dead-letter"], topic=SOURCE_JOURNAL, partition=None, offset=at, key=None,
                           raw=entry.value, reason=entry.expected_reason)
    assert ledger_outputs(out) == CLEAN_EMBEDDED


def test_the_whole_journal_corpus_in_one_file(tmp_path: Path):
    """run_journal on the minimum case with every journal entry (but the
    known defects) between its lines: one dead letter per entry, at its line,
    and the same ledger files as the minimum case alone, byte for byte (the
    views: the same final value per key)."""
    entries = [entry for entry in JOURNAL_ENTRIES if "embedded" not in entry.defects]
    lines: list[bytes] = []
    expected: list[tuple[int, str, bytes]] = []
    for index in range(len(VALID) + 1):
        for entry in entries:
            if GAPS[entry.id] == index:
                assert b"\n" not in entry.value and entry.value.strip(), entry.id  # one line, not blank
                expected.append((len(lines), entry.expected_reason, corpus.kept_raw(entry.value)))
                lines.append(entry.value)
        if index < len(VALID):
            lines.append(VALID[index])
    journal = tmp_path / "corpus.jsonl"
    journal.write_bytes(b"\n".join(lines) + b"\n")
    summary = run_journal(journal, tmp_path / "out", show_progress=False, validate_outputs=True)
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(b"\n".join(VALID) + b"\n")
    run_journal(clean, tmp_path / "clean", show_progress=False, validate_outputs=True)

    dead = read_jsonl(tmp_path / "out" / "dead-letter.jsonl")
    assert [(d["offset"], d["reason"], corpus.raw_of(d)) for d in dead] == expected
    assert summary.dead_letters == len(entries)
    for topic in FACT_TOPICS:
        assert (tmp_path / "out" / f"{topic}.jsonl").read_bytes() == (tmp_path / "clean" / f"{topic}.jsonl").read_bytes(), topic
    for topic in VIEW_TOPICS:  # by final value per key: the bad lines move the batch boundaries
        assert final_views(topic, read_jsonl(tmp_path / "out" / f"{topic}.jsonl")) == final_views(topic, read_jsonl(tmp_path / "clean" / f"{topic}.jsonl"))


# --------------------------------------------------------------------- Kafka entries, the worker's decode path


@pytest.mark.parametrize("entry", params(KAFKA_ENTRIES, "decode"))
def test_kafka_entry_between_valid_records(entry: Entry):
    at = GAPS[entry.id]
    valid = valid_kafka_records()
    out, emits = kafka_run([*valid[:at], (entry.target, entry.key, entry.value), *valid[at:]])
    offset = at if entry.target == SOURCE_JOURNAL else 0
    key = entry.key.decode("utf-8", "replace") if entry.key is not None else None
    assert_one_dead_letter(out["dead-letter"], topic=entry.target, partition=0, offset=offset, key=key,
                           raw=entry.value, reason=entry.expected_reason)
    assert ledger_outputs(out) == CLEAN_KAFKA
    # The worker must be able to produce every record, the dead letter included.
    assert max(corpus.wire_size(emit) for emit in emits) <= corpus.MAX_PRODUCE_BYTES


@pytest.mark.parametrize("entry", params(JOURNAL_ENTRIES, "decode"))
def test_journal_line_published_raw_on_source_journal(entry: Entry):
    """A bad journal line published as is (publish_journal's raw path, with
    no key when it names no scope_id) gets the embedded runner's reason
    when it is JSON (contract §9, §10 parity)."""
    key, reason = corpus.as_source_journal(entry)
    at = GAPS[entry.id]
    valid = valid_kafka_records()
    out, emits = kafka_run([*valid[:at], (SOURCE_JOURNAL, key, entry.value), *valid[at:]])
    assert_one_dead_letter(out["dead-letter"], topic=SOURCE_JOURNAL, partition=0, offset=at,
                           key=None if key is None else key.decode("utf-8", "replace"), raw=entry.value, reason=reason)
    assert ledger_outputs(out) == CLEAN_KAFKA
    assert max(corpus.wire_size(emit) for emit in emits) <= corpus.MAX_PRODUCE_BYTES


# --------------------------------------------------------------------- hostile but valid


@pytest.mark.parametrize("case", HOSTILE_VALID_CUES, ids=[case.id for case in HOSTILE_VALID_CUES])
def test_hostile_valid_cue_is_accepted_and_matches_as_normalize_says(case: corpus.HostileCue):
    """Given an Experience revision with the hostile cue, when an unlinked
    outcome fails a verified check named ``check_name``, then nothing is
    dead-lettered and the RecurrenceMatch is matched exactly when contract
    §4 normalize makes cue and name equal — here as the case states."""
    assert (normalize(case.cue) == normalize(case.check_name)) == case.matches
    records = [experience("hostile", 1, "E1", cue=case.cue), outcome("hostile", 2, "O1", checks=[check(case.check_name)])]
    ledger = Ledger().feed(*records).flush()
    assert ledger.reasons() == []
    if case.matches:
        assert ledger.matches() == [("O1", "check", 0, "scope_heads", "matched", "E1r1")]
        assert ledger.observations() == ["recurred E1r1 O1"]
        [match] = ledger.out["recurrence-matches"]
        assert match["signature_key"] == normalize(case.cue)
    else:
        assert ledger.matches() == [("O1", "check", 0, "scope_heads", "unmatched", None)]
        assert ledger.observations() == []

    # The same records as Avro on source-journal give the same outputs.
    lines = [corpus.jline(record) for record in records]
    kafka, _ = kafka_run([(SOURCE_JOURNAL, *corpus.publish_form(line)) for line in lines])
    assert kafka["dead-letter"] == []
    assert ledger_outputs(kafka) == ledger_outputs(ledger.out)


@pytest.mark.parametrize("case", HOSTILE_VALID_REPLAYS, ids=[case.id for case in HOSTILE_VALID_REPLAYS])
def test_replay_identical_after_validation_is_a_duplicate(case: corpus.Replay):
    """contract §3: the same identity with identical content changes nothing
    — whatever its JSON spelling, omitted defaults or wire format."""
    if case.target == JOURNAL:
        processor = LedgerProcessor(validate_outputs=True)
        for offset, line in enumerate(VALID[: case.after]):
            ingest_journal_line(processor, line, Coordinates(SOURCE_JOURNAL, None, offset, None))
        assert ingest_journal_line(processor, case.value, Coordinates(SOURCE_JOURNAL, None, case.after, None)) == []
        out = embedded_run([*VALID[: case.after], case.value, *VALID[case.after:]])
        assert out["dead-letter"] == []
        assert ledger_outputs(out) == CLEAN_EMBEDDED
    else:
        valid = valid_kafka_records()
        out, _ = kafka_run([*valid[: case.after], (case.target, case.key, case.value), *valid[case.after:]])
        assert out["dead-letter"] == []
        assert ledger_outputs(out) == CLEAN_KAFKA


def test_every_output_topic_is_covered():
    assert set(FACT_TOPICS) | set(VIEW_TOPICS) | {"dead-letter"} == set(OUTPUT_TOPICS)
