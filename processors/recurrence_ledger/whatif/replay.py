"""The policy replay of a what-if (contract §20): retained inputs through
the core under several policies, in as few passes as the rules allow
(:func:`~recurrence_ledger.whatif.policies.passes`), into a folder of the
what-if's own.

Inputs: a journal file (:class:`JournalInput`, read like ``run-journal``
reads it) or the deployment's input topics
(:class:`~recurrence_ledger.whatif.topics.TopicsInput`). Each record is
read once and applied to every pass's processor. Like ``run-journal``, the
end of the input passes the provenance horizon for whatever still waits
(contract §5), so a replay of the topics decides exactly what a replay of
the same events as a journal decides.

With ``facts_of`` (a what-if of one alternative policy), that policy's
output files are written to ``out_dir/ledger/<topic>.jsonl`` exactly as
``run-journal`` writes them (ledger facts byte for byte, views every
``view_batch`` records and at the end) — its pass runs the core at that
policy itself.
"""

from __future__ import annotations

import contextlib
import gc
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from recurrence_ledger.catalogue import DEAD_LETTER, SOURCE_JOURNAL
from recurrence_ledger.embedded.journal import journal_lines
from recurrence_ledger.embedded.output import file_progress
from recurrence_ledger.embedded.parallel import JobPool, ShardResult, ShardWriter, merge_outputs, shard_records, wait_with_progress
from recurrence_ledger.embedded.runner import JsonlSink, RunSummary, close_batch, tally
from recurrence_ledger.policy import DEFAULT_VIEW_BATCH
from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
from recurrence_ledger.ledger.patterns import PatternStage, state_counts
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger.results import Emit
from recurrence_ledger.policy import MAX_PENDING_CANDIDATES
from recurrence_ledger.whatif.policies import Pass, Policy, passes
from recurrence_ledger.whatif.results import PolicyResult, merge_results, policy_result
from recurrence_ledger.whatif.shadow import WhatIfProcessor

#: Folder of ``out_dir`` that holds the alternative's output files.
LEDGER_FOLDER = "ledger"

Apply = Callable[[LedgerProcessor], list[Emit]]


class Input(Protocol):
    """What a replay reads: :meth:`records` yields, per input record, a
    function applying it to a processor; :meth:`describe` names the input
    for the report."""

    def describe(self) -> dict: ...

    def records(self, show_progress: bool = True) -> Iterator[Apply]: ...


class UnreadableJournal(RecurrenceLedgerError, OSError):
    """The journal file cannot be read (missing, a folder, no permission)."""


