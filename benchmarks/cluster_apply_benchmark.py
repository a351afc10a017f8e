"""Benchmark of applying the read models on a single Redis and on Redis
Cluster (not a test).

A generated journal (``recurrence_ledger.workload``: 10 scopes × 2,000
outcomes) run through the embedded core; its RecurrenceObservations,
ReviewCandidates and ScopeStatistics records applied with
``ReadModels.apply`` in batches of 500 (a follower's batch) into an empty
namespace, as a view follower applies them. Measured per run: the wall
time, the client's CPU time (``time.process_time``) and the Redis
servers' CPU time (``INFO cpu`` ``used_cpu_user + used_cpu_sys``, summed
over the cluster's primaries), each per 1,000 records.

Run it with the code under test on ``PYTHONPATH`` (so the same script
times two versions of the package):

    python benchmarks/cluster_apply_benchmark.py --redis-url redis://127.0.0.1:6379/0 --runs 3
    python benchmarks/cluster_apply_benchmark.py --redis-url redis+cluster://127.0.0.1:7001 --runs 3

Prints one line per run and min / median / max; writes nothing else
(BENCHMARKS.md's ``cluster-apply`` section is written by hand from them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.outputs import located_outputs  # noqa: E402
from recurrence_ledger.catalogue import OBSERVATIONS, REVIEW_CANDIDATES, STATISTICS  # noqa: E402
from recurrence_ledger.read.history import ReadModels  # noqa: E402
from recurrence_ledger.read.records import Located  # noqa: E402
from recurrence_ledger.workload import Workload  # noqa: E402

BATCH = 500


def records_of(shape: Workload) -> list[Located]:
    """The read-model records of the journal of ``shape``
    (``benchmarks.outputs.located_outputs``), the topics interleaved
    by offset as a follower reads them."""
    records = located_outputs(shape, (OBSERVATIONS, REVIEW_CANDIDATES, STATISTICS))
    records.sort(key=lambda record: (record.offset, record.topic))
    return records


def client_of(url: str):  # noqa: ANN201
    try:
        from recurrence_ledger.read.connect import redis_client
    except ImportError:  # pragma: no cover
        import redis

        return redis.Redis.from_url(url)
    return redis_client(url)


def server_cpu(client) -> float:  # noqa: ANN001
    """Seconds of CPU the Redis servers used so far (the cluster's primaries summed)."""
    if "+cluster" in getattr(client, "first_url", "") or type(client).__name__ == "ClusterClient":
        infos = client.info("cpu", target_nodes="primaries")
        infos = infos.values() if isinstance(infos, dict) and "used_cpu_user" not in infos else [infos]
    else:
        infos = [client.info("cpu")]
    return sum(float(info["used_cpu_user"]) + float(info["used_cpu_sys"]) for info in infos)


def run(url: str, records: list[Located]) -> tuple[float, float, float]:
    client = client_of(url)
    models = ReadModels(client, f"rlbench-{uuid.uuid4().hex[:8]}")
    try:
        server, cpu, wall = server_cpu(client), time.process_time(), time.perf_counter()
        for start in range(0, len(records), BATCH):
            models.apply(records[start : start + BATCH])
        wall, cpu, server = time.perf_counter() - wall, time.process_time() - cpu, server_cpu(client) - server
    finally:
        models.clear()
        client.close()
    per = 1000 / len(records)
    return wall * per, cpu * per, server * per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    records = records_of(Workload(scopes=10, outcomes_per_scope=2000))
    results = []
    for number in range(args.runs):
        results.append(run(args.redis_url, records))
        print(f"run {number + 1}: wall {results[-1][0] * 1000:.1f} ms, client CPU {results[-1][1] * 1000:.1f} ms, "
              f"Redis CPU {results[-1][2] * 1000:.1f} ms per 1,000 records ({len(records):,} records)", flush=True)
    for name, column in (("wall", 0), ("client CPU", 1), ("Redis CPU", 2)):
        values = sorted(result[column] * 1000 for result in results)
        print(f"{name} ms per 1,000 records: min {values[0]:.1f} / median {statistics.median(values):.1f} / max {values[-1]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
