"""Benchmark of the recall-time advisory, ``POST /advisories`` (not a test).

1. Fills a real Redis through the product's own projection, as
   ``benchmarks/api_benchmark.py`` does (``fill``: a generated journal
   through the embedded core, the view and the review read models, in a
   namespace of its own, deleted at the end).
2. Starts one ``recurrence-ledger serve`` process (``api_benchmark.Server``)
   and sends it 20-ref advisory requests at a fixed rate (open loop,
   ``--rate``, default 500 requests/s) for ``--seconds`` after a warm-up:
   each request has a scheduled send time, and its latency is measured from
   that time, so a slow answer that delays the next request counts against
   the server (no coordinated omission). The load comes from
   ``--processes`` processes of ``--threads`` keep-alive ``http.client``
   threads each, every thread sending its share of the rate.
3. Each request asks about one scope's revisions: every revision the scope
   has in the view (their rows, some with review candidates) up to 20, the
   rest revisions the ledger does not know — as a recall asks about what
   it found. Reports requests/s achieved, latency p50 / p95 / p99 / max,
   errors, and the server's CPU per request.

Run (the shared Redis of deploy/services.sh, REDIS_URL):

    python benchmarks/advisory_benchmark.py              # 20 s at 500 requests/s; BENCHMARKS.md updated
    python benchmarks/advisory_benchmark.py --quick      # small view, 5 s, no file update

Records the numbers in BENCHMARKS.md between the ``advisory-benchmark`` markers.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import platform
import random
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recurrence_ledger.workload import Workload  # noqa: E402

from benchmarks.api_benchmark import Data, Server, commit, fill, load_average  # noqa: E402
from benchmarks.record import write_block  # noqa: E402

#: Refs per request.
REFS = 20


def bodies(data: Data, count: int, seed: int) -> list[bytes]:
    """``count`` request bodies (module docstring, 3.), each for a random scope."""
    rng = random.Random(seed)
    by_scope: dict[str, list[dict]] = {}
    for scope_id, artifact_id, revision in data.revisions:
        by_scope.setdefault(scope_id, []).append({"family": "experience", "artifact_id": artifact_id, "revision": revision})
    scopes = sorted(by_scope)
    out = []
    for _ in range(count):
        scope_id = rng.choice(scopes)
        known = rng.sample(by_scope[scope_id], min(REFS, len(by_scope[scope_id])))
        unknown = [{"family": "experience", "artifact_id": f"recall-{rng.randrange(10**6)}", "revision": 1} for _ in range(REFS - len(known))]
        refs = known + unknown
        rng.shuffle(refs)
        out.append(orjson.dumps({"scope_id": scope_id, "artifact_refs": refs}))
    return out


def _thread(port: int, schedule: list[tuple[float, bytes]], out: list, errors: list) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    for due, body in schedule:
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            connection.request("POST", "/advisories", body, headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                errors.append(response.status)
        except (OSError, http.client.HTTPException):
            errors.append(0)
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        out.append(time.monotonic() - due)


def _process(port: int, schedules: list[list[tuple[float, bytes]]], pipe) -> None:  # noqa: ANN001 - a Connection
    outs: list[list[float]] = [[] for _ in schedules]
    errors: list = []
    threads = [threading.Thread(target=_thread, args=(port, schedule, out, errors)) for schedule, out in zip(schedules, outs, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pipe.send(([latency for out in outs for latency in out], errors))


def run(port: int, bodies_: list[bytes], rate: float, processes: int, threads: int) -> tuple[list[float], list, float]:
    """Send ``bodies_`` at ``rate`` per second, starting 1 s from now;
    returns (latencies in s, errors, wall seconds)."""
    start = time.monotonic() + 1.0
    lanes = processes * threads
    schedule = [(start + n / rate, body) for n, body in enumerate(bodies_)]
    per_lane = [schedule[lane::lanes] for lane in range(lanes)]
    pipes, workers = [], []
    for p in range(processes):
        parent, child = multiprocessing.Pipe()
        worker = multiprocessing.Process(target=_process, args=(port, per_lane[p * threads : (p + 1) * threads], child))
        worker.start()
        pipes.append(parent)
        workers.append(worker)
    latencies: list[float] = []
    errors: list = []
    for parent in pipes:
        got, errs = parent.recv()
        latencies += got
        errors += errs
    for worker in workers:
        worker.join()
    return latencies, errors, time.monotonic() - start


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (nearest rank), in ms."""
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--rate", type=float, default=500.0, help="requests per second (open loop)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds (after 2 s of warm-up)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8, help="client threads per process")
    parser.add_argument("--quick", action="store_true", help="a small view, 5 s; BENCHMARKS.md untouched")
    args = parser.parse_args()
    shape = Workload(scopes=6, outcomes_per_scope=300, candidates=0.05) if args.quick else Workload(scopes=40, outcomes_per_scope=600, candidates=0.05)
    seconds = 5.0 if args.quick else args.seconds
    started = time.monotonic()
    data, view, models = fill(args.redis_url, shape)
    try:
        with Server(args.redis_url, data.prefix) as server:
            run(server.port, bodies(data, int(2 * args.rate), seed=1), args.rate, args.processes, args.threads)
            load = load_average()
            cpu_before = server.cpu_seconds()
            latencies, errors, wall = run(server.port, bodies(data, int(seconds * args.rate), seed=2), args.rate, args.processes, args.threads)
            server_cpu = server.cpu_seconds() - cpu_before
    finally:
        models.clear()
        view.clear()
        view.close()
    achieved = len(latencies) / wall
    p50, p95, p99, top = (percentile(latencies, q) for q in (0.5, 0.95, 0.99, 1.0))
    lines = [
        f"Recorded {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `python benchmarks/advisory_benchmark.py` at commit {commit()} "
        f"({platform.machine()}, CPython {platform.python_version()}, {os.cpu_count()} cores shared with the load generator, redis-server "
        f"and other jobs: **the machine is shared and noisy**, 1-minute load average {load} at the start; run time "
        f"{time.monotonic() - started:.0f} s).",
        "",
        f"One `recurrence-ledger serve` process, {len(data.scopes)} scopes, {len(data.revisions)} revisions, {len(data.candidates)} review "
        f"candidates. `POST /advisories` with {REFS} refs of one scope each (its revisions in the view, the rest unknown), sent open loop at "
        f"{args.rate:,.0f} requests/s for {seconds:.0f} s after 2 s of warm-up by {args.processes} × {args.threads} keep-alive "
        "`http.client` threads; latency from each request's scheduled send time.",
        "",
        "| requests | requests/s | p50 ms | p95 ms | p99 ms | max ms | errors | server CPU ms/request |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {len(latencies):,} | {achieved:,.0f} | {p50:.1f} | {p95:.1f} | **{p99:.1f}** | {top:.1f} | {len(errors)} | "
        f"{1000 * server_cpu / max(1, len(latencies)):.2f} |",
    ]
    print("\n".join(lines))
    if not args.quick:
        write_block("advisory-benchmark", "Advisory benchmark", lines)


if __name__ == "__main__":
    main()