@dataclass
class JournalInput:
    """A journal file (docs/journals.md) as the input of a replay, read as
    ``run-journal`` reads it. Raises :class:`UnreadableJournal` from
    :meth:`open` when the file cannot be read."""

    path: Path
    _handle: BinaryIO | None = None
    _size: int = 0

    def open(self) -> JournalInput:
        """Open the file; UnreadableJournal when that fails."""
        try:
            self._handle = open(self.path, "rb")  # noqa: SIM115 - closed by close()
            self._size = self.path.stat().st_size
        except OSError as error:
            raise UnreadableJournal(f"cannot read the journal {self.path}: {error.strerror or error}") from None
        return self

    def close(self) -> None:
        """Close the file."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def describe(self) -> dict:
        """The input as the report names it."""
        return {"kind": "journal", "path": str(self.path), "bytes": self._size}

    def records(self, show_progress: bool = True) -> Iterator[Apply]:
        """Every non-blank line (a byte-order mark ignored) as a function
        applying it like ``run-journal`` (``ingest_journal_line``). A
        progress bar of bytes read on stderr."""
        assert self._handle is not None, "open() first"
        handle = self._handle
        with file_progress(show_progress) as progress:
            task = progress.add_task(f"what-if {self.path.name}", total=self._size)
            for number, line in journal_lines(handle):
                coordinates = Coordinates(SOURCE_JOURNAL, None, number, None)
                yield lambda processor, line=line, coordinates=coordinates: ingest_journal_line(processor, line, coordinates)
                if number % 512 == 0:
                    progress.update(task, completed=handle.tell())
            progress.update(task, completed=self._size)


@dataclass
class ReplayOutcome:
    """A finished replay: each policy's :class:`PolicyResult`, the input's
    description, records read, dead letters by reason (the first pass's;
    bad input is bad under every policy), passes run, wall seconds, and the
    folder of ``facts_of``'s output files (or None), and the review
    decisions of the input (``WhatIfProcessor.review_decisions``:
    (scope_id, candidate_id) → "approved" or "rejected", contract §18)."""

    results: dict[Policy, PolicyResult]
    inputs: dict
    review_decisions: dict[tuple[str, str], str] = field(default_factory=dict)
    records: int = 0
    dead_letters: Counter = field(default_factory=Counter)
    passes: int = 0
    seconds: float = 0.0
    facts_dir: Path | None = None


def dead_letter_reasons(emits: Iterable[Emit]) -> Iterator[str]:
    """The reason code of each dead letter among ``emits``."""
    return (emit.value["reason"] for emit in emits if emit.topic == DEAD_LETTER)


def pass_processors(policies: Sequence[Policy], facts_of: Policy | None, max_pending_candidates: int) -> list[tuple[Pass, WhatIfProcessor]]:
    """The passes of a replay of ``policies`` (``facts_of``'s first, when
    given) and a processor for each."""
    ordered = [facts_of, *policies] if facts_of is not None else list(policies)
    return [
        (group, WhatIfProcessor(group.native.config(max_pending_candidates), group.review_thresholds, group.near_duplicate_thresholds))
        for group in passes(ordered)
    ]


def replay(
    source: Input,
    policies: Sequence[Policy],
    *,
    out_dir: Path,
    facts_of: Policy | None = None,
    max_pending_candidates: int = MAX_PENDING_CANDIDATES.default,
    view_batch: int = DEFAULT_VIEW_BATCH,
    show_progress: bool = True,
) -> ReplayOutcome:
    """Replay ``source`` under every policy of ``policies`` (see the module
    docstring); ``facts_of`` (one of them) also gets its output files under
    ``out_dir/ledger/``. Raises ValueError for ``view_batch`` < 1 or a
    ``facts_of`` that is not among ``policies``, OSError when the output
    cannot be written, and what the input raises."""
    if view_batch < 1:
        raise ValueError("view_batch must be ≥ 1")
    if facts_of is not None and facts_of not in policies:
        raise ValueError("facts_of must be one of the policies")
    started = time.monotonic()
    runs = pass_processors(policies, facts_of, max_pending_candidates)
    writer = runs[0][1] if facts_of is not None else None
    stage = PatternStage(threshold=facts_of.pattern_threshold) if facts_of is not None else None  # the writer's pattern stage (§23)
    outcome = ReplayOutcome({}, source.describe(), passes=len(runs))
    summary = RunSummary()
    with contextlib.ExitStack() as stack:
        sink = None
        if writer is not None:
            outcome.facts_dir = out_dir / LEDGER_FOLDER
            sink = JsonlSink(outcome.facts_dir, stack)
        first = runs[0][1]
        for apply in source.records(show_progress):
            outcome.records += 1
            for _, processor in runs:
                emits = apply(processor)
                if processor is first:
                    outcome.dead_letters.update(dead_letter_reasons(emits))
                if processor is writer:
                    sink.write(emits, summary)
            if sink is not None and outcome.records % view_batch == 0:
                sink.write(close_batch(writer, stage), summary)
        for _, processor in runs:
            emits = processor.flush()  # the input's end decides what still waits, dead letters included (contract §18)
            if processor is first:
                outcome.dead_letters.update(dead_letter_reasons(emits))
            if processor is writer:
                sink.write(emits, summary)
                sink.write(close_batch(writer, stage), summary)
    for group, processor in runs:
        for member in group.policies:
            outcome.results[member] = policy_result(processor, member)
    outcome.review_decisions = dict(runs[0][1].review_decisions)
    outcome.seconds = time.monotonic() - started
    return outcome


@dataclass
class ShardReplay:
    """What one worker process of :func:`replay_journal_jobs` concluded on
    the scopes it owns: each policy's result (its pattern candidates still
    to be merged), each pass's pattern counts (``patterns.state_counts``)
    and the review decisions. The first pass's dead letters are counted in
    the shard's summary (``ShardResult.summary``), with or without a
    writer."""

    results: dict[Policy, PolicyResult]
    counts: list[list[tuple[str, str, int]]]
    review_decisions: dict[tuple[str, str], str]


def replay_shard(journal: Path, directory: Path, shard: int, jobs: int, policies: Sequence[Policy], facts_of: Policy | None,
                 max_pending_candidates: int, view_batch: int) -> ShardResult:
    """One worker process of :func:`replay_journal_jobs`: the records of
    ``journal`` it owns (``embedded.parallel.shard_records``) through every
    pass, ``facts_of``'s output files into ``directory``."""
    runs = pass_processors(policies, facts_of, max_pending_candidates)
    first = runs[0][1]
    summary = RunSummary()  # the first pass's emits without a writer (the writer keeps its own)
    with contextlib.ExitStack() as stack:
        stack.callback(gc.unfreeze)
        writer = ShardWriter(first, directory, stack) if facts_of is not None else None
        records = 0
        for records, number, line, scope_id in shard_records(journal, shard, jobs):
            if line is not None:
                coordinates = Coordinates(SOURCE_JOURNAL, None, number, None)
                for _, processor in runs:
                    emits = ingest_journal_line(processor, line, coordinates)
                    if processor is first:
                        if writer is not None:
                            writer.facts(records, scope_id, emits)
                        else:
                            tally(emits, summary)
            if writer is not None and records % view_batch == 0:
                writer.close(records)
        for _, processor in runs:
            if processor is not first or writer is None:
                emits = processor.flush()  # the input's end decides what still waits, dead letters included (contract §18)
                if processor is first:
                    tally(emits, summary)
        summary.lines = records
        result = writer.finish(records) if writer is not None else ShardResult(directory, summary)
    result.extra = ShardReplay(
        {member: policy_result(processor, member) for group, processor in runs for member in group.policies},
        [state_counts(processor.state.store) for _, processor in runs],
        dict(first.review_decisions),
    )
    return result


