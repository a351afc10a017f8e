"""End-to-end benchmark of the Kafka worker on the real broker (not a test).

Measures the ledger worker (``python -m processors.cli worker``, a separate
process, exactly as deployed) against a plain consume → produce passthrough
written with the same client library (confluent-kafka), over the same
pre-published input topic, in the same run, and records the numbers in
BENCHMARKS.md between the ``kafka-benchmark`` markers. Run (broker on
127.0.0.1:9092, e.g. ``eval "$(bash deploy/services.sh up)"``):

    python benchmarks/kafka_benchmark.py            # full run, writes BENCHMARKS.md
    python benchmarks/kafka_benchmark.py --quick    # smoke sizes, prints only

Every run uses fresh topics under a random prefix (``kbench-<hex>.``) and
deletes them (and its consumer groups) at the end.

Throughput (events/s). The generated workload (``processors.workload``) is
published once, as Avro SourceEvents on ``source-journal``
(``kafka_io.publish_journal``), before anything consumes it. Then, one at a
time and each in its own consumer group, a process drains that backlog and
exits after 3 s without input:

- ``ledger``: the worker (transactions every ``--commit-interval-ms``, 100 by
  default; no Redis view — Redis is not on the publish → output path);
- ``passthrough-alo``: plain at-least-once passthrough: subscribe (range
  assignor, read_committed, no auto commit, the worker's consumer settings),
  produce each record unchanged (same key, value and partition number) to
  its own output topic, and every 100 ms flush the producer and commit the
  consumed offsets;
- ``passthrough-tx``: the same with the worker's transaction pattern:
  begin, produce, every 100 ms ``send_offsets_to_transaction`` +
  ``commit_transaction`` (same producer settings as the worker).

events/s = input records / (t_end − t_start), where
t_start = the smallest CreateTime of the run's output records (librdkafka
stamps a record when ``produce()`` is called, so this is when the process
emitted its first output — process start, imports, group join, partition
assignment and changelog restore are excluded), and t_end = the moment the
last output became visible to a ``read_committed`` reader: a sampler in this
process asks the broker for the last stable offsets of the watched output
topic every 20 ms (``AdminClient.list_offsets``, READ_COMMITTED) and t_end
is the first sample that shows the final value. The idle tail before the
process exits is therefore excluded too; the error is about one sampling
period. Watched topic: ``recurrence-statistics`` for the ledger (one record
per applied event, committed atomically with every other output of the
transaction), the passthrough's output topic otherwise. Output counts are
checked after each run by reading the committed records back.
Also recorded per run: the process's CPU seconds (``wait4`` rusage) and the
machine's CPU utilisation (``/proc/stat``) over [t_start, t_end].

Latency at half of the maximum throughput. For each commit interval (the
default 100 ms and 50 ms), on fresh topics, a worker is started and waited
for until it logs its partition assignment; then this process publishes a
prefix of the same workload at a fixed rate — half the median ledger
events/s measured above — with the idempotent producer of
``kafka_io.PRODUCER_CONFIG`` (values encoded beforehand), noting
``time.perf_counter()`` just before each ``produce()``. A ``read_committed``
consumer thread in this process (``fetch.wait.max.ms`` 10, so it adds little
itself) assigned to ``recurrence-statistics`` and ``recurrence-observations``
notes when each record arrives. The worker publishes one ScopeStatistics
record per applied event, whose ``as_of_position`` is that event's
journal_position (checked: every published event is matched exactly once,
counts are reported), so latency(event) = first arrival of the statistics
record (scope_id, as_of_position) − publish time of the event with that
(scope_id, journal_position). For outcomes that produce observations, the
first RecurrenceObservation with (scope_id, task_outcome_ref.source_id) is
matched the same way. p50/p99/max are nearest-rank percentiles over all
matched events (no warm-up is dropped).

The VM has 2 cores shared by the broker, the process under test and this
script (and, while this runs, by whatever else runs on the machine): the
load average at start and end is recorded with the numbers. Each throughput
measurement is repeated ``--repeats`` times (default 2), interleaved; the
median is what the targets are checked against.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
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

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from processors.kafka_admin import create_topics  # noqa: E402
from processors.kafka_io import PRODUCER_CONFIG, prepare_line, publish_journal  # noqa: E402
from processors.workload import Workload, generate_journal  # noqa: E402
from schemas.codec import decode_value  # noqa: E402
from topics import catalogue  # noqa: E402

BENCHMARKS_MD = REPO / "BENCHMARKS.md"
BEGIN, END = "<!-- kafka-benchmark:begin -->", "<!-- kafka-benchmark:end -->"
STATISTICS, OBSERVATIONS = "recurrence-statistics", "recurrence-observations"
SAMPLE_S = 0.02
#: Targets of the requirement.
TARGET_RATIO = 0.5
TARGET_P99_MS = 250.0


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
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "range",
        "enable.partition.eof": False,
        "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 1_000,
    })
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
def _cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as handle:
        fields = [float(value) for value in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


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
    """One drain of the pre-published backlog by one process."""

    kind: str
    events: int
    outputs: int = 0
    seconds: float = 0.0
    events_per_s: float = 0.0
    wall_s: float = 0.0
    process_cpu_s: float = 0.0
    machine_cpu: float = 0.0
    output_records_total: int = 0  # every topic the process wrote, by offsets (includes transaction markers)


def _child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "RL_TOPIC_PREFIX", "RL_APP_ID", "RL_INSTANCE_ID")}


def timed_run(kind: str, command: list[str], bootstrap: str, watch: str, other_outputs: list[str], partitions: int,
              events: int, log_path: Path) -> ThroughputRun:
    """Run ``command`` until it exits, sampling the last stable offsets of
    ``watch`` every SAMPLE_S; see the module docstring for the method."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    starts = committed_ends(admin, watch, partitions)
    other_starts = {topic: committed_ends(admin, topic, partitions) for topic in other_outputs}
    samples: list[tuple[float, int, tuple[float, float]]] = []  # (wall time, sum of LSOs, machine cpu)
    launched = time.time()
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=_child_env(), start_new_session=True)
    rusage = None
    try:
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            ends = committed_ends(admin, watch, partitions)
            samples.append((time.time(), sum(ends.values()), _cpu_times()))
            if pid:
                rusage = usage
                process.returncode = os.waitstatus_to_exitcode(status)
                break
            time.sleep(SAMPLE_S)
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    exited = time.time()
    if process.returncode != 0:
        raise RuntimeError(f"{kind} exited with {process.returncode}; log {log_path}:\n{log_path.read_text()[-3000:]}")
    final = committed_ends(admin, watch, partitions)
    outputs, first_ts, _ = read_range(bootstrap, watch, starts, final)
    if first_ts is None:
        raise RuntimeError(f"{kind}: no output on {watch}; log {log_path}")
    final_sum = sum(final.values())
    end_sample = next(sample for sample in samples if sample[1] >= final_sum)
    t_start, t_end = first_ts / 1000, end_sample[0]
    # Machine CPU over [t_start, t_end]: the samples closest to both ends.
    start_sample = min(samples, key=lambda sample: abs(sample[0] - t_start))
    busy = end_sample[2][0] - start_sample[2][0]
    total = end_sample[2][1] - start_sample[2][1]
    written = sum(final.values()) - sum(starts.values())
    for topic, topic_starts in other_starts.items():
        written += sum(committed_ends(admin, topic, partitions).values()) - sum(topic_starts.values())
    run = ThroughputRun(
        kind=kind, events=events, outputs=outputs, seconds=t_end - t_start, events_per_s=events / (t_end - t_start),
        wall_s=exited - launched, process_cpu_s=rusage.ru_utime + rusage.ru_stime,
        machine_cpu=busy / total if total else 0.0, output_records_total=written,
    )
    print(f"  {kind}: {run.events_per_s:,.0f} events/s ({events:,} events in {run.seconds:.2f} s; {outputs:,} records on "
          f"{watch.split('.', 1)[-1]}; process CPU {run.process_cpu_s:.1f} s; machine CPU {run.machine_cpu:.0%}; wall {run.wall_s:.1f} s)",
          flush=True)
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
    observation_outcomes: int = 0
    observation_p50_ms: float = 0.0
    observation_p99_ms: float = 0.0
    observation_max_ms: float = 0.0
    extra: dict = field(default_factory=dict)


