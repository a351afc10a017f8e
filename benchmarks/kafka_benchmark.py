"""End-to-end benchmark of the Kafka worker on the real broker (not a test).

Measures the ledger worker (``python -m recurrence_ledger.cli worker``, run
through its CLI as deployed, in one process and in two processes of one
consumer group) against a plain consume → produce passthrough written with
the same client library (confluent-kafka) and against a stateful
exactly-once quixstreams application, over the same pre-published input
topic, in the same run, and records the numbers in BENCHMARKS.md between
the ``kafka-benchmark`` markers. Run with the local broker up
(``env_lines="$(bash deploy/services.sh up)"; eval "$env_lines"``):

    python benchmarks/kafka_benchmark.py            # full run (~7 min on the 2-core VM), writes BENCHMARKS.md
    python benchmarks/kafka_benchmark.py --quick    # smoke sizes (~1 min), prints only
    python benchmarks/kafka_benchmark.py --no-record             # full sizes, prints only
    python benchmarks/kafka_benchmark.py --no-quixstreams        # without the quixstreams row (noted)

quixstreams is not a dependency of the project, and every quixstreams
2.x/3.x release pins a confluent-kafka older than the project's, so it
lives in a virtualenv of its own: the ``bench`` dependency group of
pyproject.toml (from the repository root, pip ≥ 25.1)::

    python3 -m venv .venv-bench && .venv-bench/bin/pip install -U pip && .venv-bench/bin/pip install --group bench

The quixstreams process runs under ``--quixstreams-python`` (default:
``$RL_BENCH_QUIXSTREAMS_PYTHON``, else ``.venv-bench/bin/python`` when it
exists, else this interpreter); the script stops before publishing, saying
how to install it, when that interpreter cannot import quixstreams.

Every run uses fresh topics under random prefixes (``kbench-<hex>.``) and
deletes them and its consumer groups at the end (``--keep-topics`` keeps
them). Worker logs, per-event latencies and ``result.json`` stay in a
temporary directory whose path is printed first.

Sizes (defaults): the core benchmark's workload, 100 scopes × 2,000 outcomes
= 202,100 events, 4 partitions, ``--runs 3``: three throughput runs of
each kind and three latency runs of 20 s of publishing per commit interval
(100 ms), each reported with min / median / max (``--repeats`` and
``--latency-repeats`` set the two counts apart; ``--quick``: one of each,
small sizes).

Throughput (events/s). The workload (``recurrence_ledger.workload``) is published
once, as Avro SourceEvents on ``source-journal`` (``kafka_io.
publish_journal``), before anything consumes it. Then, one at a time, each
in its own consumer group, a process (or two) drains that backlog and exits
after 3 s without input; the five kinds are interleaved, ``--repeats``
rounds:

- ``ledger``: the worker (Avro outputs, a transaction every 100 ms, the
  default; no Redis view — Redis is not on the publish → output path);
  ``--instance-id w1``, ``--exit-when-idle 3``;
- ``ledger-2proc``: ``worker --processes 2 --instance-id w1`` as deployed:
  one supervisor and two worker processes (instance ids ``w1-0`` /
  ``w1-1``) in one consumer group; with 4 partitions the range assignor
  gives each 2 partitions of every input topic. The first to join takes
  all partitions until the other joins and the group rebalances (static
  members; the broker's ``group.initial.rebalance.delay.ms`` is 0): that
  rebalance is inside the measured time, and the assignments are read from
  the log (each line names its process) and reported relative to t_start.
  A batch worker exits only once the whole group is caught up, so both
  exit at the end. CPU = the supervisor and both worker processes;
  ``--no-two-processes`` skips this kind;
- ``passthrough-alo``: plain at-least-once passthrough (:func:`passthrough`):
  subscribe with the worker's consumer settings (range assignor,
  read_committed, no auto commit, batches of 2,000), produce each record
  unchanged (key, value, partition number) to its own output topic, and
  every 100 ms flush the producer and commit the consumed offsets;
- ``passthrough-tx``: the same with the worker's transaction pattern: begin,
  produce, every 100 ms ``send_offsets_to_transaction`` +
  ``commit_transaction`` (the worker's producer settings);
- ``quixstreams``: a quixstreams ``Application`` (benchmarks/
  quixstreams_baseline.py, started as ``kafka_benchmark.py
  --quixstreams-child`` under ``--quixstreams-python``):
  ``processing_guarantee="exactly-once"``, ``auto_offset_reset="earliest"``,
  ``commit_interval`` 0.1 s (the worker's), reads ``source-journal`` as
  bytes, keeps a counter per record key in its default state store
  (RocksDB, with its changelog topic ``changelog__<group>--…--default``,
  created by quixstreams) — one ``State.get`` + ``State.set`` per record —
  and produces each record's key and value unchanged to its own output
  topic, stamped with the processing time (``set_timestamp``; quixstreams
  otherwise gives outputs their input's timestamp, which would put t_start
  at publish time). Its own confluent-kafka (quixstreams' pin) is used.

events/s = input events / (t_end − t_start). t_start is the smallest
CreateTime of the run's output records, over every topic it wrote (the
ledger produces its views at the end of each transaction, so its first
output is a fact, not a view): librdkafka stamps a record when
``produce()`` is called, so this is when the process emitted its first
output, and process start, imports, group join, assignment and changelog
restore are not counted (nor what a process computes before its first
``produce()``). t_end is when the last output became visible to a
``read_committed`` reader: every 20 ms this script asks the broker for the
last stable offsets of the watched output topic (``AdminClient.
list_offsets``, READ_COMMITTED), and t_end is the first sample showing the
final value — so the idle tail before the process exits is not counted
either; the error is about one sampling period. The watched topic is
``recurrence-statistics`` for the ledger (one record per scope changed in a
transaction, contract §8, committed atomically with all other outputs of
its transaction) and the baseline's output topic otherwise. Output counts
are checked afterwards by reading the committed records back. Also
recorded over [t_start, t_end]: the process's CPU seconds (``wait4``
rusage, whole run; two processes: the sum) and the CPU shares of the
machine (``/proc/stat``, ``/proc/<pid>/stat``; 2 cores = 100 %) used by the
process(es), the broker (``deploy/kafka.sh``'s pid file), this script and
everything else ("other": the VM is shared).

Records written per input event: after each run, every topic the process
wrote — the ledger's output topics and its state changelog (created by
this script before the run, so its start offsets are known), a
baseline's output topic, quixstreams' changelog — is read back from the
run's start offsets to its last stable offsets with a ``read_committed``
consumer and its records are counted. Transaction markers occupy offsets
but are never delivered, so they are excluded; offsets advanced − records
read = the markers, reported separately. Split: ledger facts (matches,
observations, review candidates, admission decisions), candidate sets,
views (ScopeStatistics, RevisionStatistics), changelog, other (dead
letters, a baseline's output).

Latency at half of the maximum throughput. Rate = half the median ledger
events/s just measured. For each commit interval (100 ms, the default;
others with e.g. ``--latency-intervals 100,50``), ``--latency-repeats``
times, interleaved,
on fresh topics: a worker is started and, once it logs its partition
assignment, this script publishes a prefix of the same workload at that
rate with the idempotent producer of ``kafka_io.publisher_config`` (values
encoded beforehand; one record delivered to a topic no worker reads first,
as librdkafka's idempotent producer holds its first ~500 ms of records:
``warmed_publisher``), noting the time just before each ``produce()``. A
``read_committed`` consumer thread here (``fetch.wait.max.ms`` 10, so it
adds little itself), assigned to ``recurrence-statistics`` and
``recurrence-observations``, notes when each record arrives. The worker
publishes, in each transaction, one ScopeStatistics record per scope the
transaction changed, with ``as_of_position`` = the highest journal_position
applied in that scope so far (contract §8), so latency(event) = arrival of
the first statistics record of the event's scope whose ``as_of_position``
reaches the event's journal_position − publish time of the event (checked
on the data: every published event is matched, and statistics records that
move no scope's ``as_of_position`` forward are counted). Outcomes are also matched to their first
RecurrenceObservation by (scope_id, task_outcome_ref.source_id). p50 / p99 /
max are nearest-rank percentiles over all matched events (no warm-up
dropped). Each latency is split at the statistics record's CreateTime (the
worker's ``produce()``): publish → produce() (waiting for ``consume()`` plus
processing) and produce() → visible (rest of the batch, commit, fetch).
Per second of publishing, the CPU shares are sampled too; seconds in which
"other" processes used < 10 % of the machine are "quiet", and the latency
of the events published in them is reported separately — a diagnostic of
the shared VM, never what the target is checked against.

Targets (checked on the medians): ledger (one process) ≥ 10,000 events/s;
≥ 30 % of the quixstreams baseline's events/s; `worker --processes 2` ≥ 1.5× one
process; ≤ 3 records written per input event (one process, markers
excluded); ≥ 50 % of the plain passthrough's events/s (the ratio to the
transactional one is shown too); p99 ≤ 250 ms at half of the maximum
throughput and p50 ≤ 60 ms, per commit interval (the target is the 100 ms
one, the default).

Dev options: ``--latency-rate R`` fixes the latency runs' rate;
``--repeats 0 --latency-rate R`` runs only the latency part (prints only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

if __name__ == "__main__" and sys.argv[1:2] == ["--quixstreams-child"]:
    # The quixstreams baseline runs under the interpreter of --quixstreams-python,
    # which has quixstreams (and its older confluent-kafka) but not this project:
    # dispatch before anything below is imported.
    from benchmarks.quixstreams_baseline import main as _quixstreams_child

    sys.exit(_quixstreams_child(sys.argv[2:]))

import confluent_kafka  # noqa: E402
import orjson  # noqa: E402
from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, OffsetSpec  # noqa: E402

from recurrence_ledger.kafka.kafka_admin import create_topics  # noqa: E402
from recurrence_ledger.kafka.kafka_io import prepare_line, publish_journal, publisher_config  # noqa: E402
from recurrence_ledger.runtime.worker_config import input_consumer_config  # noqa: E402
from recurrence_ledger.workload import Workload, generate_journal  # noqa: E402
from recurrence_ledger.serde.codec import decode_value  # noqa: E402
from recurrence_ledger import catalogue  # noqa: E402

from benchmarks.record import BENCHMARKS_MD, write_block  # noqa: E402

STATISTICS, OBSERVATIONS = "recurrence-statistics", "recurrence-observations"
SAMPLE_S = 0.02
#: A second of a latency run is "quiet" when processes other than the
#: worker, the broker and this script used less than this share of the
#: machine's CPU in it (a diagnostic for the shared VM, not the measurement).
QUIET_OTHER = 0.10
#: Targets of the requirement.
TARGET_RATIO = 0.5
TARGET_P99_MS = 250.0
TARGET_P50_MS = 60.0
TARGET_EVENTS_PER_S = 10_000
TARGET_QUIXSTREAMS_RATIO = 0.30  # ledger, one process / the quixstreams stateful exactly-once baseline (issue 23)
TARGET_TWO_PROCESSES = 1.5  # ledger, worker --processes 2 / one process (issue 32)
TARGET_RECORDS_PER_EVENT = 3.0


# ---------------------------------------------------------------------------------------------
# The baseline: a plain consume → produce passthrough (run as a child process of this script)
# ---------------------------------------------------------------------------------------------
def passthrough(bootstrap: str, topic_prefix: str, group: str, out_topic: str, mode: str, commit_interval_ms: int,
                exit_when_idle_s: float) -> None:
    """Copy every record of the input topics under ``topic_prefix`` to
    ``out_topic`` unchanged (key, value, partition number), until idle for
    ``exit_when_idle_s`` seconds after an assignment.

    ``mode`` "alo": every ``commit_interval_ms`` flush the producer, then
    commit the consumed offsets (at-least-once). ``mode`` "tx": the worker's
    pattern — one transaction per interval carrying the records and the
    consumed offsets (``send_offsets_to_transaction``). Consumer and producer
    settings are the worker's (processors/worker.py).
    """
    inputs = [catalogue.physical(name, topic_prefix) for name in catalogue.INPUT_TOPICS]
    consumer = Consumer(input_consumer_config(bootstrap, group))
    producer_config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4"}
    if mode == "tx":
        producer_config |= {"transactional.id": f"{group}-p1", "transaction.timeout.ms": 30_000}
    producer = Producer(producer_config)
    assigned: list[bool] = []
    offsets: dict[tuple[str, int], int] = {}
    in_transaction = False

    def commit() -> None:
        nonlocal in_transaction
        positions = [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
        offsets.clear()
        if mode == "tx":
            if positions:
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            in_transaction = False
        else:
            producer.flush(30)
            if positions:
                consumer.commit(offsets=positions, asynchronous=False)

    if mode == "tx":
        producer.init_transactions(30)
    consumer.subscribe(inputs, on_assign=lambda c, p: assigned.append(True))
    interval = commit_interval_ms / 1000
    last_commit = last_activity = time.monotonic()
    try:
        while True:
            messages = consumer.consume(num_messages=2_000, timeout=interval)
            now = time.monotonic()
            if messages:
                last_activity = now
                if mode == "tx" and not in_transaction:
                    producer.begin_transaction()
                    in_transaction = True
                for message in messages:
                    if message.error() is not None:
                        continue
                    while True:
                        try:
                            producer.produce(out_topic, value=message.value(), key=message.key(), partition=message.partition())
                            break
                        except BufferError:
                            producer.poll(0.05)
                    offsets[(message.topic(), message.partition())] = message.offset() + 1
                    producer.poll(0)
            pending = in_transaction if mode == "tx" else bool(offsets)
            if pending and now - last_commit >= interval:
                commit()
                last_commit = time.monotonic()
            if assigned and not pending and now - last_activity >= exit_when_idle_s:
                break
    finally:
        if (mode == "tx" and in_transaction) or offsets:
            commit()
        consumer.close()
        producer.flush(10)


# ---------------------------------------------------------------------------------------------
# Measuring helpers
# ---------------------------------------------------------------------------------------------
def _broker_pid() -> int | None:
    """The local broker's pid (deploy/kafka.sh's pid file), if readable."""
    try:
        return int((Path(os.environ.get("RL_RUN_DIR", "/tmp/recurrence-ledger-kafka")) / "kafka.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _with_children(pids: list[int]) -> list[int]:
    """``pids`` and their running child processes (a ``worker --processes``
    supervisor's worker processes), from /proc/<pid>/task/<pid>/children."""
    found = list(pids)
    for pid in pids:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                found += [int(child) for child in handle.read().split()]
        except OSError:
            pass
    return found


def _process_ticks(pids: int | list[int] | None) -> float | None:
    """utime + stime of a process (all its threads) and its running child
    processes in clock ticks, summed over ``pids`` when given a list, or
    None when one is unreadable."""
    if pids is None:
        return None
    total = 0.0
    for pid in _with_children([pids] if isinstance(pids, int) else pids):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += float(fields[11]) + float(fields[12])
        except (OSError, IndexError, ValueError):
            return None
    return total


@dataclass
class CpuSample:
    """Cumulative CPU counters at one moment, in clock ticks: the machine's
    busy and total time (/proc/stat, all cores), and the process(es) under
    test (summed), the broker and this script."""

    at: float
    busy: float
    total: float
    process: float | None
    broker: float | None
    script: float | None

    @classmethod
    def take(cls, at: float, process_pid: int | list[int] | None, broker_pid: int | None) -> CpuSample:
        with open("/proc/stat") as handle:
            fields = [float(value) for value in handle.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return cls(at, sum(fields) - idle, sum(fields), _process_ticks(process_pid), _process_ticks(broker_pid), _process_ticks(os.getpid()))


def cpu_shares(first: CpuSample, last: CpuSample) -> dict[str, float]:
    """Share of the machine's CPU time (all cores = 1.0) between two samples:
    busy, and the parts used by the process under test, the broker, this
    script and everything else."""
    total = last.total - first.total
    if total <= 0:
        return {}
    shares = {"busy": (last.busy - first.busy) / total}
    accounted = 0.0
    for name in ("process", "broker", "script"):
        a, b = getattr(first, name), getattr(last, name)
        if a is not None and b is not None:
            shares[name] = (b - a) / total
            accounted += b - a
    shares["other"] = max(0.0, (last.busy - first.busy - accounted) / total)
    return shares


def _shares(shares: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.0%}" for name, value in shares.items())


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def committed_ends(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    """Last stable offset of every partition of ``topic`` (what a read_committed reader can reach)."""
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                                 isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10)
    return {tp.partition: future.result().offset for tp, future in futures.items()}


def read_range(bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int], keep_values: bool = False,
               timeout: float = 120.0) -> tuple[int, int | None, list]:
    """Read committed records of ``topic`` from ``starts`` to ``ends`` (per
    partition). Returns (count, smallest CreateTime in ms or None, values
    if ``keep_values``)."""
    todo = {p: end for p, end in ends.items() if end > starts.get(p, 0)}
    count, first_ts, values = 0, None, []
    if not todo:
        return count, first_ts, values
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kbench-reader-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    deadline = time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in todo])
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: end not reached in {timeout:.0f} s")
            for message in consumer.consume(num_messages=5_000, timeout=0.2):
                if message.error() is not None:
                    continue
                partition, offset = message.partition(), message.offset()
                if partition not in todo or offset >= todo[partition]:
                    continue
                count += 1
                ts = message.timestamp()[1]
                first_ts = ts if first_ts is None else min(first_ts, ts)
                if keep_values:
                    values.append(message.value())
            # Transaction markers occupy offsets without being delivered: compare positions.
            for tp in consumer.position([TopicPartition(topic, p) for p in todo]):
                if tp.offset >= todo[tp.partition]:
                    del todo[tp.partition]
    finally:
        consumer.close()
    return count, first_ts, values


