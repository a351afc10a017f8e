"""The journal-file reader (contract §9, §11): the non-blank lines of a
JSON Lines journal, a leading byte-order mark ignored. Shared by the embedded
runner, ``publish`` and what-if."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from recurrence_ledger.catalogue import OUTPUT_TOPICS
from recurrence_ledger.ledger.deadletter import CutRecord
from recurrence_ledger.ledger.intake import BOM, MAX_RECORD_BYTES


def journal_problem(journal: Path, out_dir: Path) -> str | None:
    """Why the journal file ``journal`` cannot be run into the folder
    ``out_dir`` (where a run writes one ``<topic>.jsonl`` per output
    topic), or None:

    - it is there but not a regular file or a folder (a pipe,
      ``/dev/stdin`` fed by one, a terminal): a run reads its journal by
      offset, and ``--jobs N`` reads it once per process;
    - it is one of the files the run writes (by its path, a symbolic link
      or a hard link): the run's file would replace it.
    """
    if journal.exists() and not journal.is_dir() and not journal.is_file():  # a folder or a missing file: the reader says so
        return f"{journal} is not a regular file (a pipe?): a journal is read by offset, once per --jobs process; save it to a file first"
    if any(_same_file(journal, out_dir / f"{topic}.jsonl") for topic in OUTPUT_TOPICS):
        return f"{journal} is one of the files the run writes into {out_dir} (the run's file would replace it): give another --out"
    return None


def _same_file(one: Path, other: Path) -> bool:
    """Whether two paths name one file: the same path once links are
    resolved, or (both existing) the same device and inode — a hard link."""
    if one.resolve() == other.resolve():
        return True
    try:
        return os.path.samefile(one, other)
    except OSError:  # either is missing (or unreadable): not the same existing file
        return False


#: JSON's insignificant white space (RFC 8259 §2): a line of nothing else is blank.
JSON_WHITE_SPACE = b" \t\r\n"
#: The most of one line held in memory: a record at the limit with a
#: byte-order mark and CR LF is read whole; a longer line is read in
#: pieces of this size and yielded cut (``deadletter.CutRecord``).
_LINE_PIECE = MAX_RECORD_BYTES + len(BOM) + 2


def journal_lines(handle: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """``(0-based line number, line without its end-of-line)`` for every
    non-blank line (a line of other bytes than :data:`JSON_WHITE_SPACE` —
    a form feed, a vertical tab — is a record, and a malformed one). A UTF-8 byte-order mark at the start of the file is
    ignored (contract §9 rev. 2), so a file saved by an editor that adds one
    reads like the same file without it.

    A line over the record limit (``intake.MAX_RECORD_BYTES``) is never
    held whole: it comes as a ``deadletter.CutRecord`` of its first bytes
    and its size, which the intake dead-letters as ``oversized_record``
    (contract §9), so a file without line ends (a compressed or binary
    file given as a journal) costs a few MiB of memory, not its size."""
    for number, line in enumerate(iter(lambda: handle.readline(_LINE_PIECE), b"")):
        whole = len(line) < _LINE_PIECE or line.endswith(b"\n")
        if number == 0 and line.startswith(BOM):
            line = line[len(BOM):]
        if not whole:
            line = _cut_line(handle, line)
            if isinstance(line, CutRecord):  # never blank
                yield number, line
                continue
        stripped = line.rstrip(b"\r\n")
        if stripped.strip(JSON_WHITE_SPACE):
            yield number, stripped


def _cut_line(handle: BinaryIO, head: bytes) -> bytes:
    """The line that starts with ``head`` (a whole piece but for a leading
    byte-order mark, and not the line's end), its rest read in pieces up to
    its end-of-line and dropped: ``head`` without its end-of-line when the
    line holds nothing more (a run of CR before the LF), ``head`` when it
    holds only white space (blank), else a ``CutRecord`` of ``head`` with
    the line's size without its end-of-line."""
    size = eol = 0  # eol: the length of the trailing run of CR and LF so far
    blank = True
    piece = head
    while piece:
        size += len(piece)
        body = piece.rstrip(b"\r\n")
        eol = len(piece) - len(body) if body else eol + len(piece)
        blank = blank and not body.strip(JSON_WHITE_SPACE)
        if piece.endswith(b"\n"):
            break
        piece = handle.readline(_LINE_PIECE)
    size -= eol
    if size <= len(head):
        return head[:size]
    return head if blank else CutRecord(head, size)
