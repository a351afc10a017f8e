"""contract §11: the embedded runner — a journal file in, one JSON Lines file
per output topic out, through the same core as the Kafka worker.

Each output line is the record value as canonical JSON (contract §4), so two
runs over the same input produce byte-identical files (contract §10).
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NamedTuple

from recurrence_ledger.embedded.journal import journal_lines
from recurrence_ledger.policy import DEFAULT_VIEW_BATCH
from recurrence_ledger.embedded.output import file_progress
from recurrence_ledger.ledger.explain import Rejected
from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
from recurrence_ledger.ledger.normalize import canonical_json_line
from recurrence_ledger.ledger.patterns import PatternStage
from recurrence_ledger.ledger.processor import Emit, LedgerConfig, LedgerProcessor
from recurrence_ledger.catalogue import (
    ADMISSION_DECISIONS, DEAD_LETTER, MATCHES, OBSERVATIONS, OUTPUT_TOPICS, REVIEW_STATUS, REVISION_STATISTICS, SOURCE_JOURNAL, STATISTICS,
)

#: Output topics the summary only counts.
_FACTS = frozenset({MATCHES, OBSERVATIONS})

@dataclass
class RunSummary:
    """What a run produced: records per output topic, each scope's last
    statistics record (its current view, contract §11), each review
    candidate's last ReviewStatus row (``review_status``, keyed by
    (scope_id, candidate_id), contract §18) and admission counts:
    ``admission`` maps "accepted", "rejected", "near_duplicates" (decisions
    listing any) and each rejection reason code to a count;
    ``dead_letter_reasons`` counts dead letters by reason code."""

    records: dict[str, int] = field(default_factory=lambda: {topic: 0 for topic in OUTPUT_TOPICS})
    statistics: dict[str, dict] = field(default_factory=dict)
    review_status: dict[tuple[str, str], dict] = field(default_factory=dict)
    effects: dict[tuple[str, str, int], dict] = field(default_factory=dict)
    admission: Counter = field(default_factory=Counter)
    lines: int = 0
    dead_letter_reasons: Counter = field(default_factory=Counter)

    @property
    def dead_letters(self) -> int:
        """Records sent to dead-letter."""
        return self.records[DEAD_LETTER]


#: The signals that stop a run as they would stop any process — a SIGTERM
#: (``kill``, a container stop) or a SIGHUP (its terminal closed, an ssh
#: session dropped) — but through :class:`Terminated`, so it unwinds.
STOPPING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(SystemExit):
    """A signal of :data:`STOPPING` reached a run: raised in its main thread
    so the run unwinds (exit code 128 + the signal's number, as a process
    ended by it reports: 143 for SIGTERM, 129 for SIGHUP)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(128 + signum)


def terminated(signum: int, _frame: object) -> None:
    """The handler of :data:`STOPPING`: raise :class:`Terminated`."""
    raise Terminated(signum)