@dataclass
class ThroughputRun:
    """One drain of the pre-published backlog by one process (or by several
    processes of one consumer group)."""

    kind: str
    events: int
    processes: int = 1
    outputs: int = 0
    seconds: float = 0.0
    events_per_s: float = 0.0
    wall_s: float = 0.0
    process_cpu_s: float = 0.0  # summed over the processes
    process_cpu_s_each: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)  # cpu_shares over the active time ("process": all of them)
    output_records_total: int = 0  # every topic the process wrote, by offsets (includes transaction markers)
    records_by_topic: dict[str, int] = field(default_factory=dict)  # logical topic → records read back (no markers)
    offsets_by_topic: dict[str, int] = field(default_factory=dict)  # logical topic → offsets advanced (with markers)
    assignments: list[str] = field(default_factory=list)  # "+1.23 s w1: assigned partitions [0, 1]" (ledger logs)
    settled_s: float | None = None  # last partition assignment − first output (several processes)
    first_output_topic: str = ""  # where the first output (t_start) was
    watched_first_output_s: float = 0.0  # first output on the watched topic − t_start


def _child_env() -> dict[str, str]:
    """The environment of the measured processes: no Redis, no Schema
    Registry (the workload is published with the fixed schema ids), and
    the deployment names each run sets itself."""
    dropped = ("REDIS_URL", "SCHEMA_REGISTRY_URL", "RL_TOPIC_PREFIX", "RL_APP_ID", "RL_INSTANCE_ID")
    return {k: v for k, v in os.environ.items() if k not in dropped}


