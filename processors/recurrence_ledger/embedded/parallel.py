"""Scope-parallel runs of a journal (``run-journal --jobs N``, ``what-if
--jobs N``): the journal split by scope across N processes, their outputs
merged into the files ``--jobs 1`` writes, byte for byte (contract §10).

Scopes share no state in the core (every state key starts with its scope),
so the processes run apart:

- every process reads the whole file and applies the records it **owns**:
  those whose ``scope_id`` hashes to it (CRC-32 of its UTF-8 modulo N,
  :func:`owner`); a record with no scope the core could apply (not JSON,
  not an event) is dead-lettered whatever the state and is owned by its
  position modulo N;
- it closes its view batches at the same input records as one process does
  (every ``--view-batch`` records, counted over the whole file, and at the
  end): its own scopes' view records, and its pattern contributions
  (contract §23.5) kept for the parent;
- each output line is written with a sort prefix (:class:`ShardWriter`):
  ledger facts by input record, view records by batch and scope_id (the
  order ``LedgerProcessor.end_batch`` gives), the end of the input's facts
  by (part, when the scope entered it) (``LedgerProcessor.flush_by_scope``);
  the parent merges each topic's files on that prefix (:func:`merge_topic`)
  and strips it.

What spans scopes — the pattern stage of contract §23 — runs in the parent:
at each batch close, the contributions of every process, merged in
(scope_id, signature_key) order as one process's ``contributions`` gives
them, through one :class:`~recurrence_ledger.ledger.patterns.PatternStage`.

The process pool is the standard library's
(``concurrent.futures.ProcessPoolExecutor``, forked workers where the
platform has ``fork``). Its processes end with the run, however it ends:
a SIGTERM (or a SIGHUP) to the parent stops the run as Ctrl-C does (the
pool's processes are terminated, the temporary folder removed, exit 143 or
129), and on
Linux each process also gets SIGTERM when the parent dies without its
clean-up (SIGKILL: :func:`die_with_parent`), so none is left behind
waiting for work.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import heapq
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from recurrence_ledger.catalogue import OUTPUT_TOPICS, PATTERN_CANDIDATES, SIGNATURE_PATTERNS, SOURCE_JOURNAL
from recurrence_ledger.embedded.journal import journal_lines
from recurrence_ledger.embedded.output import file_progress
from recurrence_ledger.embedded.runner import STOPPING, RunSummary, merge_summaries, raising_when_stopped, run_journal, staged_outputs, tally
from recurrence_ledger.policy import DEFAULT_VIEW_BATCH
from recurrence_ledger.ledger.intake import BadRecord, Coordinates, decode_journal_line, ingest_journal_line
from recurrence_ledger.ledger.normalize import canonical_json_line
from recurrence_ledger.ledger.patterns import PatternStage
from recurrence_ledger.ledger.processor import LedgerConfig, LedgerProcessor
from recurrence_ledger.ledger.results import Emit

#: The topics only the pattern stage writes: the parent's own files.
STAGE_TOPICS = (PATTERN_CANDIDATES, SIGNATURE_PATTERNS)
#: Ends a line's sort prefix: canonical JSON escapes every control character
#: and a scope_id has none (contract §3), so the first NUL of a line is it.
PREFIX_END = b"\x00"
#: Phases of a sort prefix, in output order at one input record: its facts,
#: the batch closed after it, the end of the input's facts, the last batch.
FACTS, BATCH, END, LAST_BATCH = 0, 1, 2, 3

#: Bytes of the journal each worker process has read (the progress bar).
_read: Any = None


def record_scope(line: bytes) -> str | None:
    """The ``scope_id`` of a journal line's event, or None when the line has
    none the core could apply (it is dead-lettered whatever the state).
    orjson reads the line when it can (the same value as the strict decoder
    for any line both accept); otherwise the strict decoder
    (``intake.decode_journal_line``) decides."""
    try:
        envelope = orjson.loads(line)
        value = envelope.get("value") if isinstance(envelope, dict) else None
    except orjson.JSONDecodeError:
        try:
            _, value = decode_journal_line(line)
        except BadRecord:
            return None
    scope_id = value.get("scope_id") if isinstance(value, dict) else None
    return scope_id if isinstance(scope_id, str) else None


def owner(scope_id: str | None, record: int, jobs: int) -> int:
    """The process (0 … ``jobs`` - 1) that applies input record ``record``
    (1-based) of scope ``scope_id``: CRC-32 of the scope_id's UTF-8 modulo
    ``jobs``, so one scope is one process; a record without a scope by its
    position."""
    if scope_id is None:
        return record % jobs
    return zlib.crc32(scope_id.encode("utf-8", "surrogatepass")) % jobs


def shard_records(journal: Path, shard: int, jobs: int) -> Iterator[tuple[int, int, bytes | None, str | None]]:
    """Every record of ``journal`` as ``(record, line number, line, scope_id)``
    — ``record`` counts the non-blank lines from 1, as the view batches do;
    ``line`` is None when another process owns it."""
    with open(journal, "rb") as handle:
        for record, (number, line) in enumerate(journal_lines(handle), start=1):
            scope_id = record_scope(line)
            yield record, number, (line if owner(scope_id, record, jobs) == shard else None), scope_id
            if _read is not None and record % 512 == 0:
                _read[shard] = handle.tell()
        if _read is not None:
            _read[shard] = handle.tell()


def _prefix(record: int, phase: int, tail: bytes = b"") -> bytes:
    return b"%012d%d%s" % (record, phase, tail) + PREFIX_END


@dataclass
class ShardResult:
    """What a worker process hands back: its output folder, its summary, its
    pattern contributions per batch close, as ``((record, phase),
    [contribution, …])`` for the closes that had any, and ``extra``: what
    the caller's process adds (a what-if's ``whatif.replay.ShardReplay``)."""

    directory: Path
    summary: RunSummary
    closes: list[tuple[tuple[int, int], list[dict]]] = field(default_factory=list)
    extra: Any = None


class ShardWriter:
    """One worker process's output files: ``DIRECTORY/<topic>.jsonl``, every
    line with its sort prefix (module docstring), for the records of the
    scopes ``processor`` applies."""

    def __init__(self, processor: LedgerProcessor, directory: Path, stack: contextlib.ExitStack):
        directory.mkdir(parents=True, exist_ok=True)
        self.processor = processor
        self.directory = directory
        self.files: dict[str, BinaryIO] = {
            topic: stack.enter_context(open(directory / f"{topic}.jsonl", "wb")) for topic in OUTPUT_TOPICS if topic not in STAGE_TOPICS
        }
        self.summary = RunSummary()
        self.closes: list[tuple[tuple[int, int], list[dict]]] = []
        self._sizes = processor.flush_part_sizes()
        self._entered: tuple[dict[str, int], ...] = ({}, {}, {})

    def _write(self, prefix: bytes, emits: Iterable[Emit]) -> None:
        files = self.files
        for emit in emits:
            files[emit.topic].write(prefix + canonical_json_line(emit.value))

    def facts(self, record: int, scope_id: str | None, emits: list[Emit]) -> None:
        """The ledger facts input record ``record`` (of ``scope_id``) caused."""
        self._write(_prefix(record, FACTS), emits)
        tally(emits, self.summary)
        sizes = self.processor.flush_part_sizes()
        if sizes != self._sizes:
            for part, (before, after) in enumerate(zip(self._sizes, sizes, strict=True)):
                if after != before:
                    self._entered[part][scope_id] = record
            self._sizes = sizes

    def close(self, record: int, phase: int = BATCH) -> None:
        """Close a batch of the views after input record ``record``: the
        processor's view records, its pattern contributions kept."""
        emits = self.processor.end_batch()
        for emit in emits:
            self.files[emit.topic].write(_prefix(record, phase, emit.value["scope_id"].encode("utf-8", "surrogatepass")) + canonical_json_line(emit.value))
        tally(emits, self.summary)
        contributions = [emit.value for emit in self.processor.contributions()]
        if contributions:
            self.closes.append(((record, phase), contributions))
        gc.freeze()  # as run_journal does after each batch

    def finish(self, records: int) -> ShardResult:
        """The end of the input after ``records`` records: the pending
        facts decided (``flush_by_scope``), then the last batch."""
        for part, scope_id, emits in self.processor.flush_by_scope():
            self._write(_prefix(records, END, b"%d%012d" % (part, self._entered[part][scope_id])), emits)
            tally(emits, self.summary)
        self.close(records, LAST_BATCH)
        self.summary.lines = records
        for handle in self.files.values():
            handle.flush()
        return ShardResult(self.directory, self.summary, self.closes)