@contextlib.contextmanager
def raising_when_stopped() -> Iterator[None]:
    """For the block, in the main thread: a signal of :data:`STOPPING`
    raises :class:`Terminated` (so the block's clean-up runs, as on
    Ctrl-C); the previous handlers after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, terminated) for signum in STOPPING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def staged_outputs(out_dir: Path) -> Iterator[Path]:
    """A hidden folder ``out_dir/.run-*`` to write a run's
    ``<topic>.jsonl`` files into. When the block ends normally each is moved
    over its name in ``out_dir`` (``os.replace``: the files of a previous
    run stay whole until then); when it raises (an error, Ctrl-C, a SIGTERM
    or a SIGHUP: :func:`raising_when_stopped`) the folder is removed. So a
    run that did not finish leaves ``out_dir`` as it was, never a set of
    truncated files that looks complete. (A SIGKILL leaves the hidden
    folder behind.)"""
    out_dir.mkdir(parents=True, exist_ok=True)
    with raising_when_stopped():
        staging = Path(tempfile.mkdtemp(prefix=".run-", dir=out_dir))
        try:
            yield staging
            for topic in OUTPUT_TOPICS:
                os.replace(staging / f"{topic}.jsonl", out_dir / f"{topic}.jsonl")
        finally:
            shutil.rmtree(staging, ignore_errors=True)


class JsonlSink:
    """Writes emits to ``DIR/<topic>.jsonl`` (one file per output topic,
    always created), through :func:`staged_outputs`: the files appear when
    ``stack`` closes without an error."""

    def __init__(self, out_dir: Path, stack: contextlib.ExitStack):
        staging = stack.enter_context(staged_outputs(out_dir))  # entered first: published after the files below are closed
        self.files: dict[str, BinaryIO] = {
            topic: stack.enter_context(open(staging / f"{topic}.jsonl", "wb")) for topic in OUTPUT_TOPICS
        }

    def write(self, emits: Iterable[Emit], summary: RunSummary) -> None:
        """Append each emit's value as one canonical JSON line."""
        files = self.files
        emits = list(emits)
        for emit in emits:
            files[emit.topic].write(canonical_json_line(emit.value))
        tally(emits, summary)


def tally(emits: Iterable[Emit], summary: RunSummary) -> None:
    """Count ``emits`` into ``summary`` (records per topic, each scope's
    last statistics record, each review candidate's last ReviewStatus row,
    each revision's last row with an effect (contract §21.4), dead letters
    by reason, admission decisions) as they are written."""
    records = summary.records
    for emit in emits:
        records[emit.topic] += 1
        if emit.topic in _FACTS:
            continue
        if emit.topic == STATISTICS:
            summary.statistics[emit.value["scope_id"]] = emit.value
        elif emit.topic == REVIEW_STATUS:
            summary.review_status[(emit.value["scope_id"], emit.value["candidate_id"])] = emit.value
        elif emit.topic == REVISION_STATISTICS and emit.value["effect"] is not None:
            ref = emit.value["artifact_ref"]
            summary.effects[(emit.value["scope_id"], ref["artifact_id"], ref["revision"])] = emit.value
        elif emit.topic == DEAD_LETTER:
            summary.dead_letter_reasons[emit.value["reason"]] += 1
        elif emit.topic == ADMISSION_DECISIONS:
            summary.admission.update([emit.value["decision"], *emit.value["reasons"]])
            summary.admission["near_duplicates"] += bool(emit.value["near_duplicates"])


def merge_summaries(parts: Iterable[RunSummary], lines: int) -> RunSummary:
    """One run's summary from the summaries of its parts over disjoint
    scopes (``run-journal --jobs``): counts added, the last records of each
    scope taken from the part that holds the scope; ``lines`` read."""
    summary = RunSummary(lines=lines)
    for part in parts:
        for topic, count in part.records.items():
            summary.records[topic] += count
        summary.statistics.update(part.statistics)
        summary.review_status.update(part.review_status)
        summary.effects.update(part.effects)
        summary.admission.update(part.admission)
        summary.dead_letter_reasons.update(part.dead_letter_reasons)
    return summary


def close_batch(processor: LedgerProcessor, stage: PatternStage) -> list[Emit]:
    """The end of a batch in one process: the scope stage's view records
    (``end_batch``), then its pattern contributions applied to the pattern
    stage — whose candidates (facts) follow — then the pattern stage's
    view records (contract §8, §23.5). The contributions themselves are
    internal and written nowhere."""
    emits = processor.end_batch()
    emits += stage.apply_all(emit.value for emit in processor.contributions())
    emits += stage.end_batch()
    return emits