def _topic_ends(admin: AdminClient, topic: str) -> dict[int, int]:
    """committed_ends over all partitions of ``topic``, {} when it does not exist."""
    metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        return {}
    return committed_ends(admin, topic, len(metadata.partitions))


def _assignment_lines(log_paths: list[Path]) -> list[tuple[float, str]]:
    """(wall time, "process N: message") of the worker's "assigned
    partitions" and "revoked partitions" log lines (its log format starts
    with asctime; under a supervisor the logger's name is followed by
    ``[process N]``)."""
    found = []
    for path in log_paths:
        for line in path.read_text(errors="replace").splitlines():
            if "assigned partitions" not in line and "revoked partitions" not in line:
                continue
            try:
                stamp, millis = line[:23].split(",")
                at = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000
            except ValueError:
                continue
            where, message = line.split(": ", 1)
            process = re.search(r"\[(process \d+)\]$", where)
            if message.startswith("revoked partitions ["):  # (topic, partition) pairs of every input topic: the partitions say it
                numbers = sorted({int(number) for number in re.findall(r", (\d+)\)", message)})
                message = f"revoked partitions {numbers}"
            found.append((at, f"{process.group(1) if process else 'worker'}: {message}"))
    return sorted(found)


def timed_run(kind: str, commands: list[list[str]], bootstrap: str, watch: str, other_outputs: list[str], partitions: int,
              events: int, log_paths: list[Path], prefix: str, discover: str | None = None, workers: int = 1) -> ThroughputRun:
    """Start ``commands`` together (one process each, ``workers`` worker
    processes in all) and wait until all have exited, sampling the last
    stable offsets of ``watch`` every SAMPLE_S; see the module docstring
    for the method. Afterwards the records written on
    ``watch``, ``other_outputs`` and the topics whose names start with
    ``discover`` (created during the run) are counted, by offsets and by
    reading them back."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    starts = committed_ends(admin, watch, partitions)
    other_starts = {topic: _topic_ends(admin, topic) for topic in other_outputs}
    samples: list[tuple[float, int, CpuSample]] = []  # (wall time, sum of LSOs, CPU counters)
    broker_pid = _broker_pid()
    launched = time.time()
    processes = []
    for command, log_path in zip(commands, log_paths):
        with open(log_path, "ab") as log:
            processes.append(subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=_child_env(),
                                              start_new_session=True))
    pids = [process.pid for process in processes]
    try:
        while True:
            cpu = CpuSample.take(time.time(), pids, broker_pid)
            # Exited without reaping them (WNOWAIT): their /proc/<pid>/stat stays readable for the CPU samples.
            exited_now = [os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None for pid in pids]
            ends = committed_ends(admin, watch, partitions)
            samples.append((time.time(), sum(ends.values()), cpu))
            if all(exited_now):
                break
            if any(exited_now):
                for pid, done in zip(pids, exited_now):
                    status = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) if done else None
                    if status is not None and status.si_status != 0:
                        raise RuntimeError(f"{kind}: a process exited with {status.si_status} while the others run")
            time.sleep(SAMPLE_S)
        cpu_each = []
        for process in processes:
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            cpu_each.append(usage.ru_utime + usage.ru_stime)
    finally:
        for process in processes:
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    exited = time.time()
    for process, log_path in zip(processes, log_paths):
        if process.returncode != 0:
            raise RuntimeError(f"{kind} exited with {process.returncode}; log {log_path}:\n{log_path.read_text()[-3000:]}")
    final = committed_ends(admin, watch, partitions)
    outputs, first_ts, _ = read_range(bootstrap, watch, starts, final)
    if first_ts is None:
        raise RuntimeError(f"{kind}: no output on {watch}; log {log_paths[0]}")
    final_sum = sum(final.values())
    # Records written: offsets advanced (transaction markers included) and records read back (markers excluded);
    # t_start is the first CreateTime over all of them (the ledger produces its views at the end of a transaction).
    if discover:
        other_starts |= {name: {} for name in admin.list_topics(timeout=10).topics if name.startswith(discover)}
    offsets_by_topic = {watch: final_sum - sum(starts.values())}
    records_by_topic = {watch: outputs}
    first_by_topic = {watch: first_ts}
    for topic, topic_starts in other_starts.items():
        topic_ends = _topic_ends(admin, topic)
        offsets_by_topic[topic] = sum(topic_ends.values()) - sum(topic_starts.values())
        records_by_topic[topic], first_by_topic[topic], _ = (read_range(bootstrap, topic, topic_starts, topic_ends, timeout=300)
                                                             if offsets_by_topic[topic] else (0, None, []))
    first_topic = min((topic for topic, ts in first_by_topic.items() if ts is not None), key=first_by_topic.__getitem__)
    end_sample = next(sample for sample in samples if sample[1] >= final_sum)
    t_start, t_end = first_by_topic[first_topic] / 1000, end_sample[0]
    # Machine CPU over [t_start, t_end]: the samples closest to both ends.
    start_sample = min(samples, key=lambda sample: abs(sample[0] - t_start))
    shares = cpu_shares(start_sample[2], end_sample[2])

    def logical(topic: str) -> str:
        return topic.removeprefix(prefix)

    run = ThroughputRun(
        kind=kind, events=events, processes=workers, outputs=outputs, seconds=t_end - t_start,
        events_per_s=events / (t_end - t_start), wall_s=exited - launched, process_cpu_s=sum(cpu_each),
        process_cpu_s_each=cpu_each, cpu=shares, output_records_total=sum(offsets_by_topic.values()),
        records_by_topic={logical(t): n for t, n in records_by_topic.items()}, first_output_topic=logical(first_topic),
        watched_first_output_s=first_ts / 1000 - t_start,
        offsets_by_topic={logical(t): n for t, n in offsets_by_topic.items()},
    )
    if kind.startswith("ledger"):
        lines = _assignment_lines(log_paths)
        run.assignments = [f"{at - t_start:+.2f} s {text}" for at, text in lines]
        assigned = [at for at, text in lines if "assigned partitions" in text]
        if workers > 1 and assigned:
            run.settled_s = max(assigned) - t_start
    print(f"  {kind}: {run.events_per_s:,.0f} events/s ({events:,} events in {run.seconds:.2f} s; {outputs:,} records on "
          f"{logical(watch)}; first output on {run.first_output_topic}, {run.watched_first_output_s:.2f} s before the first on {logical(watch)}; {sum(records_by_topic.values()) / events:.2f} records/event, "
          f"{run.output_records_total - sum(records_by_topic.values()):,} transaction markers; process CPU "
          f"{' + '.join(f'{value:.1f}' for value in cpu_each)} s; wall {run.wall_s:.1f} s; CPU shares {_shares(shares)})",
          flush=True)
    for line in run.assignments if workers > 1 else ():
        print(f"    {line}", flush=True)
    return run


# ---------------------------------------------------------------------------------------------
# Latency at a fixed publish rate
# ---------------------------------------------------------------------------------------------
def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


@dataclass
class LatencyRun:
    """Publish → committed output latency at a fixed rate for one commit interval."""

    commit_interval_ms: int
    target_rate: float
    events: int
    achieved_rate: float = 0.0
    matched: int = 0
    unmatched: int = 0
    extra_statistics: int = 0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    to_produce_p50_ms: float = 0.0  # publish → the worker's produce() of the statistics record (its CreateTime)
    to_produce_p99_ms: float = 0.0
    to_visible_p50_ms: float = 0.0  # that produce() → visible to the read_committed observer
    to_visible_p99_ms: float = 0.0
    quiet_seconds: int = 0  # seconds of publishing in which other processes used < QUIET_OTHER of the machine
    quiet_events: int = 0
    quiet_p50_ms: float = math.nan  # latency of the events published in those seconds
    quiet_p99_ms: float = math.nan
    observation_outcomes: int = 0
    observation_p50_ms: float = 0.0
    observation_p99_ms: float = 0.0
    observation_max_ms: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # cpu_shares while publishing


#: A topic no worker reads, for the latency runs' publisher warm-up record.
PUBLISHER_WARMUP = "publisher-warmup"


def warmed_publisher(bootstrap: str, warmup_topic: str) -> Producer:
    """The latency runs' publisher (``kafka_io.publisher_config``: idempotent),
    with one record delivered to ``warmup_topic`` first. A new idempotent
    librdkafka producer delivers nothing for its first ~500 ms (it waits a
    timer for its producer id: confluentinc/librdkafka#5032); without the
    warm-up the first half second of events waited for it and was counted
    as the ledger's latency (p99 542 ms against 238 ms at 2,000 events/s,
    2026-12-07). A long-running publisher pays it once."""
    producer = Producer(publisher_config(bootstrap))
    producer.produce(warmup_topic, value=b"warm-up")
    if producer.flush(30):
        raise RuntimeError("latency publisher: the warm-up record was not delivered in 30 s")
    return producer


class Observer(threading.Thread):
    """read_committed consumer noting when each output record arrives."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int):
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kbench-observer-{uuid.uuid4().hex[:8]}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 10, "enable.partition.eof": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for topic in topics for p in range(partitions)])
        self.seen: list[tuple[float, str, bytes, int]] = []  # (arrival perf_counter, topic, value, CreateTime ms)
        self.statistics = 0
        self.as_of: dict[str, int] = {}  # scope → highest as_of_position seen
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            messages = self.consumer.consume(num_messages=1_000, timeout=0.05)
            now = time.perf_counter()
            for message in messages:
                if message.error() is None:
                    topic = message.topic()
                    self.seen.append((now, topic, message.value(), message.timestamp()[1]))
                    if topic.endswith(STATISTICS):
                        self.statistics += 1
                        value = decode_value(message.value(), ("ScopeStatistics",))
                        self.as_of[value["scope_id"]] = max(self.as_of.get(value["scope_id"], -1), value["as_of_position"])
        self.consumer.close()

    def covers(self, last_positions: dict[str, int]) -> bool:
        """True once every scope's statistics reached its last published position."""
        return all(self.as_of.get(scope, -1) >= position for scope, position in last_positions.items())


