"""Gap between a worker's ``kill -9`` and the next committed output, with
static and with dynamic group membership (not a test; real broker).

For each membership kind and repeat: fresh topics (4 partitions) under a
random prefix, a ~17,700-event workload published, ``worker --instance-id
w1`` started; once outputs flow it is SIGKILLed and the same command is
started again at once. A ``read_committed`` reader tails
``recurrence-observations``; the gap is from the kill to the arrival of the
first record whose CreateTime is after the kill (stamped by the restarted
process, so it is not a record of the dead one still in flight).

    python benchmarks/restart_gap.py [--repeats 2] [--session-timeout-ms 10000]

Prints one line per run and the medians; topics are deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from recurrence_ledger.workload import Workload, generate_journal  # noqa: E402
from tests.e2e import harness  # noqa: E402

WORKLOAD = Workload(scopes=80, outcomes_per_scope=190, heads_per_scope=5, handoffs=3, seed=29, candidates=0.1)


def tail(bootstrap: str, topic: str, arrivals: list[tuple[float, float]], stop: threading.Event) -> None:
    """Append (arrival time, CreateTime s) of every committed record of ``topic``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-gap-tail", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    try:
        while not stop.is_set():
            for message in consumer.consume(500, 0.05):
                if message.error() is None:
                    arrivals.append((time.time(), message.timestamp()[1] / 1000))
    finally:
        consumer.close()


def one_run(bootstrap: str, journal: Path, membership: str, session_ms: int, work: Path) -> float:
    prefix = harness.new_prefix()
    try:
        harness.prepare(bootstrap, prefix, partitions=4)
        harness.publish(bootstrap, journal, prefix)
        arrivals: list[tuple[float, float]] = []
        stop = threading.Event()
        reader = threading.Thread(target=tail, args=(bootstrap, harness.physical(prefix, "recurrence-observations"), arrivals, stop), daemon=True)
        reader.start()
        log = work / f"{prefix}log"
        extra = (membership, "--session-timeout-ms", str(session_ms))
        first = harness.start_worker(bootstrap, prefix, log, idle_exit=None, extra=extra)
        harness.wait_until(lambda: len(arrivals) > 50, 60, "first outputs")
        time.sleep(0.5)
        killed_at = time.time()
        harness.kill(first)
        second = harness.start_worker(bootstrap, prefix, log, idle_exit=None, extra=extra)
        try:
            harness.wait_until(lambda: any(created > killed_at for _, created in arrivals), 120, "output after the restart")
            return min(arrived for arrived, created in arrivals if created > killed_at) - killed_at
        finally:
            harness.kill(second)
            stop.set()
            reader.join(timeout=10)
    finally:
        harness.remove_prefix(bootstrap, prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    args = parser.parse_args()
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    work = Path(tempfile.mkdtemp(prefix="restart-gap-"))
    journal = work / "journal.jsonl"
    journal.write_text("".join(json.dumps(record) + "\n" for record in generate_journal(WORKLOAD)))
    gaps: dict[str, list[float]] = {"--dynamic-membership": [], "--static-membership": []}
    for _ in range(args.repeats):
        for membership in gaps:
            gap = one_run(bootstrap, journal, membership, args.session_timeout_ms, work)
            gaps[membership].append(gap)
            print(f"{membership[2:]}: kill -9 → next committed output {gap:.2f} s", flush=True)
    for membership, values in gaps.items():
        print(f"{membership[2:]}: median {statistics.median(values):.2f} s (runs: {' / '.join(f'{v:.2f}' for v in values)}), session.timeout.ms {args.session_timeout_ms}")


if __name__ == "__main__":
    main()
