"""contract §9: the DeadLetter record — where a record was read, its bytes
and why it was not applied. ``recurrence_ledger.ledger.intake`` builds one
for every record it rejects; the core builds one itself for a review
decision that waited for its candidate in vain (contract §18), from the
coordinates and bytes it kept while the decision waited.

Part of the pure core: imports nothing but the catalogue and the standard
library.
"""

from __future__ import annotations

import base64
from typing import NamedTuple

from recurrence_ledger.catalogue import DEAD_LETTER
from recurrence_ledger.ledger.results import Emit

#: Largest raw record kept whole in a dead letter: base64 grows it by 4/3, and
#: the dead letter must itself fit in a Kafka message.
MAX_DEAD_LETTER_RAW = 262_144
#: Longest dead-letter message (characters), a truncation note included.
MAX_DEAD_LETTER_MESSAGE = 1_200


class CutRecord(bytes):
    """A record read only in part because it is over the record limit
    (``intake.MAX_RECORD_BYTES``): its first bytes, more than the limit, and
    ``size``, its whole length in bytes. A journal line of gigabytes (a
    binary file given as a journal) is judged ``oversized_record`` and
    dead-lettered with its true size without being held in memory
    (``embedded.journal.journal_lines``)."""

    size: int

    def __new__(cls, head: bytes, size: int) -> CutRecord:
        record = super().__new__(cls, head)
        record.size = size
        return record


def record_size(raw: bytes) -> int:
    """The length in bytes of the record ``raw`` was read from: a
    :class:`CutRecord`'s ``size``, else ``len(raw)``."""
    return raw.size if isinstance(raw, CutRecord) else len(raw)


class Coordinates(NamedTuple):
    """Where a record came from: topic, partition, offset and key. The
    embedded runner uses topic "source-journal", partition None and the
    0-based line number as offset."""

    topic: str
    partition: int | None
    offset: int | None
    key: str | None


def dead_letter(coordinates: Coordinates, raw: bytes, reason: str, message: str) -> Emit:
    """The DeadLetter record (contract §9) for ``raw`` read at ``coordinates``.

    A record over MAX_DEAD_LETTER_RAW bytes keeps only its first
    MAX_DEAD_LETTER_RAW bytes in ``raw``: the original stays in its input
    topic at the given coordinates. ``message`` is cut to
    MAX_DEAD_LETTER_MESSAGE characters; when ``raw`` was cut, the message
    is cut shorter and ends with a note giving the original size, so the
    note is always there (contract §19 rev. 3).
    """
    if len(raw) > MAX_DEAD_LETTER_RAW:
        note = f" [raw truncated to the first {MAX_DEAD_LETTER_RAW} of {record_size(raw)} bytes]"
        message = message[:MAX_DEAD_LETTER_MESSAGE - len(note)] + note
        raw = raw[:MAX_DEAD_LETTER_RAW]
    return Emit(
        DEAD_LETTER,
        coordinates.key,
        {
            "topic": coordinates.topic,
            "partition": coordinates.partition,
            "offset": coordinates.offset,
            "key": coordinates.key,
            "raw": base64.b64encode(raw).decode("ascii"),
            "reason": reason,
            "message": message[:MAX_DEAD_LETTER_MESSAGE],
        },
    )


def read_at(letter: dict) -> str:
    """Where the record of the DeadLetter value ``letter`` was read, for
    people: "line 12 (offset 11)" of a journal file — counted from 1 as an
    editor does, and the dead letter's own ``offset``, the 0-based line
    number (partition None) — else "topic[partition]@offset"."""
    if letter["partition"] is None:
        return f"line {letter['offset'] + 1} (offset {letter['offset']})"
    return f"{letter['topic']}[{letter['partition']}]@{letter['offset']}"
