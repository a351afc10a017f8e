"""A generated journal's outputs as the view follower reads them: for the
benchmarks that fill Redis through the product's own read side."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

import orjson

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.read.records import Located
from recurrence_ledger.workload import Workload, generate_journal

#: Kafka timestamp (ms) of the first record of each topic; the next ones 1 ms apart.
CLOCK_MS = 1_790_000_000_000


def located_outputs(shape: Workload, topics: Iterable[str]) -> list[Located]:
    """The records of ``topics`` (in that order, each in publication order)
    that ``run_journal`` writes for the journal ``generate_journal(shape)``,
    each with partition 0, its line number as offset and
    :data:`CLOCK_MS` + offset as timestamp."""
    with tempfile.TemporaryDirectory() as folder:
        journal = Path(folder) / "journal.jsonl"
        with open(journal, "wb") as handle:
            for record in generate_journal(shape):
                handle.write(orjson.dumps(record) + b"\n")
        out = Path(folder) / "out"
        run_journal(journal, out, show_progress=False)
        return [
            Located(topic, 0, offset, CLOCK_MS + offset, orjson.loads(line))
            for topic in topics
            for offset, line in enumerate((out / f"{topic}.jsonl").read_bytes().splitlines())
        ]
