"""A generated journal's outputs as the view follower reads them: for the
benchmarks that fill Redis through the product's own read side."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

import orjson

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.policy import DEFAULT_VIEW_BATCH
from recurrence_ledger.read.records import Located
from recurrence_ledger.workload import Workload, generate_journal

#: Kafka timestamp (ms) of the first record of each topic; the next ones 1 ms apart.
CLOCK_MS = 1_790_000_000_000


def located_outputs(shape: Workload, topics: Iterable[str], view_batch: int = DEFAULT_VIEW_BATCH) -> list[Located]:
    """The records of ``topics`` (in that order, each in publication order)
    that ``run_journal`` writes for the journal ``generate_journal(shape)``
    with views every ``view_batch`` events (1: after every event, as a
    worker at low load publishes them), each with partition 0, its line
    number as offset and :data:`CLOCK_MS` + offset as timestamp."""
    with tempfile.TemporaryDirectory() as folder:
        journal = Path(folder) / "journal.jsonl"
        with open(journal, "wb") as handle:
            for record in generate_journal(shape):
                handle.write(orjson.dumps(record) + b"\n")
        out = Path(folder) / "out"
        run_journal(journal, out, show_progress=False, view_batch=view_batch)
        return [
            Located(topic, 0, offset, CLOCK_MS + offset, orjson.loads(line))
            for topic in topics
            for offset, line in enumerate((out / f"{topic}.jsonl").read_bytes().splitlines())
        ]