class Observer(threading.Thread):
    """read_committed consumer noting when each output record arrives."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int):
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kbench-observer-{uuid.uuid4().hex[:8]}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 10, "enable.partition.eof": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for topic in topics for p in range(partitions)])
        self.seen: list[tuple[float, str, bytes]] = []
        self.statistics = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            messages = self.consumer.consume(num_messages=1_000, timeout=0.05)
            now = time.perf_counter()
            for message in messages:
                if message.error() is None:
                    topic = message.topic()
                    self.seen.append((now, topic, message.value()))
                    if topic.endswith(STATISTICS):
                        self.statistics += 1
        self.consumer.close()


def latency_run(bootstrap: str, partitions: int, lines: list[bytes], rate: float, commit_interval_ms: int, workdir: Path,
                prefixes: list[str]) -> LatencyRun:
    """One latency measurement on fresh topics (see the module docstring)."""
    prefix = f"kbench-{uuid.uuid4().hex[:8]}."
    prefixes.append(prefix)
    create_topics(bootstrap, partitions, prefix)
    prepared = [prepare_line(line) for line in lines]
    identities = []
    for line in lines:
        value = orjson.loads(line)["value"]
        identities.append((value["scope_id"], value["journal_position"], value.get("source_ref", {}).get("source_id")))
    log_path = workdir / f"latency-{commit_interval_ms}.log"
    command = [sys.executable, "-m", "processors.cli", "worker", "--bootstrap", bootstrap, "--topic-prefix", prefix,
               "--app-id", "kbench-latency", "--instance-id", "w1", "--commit-interval-ms", str(commit_interval_ms),
               "--exit-when-idle", "120"]
    log = open(log_path, "w+b")
    process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=_child_env(), start_new_session=True)
    observer = Observer(bootstrap, [prefix + STATISTICS, prefix + OBSERVATIONS], partitions)
    observer.start()
    try:
        deadline = time.monotonic() + 60
        while b"assigned partitions" not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"latency worker did not start; log {log_path}:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.05)
        time.sleep(0.5)
        producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
        topic = prefix + catalogue.SOURCE_JOURNAL
        sent = [0.0] * len(prepared)
        t0 = time.perf_counter() + 0.01
        i = 0
        while i < len(prepared):
            due = min(len(prepared), int((time.perf_counter() - t0) * rate) + 1)
            while i < due:
                record = prepared[i]
                sent[i] = time.perf_counter()
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
        while observer.statistics < len(prepared) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        time.sleep(max(0.5, 3 * commit_interval_ms / 1000))  # late duplicates, if any, would show up here
    finally:
        observer.stopping.set()
        observer.join(10)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()

    sent_at = {(scope, position): sent[index] for index, (scope, position, _) in enumerate(identities)}
    outcome_sent = {(scope, source): sent[index] for index, (scope, _, source) in enumerate(identities) if source}
    first_stat: dict[tuple[str, int], float] = {}
    first_observation: dict[tuple[str, str], float] = {}
    extra = 0
    for arrived, topic, raw in observer.seen:
        if topic.endswith(STATISTICS):
            value = decode_value(raw, ("ScopeStatistics",))
            key = (value["scope_id"], value["as_of_position"])
            if key in first_stat or key not in sent_at:
                extra += 1
            else:
                first_stat[key] = arrived
        else:
            value = decode_value(raw, ("RecurrenceObservation",))
            key = (value["scope_id"], value["task_outcome_ref"]["source_id"])
            if key in outcome_sent and key not in first_observation:
                first_observation[key] = arrived
    series = sorted((sent_at[key] - sent[0], (arrived - sent_at[key]) * 1000) for key, arrived in first_stat.items())
    (workdir / f"latency-{commit_interval_ms}.tsv").write_text("".join(f"{t:.4f}\t{ms:.1f}\n" for t, ms in series))
    latencies = sorted(ms for _, ms in series)
    observation_latencies = sorted((arrived - outcome_sent[key]) * 1000 for key, arrived in first_observation.items())
    run = LatencyRun(commit_interval_ms=commit_interval_ms, target_rate=rate, events=len(prepared),
                     achieved_rate=(len(prepared) - 1) / publish_seconds if publish_seconds > 0 else 0.0,
                     matched=len(latencies), unmatched=len(prepared) - len(latencies), extra_statistics=extra)
    if latencies:
        run.p50_ms, run.p99_ms, run.max_ms = percentile(latencies, 0.5), percentile(latencies, 0.99), latencies[-1]
    if observation_latencies:
        run.observation_outcomes = len(observation_latencies)
        run.observation_p50_ms = percentile(observation_latencies, 0.5)
        run.observation_p99_ms = percentile(observation_latencies, 0.99)
        run.observation_max_ms = observation_latencies[-1]
    print(f"  latency, commit interval {commit_interval_ms} ms, {run.achieved_rate:,.0f} events/s published: p50 {run.p50_ms:.0f} ms, "
          f"p99 {run.p99_ms:.0f} ms, max {run.max_ms:.0f} ms ({run.matched:,}/{run.events:,} matched, {extra} other statistics "
          f"records); observations p50 {run.observation_p50_ms:.0f} / p99 {run.observation_p99_ms:.0f} ms "
          f"({run.observation_outcomes:,} outcomes)", flush=True)
    return run


def delete_prefixed(bootstrap: str, prefixes: list[str], groups: list[str]) -> int:
    """Delete every topic whose name starts with one of ``prefixes`` and the
    given consumer groups. Returns the number of topics deleted."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [name for name in admin.list_topics(timeout=10).topics if any(name.startswith(p) for p in prefixes)]
    if names:
        for name, future in admin.delete_topics(names, operation_timeout=30).items():
            try:
                future.result()
            except KafkaException as error:
                print(f"  could not delete {name}: {error}", file=sys.stderr)
    if groups:
        for group, future in admin.delete_consumer_groups(groups, request_timeout=30).items():
            try:
                future.result()
            except KafkaException as error:
                if error.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                    print(f"  could not delete group {group}: {error}", file=sys.stderr)
    return len(names)