def run_shard(journal: Path, directory: Path, shard: int, jobs: int, config: LedgerConfig | None, validate_outputs: bool,
              view_batch: int) -> ShardResult:
    """One worker process of ``run-journal --jobs``: the records of
    ``journal`` it owns through its own processor into ``directory``."""
    processor = LedgerProcessor(config=config, validate_outputs=validate_outputs)
    with contextlib.ExitStack() as stack:
        stack.callback(gc.unfreeze)
        writer = ShardWriter(processor, directory, stack)
        records = 0
        for records, number, line, scope_id in shard_records(journal, shard, jobs):
            if line is not None:
                writer.facts(records, scope_id, ingest_journal_line(processor, line, Coordinates(SOURCE_JOURNAL, None, number, None)))
            if records % view_batch == 0:
                writer.close(records)
        return writer.finish(records)


def merge_topic(topic: str, directories: Sequence[Path], out_path: Path) -> None:
    """Merge one topic's files of every worker process on their sort
    prefixes into ``out_path``, prefixes stripped."""
    with contextlib.ExitStack() as stack:
        sources = [stack.enter_context(open(directory / f"{topic}.jsonl", "rb")) for directory in directories]
        with open(out_path, "wb") as out:
            write = out.write
            for line in heapq.merge(*sources):
                write(line[line.index(PREFIX_END) + 1:])


