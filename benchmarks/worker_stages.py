"""Per-stage CPU cost of the Kafka worker's own path, without a broker (not a test).

Times, in one process, each step the worker (``recurrence_ledger.runtime.
worker``) takes for a record of a backlog drain, on the core benchmark's
workload (``recurrence_ledger.workload``) published the way
``benchmarks/kafka_benchmark.py`` publishes it (Avro SourceEvents on
``source-journal``, fixed schema ids, keyed by scope_id, spread over
``--partitions`` partitions by key):

- **decode + validation**: ``records.process_message``'s shell before the
  core — key, Confluent frame, Avro body, the contract §3 field rules —
  ``Codec.decode_source`` then ``intake.validate`` (contract §9);
- **core**: ``LedgerProcessor.apply`` of every event (facts only);
- **core: views**: ``LedgerProcessor.end_batch`` at every transaction;
- **encode**: ``Outputs.records`` (Avro framing of every fact and view
  record, keys, topics) and the size check ``Outputs.oversized``;
- **checkpoint + commit**: the store's changed keys serialized
  (``store.changes()``) and every output and changelog record handed to a
  real confluent-kafka ``Producer`` through ``Checkpoint.produce`` /
  ``commit`` (librdkafka queues them locally: no broker is contacted; the
  transactional calls themselves are broker round trips and are left out:
  the end-to-end benchmark has them);
- **whole path**: the same records through the worker's own functions in
  one pass (``process_message`` → ``Outputs.records`` → ``Checkpoint``),
  to check that the stages add up.

Each stage is timed as a whole pass over the records (CPU time of the
process, ``time.process_time``), never per call, so the clock costs
nothing per record; before each pass (and after each transaction of the
whole path) what is alive is frozen out of the cyclic collector's
generations, as the worker does at each checkpoint. ``--runs`` (default 3) fresh runs; min / median / max
of each stage in µs per input event. The machine is shared: CPU time is
the truer measure, and the ratios between stages hold better than the
absolute values.

    python benchmarks/worker_stages.py                 # 25k events, 3 runs, writes BENCHMARKS.md
    python benchmarks/worker_stages.py --quick         # 5k events, 3 runs, print only
    python benchmarks/worker_stages.py --no-record --runs 5
    python benchmarks/worker_stages.py --profile       # and the whole path's profile by source file
    python benchmarks/worker_stages.py --interpreter /usr/bin/python3   # and the whole path under another
                                                       # interpreter (the package installed in it), side by side
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer, TopicPartition  # noqa: E402
from confluent_kafka import version as kafka_version  # noqa: E402

from recurrence_ledger import catalogue  # noqa: E402
from recurrence_ledger.ledger.config import LedgerConfig  # noqa: E402
from recurrence_ledger.ledger.intake import validate  # noqa: E402
from recurrence_ledger.runtime.checkpoint import Checkpoint  # noqa: E402
from recurrence_ledger.kafka.kafka_io import prepare_line  # noqa: E402
from recurrence_ledger.kafka.records import Outputs, process_message  # noqa: E402
from recurrence_ledger.runtime.task import Task  # noqa: E402
from recurrence_ledger.serde import codec  # noqa: E402
from recurrence_ledger.workload import Workload, generate_journal  # noqa: E402

from benchmarks.record import write_block  # noqa: E402
from tests.consumed import Record  # noqa: E402 - a consumed record as the worker sees it

STAGES = ("decode + validation", "core", "core: views", "encode", "checkpoint + commit")
WHOLE = "whole path"
#: The issue's budget per stage, µs per event (decode and validation together).
BUDGET = {"decode + validation": 15.0, "encode": 20.0, "checkpoint + commit": 15.0, "core": 50.0}
CHANGELOG = "bench-ledger-state-changelog"


class LocalProducer:
    """A real confluent-kafka Producer (librdkafka queues what is produced;
    nothing reaches a broker) whose transactional calls are no-ops."""

    def __init__(self) -> None:
        self.producer = Producer({"bootstrap.servers": "127.0.0.1:1", "queue.buffering.max.messages": 2_000_000,
                                  "queue.buffering.max.kbytes": 2_097_151, "linger.ms": 5, "compression.type": "lz4",
                                  "log_level": 0})
        self.produce = self.producer.produce
        self.poll = self.producer.poll

    def begin_transaction(self) -> None:
        pass

    def send_offsets_to_transaction(self, *_: object) -> None:
        pass

    def commit_transaction(self, *_: object) -> None:
        pass

    def close(self) -> None:
        self.producer.purge()
        self.producer.flush(0)


def messages(shape: Workload, partitions: int) -> list[Record]:
    """The workload as the consumer would hand it over (:func:`consumed`)."""
    return consumed(generate_journal(shape), partitions)


def consumed(records: Iterable[dict], partitions: int) -> list[Record]:
    """Journal records (``{"topic", "value"}``) as the consumer would hand
    them over: Avro SourceEvents on ``source-journal``, spread over
    ``partitions`` by key, offsets per partition in publish order."""
    out, offsets = [], [0] * partitions
    for record in records:
        prepared = prepare_line(orjson.dumps(record))
        partition = zlib.crc32(prepared.key) % partitions
        out.append(Record(catalogue.SOURCE_JOURNAL, partition, offsets[partition], prepared.key, prepared.value))
        offsets[partition] += 1
    return out


def decoded(wire: codec.Codec, message: Record, prefix: str) -> tuple[str, dict]:
    """``(kind, canonical event)``: what ``process_message`` and
    ``intake.ingest`` do before the core (key, frame, Avro body, §3 rules,
    key = scope_id)."""
    key = message.key().decode("utf-8")
    kind, value = wire.decode_source(catalogue.logical(message.topic(), prefix), message.value())
    event = validate(kind, value)
    if key != event["scope_id"]:
        raise AssertionError("the workload's keys are its scope_ids")
    return kind, event


def _timed(work: Callable[[], object]) -> tuple[float, object]:
    """CPU seconds of ``work()`` and its result. What earlier passes left
    alive is first moved out of the collector's generations, as the worker
    does after each checkpoint (``gc.freeze``), so a pass does not pay for
    scanning the others' objects."""
    gc.freeze()
    started = time.process_time()
    result = work()
    return time.process_time() - started, result