# ---------------------------------------------------------------------------------------------
# The whole benchmark
# ---------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat; print only")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--scopes", type=int, default=100)
    parser.add_argument("--outcomes-per-scope", type=int, default=500, help="throughput workload size (events ≈ scopes × (outcomes + 21))")
    parser.add_argument("--repeats", type=int, default=2, help="throughput repeats (interleaved); 0 skips them (needs --latency-rate, prints only)")
    parser.add_argument("--latency-seconds", type=float, default=20.0, help="publish duration of each latency run")
    parser.add_argument("--latency-rate", type=float, help="publish rate of the latency runs (default: half the median ledger events/s)")
    parser.add_argument("--latency-intervals", default="100,50", help="worker commit intervals (ms) for the latency runs")
    parser.add_argument("--keep-topics", action="store_true", help="do not delete the benchmark topics")
    # The baseline process (internal).
    parser.add_argument("--passthrough-child", choices=("alo", "tx"), help=argparse.SUPPRESS)
    parser.add_argument("--topic-prefix", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--out-topic", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.passthrough_child:
        passthrough(args.bootstrap, args.topic_prefix, args.group, args.out_topic, args.passthrough_child, 100, 3.0)
        return
    if args.repeats < 1 and not args.latency_rate:
        parser.error("--repeats 0 needs --latency-rate")
    if args.quick:
        args.scopes, args.outcomes_per_scope, args.repeats, args.latency_seconds = 20, 100, 1, 5.0

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
        journal = workdir / "journal.jsonl"
        journal.write_bytes(b"\n".join(lines) + b"\n")
        events = len(lines)
        runs_per_kind = ("ledger", "passthrough-alo", "passthrough-tx")
        extra_topics = [(f"passthrough-{mode}-{rep}", {}) for mode in ("alo", "tx") for rep in range(args.repeats)]
        create_topics(bootstrap, partitions, prefix, extra=extra_topics)
        summary = publish_journal(bootstrap, journal, topic_prefix=prefix, show_progress=False)
        print(f"published {summary.records:,} events ({shape.scopes} scopes × {shape.outcomes_per_scope} outcomes) "
              f"in {summary.seconds:.1f} s", flush=True)

        runs: dict[str, list[ThroughputRun]] = {kind: [] for kind in runs_per_kind}
        ledger_outputs = [prefix + name for name in catalogue.OUTPUT_TOPICS if name != STATISTICS]
        for rep in range(args.repeats):
            app_id = f"kbench-ledger-{rep}"
            groups.append(prefix + app_id)
            command = [sys.executable, "-m", "processors.cli", "worker", "--bootstrap", bootstrap, "--topic-prefix", prefix,
                       "--app-id", app_id, "--instance-id", "w1", "--exit-when-idle", "3"]
            changelog = f"{prefix}{app_id}-ledger-state-changelog"
            # The worker creates its changelog; create it first (same settings) so its records are counted.
            create_topics(bootstrap, partitions, prefix, extra=[(f"{app_id}-ledger-state-changelog",
                                                                 {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"})])
            runs["ledger"].append(timed_run("ledger", command, bootstrap, prefix + STATISTICS, [*ledger_outputs, changelog],
                                            partitions, events, workdir / f"ledger-{rep}.log"))
            for mode in ("alo", "tx"):
                group = f"{prefix}kbench-passthrough-{mode}-{rep}"
                groups.append(group)
                out_topic = f"{prefix}passthrough-{mode}-{rep}"
                command = [sys.executable, str(Path(__file__).resolve()), "--passthrough-child", mode, "--bootstrap", bootstrap,
                           "--topic-prefix", prefix, "--group", group, "--out-topic", out_topic]
                runs[f"passthrough-{mode}"].append(timed_run(f"passthrough-{mode}", command, bootstrap, out_topic, [],
                                                             partitions, events, workdir / f"passthrough-{mode}-{rep}.log"))

        median = {kind: statistics.median(run.events_per_s for run in kind_runs) if kind_runs else math.nan
                  for kind, kind_runs in runs.items()}
        rate = args.latency_rate or median["ledger"] / 2
        latency_events = min(events, max(1_000, int(rate * args.latency_seconds)))
        latency = []
        for interval in (int(value) for value in args.latency_intervals.split(",")):
            latency.append(latency_run(bootstrap, partitions, lines[:latency_events], rate, interval, workdir, prefixes))
            groups.append(prefixes[-1] + "kbench-latency")
    finally:
        if not args.keep_topics:
            deleted = delete_prefixed(bootstrap, prefixes, groups)
            print(f"deleted {deleted} benchmark topics", flush=True)

    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
                   f"{os.cpu_count()} CPUs, confluent-kafka {__import__('confluent_kafka').version()[0]}",
        "events": events,
        "scopes": shape.scopes,
        "outcomes_per_scope": shape.outcomes_per_scope,
        "partitions": partitions,
        "repeats": args.repeats,
        "runs": {kind: [run.__dict__ for run in kind_runs] for kind, kind_runs in runs.items()},
        "median_events_per_s": median,
        "ratio_to_alo": median["ledger"] / median["passthrough-alo"],
        "ratio_to_tx": median["ledger"] / median["passthrough-tx"],
        "latency": [run.__dict__ for run in latency],
        "load_start": load_start,
        "load_end": _load(),
        "script_seconds": time.monotonic() - started,
    }
    print(json.dumps(result, indent=2), flush=True)
    if not args.quick and args.repeats > 0:
        write_markdown(result)
        print(f"wrote {BENCHMARKS_MD}")


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def write_markdown(r: dict) -> None:
    """Replace the kafka-benchmark block of BENCHMARKS.md (or append it)."""
    median = r["median_events_per_s"]
    runs = r["runs"]

    def row(kind: str, label: str) -> str:
        values = " / ".join(f"{run['events_per_s']:,.0f}" for run in runs[kind])
        cpu = statistics.median(run["process_cpu_s"] for run in runs[kind])
        machine = statistics.median(run["machine_cpu"] for run in runs[kind])
        seconds = statistics.median(run["seconds"] for run in runs[kind])
        return f"| {label} | {values} | **{median[kind]:,.0f}** | {seconds:.1f} s | {cpu:.1f} s | {machine:.0%} |"

    ledger_run = runs["ledger"][0]
    lines = [
        BEGIN,
        f"Recorded {r['date']} by `python benchmarks/kafka_benchmark.py` ({r['machine']}; one Kafka 3.9.1 KRaft broker on the same"
        f" VM, `deploy/services.sh`). Load average at start / end: {r['load_start']} / {r['load_end']}. Script run time"
        f" {r['script_seconds'] / 60:.1f} min.",
        "",
        f"Workload: {r['events']:,} source events (`processors.workload`, {r['scopes']} scopes × {r['outcomes_per_scope']} outcomes,"
        f" 10 heads and 5 Handoffs per scope), published beforehand as Avro SourceEvents on `source-journal`,"
        f" {r['partitions']} partitions per topic. Each process drains that backlog in its own consumer group;"
        " events/s = input events / (first output's CreateTime → last output visible to a `read_committed` reader),"
        " so start-up, group join and the idle tail are excluded (method in the script's docstring).",
        "",
        f"| process | events/s per run ({r['repeats']} runs, interleaved) | median | active time | process CPU | machine CPU (2 cores) |",
        "| --- | --- | --- | --- | --- | --- |",
        row("ledger", "ledger worker (`processors.cli worker`, transactions every 100 ms)"),
        row("passthrough-alo", "passthrough, at-least-once (produce; flush + commit offsets every 100 ms)"),
        row("passthrough-tx", "passthrough, transactional (the worker's begin / send_offsets / commit every 100 ms)"),
        "",
        f"Ledger output per run: {ledger_run['outputs']:,} ScopeStatistics records (one per event) and"
        f" ≈{ledger_run['output_records_total'] / ledger_run['events']:.1f} records per input event over all output topics"
        " and the changelog (offsets, transaction markers included).",
        "",
        "| target | measured | |",
        "| --- | --- | --- |",
        f"| ledger throughput ≥ 50 % of the plain passthrough | {r['ratio_to_alo']:.1%} ({median['ledger']:,.0f} /"
        f" {median['passthrough-alo']:,.0f} events/s) | {_met(r['ratio_to_alo'] >= TARGET_RATIO)} |",
        f"| (same, against the transactional passthrough) | {r['ratio_to_tx']:.1%} ({median['ledger']:,.0f} /"
        f" {median['passthrough-tx']:,.0f} events/s) | {_met(r['ratio_to_tx'] >= TARGET_RATIO)} |",
    ]
    for run in r["latency"]:
        lines.append(f"| p99 latency ≤ 250 ms at half of max throughput, commit interval {run['commit_interval_ms']} ms |"
                     f" {run['p99_ms']:,.0f} ms | {_met(run['p99_ms'] <= TARGET_P99_MS and run['unmatched'] == 0)} |")
    lines += [
        "",
        "Latency publish → output visible to a `read_committed` consumer, with events published at half the median ledger"
        " throughput (a prefix of the same workload, fresh topics, worker already assigned; every event matched to the"
        " ScopeStatistics record with its `as_of_position`, outcomes also to their first RecurrenceObservation):",
        "",
        "| commit interval | events (published rate) | matched | p50 | p99 | max | observations: outcomes, p50 / p99 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in r["latency"]:
        lines.append(
            f"| {run['commit_interval_ms']} ms | {run['events']:,} ({run['achieved_rate']:,.0f}/s) | {run['matched']:,}"
            f" | {run['p50_ms']:,.0f} ms | {run['p99_ms']:,.0f} ms | {run['max_ms']:,.0f} ms |"
            f" {run['observation_outcomes']:,}, {run['observation_p50_ms']:,.0f} / {run['observation_p99_ms']:,.0f} ms |"
        )
    lines.append(END)
    block = "\n".join(lines)
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n\n"
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Kafka end to end\n\n" + block + "\n"
    BENCHMARKS_MD.write_text(text)


if __name__ == "__main__":
    main()