def pattern_stage_outputs(results: Sequence[ShardResult], stage: PatternStage, out_dir: Path, summary: RunSummary) -> None:
    """The pattern stage over every process's contributions, batch by batch
    in input order, each batch's in (scope_id, signature_key) order: its
    output files in ``out_dir``, counted into ``summary``."""
    by_close: dict[tuple[int, int], list[list[dict]]] = {}
    for result in results:
        for close, contributions in result.closes:
            by_close.setdefault(close, []).append(contributions)
    with contextlib.ExitStack() as stack:
        files = {topic: stack.enter_context(open(out_dir / f"{topic}.jsonl", "wb")) for topic in STAGE_TOPICS}
        for close in sorted(by_close):
            merged = heapq.merge(*by_close[close], key=lambda value: (value["scope_id"], value["signature_key"]))
            emits = stage.apply_all(merged) + stage.end_batch()
            for emit in emits:
                files[emit.topic].write(canonical_json_line(emit.value))
            tally(emits, summary)


#: prctl(2)'s option naming the signal a process gets when its parent ends (Linux).
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Have this process sent SIGTERM when its parent (``parent_pid``, the
    process that started it, from the thread that started it) ends, so
    that a parent killed before it could stop its children (SIGKILL) leaves
    none behind; and stop at once if the parent is gone already. Linux
    only (``prctl(PR_SET_PDEATHSIG)``); elsewhere nothing is done."""
    if sys.platform != "linux":
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)


@dataclass
class JobPool:
    """``jobs`` worker processes (``ProcessPoolExecutor``, forked where the
    platform can) and the array of the bytes each has read (``read``, the
    progress bar). A context manager: the processes end with it — after
    their work, or at once when the block raises (an error, Ctrl-C, or a
    SIGTERM or SIGHUP, which raises ``runner.Terminated`` inside the block
    when it runs in the main thread)."""

    jobs: int
    executor: ProcessPoolExecutor = field(init=False)
    read: Any = field(init=False)
    _earlier: set = field(init=False)
    _stopping: Any = field(init=False, default=None)

    def __post_init__(self) -> None:
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        self.read = context.Array("q", self.jobs, lock=False)
        self._earlier = set(multiprocessing.active_children())
        self.executor = ProcessPoolExecutor(self.jobs, mp_context=context, initializer=_share, initargs=(self.read, os.getpid()))

    def __enter__(self) -> JobPool:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._stopping = raising_when_stopped()
        self._stopping.__enter__()
        # Start the processes and the executor's manager thread now, with
        # SIGTERM held back until they run: a Terminated raised while
        # Thread.start() waits for the thread leaves an executor whose
        # shutdown cannot join it ("cannot join thread before it is
        # started", exit 1 instead of 143). The pool processes inherit the
        # blocked signal and let it through as they start (_share).
        signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
        try:
            try:
                self.executor.submit(int).result()
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)  # a signal that waited is raised here
        except BaseException as error:
            self.__exit__(type(error))
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self._stopping is not None:  # the previous handlers back
            self._stopping.__exit__(None, None, None)
        if kind is not None:  # do not wait for the work still running
            for child in set(multiprocessing.active_children()) - self._earlier:
                child.terminate()
        self.executor.shutdown(wait=True, cancel_futures=True)


def _share(read: Any, parent_pid: int) -> None:
    """A pool process's start: the progress array; SIGTERM or SIGHUP ends it
    (not the parent's handler, inherited by a fork), SIGTERM also when the
    parent dies."""
    global _read
    _read = read
    for signum in STOPPING:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)  # blocked in the parent while the pool started
    die_with_parent(parent_pid)


def wait_with_progress(pool: JobPool, futures: list[Future], journal: Path, show_progress: bool, label: str) -> list[Any]:
    """The results of ``futures`` (the worker processes over ``journal``),
    with a progress bar of the bytes the slowest has read; the first error
    raised."""
    size = journal.stat().st_size
    read = pool.read
    with file_progress(show_progress) as progress:
        task = progress.add_task(label, total=size)
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
            progress.update(task, completed=min(read))
            if any(future.done() and future.exception() is not None for future in futures):
                break
        progress.update(task, completed=size)
    return [future.result() for future in futures]


def merge_outputs(pool: JobPool, results: Sequence[ShardResult], out_dir: Path, stage: PatternStage) -> RunSummary:
    """The files of one process from the workers' ``results`` into
    ``out_dir``: every topic's lines merged (in the pool), the pattern stage
    run here; the run's summary. The files appear once all are written
    (:func:`~recurrence_ledger.embedded.runner.staged_outputs`)."""
    summary = merge_summaries((result.summary for result in results), results[0].summary.lines)
    directories = [result.directory for result in results]
    with staged_outputs(out_dir) as staging:  # the files appear when every merge is done (runner.staged_outputs)
        merges = [pool.executor.submit(merge_topic, topic, directories, staging / f"{topic}.jsonl") for topic in OUTPUT_TOPICS if topic not in STAGE_TOPICS]
        pattern_stage_outputs(results, stage, staging, summary)
        for merge in merges:
            merge.result()
    return summary


def run_journal_jobs(
    journal: Path,
    out_dir: Path,
    config: LedgerConfig | None = None,
    jobs: int = 1,
    show_progress: bool = True,
    validate_outputs: bool = False,
    view_batch: int = DEFAULT_VIEW_BATCH,
) -> RunSummary:
    """``run_journal`` on ``jobs`` processes (module docstring): the same
    files, byte for byte, and the same summary. ``jobs`` 1 is
    ``run_journal`` itself. Raises ValueError for ``jobs`` or
    ``view_batch`` < 1, OSError as ``run_journal``."""
    if jobs < 1 or view_batch < 1:
        raise ValueError("jobs and view_batch must be ≥ 1")
    if jobs == 1:
        return run_journal(journal, out_dir, config, show_progress, validate_outputs, view_batch)
    processor_config = config or LedgerConfig()
    journal.stat()  # OSError before any process starts
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".jobs-", dir=out_dir) as tmp, JobPool(jobs) as pool:
        futures = [pool.executor.submit(run_shard, journal, Path(tmp) / str(shard), shard, jobs, processor_config, validate_outputs, view_batch)
                   for shard in range(jobs)]
        results = wait_with_progress(pool, futures, journal, show_progress, journal.name)
        stage = PatternStage(threshold=processor_config.pattern_threshold, validate_outputs=validate_outputs)
        return merge_outputs(pool, results, out_dir, stage)