class CpuSampler(threading.Thread):
    """CpuSample every ``period`` seconds (time base: perf_counter)."""

    def __init__(self, process_pid: int, period: float = 0.25):
        super().__init__(daemon=True)
        self.process_pid, self.broker_pid, self.period = process_pid, _broker_pid(), period
        self.samples: list[CpuSample] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.samples.append(CpuSample.take(time.perf_counter(), self.process_pid, self.broker_pid))
            self.stopping.wait(self.period)

    def shares(self, start: float, end: float) -> dict[str, float]:
        """cpu_shares between the samples nearest to ``start`` and ``end``."""
        if len(self.samples) < 2:
            return {}
        first = min(self.samples, key=lambda sample: abs(sample.at - start))
        last = min(self.samples, key=lambda sample: abs(sample.at - end))
        return cpu_shares(first, last) if last.at > first.at else {}


def latency_run(bootstrap: str, partitions: int, lines: list[bytes], rate: float, commit_interval_ms: int, workdir: Path,
                prefixes: list[str], tag: str) -> LatencyRun:
    """One latency measurement on fresh topics (see the module docstring).
    Writes ``latency-<tag>.tsv`` (per event: seconds since the first publish,
    latency in ms) and ``latency-<tag>-seconds.tsv`` (per second of
    publishing: events, p50, max, CPU shares) into ``workdir``."""
    prefix = f"kbench-{uuid.uuid4().hex[:8]}."
    prefixes.append(prefix)
    create_topics(bootstrap, partitions, prefix, extra=[(PUBLISHER_WARMUP, {})])
    prepared = [prepare_line(line) for line in lines]
    identities = []
    for line in lines:
        value = orjson.loads(line)["value"]
        identities.append((value["scope_id"], value["journal_position"], value.get("source_ref", {}).get("source_id")))
    log_path = workdir / f"latency-{tag}.log"
    command = [sys.executable, "-m", "recurrence_ledger.cli", "worker", "--bootstrap", bootstrap, "--topic-prefix", prefix,
               "--app-id", "kbench-latency", "--instance-id", "w1", "--commit-interval-ms", str(commit_interval_ms),
               "--exit-when-idle", "120"]
    log = open(log_path, "w+b")
    process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=_child_env(), start_new_session=True)
    observer = Observer(bootstrap, [prefix + STATISTICS, prefix + OBSERVATIONS], partitions)
    observer.start()
    sampler = CpuSampler(process.pid)
    sampler.start()
    try:
        deadline = time.monotonic() + 60
        while b"assigned partitions" not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"latency worker did not start; log {log_path}:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.05)
        time.sleep(0.5)
        producer = warmed_publisher(bootstrap, prefix + PUBLISHER_WARMUP)
        topic = prefix + catalogue.SOURCE_JOURNAL
        sent = [0.0] * len(prepared)
        sent_wall = [0.0] * len(prepared)
        t0 = time.perf_counter() + 0.01
        i = 0
        while i < len(prepared):
            due = min(len(prepared), int((time.perf_counter() - t0) * rate) + 1)
            while i < due:
                record = prepared[i]
                sent[i] = time.perf_counter()
                sent_wall[i] = time.time()
                try:
                    producer.produce(topic, value=record.value, key=record.key)
                except BufferError:
                    producer.poll(0.01)
                    continue
                i += 1
            producer.poll(0)
            pause = t0 + i / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        publish_seconds = sent[-1] - sent[0]
        if producer.flush(60):
            raise RuntimeError("latency publisher: records undelivered after 60 s")
        deadline = time.monotonic() + 120
        last_positions: dict[str, int] = {}
        for scope, position, _ in identities:
            last_positions[scope] = max(last_positions.get(scope, -1), position)
        while not observer.covers(last_positions) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        time.sleep(max(0.5, 3 * commit_interval_ms / 1000))  # late duplicates, if any, would show up here
    finally:
        observer.stopping.set()
        observer.join(10)
        sampler.stopping.set()
        sampler.join(10)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()

    sent_at = {(scope, position): sent[index] for index, (scope, position, _) in enumerate(identities)}
    sent_wall_at = {(scope, position): sent_wall[index] for index, (scope, position, _) in enumerate(identities)}
    produced: dict[tuple[str, int], float] = {}  # CreateTime of the statistics record, wall seconds
    outcome_sent = {(scope, source): sent[index] for index, (scope, _, source) in enumerate(identities) if source}
    first_stat: dict[tuple[str, int], float] = {}
    first_observation: dict[tuple[str, str], float] = {}
    extra = 0
    # Views are published once per transaction (contract §8): a statistics
    # record covers every event of its scope up to its as_of_position.
    waiting: dict[str, list[int]] = {}
    for scope, position in sorted(sent_at):
        waiting.setdefault(scope, []).append(position)
    for positions in waiting.values():
        positions.reverse()  # pop() gives the lowest position still waiting
    for arrived, topic, raw, created_ms in observer.seen:
        if topic.endswith(STATISTICS):
            value = decode_value(raw, ("ScopeStatistics",))
            positions = waiting.get(value["scope_id"], [])
            if not positions or positions[-1] > value["as_of_position"]:
                extra += 1
            while positions and positions[-1] <= value["as_of_position"]:
                key = (value["scope_id"], positions.pop())
                first_stat[key] = arrived
                produced[key] = created_ms / 1000
        else:
            value = decode_value(raw, ("RecurrenceObservation",))
            key = (value["scope_id"], value["task_outcome_ref"]["source_id"])
            if key in outcome_sent and key not in first_observation:
                first_observation[key] = arrived
    series = sorted((sent_at[key] - sent[0], (arrived - sent_at[key]) * 1000) for key, arrived in first_stat.items())
    (workdir / f"latency-{tag}.tsv").write_text("".join(f"{t:.4f}\t{ms:.1f}\n" for t, ms in series))
    per_second: dict[int, list[float]] = {}
    for t, ms in series:
        per_second.setdefault(int(t), []).append(ms)
    rows = ["second\tevents\tp50_ms\tmax_ms\tbusy\tworker\tbroker\tscript\tother"]
    quiet: list[float] = []
    quiet_seconds = 0
    for second, values in sorted(per_second.items()):
        values.sort()
        shares = sampler.shares(sent[0] + second, sent[0] + second + 1)
        if shares.get("other", 1.0) < QUIET_OTHER:
            quiet += values
            quiet_seconds += 1
        rows.append("\t".join([str(second), str(len(values)), f"{percentile(values, 0.5):.0f}", f"{values[-1]:.0f}",
                               *(f"{shares.get(name, math.nan):.2f}" for name in ("busy", "process", "broker", "script", "other"))]))
    (workdir / f"latency-{tag}-seconds.tsv").write_text("\n".join(rows) + "\n")
    latencies = sorted(ms for _, ms in series)
    # The split at the worker's produce() (CreateTime, wall clock of the same machine).
    to_produce = sorted((produced[key] - sent_wall_at[key]) * 1000 for key in first_stat)
    to_visible = sorted((first_stat[key] - sent_at[key]) * 1000 - (produced[key] - sent_wall_at[key]) * 1000 for key in first_stat)
    observation_latencies = sorted((arrived - outcome_sent[key]) * 1000 for key, arrived in first_observation.items())
    run = LatencyRun(commit_interval_ms=commit_interval_ms, target_rate=rate, events=len(prepared),
                     achieved_rate=(len(prepared) - 1) / publish_seconds if publish_seconds > 0 else 0.0,
                     matched=len(latencies), unmatched=len(prepared) - len(latencies), extra_statistics=extra,
                     cpu=sampler.shares(sent[0], sent[-1]))
    if latencies:
        run.p50_ms, run.p99_ms, run.max_ms = percentile(latencies, 0.5), percentile(latencies, 0.99), latencies[-1]
    if quiet:
        quiet.sort()
        run.quiet_seconds, run.quiet_events = quiet_seconds, len(quiet)
        run.quiet_p50_ms, run.quiet_p99_ms = percentile(quiet, 0.5), percentile(quiet, 0.99)
    if to_produce:
        run.to_produce_p50_ms, run.to_produce_p99_ms = percentile(to_produce, 0.5), percentile(to_produce, 0.99)
        run.to_visible_p50_ms, run.to_visible_p99_ms = percentile(to_visible, 0.5), percentile(to_visible, 0.99)
    if observation_latencies:
        run.observation_outcomes = len(observation_latencies)
        run.observation_p50_ms = percentile(observation_latencies, 0.5)
        run.observation_p99_ms = percentile(observation_latencies, 0.99)
        run.observation_max_ms = observation_latencies[-1]
    print(f"  latency, commit interval {commit_interval_ms} ms, {run.achieved_rate:,.0f} events/s published: p50 {run.p50_ms:.0f} ms, "
          f"p99 {run.p99_ms:.0f} ms, max {run.max_ms:.0f} ms ({run.matched:,}/{run.events:,} matched, {extra} other statistics "
          f"records; publish → worker produce() p50 {run.to_produce_p50_ms:.0f} / p99 {run.to_produce_p99_ms:.0f} ms, "
          f"produce() → visible p50 {run.to_visible_p50_ms:.0f} / p99 {run.to_visible_p99_ms:.0f} ms; {run.quiet_seconds} quiet "
          f"seconds: p50 {run.quiet_p50_ms:.0f} / p99 {run.quiet_p99_ms:.0f} ms); observations p50 {run.observation_p50_ms:.0f} / p99 {run.observation_p99_ms:.0f} ms "
          f"({run.observation_outcomes:,} outcomes); CPU shares {_shares(run.cpu)}", flush=True)
    return run