def replay_journal_jobs(
    source: JournalInput,
    policies: Sequence[Policy],
    jobs: int,
    *,
    out_dir: Path,
    facts_of: Policy | None = None,
    max_pending_candidates: int = MAX_PENDING_CANDIDATES.default,
    view_batch: int = DEFAULT_VIEW_BATCH,
    show_progress: bool = True,
) -> ReplayOutcome:
    """:func:`replay` of a journal on ``jobs`` processes, split by scope
    (``embedded.parallel``): the same results, report and ``facts_of``
    files, byte for byte. Patterns span scopes (contract §23): each
    policy's pattern candidates come from the counts of every process, and
    ``facts_of``'s pattern stage runs here. ``jobs`` 1 is :func:`replay`.
    Raises as :func:`replay`."""
    if jobs == 1:
        return replay(source, policies, out_dir=out_dir, facts_of=facts_of, max_pending_candidates=max_pending_candidates,
                      view_batch=view_batch, show_progress=show_progress)
    if view_batch < 1 or jobs < 1:
        raise ValueError("view_batch and jobs must be ≥ 1")
    if facts_of is not None and facts_of not in policies:
        raise ValueError("facts_of must be one of the policies")
    started = time.monotonic()
    groups = passes([facts_of, *policies] if facts_of is not None else list(policies))
    outcome = ReplayOutcome({}, source.describe(), passes=len(groups))
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".jobs-", dir=out_dir) as tmp, JobPool(jobs) as pool:
        futures = [pool.executor.submit(replay_shard, source.path, Path(tmp) / str(shard), shard, jobs, list(policies), facts_of,
                                        max_pending_candidates, view_batch) for shard in range(jobs)]
        shards = wait_with_progress(pool, futures, source.path, show_progress, f"what-if {source.path.name}")
        if facts_of is not None:
            outcome.facts_dir = out_dir / LEDGER_FOLDER
            outcome.facts_dir.mkdir(parents=True, exist_ok=True)
            merge_outputs(pool, shards, outcome.facts_dir, PatternStage(threshold=facts_of.pattern_threshold))
    parts: list[ShardReplay] = [shard.extra for shard in shards]
    for index, group in enumerate(groups):
        counts = [count for part in parts for count in part.counts[index]]
        for member in group.policies:
            outcome.results[member] = merge_results(member, [part.results[member] for part in parts], counts)
    outcome.records = shards[0].summary.lines
    for shard in shards:  # the first pass's dead letters (its summary: of the records and of the input's end)
        outcome.dead_letters.update(shard.summary.dead_letter_reasons)
        outcome.review_decisions.update(shard.extra.review_decisions)
    outcome.seconds = time.monotonic() - started
    return outcome
