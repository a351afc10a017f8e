"""The journal-file reader (contract §9, §11): the non-blank lines of a
JSON Lines journal, a leading byte-order mark ignored. Shared by the embedded
runner, ``publish`` and what-if."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from recurrence_ledger.ledger.intake import BOM


def journal_lines(handle: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """``(0-based line number, line without its end-of-line)`` for every
    non-blank line. A UTF-8 byte-order mark at the start of the file is
    ignored (contract §9 rev. 2), so a file saved by an editor that adds one
    reads like the same file without it."""
    for number, line in enumerate(handle):
        if number == 0 and line.startswith(BOM):
            line = line[len(BOM):]
        stripped = line.rstrip(b"\r\n")
        if stripped.strip():
            yield number, stripped