def delete_prefixed(bootstrap: str, prefixes: list[str], groups: list[str]) -> int:
    """Delete every topic whose name contains one of ``prefixes`` (they start
    with it, or, quixstreams' changelogs, contain the prefixed group) and the
    given consumer groups. Returns the number of topics deleted."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [name for name in admin.list_topics(timeout=10).topics if any(p in name for p in prefixes)]
    if names:
        for name, future in admin.delete_topics(names, operation_timeout=30).items():
            try:
                future.result()
            except KafkaException as error:
                print(f"  could not delete {name}: {error}", file=sys.stderr)
    # A worker stopped by SIGTERM is a static member that sent no LeaveGroup:
    # its group stays non-empty until its session expires (10 s); retry until then.
    deadline = time.monotonic() + 30
    while groups:
        retry = []
        for group, future in admin.delete_consumer_groups(groups, request_timeout=30).items():
            try:
                future.result()
            except KafkaException as error:
                code = error.args[0].code()
                if code == KafkaError.NON_EMPTY_GROUP and time.monotonic() < deadline:
                    retry.append(group)
                elif code != KafkaError.GROUP_ID_NOT_FOUND:
                    print(f"  could not delete group {group}: {error}", file=sys.stderr)
        groups = retry
        if groups:
            time.sleep(1.0)
    return len(names)


# ---------------------------------------------------------------------------------------------
# The quixstreams baseline's interpreter
# ---------------------------------------------------------------------------------------------
#: Where the ``bench`` dependency group is installed by default (see quixstreams_python).
QUIXSTREAMS_VENV = ".venv-bench"


def default_quixstreams_python() -> str:
    """$RL_BENCH_QUIXSTREAMS_PYTHON, else the repository's .venv-bench when
    it exists, else this interpreter."""
    venv_python = REPO / QUIXSTREAMS_VENV / "bin" / "python"
    return os.environ.get("RL_BENCH_QUIXSTREAMS_PYTHON") or (str(venv_python) if venv_python.exists() else sys.executable)


def quixstreams_versions(python: str) -> dict[str, str]:
    """quixstreams and confluent-kafka versions that ``python`` imports; exits
    with how to install them when it cannot import quixstreams."""
    probe = subprocess.run([python, "-c", "import quixstreams, confluent_kafka; "
                            "print(quixstreams.__version__, confluent_kafka.__version__, confluent_kafka.libversion()[0])"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(
            f"kafka_benchmark.py: the quixstreams baseline needs quixstreams, and {python} cannot import it ({reason}).\n"
            "quixstreams pins an older confluent-kafka than this project's, so it goes in a virtualenv of its own, from the"
            " `bench` dependency group of pyproject.toml (pip >= 25.1), run from the repository root:\n"
            f"    python3 -m venv {QUIXSTREAMS_VENV} && {QUIXSTREAMS_VENV}/bin/pip install -U pip"
            f" && {QUIXSTREAMS_VENV}/bin/pip install --group bench\n"
            f"The script uses {QUIXSTREAMS_VENV}/bin/python when it exists (or --quixstreams-python PATH,"
            " $RL_BENCH_QUIXSTREAMS_PYTHON). Or skip that row with --no-quixstreams.")
    quixstreams, client, librdkafka = probe.stdout.split()
    return {"python": python, "quixstreams": quixstreams, "confluent_kafka": client, "librdkafka": librdkafka}


# ---------------------------------------------------------------------------------------------
# The whole benchmark
# ---------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat; print only")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--scopes", type=int, default=100)
    parser.add_argument("--outcomes-per-scope", type=int, default=2_000, help="throughput workload size (events ≈ scopes × (outcomes + 21))")
    parser.add_argument("--runs", type=int, default=3, help="runs of each throughput kind and latency interval (interleaved; min / median / max reported)")
    parser.add_argument("--repeats", type=int, help="throughput runs, if not --runs; 0 skips them (needs --latency-rate, prints only)")
    parser.add_argument("--latency-seconds", type=float, default=20.0, help="publish duration of each latency run")
    parser.add_argument("--latency-rate", type=float, help="publish rate of the latency runs (default: half the median ledger events/s)")
    parser.add_argument("--latency-repeats", type=int, help="latency runs per commit interval, if not --runs (interleaved)")
    parser.add_argument("--latency-intervals", default="100", help="worker commit intervals (ms) for the latency runs, e.g. 100,50")
    parser.add_argument("--keep-topics", action="store_true", help="do not delete the benchmark topics")
    parser.add_argument("--no-record", action="store_true", help="print only: do not write BENCHMARKS.md")
    parser.add_argument("--no-two-processes", action="store_true", help="skip the two-process ledger runs")
    parser.add_argument("--no-quixstreams", action="store_true", help="skip the quixstreams baseline (noted in the output)")
    parser.add_argument("--quixstreams-python", default=default_quixstreams_python(),
                        help=f"interpreter with quixstreams for the baseline (default: $RL_BENCH_QUIXSTREAMS_PYTHON, else"
                             f" {QUIXSTREAMS_VENV}/bin/python in the repository when it exists, else this one)")
    # The baseline processes (internal; --quixstreams-child is dispatched at the top of this file).
    parser.add_argument("--passthrough-child", choices=("alo", "tx"), help=argparse.SUPPRESS)
    parser.add_argument("--topic-prefix", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--out-topic", help=argparse.SUPPRESS)
    parser.add_argument("--quixstreams-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.passthrough_child:
        passthrough(args.bootstrap, args.topic_prefix, args.group, args.out_topic, args.passthrough_child, 100, 3.0)
        return
    args.repeats = args.runs if args.repeats is None else args.repeats
    args.latency_repeats = args.runs if args.latency_repeats is None else args.latency_repeats
    if args.repeats < 1 and not args.latency_rate:
        parser.error("--repeats 0 needs --latency-rate")
    if args.quick:
        args.scopes, args.outcomes_per_scope, args.repeats, args.latency_seconds, args.latency_repeats = 20, 100, 1, 5.0, 1
    quixstreams = None
    if args.no_quixstreams:
        print("note: --no-quixstreams: the quixstreams baseline is skipped", flush=True)
    elif args.repeats > 0:
        quixstreams = quixstreams_versions(args.quixstreams_python)  # fails early, before publishing
        print(f"quixstreams {quixstreams['quixstreams']} (confluent-kafka {quixstreams['confluent_kafka']}) under "
              f"{quixstreams['python']}", flush=True)

    started = time.monotonic()
    load_start = _load()
    bootstrap, partitions = args.bootstrap, args.partitions
    prefix = f"kbench-{uuid.uuid4().hex[:8]}."
    prefixes, groups = [prefix], []
    shape = Workload(scopes=args.scopes, outcomes_per_scope=args.outcomes_per_scope, heads_per_scope=10, handoffs=5)
    workdir = Path(tempfile.mkdtemp(prefix="kafka-benchmark-"))
    print(f"topic prefix {prefix}; logs in {workdir}", flush=True)
    try:
        lines = [orjson.dumps(record) for record in generate_journal(shape)]
        events = len(lines)
        runs_per_kind = ["ledger", "ledger-2proc", "passthrough-alo", "passthrough-tx", "quixstreams"]
        if args.no_two_processes:
            runs_per_kind.remove("ledger-2proc")
        if quixstreams is None:
            runs_per_kind.remove("quixstreams")
        extra_topics = [(f"{kind}-{rep}", {}) for kind in runs_per_kind if not kind.startswith("ledger") for rep in range(args.repeats)]
        if args.repeats > 0:
            create_topics(bootstrap, partitions, prefix, extra=extra_topics)
            journal = workdir / "journal.jsonl"
            journal.write_bytes(b"\n".join(lines) + b"\n")
            summary = publish_journal(bootstrap, journal, topic_prefix=prefix, show_progress=False)
            journal.unlink()  # up to ~110 MB; the lines stay in memory for the latency runs
            print(f"published {summary.records:,} events ({shape.scopes} scopes × {shape.outcomes_per_scope} outcomes) "
                  f"in {summary.seconds:.1f} s", flush=True)

        runs: dict[str, list[ThroughputRun]] = {kind: [] for kind in runs_per_kind}
        ledger_outputs = [prefix + name for name in catalogue.OUTPUT_TOPICS if name != STATISTICS]
        for rep in range(args.repeats):
            for kind in runs_per_kind:
                if kind.startswith("ledger"):
                    workers = 2 if kind == "ledger-2proc" else 1
                    app_id = f"kbench-{kind}-{rep}"
                    groups.append(prefix + app_id)
                    command = [sys.executable, "-m", "recurrence_ledger.cli", "worker", "--bootstrap", bootstrap, "--topic-prefix",
                               prefix, "--app-id", app_id, "--instance-id", "w1", "--exit-when-idle", "3", "--processes", str(workers)]
                    changelog = catalogue.changelog_name(app_id)
                    # The worker creates its changelog; create it first (same settings) so its records are counted.
                    create_topics(bootstrap, partitions, prefix, extra=[(changelog, {"cleanup.policy": "compact",
                                                                                    "min.cleanable.dirty.ratio": "0.1"})])
                    runs[kind].append(timed_run(kind, [command], bootstrap, prefix + STATISTICS, [*ledger_outputs, prefix + changelog],
                                                partitions, events, [workdir / f"{kind}-{rep}.log"], prefix, workers=workers))
                elif kind.startswith("passthrough"):
                    mode = kind.split("-")[1]
                    group = f"{prefix}kbench-{kind}-{rep}"
                    groups.append(group)
                    out_topic = f"{prefix}{kind}-{rep}"
                    command = [sys.executable, str(Path(__file__).resolve()), "--passthrough-child", mode, "--bootstrap", bootstrap,
                               "--topic-prefix", prefix, "--group", group, "--out-topic", out_topic]
                    runs[kind].append(timed_run(kind, [command], bootstrap, out_topic, [], partitions, events,
                                                [workdir / f"{kind}-{rep}.log"], prefix))
                else:
                    group = f"{prefix}kbench-quixstreams-{rep}"
                    groups.append(group)
                    out_topic = f"{prefix}quixstreams-{rep}"
                    command = [args.quixstreams_python, str(Path(__file__).resolve()), "--quixstreams-child", "--bootstrap", bootstrap,
                               "--group", group, "--in-topic", prefix + catalogue.SOURCE_JOURNAL, "--out-topic", out_topic,
                               "--state-dir", str(workdir / f"quixstreams-state-{rep}"), "--commit-interval-ms", "100",
                               "--exit-when-idle", "3"]
                    runs[kind].append(timed_run(kind, [command], bootstrap, out_topic, [], partitions, events,
                                                [workdir / f"quixstreams-{rep}.log"], prefix, discover=f"changelog__{group}--"))

        median = {kind: statistics.median(run.events_per_s for run in kind_runs) if kind_runs else math.nan
                  for kind, kind_runs in runs.items()}
        rate = args.latency_rate or median["ledger"] / 2
        latency_events = min(events, max(1_000, int(rate * args.latency_seconds)))
        latency = []
        for rep in range(args.latency_repeats):
            for interval in (int(value) for value in args.latency_intervals.split(",")):
                latency.append(latency_run(bootstrap, partitions, lines[:latency_events], rate, interval, workdir, prefixes,
                                           f"{interval}-{rep}"))
                groups.append(prefixes[-1] + "kbench-latency")
    finally:
        if not args.keep_topics:
            deleted = delete_prefixed(bootstrap, prefixes, groups)
            print(f"deleted {deleted} benchmark topics", flush=True)

    latency_by_interval: dict[int, dict] = {}
    for run in latency:
        entry = latency_by_interval.setdefault(run.commit_interval_ms, {"p50": [], "p99": [], "all_matched": True})
        entry["p50"].append(run.p50_ms)
        entry["p99"].append(run.p99_ms)
        entry["all_matched"] &= run.unmatched == 0
    for entry in latency_by_interval.values():
        entry["p50_median"], entry["p99_median"] = statistics.median(entry["p50"]), statistics.median(entry["p99"])
    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "code": _code_revision(),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
                   f"{os.cpu_count()} CPUs, confluent-kafka {confluent_kafka.__version__}",
        "events": events,
        "scopes": shape.scopes,
        "outcomes_per_scope": shape.outcomes_per_scope,
        "partitions": partitions,
        "repeats": args.repeats,
        "runs": {kind: [run.__dict__ for run in kind_runs] for kind, kind_runs in runs.items()},
        "median_events_per_s": median,
        "ratio_to_alo": median["ledger"] / median["passthrough-alo"],
        "ratio_to_tx": median["ledger"] / median["passthrough-tx"],
        "ratio_2proc": median["ledger-2proc"] / median["ledger"] if "ledger-2proc" in median else None,
        "ratio_to_quixstreams": median["ledger"] / median["quixstreams"] if "quixstreams" in median else None,
        "records_per_event": {kind: [records_split(run) for run in runs[kind]] for kind in runs},
        "quixstreams": quixstreams,
        "latency_rate": rate,
        "latency": [run.__dict__ for run in latency],
        "latency_by_interval": latency_by_interval,
        "load_start": load_start,
        "load_end": _load(),
        "script_seconds": time.monotonic() - started,
        "workdir": str(workdir),
    }
    (workdir / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2), flush=True)
    if not args.quick and not args.no_record and args.repeats > 0:
        write_markdown(result)
        print(f"wrote {BENCHMARKS_MD}")


def records_split(run: ThroughputRun) -> dict[str, float]:
    """Records written per input event, read back (transaction markers
    excluded), by kind of topic: ledger facts (the ledger topics but
    candidate sets), candidate sets, views, the state changelog, the rest
    (dead letters, a baseline's output); and "markers": offsets taken by
    transaction markers per event."""
    split = dict.fromkeys(("ledger facts", "candidate sets", "views", "changelog", "other"), 0.0)
    for topic, count in run.records_by_topic.items():
        if topic == catalogue.CANDIDATE_SETS:
            name = "candidate sets"
        elif topic in catalogue.LEDGER_TOPICS:
            name = "ledger facts"
        elif topic in catalogue.VIEW_TOPICS:
            name = "views"
        elif topic.endswith("changelog") or topic.startswith("changelog__"):
            name = "changelog"
        else:
            name = "other"
        split[name] += count / run.events
    split["total"] = sum(split.values())
    split["markers"] = (sum(run.offsets_by_topic.values()) - sum(run.records_by_topic.values())) / run.events
    return split


def _code_revision() -> str:
    """HEAD's short hash, noting uncommitted changes to the code under test."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "processors", "schemas", "topics"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} + uncommitted changes" if dirty else head


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _pct(shares: dict, name: str) -> str:
    return f"{shares[name]:.0%}" if name in shares else "?"


def write_markdown(r: dict) -> None:
    """Replace the kafka-benchmark block of BENCHMARKS.md (or append it)."""
    median = r["median_events_per_s"]
    runs = r["runs"]

    def row(kind: str, label: str) -> str:
        if not runs.get(kind):
            return f"| {label} | not run | | | | |"
        rates = sorted(run["events_per_s"] for run in runs[kind])
        values = " / ".join(f"{run['events_per_s']:,.0f}" for run in runs[kind])
        spread = f"{rates[0]:,.0f} / **{median[kind]:,.0f}** / {rates[-1]:,.0f}"
        seconds = " / ".join(f"{run['seconds']:.1f}" for run in runs[kind])
        cpu = " / ".join(" + ".join(f"{value:.1f}" for value in run["process_cpu_s_each"]) for run in runs[kind])
        shares = " / ".join(f"{_pct(run['cpu'], 'process')}, {_pct(run['cpu'], 'broker')}, {_pct(run['cpu'], 'other')}"
                            for run in runs[kind])
        return f"| {label} | {values} | {spread} | {seconds} s | {cpu} s | {shares} |"

    def records_row(kind: str, label: str) -> str:
        splits = r["records_per_event"].get(kind) or []
        if not splits:
            return f"| {label} | not run | | | | | | |"
        cells = [" / ".join(f"{split[name]:.2f}" for split in splits)
                 for name in ("ledger facts", "candidate sets", "views", "changelog", "other", "total", "markers")]
        return f"| {label} | " + " | ".join(cells) + " |"

    def target(label: str, ratio: float | None, measured: str, ok: bool) -> str:
        return f"| {label} | {measured} | {_met(ok)} |" if ratio is not None else f"| {label} | not run | |"

    ledger = runs["ledger"]
    per_event_ms = statistics.median(run["process_cpu_s"] / run["events"] * 1000 for run in ledger)
    records = statistics.median(split["total"] for split in r["records_per_event"]["ledger"])
    quix = r.get("quixstreams")
    quix_label = (f"quixstreams {quix['quixstreams']} `Application`, stateful exactly-once (counter per key in RocksDB +"
                  f" changelog, checkpoint every 100 ms; confluent-kafka {quix['confluent_kafka']})" if quix else
                  "quixstreams stateful exactly-once baseline (skipped: `--no-quixstreams`)")
    two = runs.get("ledger-2proc") or []
    lines = [
        f"Recorded {r['date']} by `python benchmarks/kafka_benchmark.py` (code {r['code']}; {r['machine']}; one Kafka 3.9.1"
        f" KRaft broker on the same VM, `deploy/services.sh`). Script run time {r['script_seconds'] / 60:.1f} min."
        f" Load average at start / end: {r['load_start']} / {r['load_end']} — the VM was shared with other work while this"
        " ran; \"other\" below is the share of the machine's CPU (2 cores = 100 %) used by processes other than the one(s)"
        " measured, the broker and the benchmark script.",
        "",
        f"Workload: {r['events']:,} source events (`recurrence_ledger.workload`, {r['scopes']} scopes × {r['outcomes_per_scope']:,}"
        " outcomes, 10 heads and 5 Handoffs per scope — the core benchmark's workload), published beforehand as Avro"
        f" SourceEvents on `source-journal`, {r['partitions']} partitions per topic. Each process (or pair of processes) drains"
        " that backlog in its own consumer group: events/s = input events / (first output's CreateTime → last output visible"
        " to a `read_committed` reader), so start-up, group join and the idle tail are excluded (method: the script's docstring).",
        "",
        f"| process | events/s ({r['repeats']} runs, interleaved) | min / median / max | active time | process CPU | CPU share: process(es), broker, other |",
        "| --- | --- | --- | --- | --- | --- |",
        row("ledger", "ledger worker, one process (`recurrence_ledger.cli worker`, Avro out, transactions at most 100 ms old, no Redis)"),
        row("ledger-2proc", "ledger worker, `--processes 2`: two worker processes in one group (2 partitions each; CPU of the supervisor and both)"),
        row("passthrough-alo", "passthrough, at-least-once (produce; flush + commit offsets every 100 ms)"),
        row("passthrough-tx", "passthrough, transactional (begin / produce / send_offsets / commit every 100 ms)"),
        row("quixstreams", quix_label),
        "",
    ]
    if two:
        settled = " / ".join(f"{run['settled_s']:.1f} s" if run["settled_s"] is not None else "?" for run in two)
        lines += [
            "Two processes: both are started together; the one that joins first takes all partitions, and the group is"
            f" rebalanced when the other joins. Last partition assignment after the first output: {settled} (the"
            " rebalance is inside the measured time). First run's assignments, seconds from its first output: "
            + "; ".join(f"`{line}`" for line in two[0]["assignments"]) + ".",
            "",
        ]
    lines += [
        "Records written per input event, counted by reading every output topic and the state changelog back with a"
        " `read_committed` consumer (transaction markers take offsets but are not delivered, so they are not counted;"
        " \"markers\" = offsets advanced − records read, per event). Ledger facts: matches, observations, review candidates,"
        " admission decisions; views: ScopeStatistics and RevisionStatistics; \"other\": dead letters, or a baseline's output."
        " One value per run.",
        "",
        "| process | ledger facts | candidate sets | views | changelog | other | total | transaction markers |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        records_row("ledger", "ledger worker, one process"),
        records_row("ledger-2proc", "ledger worker, two processes"),
        records_row("quixstreams", "quixstreams baseline"),
        "",
        f"The ledger's process uses {per_event_ms:.2f} ms of CPU per event (one Python process for all partitions).",
        "",
        "| target | measured | |",
        "| --- | --- | --- |",
        f"| ledger throughput ≥ {TARGET_EVENTS_PER_S:,} events/s (one process) | {median['ledger']:,.0f} events/s"
        + (f" (two processes: {median['ledger-2proc']:,.0f})" if two else "")
        + f" | {_met(median['ledger'] >= TARGET_EVENTS_PER_S)} |",
        target(f"ledger, one process, ≥ {TARGET_QUIXSTREAMS_RATIO:.0%} of the quixstreams stateful exactly-once baseline",
               r["ratio_to_quixstreams"], f"{r['ratio_to_quixstreams'] or 0:.1%} ({median['ledger']:,.0f} /"
               f" {median.get('quixstreams', 0):,.0f} events/s)", (r["ratio_to_quixstreams"] or 0) >= TARGET_QUIXSTREAMS_RATIO),
        target(f"ledger, two processes ≥ {TARGET_TWO_PROCESSES}× one process", r["ratio_2proc"],
               f"{r['ratio_2proc'] or 0:.2f}× ({median.get('ledger-2proc', 0):,.0f} / {median['ledger']:,.0f} events/s)",
               (r["ratio_2proc"] or 0) >= TARGET_TWO_PROCESSES),
        f"| records written per input event ≤ {TARGET_RECORDS_PER_EVENT:g} (one process, markers excluded) | {records:.2f}"
        f" | {_met(records <= TARGET_RECORDS_PER_EVENT)} |",
        f"| ledger throughput ≥ 50 % of the plain passthrough | {r['ratio_to_alo']:.1%} ({median['ledger']:,.0f} /"
        f" {median['passthrough-alo']:,.0f} events/s) | {_met(r['ratio_to_alo'] >= TARGET_RATIO)} |",
        f"| (same, against the transactional passthrough) | {r['ratio_to_tx']:.1%} ({median['ledger']:,.0f} /"
        f" {median['passthrough-tx']:,.0f} events/s) | {_met(r['ratio_to_tx'] >= TARGET_RATIO)} |",
    ]
    for interval, entry in r["latency_by_interval"].items():
        for name, goal in (("p99", TARGET_P99_MS), ("p50", TARGET_P50_MS)):
            values = sorted(entry[name])
            lines.append(f"| {name} latency ≤ {goal:.0f} ms at half of max throughput ({r['latency_rate']:,.0f} events/s), commit"
                         f" interval {interval} ms | min / median / max {values[0]:,.0f} / **{entry[name + '_median']:,.0f}** /"
                         f" {values[-1]:,.0f} ms ({len(values)} runs) | {_met(entry[name + '_median'] <= goal and entry['all_matched'])} |")
    lines += [
        "",
        f"Latency publish → output visible to a `read_committed` consumer, events published at {r['latency_rate']:,.0f}/s"
        " (half the median ledger throughput; a prefix of the same workload, fresh topics, worker already assigned). Every"
        " event is matched to the first ScopeStatistics record of its scope whose `as_of_position` reaches the event's"
        " position (views are published once per transaction); outcomes also to their first"
        " RecurrenceObservation. The split is at the worker's `produce()` of that record (its CreateTime). \"Quiet seconds\":"
        f" publishing seconds in which other processes used < {QUIET_OTHER:.0%} of the machine — a diagnostic, not the target.",
        "",
        "| commit interval | events (rate) | matched | p50 | p99 | max | publish → produce(), p50 / p99 | produce() → visible,"
        " p50 / p99 | observations: outcomes, p50 / p99 | CPU share: worker, broker, other | quiet seconds: n, p50 / p99 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in r["latency"]:
        cpu = run["cpu"]
        lines.append(
            f"| {run['commit_interval_ms']} ms | {run['events']:,} ({run['achieved_rate']:,.0f}/s) | {run['matched']:,}"
            f" | {run['p50_ms']:,.0f} ms | {run['p99_ms']:,.0f} ms | {run['max_ms']:,.0f} ms"
            f" | {run['to_produce_p50_ms']:,.0f} / {run['to_produce_p99_ms']:,.0f} ms"
            f" | {run['to_visible_p50_ms']:,.0f} / {run['to_visible_p99_ms']:,.0f} ms"
            f" | {run['observation_outcomes']:,}, {run['observation_p50_ms']:,.0f} / {run['observation_p99_ms']:,.0f} ms"
            f" | {_pct(cpu, 'process')}, {_pct(cpu, 'broker')}, {_pct(cpu, 'other')}"
            + (f" | {run['quiet_seconds']}, {run['quiet_p50_ms']:,.0f} / {run['quiet_p99_ms']:,.0f} ms |" if run["quiet_events"] else " | 0 |")
        )
    write_block("kafka-benchmark", "Kafka end to end", lines)


if __name__ == "__main__":
    main()
