"""A journal line over the record limit (contract §9 ``oversized_record``) is
never held whole: ``journal_lines`` reads it in pieces and yields a
``deadletter.CutRecord`` of its first bytes and its true size, so a file
without line ends — a compressed or binary file given as a journal — is
dead-lettered in a few MiB of memory, with the size it had, and the lines
around it are applied as if it were not there."""

from __future__ import annotations

import base64
import io
import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recurrence_ledger.catalogue import OUTPUT_TOPICS
from recurrence_ledger.embedded import journal
from recurrence_ledger.embedded.journal import journal_lines
from recurrence_ledger.embedded.parallel import run_journal_jobs
from recurrence_ledger.embedded.runner import run_journal
from recurrence_ledger.ledger.deadletter import MAX_DEAD_LETTER_RAW, CutRecord
from recurrence_ledger.ledger.intake import BOM, MAX_RECORD_BYTES
from tests.conftest import case

JSON_WHITE_SPACE = b" \t\r\n"


def whole_lines(data: bytes) -> list[tuple[int, bytes]]:
    """What journal_lines gives when every line is held whole: the oracle."""
    lines = []
    for number, line in enumerate(io.BytesIO(data)):
        if number == 0 and line.startswith(BOM):
            line = line[len(BOM):]
        stripped = line.rstrip(b"\r\n")
        if stripped.strip(JSON_WHITE_SPACE):
            lines.append((number, stripped))
    return lines


@settings(max_examples=300, deadline=None)
@given(
    bom=st.booleans(),
    lines=st.lists(st.lists(st.sampled_from([b"a", b"{", b" ", b"\t", b"\r", b"\x0c", b"\xff"]), max_size=40).map(b"".join), max_size=6),
    last_end=st.sampled_from([b"", b"\n", b"\r\n", b"\r"]),
)
def test_lines_over_a_piece_come_cut_with_their_size_and_the_others_whole(bom, lines, last_end):
    """With pieces of 8 bytes: a line whose text fits in its first piece
    comes whole (also when a run of CR before its LF does not), a blank one
    not at all, a longer one as a CutRecord of its first piece (the BOM
    dropped) whose size is the line's — and the line numbers are those of
    the whole-line reader."""
    data = (BOM if bom else b"") + b"\n".join(lines) + last_end
    expected = whole_lines(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(journal, "_LINE_PIECE", 8)
        got = list(journal_lines(io.BytesIO(data)))
    assert [number for number, _ in got] == [number for number, _ in expected]
    for (number, line), (_, text) in zip(got, expected):
        head = 8 - (len(BOM) if number == 0 and bom else 0)
        if len(text) <= head:
            assert type(line) is bytes and line == text
        else:
            assert isinstance(line, CutRecord) and line.size == len(text) and bytes(line) == text[:head]


def test_a_line_of_64_mib_is_read_in_a_few_mib(tmp_path):
    """Reading a file that is one 64 MiB line allocates a few pieces of the
    record limit (about 4 MiB), not the line (the old reader held 64 MiB and
    more)."""
    path = tmp_path / "blob.jsonl"
    with open(path, "wb") as handle:
        for _ in range(64):
            handle.write(b"\x1f\x8b" * (1 << 19))
    tracemalloc.start()
    try:
        with open(path, "rb") as handle:
            lines = list(journal_lines(handle))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(number, type(line), line.size) for number, line in lines] == [(0, CutRecord, 64 << 20)]
    assert peak < 8 * MAX_RECORD_BYTES, peak


def test_a_binary_file_between_journal_lines_is_one_dead_letter_with_its_size(tmp_path):
    """run-journal and run-journal --jobs 2 on a case journal with 3 MiB of
    bytes without a line end spliced in: the same files byte for byte, equal
    to the plain journal's but for one oversized_record dead letter naming
    the true size, its raw cut to the dead letter's limit."""
    plain, _ = case("minimum_case")
    text = plain.read_bytes()
    blob = b"\x1f\x8b\x08\x00" + bytes(byte for byte in range(256) if byte != ord("\n")) * (3 * (1 << 12))
    spliced = tmp_path / "spliced.jsonl"
    first_line_end = text.index(b"\n") + 1
    spliced.write_bytes(text[:first_line_end] + blob + b"\n" + text[first_line_end:])
    outputs = {}
    for name, journal_file, jobs in (("plain", plain, 1), ("one", spliced, 1), ("two", spliced, 2)):
        out = tmp_path / name
        if jobs == 1:
            run_journal(journal_file, out, show_progress=False)
        else:
            run_journal_jobs(journal_file, out, None, jobs, show_progress=False)
        outputs[name] = {topic: (out / f"{topic}.jsonl").read_bytes() for topic in OUTPUT_TOPICS}
    assert outputs["two"] == outputs["one"]
    letters = [json.loads(raw) for raw in outputs["one"]["dead-letter"].splitlines()]
    assert [(letter["offset"], letter["reason"]) for letter in letters] == [(1, "oversized_record")]
    assert letters[0]["message"] == (
        f"record is {len(blob)} bytes; the limit is {MAX_RECORD_BYTES} "
        f"[raw truncated to the first {MAX_DEAD_LETTER_RAW} of {len(blob)} bytes]"
    )
    assert base64.b64decode(letters[0]["raw"]) == blob[:MAX_DEAD_LETTER_RAW]
    assert {topic: data for topic, data in outputs["one"].items() if topic != "dead-letter"} == {
        topic: data for topic, data in outputs["plain"].items() if topic != "dead-letter"
    }


def test_a_line_at_the_limit_with_a_bom_and_cr_lf_is_read_whole(tmp_path):
    """The longest line the limit admits — MAX_RECORD_BYTES of text after a
    BOM, ending in CR LF — comes whole as plain bytes, and so does one byte
    more (it fits the first piece, the intake judges it); three more are cut."""
    for extra, kind in ((0, bytes), (1, bytes), (3, CutRecord)):
        path = tmp_path / f"limit{extra}.jsonl"
        path.write_bytes(BOM + b"x" * (MAX_RECORD_BYTES + extra) + b"\r\n" + b"next\n")
        with open(path, "rb") as handle:
            lines = list(journal_lines(handle))
        (number, first), rest = lines[0], lines[1:]
        assert (number, type(first), len(first) if kind is bytes else first.size) == (0, kind, MAX_RECORD_BYTES + extra)
        assert rest == [(1, b"next")]


def test_dead_letter_offsets_are_line_numbers_after_a_cut_line(tmp_path: Path):
    """A malformed line after a cut one is dead-lettered at its own line number."""
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"y" * (2 * MAX_RECORD_BYTES) + b"\n\nnot json\n")
    summary = run_journal(path, tmp_path / "out", show_progress=False)
    letters = [json.loads(raw) for raw in (tmp_path / "out" / "dead-letter.jsonl").read_bytes().splitlines()]
    assert summary.dead_letters == 2
    assert [(letter["offset"], letter["reason"]) for letter in letters] == [(0, "oversized_record"), (2, "malformed_json")]
