"""Benchmark of the partition stores (not a test): the in-memory
``ChangelogStore`` against the RocksDB ``RocksStore`` (``--state-dir``),
driven as the worker drives one partition — records decoded and applied
through ``process_message``, every ``--max-batch`` records a checkpoint:
the views (``end_batch``), the changelog records (``changes``) and
``checkpointed`` (for RocksDB: the WriteBatch with the checkpoint). No
broker: what is timed is the core plus the store, the part the store
changes; Kafka's cost is the same for both.

Measured: CPU seconds of the process (``process_time``; wall time on the
shared machine is noisy) per run, min / median / max of ``--repeats`` runs
of each store, alternating, over one generated journal; the RocksDB run
starts from an empty directory each time. Records the table in
BENCHMARKS.md between the ``store-benchmark`` markers.

With ``--kafka`` (the local broker up, ``KAFKA_BOOTSTRAP_SERVERS``), also
through the worker as deployed: the journal is published once to 4
partitions, then ``recurrence-ledger worker --exit-when-idle 3`` drains it,
each run in a consumer group (app id) of its own, alternating without and
with ``--state-dir``; measured are the worker process's CPU seconds
(``getrusage`` of the child) and wall seconds (including the 3 s idle
exit). The topics are deleted at the end.

    python benchmarks/store_benchmark.py              # ~54k events, 3 repeats
    python benchmarks/store_benchmark.py --kafka      # and through the worker
    python benchmarks/store_benchmark.py --quick --no-record
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recurrence_ledger.ledger.processor import LedgerConfig  # noqa: E402
from recurrence_ledger.ledger.state import pin_unicode_version  # noqa: E402
from recurrence_ledger.policy import MAX_BATCH  # noqa: E402
from recurrence_ledger.kafka.records import process_message  # noqa: E402
from recurrence_ledger.store.rocksdb import open_store  # noqa: E402
from recurrence_ledger.store.memory import ChangelogStore  # noqa: E402
from recurrence_ledger.runtime.task import Task  # noqa: E402
from recurrence_ledger.workload import Workload, generate_journal  # noqa: E402

from benchmarks.record import write_block  # noqa: E402
from tests.consumed import consumed  # noqa: E402

FULL = Workload(scopes=40, outcomes_per_scope=1_200, heads_per_scope=20, handoffs=2, seed=7, candidates=0.1)
QUICK = Workload(scopes=10, outcomes_per_scope=300, heads_per_scope=10, handoffs=2, seed=7, candidates=0.1)


def drive(records: list, store: ChangelogStore, batch: int) -> tuple[float, int]:
    """CPU seconds to apply ``records`` through a Task over ``store`` in
    checkpoints of ``batch`` records; and the changelog records written."""
    task = Task(0, LedgerConfig(), store)
    pin_unicode_version(task.store)
    task.mark()
    offset = written = 0
    started = time.process_time()
    for at in range(0, len(records), batch):
        for record in records[at : at + batch]:
            process_message(task.processor, record, "")
        task.processor.end_batch()
        changes = task.store.changes()
        written += len(changes)
        offset += len(changes)
        task.checkpointed(offset - 1 if changes else None)
    seconds = time.process_time() - started
    store.close()
    return seconds, written


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def worker_runs(records_path: Path, repeats: int, bootstrap: str) -> dict[str, list[tuple[float, float]]]:
    """(CPU s, wall s) of each worker run over the published journal."""
    import resource
    import uuid

    from recurrence_ledger.kafka.kafka_admin import create_topics, delete_deployment
    from recurrence_ledger.kafka.kafka_io import publish_journal

    prefix = f"sbench-{uuid.uuid4().hex[:8]}."
    create_topics(bootstrap, 4, prefix)
    publish_journal(bootstrap, records_path, topic_prefix=prefix, show_progress=False)
    runs: dict[str, list[tuple[float, float]]] = {"memory": [], "rocksdb": []}
    apps: list[str] = []
    state = Path(tempfile.mkdtemp(prefix="store-bench-worker-"))
    try:
        for repeat in range(repeats):
            for name in runs:
                app = f"bench-{name}-{repeat}"
                apps.append(app)
                extra = ["--state-dir", str(state)] if name == "rocksdb" else []
                args = [sys.executable, "-m", "recurrence_ledger.cli", "worker", "--bootstrap", bootstrap, "--topic-prefix", prefix,
                        "--app-id", app, "--instance-id", "w1", "--output-format", "avro", "--exit-when-idle", "3", *extra]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.monotonic()
                subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                wall = time.monotonic() - started
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                runs[name].append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall))
    finally:
        shutil.rmtree(state, ignore_errors=True)
        for app in apps:
            delete_deployment(bootstrap, prefix, app)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-batch", type=int, default=MAX_BATCH.default)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--kafka", action="store_true", help="also through the worker on the broker of KAFKA_BOOTSTRAP_SERVERS")
    args = parser.parse_args()
    shape = QUICK if args.quick else FULL
    records = consumed(json.dumps(record).encode() for record in generate_journal(shape))
    times: dict[str, list[float]] = {"memory": [], "rocksdb": []}
    written = 0
    load_before = load()
    for _ in range(args.repeats):
        seconds, written = drive(records, ChangelogStore(), args.max_batch)
        times["memory"].append(seconds)
        root = Path(tempfile.mkdtemp(prefix="store-bench-"))
        try:
            seconds, _ = drive(records, open_store(root, "bench-changelog", 0, "bench-id"), args.max_batch)
        finally:
            shutil.rmtree(root)
        times["rocksdb"].append(seconds)
    rows = []
    for name, runs in times.items():
        rate = [len(records) / s for s in runs]
        rows.append(f"| {name} | {min(runs):.2f} / {statistics.median(runs):.2f} / {max(runs):.2f} | "
                    f"{max(rate):,.0f} / {statistics.median(rate):,.0f} / {min(rate):,.0f} |")
    ratio = statistics.median(times["rocksdb"]) / statistics.median(times["memory"])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC at commit {commit}, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} cores (shared with other jobs: load average {load_before} before, {load()} after).",
        f"One partition, {len(records):,} journal records ({shape.scopes} scopes × {shape.outcomes_per_scope} outcomes), "
        f"checkpoints of {args.max_batch} records, {written:,} changelog records; CPU seconds (process_time) of "
        f"{args.repeats} runs of each store, alternating (`python benchmarks/store_benchmark.py`).",
        "",
        "| store | CPU s (min / median / max) | records/s (best / median / worst) |",
        "| --- | --- | --- |",
        *rows,
        "",
        f"RocksDB / in-memory CPU time (medians): {ratio:.2f}× (target: within 1.25×).",
    ]
    if args.kafka:
        journal_path = Path(tempfile.mkdtemp(prefix="store-bench-journal-")) / "journal.jsonl"
        journal_path.write_text("".join(json.dumps(record) + "\n" for record in generate_journal(shape)))
        runs = worker_runs(journal_path, args.repeats, os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
        lines += [
            "",
            f"Through the worker on the local broker (`--kafka`): the same journal on 4 partitions, one worker draining it "
            f"(`worker --exit-when-idle 3`, defaults otherwise), {args.repeats} runs of each, alternating; load average {load()} after.",
            "",
            "| worker | CPU s (min / median / max) | wall s incl. 3 s idle exit (min / median / max) |",
            "| --- | --- | --- |",
        ]
        for name, pairs in runs.items():
            cpu, wall = [c for c, _ in pairs], [w for _, w in pairs]
            lines.append(f"| {'in memory' if name == 'memory' else '--state-dir'} | {min(cpu):.1f} / {statistics.median(cpu):.1f} / {max(cpu):.1f} | "
                         f"{min(wall):.1f} / {statistics.median(wall):.1f} / {max(wall):.1f} |")
        cpu_ratio = statistics.median(c for c, _ in runs["rocksdb"]) / statistics.median(c for c, _ in runs["memory"])
        lines += ["", f"Worker CPU time with `--state-dir` / in memory (medians): {cpu_ratio:.2f}×."]
    print("\n".join(lines))
    if not args.no_record:
        write_block("store-benchmark", "Partition stores: in memory and RocksDB", lines)


if __name__ == "__main__":
    main()
