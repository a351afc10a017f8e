"""The views' cost as a revision's history grows (not a test).

A deployment runs for months: a revision that keeps failing gathers
thousands of verdicts, runs and review candidates. The view records of a
batch (contract §8: RevisionStatistics, ReviewStatus, ScopeStatistics of
what the batch changed) must cost what the batch changed, not what the
history holds. The journal here is that revision: one Experience revision
cited by one Handoff, then ``--outcomes`` Task Outcomes through its
receipt, three recurred and one avoided in turn — every avoided verdict
closes a run of three, which reaches the review threshold (3) and
publishes a review candidate, so each batch publishes about the same view
records while the revision's runs and open candidates grow. It is driven
the way the worker drives the core: ``records.process_message`` per record
(Avro SourceEvents), ``end_batch`` and the Avro encoding of its records
(``Outputs.records``) once per transaction of ``--tx-events`` records. For
each fifth of the journal: the CPU time of the batch's views per batch,
the view records per batch, and beside them the facts' CPU per event and
the changelog bytes a batch writes (``store.changes()``: keys and values),
median of ``--runs`` fresh runs.

Target: computing the views of a batch (``end_batch``) in the last fifth
costs ≤ 2× the first (before, each RevisionStatistics row read every run
record of its revision, and each new candidate recomputed the ReviewStatus
row of every candidate of its artifact: the cost grew with the history).
Their encoding is reported beside it: it grows with the revision's row,
whose ``runs_reaching_threshold`` names every run at the threshold.

    python benchmarks/history_benchmark.py            # 40,000 outcomes, 3 runs, writes BENCHMARKS.md
    python benchmarks/history_benchmark.py --quick    # 8,000 outcomes, 1 run, print only
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.record import write_block  # noqa: E402
from benchmarks.worker_stages import _code_revision, catalogue_max_bytes, consumed  # noqa: E402
from recurrence_ledger.kafka.records import Outputs, process_message  # noqa: E402
from recurrence_ledger.ledger.config import LedgerConfig  # noqa: E402
from recurrence_ledger.runtime.task import Task  # noqa: E402
from recurrence_ledger.serde import codec  # noqa: E402
from tests.consumed import Record  # noqa: E402 - a consumed record as the worker sees it
from tests.journal import check, claim, experience, handoff, outcome, receipt  # noqa: E402

PARTS = 5
SCOPE = "history"
CUE = "port already bound"


def journal(outcomes: int) -> list[Record]:
    """The failing revision's journal (module docstring) as the consumer
    hands it over: Avro SourceEvents on ``source-journal``, one partition."""
    records = [experience(SCOPE, 1, "E1", cue=CUE), handoff(SCOPE, 2, "H1", [("E1", 1)]), receipt(SCOPE, 3, "R1", "H1")]
    for number in range(outcomes):
        position = 10 + number
        if number % 4 == 3:
            records.append(outcome(SCOPE, position, f"O{position}", status="completed", receipt_id="R1",
                                   observations=[claim("tests started in sandbox")], checks=[check("ports free before pytest", status="passed")]))
        else:
            records.append(outcome(SCOPE, position, f"O{position}", receipt_id="R1", checks=[check(CUE)]))
    return consumed(records, 1)


#: What :func:`run` reports per fifth of the journal, in this order.
COLUMNS = ("views computed (`end_batch`), ms per batch", "encoded, ms per batch", "view records per batch",
           "facts (`process_message` + encoding), µs per event", "changelog written, KiB per batch")


def run(outcomes: int, tx_events: int) -> list[tuple[float, ...]]:
    """One fresh run: per fifth of the journal, the :data:`COLUMNS`."""
    batch = journal(outcomes)
    outputs = Outputs(codec.AVRO, codec.FIXED, "", catalogue_max_bytes())
    task = Task(0, LedgerConfig())
    computed, encoded, applied, written = [0.0] * PARTS, [0.0] * PARTS, [0.0] * PARTS, [0] * PARTS
    published, batches, events = [0] * PARTS, [0] * PARTS, [0] * PARTS
    for start in range(0, len(batch), tx_events):
        part = min(PARTS - 1, start * PARTS // len(batch))
        chunk = batch[start:start + tx_events]
        began = time.process_time()
        for message in chunk:
            outputs.records(process_message(task.processor, message, "", codec.FIXED), message.key())
        applied[part] += time.process_time() - began
        events[part] += len(chunk)
        began = time.process_time()
        emits = task.processor.end_batch()
        between = time.process_time()
        outputs.records(emits, None)
        computed[part] += between - began
        encoded[part] += time.process_time() - between
        published[part] += len(emits)
        batches[part] += 1
        written[part] += sum(len(key) + len(value or b"") for key, value in task.store.changes())
        task.checkpointed()
        gc.freeze()  # as LedgerWorker._commit does
    return [
        (computed[part] * 1000 / batches[part], encoded[part] * 1000 / batches[part], published[part] / batches[part],
         applied[part] * 1e6 / events[part], written[part] / 1024 / batches[part])
        for part in range(PARTS)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8,000 outcomes, 1 run, print only")
    parser.add_argument("--outcomes", type=int, default=40_000)
    parser.add_argument("--tx-events", type=int, default=200, help="records per transaction (a steady stream's)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="print only: do not write BENCHMARKS.md")
    options = parser.parse_args()
    outcomes, runs = (8_000, 1) if options.quick else (options.outcomes, options.runs)
    results = [run(outcomes, options.tx_events) for _ in range(runs)]
    rows = ["| part of the journal | " + " | ".join(COLUMNS) + " |", "| --- |" + " --- |" * len(COLUMNS)]
    medians = [[statistics.median(result[part][column] for result in results) for column in range(len(COLUMNS))] for part in range(PARTS)]
    for part, values in enumerate(medians):
        rows.append(f"| {part + 1}/{PARTS} | " + " | ".join(f"{value:,.2f}" if column < 2 else f"{value:,.0f}" for column, value in enumerate(values)) + " |")
    computed = [values[0] for values in medians]
    ratio = computed[-1] / computed[0]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"Recorded {stamp} by `python benchmarks/history_benchmark.py` (code {_code_revision()}; {platform.machine()}, "
        f"CPython {platform.python_version()}, {os.cpu_count()} CPUs). One revision failing three times in four over "
        f"{outcomes:,} Task Outcomes ({outcomes // 4:,} runs at the threshold, as many open review candidates), "
        f"transactions of {options.tx_events} records; CPU time of `end_batch` and of the Avro encoding of its records, "
        f"median of {runs} runs per fifth of the journal.",
        "",
        *rows,
        "",
        f"Views computed per batch, last fifth / first: **{ratio:.2f}×** (target ≤ 2×: {'met' if ratio <= 2 else 'not met'}). "
        "The encoding grows with the revision's row itself: its `runs_reaching_threshold` names every run at the threshold "
        "(contract §8), here one in four verdicts. The facts' CPU and the changelog written per batch do not: the lists "
        "that grow with the revision's history (its avoided positions, its runs with a candidate, its artifact's candidate "
        "ids) are kept in chunks, so a new entry rewrites one chunk (state format 3; docs/sizing.md, \"A revision that "
        "keeps failing\").",
    ]
    print("\n".join(lines))
    if not (options.quick or options.no_record):
        write_block("history-benchmark", "Views against history", lines)


if __name__ == "__main__":
    main()
