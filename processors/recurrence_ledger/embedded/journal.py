"""The journal-file reader (contract §9, §11): the non-blank lines of a
JSON Lines journal, a leading byte-order mark ignored. Shared by the embedded
runner, ``publish`` and what-if."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from recurrence_ledger.catalogue import OUTPUT_TOPICS
from recurrence_ledger.ledger.intake import BOM


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


def journal_lines(handle: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """``(0-based line number, line without its end-of-line)`` for every
    non-blank line (a line of other bytes than :data:`JSON_WHITE_SPACE` —
    a form feed, a vertical tab — is a record, and a malformed one). A UTF-8 byte-order mark at the start of the file is
    ignored (contract §9 rev. 2), so a file saved by an editor that adds one
    reads like the same file without it."""
    for number, line in enumerate(handle):
        if number == 0 and line.startswith(BOM):
            line = line[len(BOM):]
        stripped = line.rstrip(b"\r\n")
        if stripped.strip(JSON_WHITE_SPACE):
            yield number, stripped
