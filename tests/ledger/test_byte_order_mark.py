"""contract §9 (rev. 2): a UTF-8 byte-order mark at the start of a journal
file or of a JSON record value is ignored — in the embedded runner, in
``publish``'s reading of a journal file and on the worker's decode path."""

from __future__ import annotations

import json

import pytest

from recurrence_ledger.embedded import journal_lines, run_journal
from recurrence_ledger.ledger.intake import BOM, BadRecord, decode_json, decode_journal_line
from recurrence_ledger.kafka.kafka_io import prepare_line
from recurrence_ledger.serde import codec
from tests.conftest import read_outputs, case
from tests.journal import Ledger, check, experience, line, outcome

RECORD = outcome("s", 2, "O1", checks=[check("port already bound")])


def test_a_journal_file_starting_with_a_bom_gives_the_same_files(tmp_path):
    journal, _ = case("minimum_case")
    with_bom = tmp_path / "bom.jsonl"
    with_bom.write_bytes(BOM + journal.read_bytes())
    run_journal(journal, tmp_path / "plain", show_progress=False)
    summary = run_journal(with_bom, tmp_path / "bom", show_progress=False)
    assert summary.dead_letters == 0
    for topic, records in read_outputs(tmp_path / "plain").items():
        assert (tmp_path / "bom" / f"{topic}.jsonl").read_bytes() == (tmp_path / "plain" / f"{topic}.jsonl").read_bytes(), topic
        assert records == read_outputs(tmp_path / "bom")[topic]


def test_a_bom_alone_on_the_first_line_is_a_blank_line(tmp_path):
    journal = tmp_path / "j.jsonl"
    journal.write_bytes(BOM + b"\r\n" + line(RECORD) + b"\n")
    with open(journal, "rb") as handle:
        assert list(journal_lines(handle)) == [(1, line(RECORD))]


def test_only_json_white_space_makes_a_line_blank(tmp_path):
    """A line of spaces, tabs and CRs is blank (skipped); a form feed or a
    vertical tab is no JSON white space: such a line is a record, dead-lettered
    as malformed JSON, never dropped silently."""
    journal = tmp_path / "j.jsonl"
    journal.write_bytes(b" \t \r\n" + b"\x0c\n" + b" \x0b\x0b \n" + line(RECORD) + b"\n")
    with open(journal, "rb") as handle:
        assert list(journal_lines(handle)) == [(1, b"\x0c"), (2, b" \x0b\x0b "), (3, line(RECORD))]
    summary = run_journal(journal, tmp_path / "out", show_progress=False)
    letters = [json.loads(raw) for raw in (tmp_path / "out" / "dead-letter.jsonl").read_bytes().splitlines()]
    assert summary.dead_letters == 2 and [letter["reason"] for letter in letters] == ["malformed_json", "malformed_json"]


def test_a_bom_at_the_start_of_a_record_value_is_ignored():
    assert decode_json(BOM + line(RECORD)) == json.loads(line(RECORD))
    assert decode_journal_line(BOM + line(RECORD)) == ("task-outcomes", RECORD["value"])
    ledger = Ledger().feed(experience("s", 1, "E1"), BOM + line(RECORD))
    assert ledger.reasons() == []
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "matched", "E1r1")]


@pytest.mark.parametrize("raw", [BOM + BOM + line(RECORD), line(RECORD)[:1] + BOM + line(RECORD)[1:], BOM])
def test_only_one_leading_bom_is_ignored(raw):
    with pytest.raises(BadRecord) as error:
        decode_journal_line(raw)
    assert error.value.reason == "malformed_json"


def test_the_worker_reads_a_json_value_with_a_bom_on_every_input_topic():
    value = json.dumps(RECORD["value"]).encode()
    assert codec.decode_source("task-outcomes", BOM + value) == ("task-outcomes", RECORD["value"])
    assert codec.decode_source("source-journal", BOM + line(RECORD)) == ("task-outcomes", RECORD["value"])
    with pytest.raises(BadRecord) as error:
        codec.decode_source("task-outcomes", BOM + b"not json")
    assert error.value.reason == "malformed_json"  # JSON's reason, not bad_magic_byte


def test_publish_sends_a_bom_line_as_its_validated_event():
    prepared = prepare_line(BOM + line(RECORD), fmt=codec.JSON)
    assert not prepared.raw
    assert codec.decode_source("source-journal", prepared.value) == ("task-outcomes", RECORD["value"])