def run_journal(
    journal: Path,
    out_dir: Path,
    config: LedgerConfig | None = None,
    show_progress: bool = True,
    validate_outputs: bool = False,
    view_batch: int = DEFAULT_VIEW_BATCH,
) -> RunSummary:
    """Process ``journal`` (JSON Lines, ``docs/journals.md``) and write
    ``out_dir/<topic>.jsonl`` for every output topic of contract §1.

    The end of the file counts as the provenance horizon passing for every
    outcome still pending (contract §5). Bad lines go to
    ``dead-letter.jsonl`` with their line number as offset; processing goes
    on. Ledger facts are written as their events cause them; the view files
    (``recurrence-statistics``, ``revision-statistics``) get the changed
    keys' latest values every ``view_batch`` journal records (valid or not)
    and at the end of the file (contract §8, ``LedgerProcessor.end_batch``),
    and so do the pattern stage's files (contract §23, :func:`close_batch`).
    ``validate_outputs`` validates every output against its pydantic
    model (tests). Raises ValueError for ``view_batch`` < 1, OSError if the
    journal cannot be read or the output written.
    """
    if view_batch < 1:
        raise ValueError("view_batch must be ≥ 1")
    processor = LedgerProcessor(config=config, validate_outputs=validate_outputs)
    stage = PatternStage(threshold=processor.config.pattern_threshold, validate_outputs=validate_outputs)
    summary = RunSummary()
    size = journal.stat().st_size
    with contextlib.ExitStack() as stack:
        sink = JsonlSink(out_dir, stack)
        handle = stack.enter_context(open(journal, "rb"))
        progress = stack.enter_context(file_progress(show_progress))
        task = progress.add_task(journal.name, total=size)
        stack.callback(gc.unfreeze)
        for number, line in journal_lines(handle):
            summary.lines += 1
            sink.write(ingest_journal_line(processor, line, Coordinates(SOURCE_JOURNAL, None, number, None)), summary)
            if summary.lines % view_batch == 0:
                sink.write(close_batch(processor, stage), summary)
                # What survived the batch is the growing state: out of the
                # collector's generations, so its collections stay the size
                # of a batch (the worker does the same at every checkpoint;
                # the core makes no cyclic garbage). Unfrozen at the end.
                gc.freeze()
            if number % 512 == 0:
                progress.update(task, completed=handle.tell())
        sink.write(processor.flush(), summary)
        sink.write(close_batch(processor, stage), summary)
        progress.update(task, completed=size)
    return summary


class JournalLedger(NamedTuple):
    """A journal run in memory (:func:`journal_ledger`): the source events
    the ledger applied, as ``(kind, canonical value)``; the output records
    per topic; the events it dead-lettered (``ledger.explain.Rejected``:
    lines that are JSON events, but invalid or refused by the core)."""

    events: list[tuple[str, dict]]
    outputs: dict[str, list[dict]]
    rejected: list[Rejected]


def journal_ledger(journal: Path, config: LedgerConfig | None = None) -> JournalLedger:
    """Run a journal in memory — what ``explain`` and ``patterns export``
    read when pointed at a journal file instead of Kafka."""
    from recurrence_ledger.ledger.intake import BadRecord, decode_journal_line, validate

    processor = LedgerProcessor(config=config)
    stage = PatternStage(threshold=processor.config.pattern_threshold)
    run = JournalLedger([], {topic: [] for topic in OUTPUT_TOPICS}, [])
    with open(journal, "rb") as handle:
        for number, line in journal_lines(handle):
            try:
                event = decode_journal_line(line)
            except BadRecord:
                event = None
            letter = None
            for emit in ingest_journal_line(processor, line, Coordinates(SOURCE_JOURNAL, None, number, None)):
                run.outputs[emit.topic].append(emit.value)
                if emit.topic == DEAD_LETTER and emit.value["offset"] == number:  # this line's, not a waiting decision's of an earlier one
                    letter = emit.value
            if event is not None and letter is not None:
                run.rejected.append(Rejected(*event, letter))
            elif event is not None:
                run.events.append((event[0], validate(*event)))
    for emit in [*processor.flush(), *close_batch(processor, stage)]:
        run.outputs[emit.topic].append(emit.value)
    return run
