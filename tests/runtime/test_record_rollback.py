"""Adversarial tests of the worker's runtime without a broker: the worker's
``Task`` driven over a generated journal as the loop drives it (per-record
rollback, random batch boundaries, several failing records per batch,
restarts from a simulated compacted changelog), compared with a run that
never saw the failed records; and the reference the broker tests of
tests/e2e/test_parked_records.py compare the worker with.

Failing when written (branch ``break``; the diagnosis is in each docstring):

- test_a_core_failure_in_the_middle_of_a_record_leaves_no_trace_in_the_views
  (``LedgerProcessor.rolled_back`` keeps ``_revisions_touched``: end_batch
  then raises TypeError and stops the worker);
- test_many_oversized_records_in_one_batch_do_not_make_the_batch_quadratic
  (every rollback re-applies the whole batch so far: quadratic, past the
  30 s transaction timeout).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import orjson
import pytest

from recurrence_ledger.ledger import processor as processor_module
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.ledger.state import pin_unicode_version
from recurrence_ledger.kafka.kafka_io import prepare_line
from recurrence_ledger.store.base import encode_key
from recurrence_ledger.kafka.records import process_message
from recurrence_ledger.runtime.task import Task
from recurrence_ledger.catalogue import LEDGER_TOPICS, VIEW_TOPICS
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import final_views
from tests.consumed import Record, consumed
from tests.e2e import harness

FUZZ_WORKLOAD = Workload(scopes=5, outcomes_per_scope=60, heads_per_scope=4, handoffs=2, seed=29, candidates=0.3)


def journal_records(workload: Workload = FUZZ_WORKLOAD) -> list[Record]:
    return consumed(json.dumps(record).encode("utf-8") for record in generate_journal(workload))


class Simulated:
    """One partition driven as ``LedgerWorker`` drives it: records applied
    through ``process_message``; a failing record rolled back with
    ``Task.rollback``; every checkpoint publishes the views
    (``end_batch``), writes the changes to a compacted changelog (a dict)
    and calls ``checkpointed``; a restart builds a fresh Task restored from
    that changelog, pins the Unicode version and marks, as ``_recover_step``."""

    def __init__(self) -> None:
        self.changelog: dict[bytes, bytes] = {}
        self.facts: list[tuple[str, str | None, bytes]] = []
        self.views: list[tuple[str, str | None, bytes]] = []
        self.task = self._fresh_task()

    def _fresh_task(self) -> Task:
        task = Task(0, LedgerConfig())
        for key, value in self.changelog.items():
            task.store.restore(key, value)
        pin_unicode_version(task.store)
        task.mark()
        task.ready = True
        return task

    def _reapply(self, record: Record) -> None:
        process_message(self.task.processor, record, "")

    def apply(self, record: Record, fail: bool) -> None:
        emits = process_message(self.task.processor, record, "")
        if fail:  # the core applied it, then "raised": as FaultInjector's core_error
            self.task.rollback(self._reapply)
            return
        self.task.applied.append(record)
        self.facts += [(e.topic, e.key, orjson.dumps(e.value)) for e in emits]

    def checkpoint(self) -> None:
        for emit in self.task.processor.end_batch():
            self.views.append((emit.topic, emit.key, orjson.dumps(emit.value)))
        for key, value in self.task.store.changes():
            if value is None:
                self.changelog.pop(key, None)
            else:
                self.changelog[key] = value
        self.task.checkpointed()

    def restart(self) -> None:
        """Crash after a commit, then restore from the changelog."""
        self.task = self._fresh_task()

    def state(self) -> dict[bytes, bytes]:
        return {encode_key(key): orjson.dumps(value) for key, value in self.task.store.data.items()}

    def final_views(self) -> dict:
        result = {}
        for topic in VIEW_TOPICS:
            result[topic] = final_views(topic, [orjson.loads(v) for t, _, v in self.views if t == topic])
        return result


def drive(records: list[Record], batches: list[list[int]], failing: set[int], restarts: set[int]) -> Simulated:
    sim = Simulated()
    for number, batch in enumerate(batches):
        for index in batch:
            sim.apply(records[index], index in failing)
        sim.checkpoint()
        if number in restarts:
            sim.restart()
    return sim


def random_plan(rng: random.Random, size: int, fail_rate: float) -> tuple[list[list[int]], set[int], set[int]]:
    batches, at = [], 0
    while at < size:
        length = rng.choice((1, 2, 3, 5, 8, 13, 40))
        batches.append(list(range(at, min(size, at + length))))
        at += length
    failing = {index for index in range(size) if rng.random() < fail_rate}
    restarts = {number for number in range(len(batches)) if rng.random() < 0.15}
    return batches, failing, restarts


@pytest.mark.parametrize("seed", range(6))
def test_many_failures_per_batch_with_restarts_equal_never_seeing_them(seed):
    """Several failing records in the same batch (adjacent ones too, the
    first of a batch, the first after a restore), checkpoints of random
    sizes, restarts from the changelog: facts, final views, the live state
    and the changelog equal a run that never saw the failed records."""
    rng = random.Random(seed)
    every = journal_records()
    batches, failing, restarts = random_plan(rng, len(every), fail_rate=0.12)
    # The first record after every restore fails too (the pin must survive).
    for number in restarts:
        if number + 1 < len(batches):
            failing.add(batches[number + 1][0])
    got = drive(every, batches, failing, restarts)
    kept_batches = [[i for i in batch if i not in failing] for batch in batches]
    want = drive(every, kept_batches, set(), set())
    for topic in LEDGER_TOPICS:
        assert [f for f in got.facts if f[0] == topic] == [f for f in want.facts if f[0] == topic], topic
    assert got.final_views() == want.final_views()
    assert got.state() == want.state()
    assert got.changelog == want.changelog
    assert got.changelog == got.state()  # what recovery would load is the live state


def test_a_failure_on_the_first_record_after_a_restore_keeps_the_unicode_pin():
    every = journal_records()
    sim = Simulated()
    sim.apply(every[0], fail=True)  # first record of a fresh partition: only the pin is pending
    sim.apply(every[1], fail=False)
    sim.checkpoint()
    assert b'["deployment","unicode_version"]' in sim.changelog
    sim.restart()
    sim.changelog.clear()  # a partition restored from a changelog written before the pin existed
    sim.restart()
    sim.apply(every[2], fail=True)
    sim.checkpoint()
    assert b'["deployment","unicode_version"]' in sim.changelog


def _first_record_with_a_verdict(every: list[Record]) -> int:
    """Index of the first record on which the core records a verdict
    (an observation: its revision is marked in ``_revisions_touched``)."""
    task = Task(0, LedgerConfig())
    for index, record in enumerate(every):
        emits = process_message(task.processor, record, "")
        if any(emit.topic == "recurrence-observations" for emit in emits):
            return index
    raise AssertionError("no record with a verdict in the workload")


def _marks_no_revision(before: list[Record], record: Record) -> bool:
    """Whether ``record``, applied after ``before``, finishes its scope
    without marking any revision for the views."""
    task = Task(0, LedgerConfig())
    for earlier in before:
        process_message(task.processor, earlier, "")
    task.processor.end_batch()
    process_message(task.processor, record, "")
    marks = task.processor._dirty
    return bool(marks) and not any(marks.values())


def test_a_core_failure_in_the_middle_of_a_record_leaves_no_trace_in_the_views(monkeypatch):
    """A real core bug raises in the middle of apply — here after the
    record's verdict was recorded (its revision marked in the processor's
    ``_revisions_touched``) and before ``_finish_scope`` moved the marks to
    the batch's view keys — not after apply returned, as the fault
    injector's core_error does. The record is rolled back and
    dead-lettered; the batch's next record, of another scope, must not
    publish a RevisionStatistics row of the failed record's revision under
    its own scope (a view key run-journal never has)."""
    every = journal_records()
    target = _first_record_with_a_verdict(every)
    target_scope = every[target].key()
    quiet = next(i for i in range(target + 1, len(every)) if every[i].key() != target_scope and _marks_no_revision(every[:target], every[i]))
    # The journal: everything before the failing record, the failing record
    # (first of its batch), then a record of another scope that changes no
    # revision's counts.
    every = [*every[:target + 1], every[quiet]]
    follower = target + 1
    original = processor_module.LedgerProcessor._expire_pending
    armed = {"on": False}

    def failing(self, *args, **kwargs):
        if armed["on"]:
            raise RuntimeError("simulated core bug after the verdict")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(processor_module.LedgerProcessor, "_expire_pending", failing)
    sim = Simulated()
    for index in range(follower + 1):
        if index == target:
            sim.checkpoint()  # the failing record is the first of its batch: nothing to re-apply
            armed["on"] = True
            with pytest.raises(Exception, match="simulated core bug"):
                process_message(sim.task.processor, every[index], "")
            armed["on"] = False
            sim.task.rollback(sim._reapply)  # as LedgerWorker._handle on a CoreFailure
            continue
        sim.apply(every[index], fail=False)
    sim.checkpoint()
    want = Simulated()
    for index in range(follower + 1):
        if index == target:
            want.checkpoint()
        else:
            want.apply(every[index], fail=False)
    want.checkpoint()
    assert sim.facts == want.facts
    assert sim.state() == want.state()
    assert [view[:2] for view in sim.views] == [view[:2] for view in want.views]
    assert sim.final_views() == want.final_views()



def test_many_oversized_records_in_one_batch_do_not_make_the_batch_quadratic():
    """--max-output-bytes 300 parks about half the records of a backlog
    batch (every record with an observation). Each rollback re-applies
    every earlier record of the batch, so k failures in a batch of n cost
    ~k·n/2 applications: a 2,000-record batch (the default --max-batch)
    takes ~58 s instead of 0.5 s here — past the transaction timeout
    (30 s), so the batch can never commit. Over the first 1,000 records of
    a one-partition backlog (about half of them parked) the rollbacks must
    re-apply at most one record per record of the batch — linear, where the
    quadratic cost is ~k·n/2 ≈ 250,000 re-applications. Counted, not timed:
    a wall-clock bound fails on a loaded machine."""
    from recurrence_ledger.kafka.records import encode_emit

    every = journal_records(Workload(scopes=10, outcomes_per_scope=200, heads_per_scope=4, handoffs=2, seed=5))[:1000]
    sim = Simulated()
    failures = reapplied = 0
    for record in every:  # one batch, as LedgerWorker._handle / _apply do
        emits = process_message(sim.task.processor, record, "")
        if any(len(encode_emit(emit, "avro")) > 300 for emit in emits):
            failures += 1
            reapplied += sim.task.rollback(sim._reapply)
        else:
            sim.task.applied.append(record)
    sim.checkpoint()
    assert failures > 400, f"the workload must park about half of {len(every)} records, parked {failures}"
    assert reapplied <= len(every), f"{len(every)} records, {failures} parked, {reapplied} re-applications"


# ------------------------------------------------------------------ the broker tests' reference
#
# The reference of a worker run that dead-lettered records (internal_error,
# oversized_output; tests/e2e/test_parked_records.py) is the embedded
# core over the journal without them. The end of a journal file is the
# provenance horizon for run-journal (it decides what is still pending,
# contract §5); a worker has no end of input. Dropping a receipt or a
# handoff can leave an outcome pending, so the reference is run-journal's
# loop *without* its end-of-file flush (``embedded_without_flush``);
# test_the_reference_equals_run_journal_on_the_full_journal checks that on
# the full journal it is byte for byte run-journal's.

BROKER_WORKLOAD = Workload(scopes=6, outcomes_per_scope=60, heads_per_scope=4, handoffs=2, seed=31, candidates=0.2)  # 473 events


@pytest.fixture(scope="module")
def broker_journal(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("reference") / "journal.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in generate_journal(BROKER_WORKLOAD)))
    return path


def embedded_without_flush(journal: Path, out: Path, dropped: set[bytes] = frozenset()) -> dict[str, bytes]:
    """run-journal's loop (same core, same sink) over ``journal`` without
    the lines whose published value is in ``dropped``, and without the
    end-of-file flush; views once at the end."""
    import contextlib

    from recurrence_ledger.embedded import JsonlSink, RunSummary, close_batch, journal_lines
    from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
    from recurrence_ledger.ledger.patterns import PatternStage
    from recurrence_ledger.ledger.processor import LedgerProcessor
    from recurrence_ledger.catalogue import OUTPUT_TOPICS, SOURCE_JOURNAL

    processor = LedgerProcessor(validate_outputs=True)
    stage = PatternStage(validate_outputs=True)
    summary = RunSummary()
    with contextlib.ExitStack() as stack:
        sink = JsonlSink(out, stack)
        with open(journal, "rb") as handle:
            for number, line in journal_lines(handle):
                if prepare_line(line).value in dropped:
                    continue
                sink.write(ingest_journal_line(processor, line, Coordinates(SOURCE_JOURNAL, None, number, None)), summary)
        sink.write(close_batch(processor, stage), summary)
    return {topic: (out / f"{topic}.jsonl").read_bytes() for topic in OUTPUT_TOPICS}


def test_the_reference_equals_run_journal_on_the_full_journal(broker_journal, tmp_path):
    full = harness.embedded(broker_journal, tmp_path / "run-journal")
    mine = embedded_without_flush(broker_journal, tmp_path / "mine")
    for topic in LEDGER_TOPICS:
        assert mine[topic] == full[topic], topic
    for topic in VIEW_TOPICS:
        assert final_views(topic, harness.lines(mine[topic])) == final_views(topic, harness.lines(full[topic])), topic