def run_stages(batch: list[Record], tx_events: int, partitions: int) -> dict[str, float]:
    """One run: seconds of CPU per stage over ``batch`` (STAGES, WHOLE)."""
    wire = codec.FIXED
    outputs = Outputs(codec.AVRO, wire, "", catalogue_max_bytes())
    seconds = dict.fromkeys((*STAGES, WHOLE), 0.0)
    prefix = ""
    # decode + validation: the shell of process_message before the core
    events: list[tuple[str, dict]] = []
    for start in range(0, len(batch), tx_events):  # a transaction at a time, frozen in between, as in the worker
        spent, chunk = _timed(lambda: [decoded(wire, m, prefix) for m in batch[start:start + tx_events]])
        seconds["decode + validation"] += spent
        events += chunk
    tasks = {number: Task(number, LedgerConfig()) for number in range(partitions)}
    produced: list[tuple[list, bytes | None, int]] = []
    views: list[tuple[list, int]] = []
    changes: list[list] = []
    for start in range(0, len(batch), tx_events):
        chunk = range(start, min(start + tx_events, len(batch)))
        spent, results = _timed(lambda: [(tasks[batch[i].partition()].processor.apply(*events[i]), i) for i in chunk])
        seconds["core"] += spent
        produced += [(result.emits, batch[i].key(), batch[i].partition()) for result, i in results]
        spent, ends = _timed(lambda: [(task.processor.end_batch(), task.partition) for task in tasks.values()])
        seconds["core: views"] += spent
        views += ends
        spent, changed = _timed(lambda: [[(task.partition, key, value) for key, value in task.store.changes()] for task in tasks.values()])
        seconds["checkpoint + commit"] += spent
        changes += changed
        for task in tasks.values():
            task.checkpointed()
    records: list[tuple[list, int]] = []
    for start in range(0, len(produced), tx_events):
        spent, chunk = _timed(lambda: [(outputs.records(emits, key), partition) for emits, key, partition in produced[start:start + tx_events]])
        seconds["encode"] += spent
        records += chunk
    spent, chunk = _timed(lambda: [(outputs.records(emits, None), partition) for emits, partition in views])
    seconds["encode"] += spent
    records += chunk
    spent, _ = _timed(lambda: [outputs.oversized(recs) for recs, _ in records])
    seconds["encode"] += spent
    producer = LocalProducer()
    checkpoint = Checkpoint(producer, lambda: None)
    offsets = [TopicPartition(catalogue.SOURCE_JOURNAL, number, 1) for number in range(partitions)]

    def commit() -> None:
        for recs, partition in records:
            for record in recs:
                checkpoint.produce(record.topic, record.key, record.value, partition)
        for per_task in changes:
            for partition, key, value in per_task:
                checkpoint.produce(CHANGELOG, key, value, partition)
        for _ in range(0, len(batch), tx_events):
            checkpoint.commit([], offsets)

    spent, _ = _timed(commit)
    seconds["checkpoint + commit"] += spent
    producer.close()
    seconds[WHOLE] = whole_path(batch, tx_events, partitions, outputs)
    return seconds


