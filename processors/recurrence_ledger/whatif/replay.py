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
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from recurrence_ledger.catalogue import DEAD_LETTER, SOURCE_JOURNAL
from recurrence_ledger.embedded.journal import journal_lines
from recurrence_ledger.embedded.output import file_progress
from recurrence_ledger.embedded.runner import JsonlSink, RunSummary, close_batch
from recurrence_ledger.policy import DEFAULT_VIEW_BATCH
from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
from recurrence_ledger.ledger.patterns import PatternStage
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger.results import Emit
from recurrence_ledger.policy import MAX_PENDING_CANDIDATES
from recurrence_ledger.whatif.policies import Pass, Policy, passes
from recurrence_ledger.whatif.results import PolicyResult, policy_result
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
    candidate_id → "approved" or "rejected", contract §18)."""

    results: dict[Policy, PolicyResult]
    inputs: dict
    review_decisions: dict[str, str] = field(default_factory=dict)
    records: int = 0
    dead_letters: Counter = field(default_factory=Counter)
    passes: int = 0
    seconds: float = 0.0
    facts_dir: Path | None = None


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
    ordered = [facts_of, *policies] if facts_of is not None else list(policies)
    runs: list[tuple[Pass, WhatIfProcessor]] = [
        (group, WhatIfProcessor(group.native.config(max_pending_candidates), group.review_thresholds, group.near_duplicate_thresholds))
        for group in passes(ordered)
    ]
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
                    outcome.dead_letters.update(emit.value["reason"] for emit in emits if emit.topic == DEAD_LETTER)
                if processor is writer:
                    sink.write(emits, summary)
            if sink is not None and outcome.records % view_batch == 0:
                sink.write(close_batch(writer, stage), summary)
        for _, processor in runs:
            emits = processor.flush()
            if processor is writer:
                sink.write(emits, summary)
                sink.write(close_batch(writer, stage), summary)
    for group, processor in runs:
        for member in group.policies:
            outcome.results[member] = policy_result(processor, member)
    outcome.review_decisions = dict(runs[0][1].review_decisions)
    outcome.seconds = time.monotonic() - started
    return outcome