def whole_path(batch: list[Record], tx_events: int, partitions: int, outputs: Outputs) -> float:
    """CPU seconds of the worker's own functions over ``batch`` in one pass."""
    tasks = {number: Task(number, LedgerConfig()) for number in range(partitions)}
    producer = LocalProducer()
    checkpoint = Checkpoint(producer, lambda: None)
    gc.freeze()
    started = time.process_time()
    for start in range(0, len(batch), tx_events):
        for message in batch[start:start + tx_events]:
            task = tasks[message.partition()]
            emits = process_message(task.processor, message, "", codec.FIXED)
            records = outputs.records(emits, message.key())
            outputs.oversized(records)
            for record in records:
                checkpoint.produce(record.topic, record.key, record.value, task.partition)
            task.offsets[message.topic()] = message.offset() + 1
        for task in tasks.values():
            for record in outputs.records(task.processor.end_batch(), None):
                checkpoint.produce(record.topic, record.key, record.value, task.partition)
        changelog = [(CHANGELOG, task.partition, key, value) for task in tasks.values() for key, value in task.store.changes()]
        offsets = [TopicPartition(topic, task.partition, offset) for task in tasks.values() for topic, offset in task.offsets.items()]
        checkpoint.commit(changelog, offsets)
        for task in tasks.values():
            task.checkpointed()
        gc.freeze()  # as LedgerWorker._commit does
    spent = time.process_time() - started
    producer.close()
    return spent


def profile(batch: list[Record], tx_events: int, partitions: int, whole_us: float, top: int = 16) -> list[str]:
    """The whole path under cProfile: own time summed per source file
    (generated code by its schema or plan), the ``top`` largest, as
    Markdown table rows: the share of the profiled time, and that share of
    ``whole_us`` (the measured µs per event of the whole path, unprofiled:
    cProfile's own overhead inflates every figure several times over, most
    for small functions, so only the shares carry over)."""
    import cProfile
    import pstats

    outputs = Outputs(codec.AVRO, codec.FIXED, "", catalogue_max_bytes())
    whole_path(batch[: min(len(batch), 500)], tx_events, partitions, outputs)  # generated code compiled, caches warm
    profiler = cProfile.Profile()
    profiler.enable()
    whole_path(batch, tx_events, partitions, outputs)
    profiler.disable()
    by_file: dict[str, float] = {}
    for (filename, _, name), (_, _, own, _, _) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        where = filename.split("recurrence_ledger/")[-1] if "recurrence_ledger/" in filename else filename
        if where == "~":
            where = f"built-in: {name}"
        by_file[where] = by_file.get(where, 0.0) + own
    total = sum(by_file.values())
    rows = ["| where (own time) | share | ≈ µs per event |", "| --- | --- | --- |"]
    for where, own in sorted(by_file.items(), key=lambda item: -item[1])[:top]:
        where = where.replace(str(Path(__file__).resolve().parents[1]) + "/", "")
        rows.append(f"| `{where}` | {own / total:.1%} | {own / total * whole_us:.1f} |")
    return rows


def other_whole_path(python: str, args: argparse.Namespace) -> float:
    """One run of the whole path (µs per event) under the interpreter
    ``python``, in a process of its own, on the same workload."""
    command = [python, __file__, "--whole-path-json", "--scopes", str(args.scopes), "--outcomes-per-scope", str(args.outcomes_per_scope),
               "--partitions", str(args.partitions), "--tx-events", str(args.tx_events)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return orjson.loads(done.stdout.strip().splitlines()[-1])["us"]


def describe(python: str) -> str:
    """``python``'s version and where it is installed (a virtualenv's base interpreter)."""
    found = subprocess.run([python, "-c", "import platform, sys; print(platform.python_version(), sys.base_prefix)"],
                           capture_output=True, text=True, check=True).stdout.split()
    return f"CPython {found[0]} in `{found[1]}`"


def interpreter_lines(runs: list[dict[str, float]], others: dict[str, list[float]]) -> list[str]:
    """The whole path under each ``--interpreter``, beside this one's, as
    Markdown: how much the interpreter's build changes the cost."""
    here = statistics.median(run[WHOLE] for run in runs)
    lines = ["", "The whole path under other interpreters, one run of each after each run above (so under the same load), "
                 "CPU µs per input event:", "", "| interpreter | runs | median | against this one |", "| --- | --- | --- | --- |",
             f"| {describe(sys.executable)} | {' / '.join(f'{run[WHOLE]:.1f}' for run in runs)} | **{here:.1f}** | 1.00× |"]
    for python, measured in others.items():
        median = statistics.median(measured)
        lines.append(f"| {describe(python)} | {' / '.join(f'{value:.1f}' for value in measured)} | **{median:.1f}** | {median / here:.2f}× |")
    return lines


def catalogue_max_bytes() -> int:
    """The worker's default ``max_output_bytes``."""
    from recurrence_ledger.runtime.worker_config import WorkerConfig

    return WorkerConfig.__dataclass_fields__["max_output_bytes"].default


def _code_revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "processors"], capture_output=True, text=True, check=True).stdout.strip()
        return head + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 scopes × 1,000 outcomes; print only")
    parser.add_argument("--scopes", type=int, default=25)
    parser.add_argument("--outcomes-per-scope", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--tx-events", type=int, default=2_000, help="records per transaction (a backlog drain's batch)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="print only: do not write BENCHMARKS.md")
    parser.add_argument("--profile", action="store_true", help="also print the whole path's cProfile, grouped by source file")
    parser.add_argument("--interpreter", action="append", default=[], metavar="PYTHON",
                        help="also time the whole path under this Python (the package installed in it), one run of it after each run here")
    parser.add_argument("--whole-path-json", action="store_true", help=argparse.SUPPRESS)  # one run of the whole path, for --interpreter
    args = parser.parse_args()
    if args.quick:
        args.scopes, args.no_record = 5, True
    shape = Workload(scopes=args.scopes, outcomes_per_scope=args.outcomes_per_scope, heads_per_scope=10, handoffs=5)
    load_before = " ".join(f"{value:.2f}" for value in os.getloadavg())
    batch = messages(shape, args.partitions)
    gc.collect()
    gc.freeze()  # as the worker does after each checkpoint
    if args.whole_path_json:
        outputs = Outputs(codec.AVRO, codec.FIXED, "", catalogue_max_bytes())
        print(orjson.dumps({"us": whole_path(batch, args.tx_events, args.partitions, outputs) * 1e6 / len(batch)}).decode())
        return
    runs, others = [], {python: [] for python in args.interpreter}
    for _ in range(args.runs):
        runs.append({stage: spent * 1e6 / len(batch) for stage, spent in run_stages(batch, args.tx_events, args.partitions).items()})
        gc.collect()
        gc.freeze()
        for python, measured in others.items():  # interleaved, so both see the same load
            measured.append(other_whole_path(python, args))
    load_after = " ".join(f"{value:.2f}" for value in os.getloadavg())
    lines = table(runs, len(batch), args, load_before, load_after)
    if others:
        lines += interpreter_lines(runs, others)
    if args.profile:
        whole_us = statistics.median(run[WHOLE] for run in runs)
        lines += ["", f"Where the whole path's time goes: own time per source file under cProfile (`--profile`), as a share,"
                      f" and that share of the measured {whole_us:.0f} µs per event:", "",
                  *profile(batch, args.tx_events, args.partitions, whole_us)]
    print("\n".join(lines))
    if not args.no_record:
        write_block("worker-stages", "Kafka worker, per stage", lines)


def table(runs: list[dict[str, float]], events: int, args: argparse.Namespace, load_before: str, load_after: str) -> list[str]:
    """The BENCHMARKS.md block."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"Recorded {when} by `python benchmarks/worker_stages.py` (code {_code_revision()}; {platform.machine()}, "
        f"CPython {platform.python_version()}, {os.cpu_count()} CPUs, confluent-kafka {kafka_version()}; no broker). "
        f"Load average before / after: {load_before} / {load_after} — the machine is shared, so read the ratios "
        "more than the absolute values.",
        "",
        f"{events:,} events ({args.scopes} scopes × {args.outcomes_per_scope:,} outcomes, 10 heads and 5 Handoffs per scope), "
        f"Avro SourceEvents on {args.partitions} partitions, transactions of {args.tx_events:,} records; CPU µs per input "
        f"event, min / median / max of {len(runs)} runs (each stage timed as one pass over all records):",
        "",
        "| stage | min | median | max | budget (issue 23) |",
        "| --- | --- | --- | --- | --- |",
    ]
    total = [sum(run[stage] for stage in STAGES) for run in runs]
    for stage in (*STAGES, "sum of the stages", WHOLE):
        values = sorted(total if stage == "sum of the stages" else [run[stage] for run in runs])
        budget = BUDGET.get(stage)
        shown = f"≤ {budget:.0f}" if budget is not None else ("≤ 100" if stage == WHOLE else "")
        lines.append(f"| {stage} | {values[0]:.1f} | **{statistics.median(values):.1f}** | {values[-1]:.1f} | {shown} |")
    return lines


if __name__ == "__main__":
    main()
