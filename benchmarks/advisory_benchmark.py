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
   ``--processes`` processes (default 1) of ``--connections`` keep-alive
   connections each (default 16), every connection sending its share of
   the rate from a uvloop event loop: the requests are bytes made before
   the run and an answer is read by its Content-Length, so the load
   generator takes little of the 2 cores it shares with the server (its
   CPU per request is reported beside the server's).
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
import asyncio
import multiprocessing
import os
import platform
import random
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson
import uvloop

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


def _request(port: int, body: bytes) -> bytes:
    """One keep-alive ``POST /advisories`` as bytes on the wire."""
    return (f"POST /advisories HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("ascii") + body


async def _lane(port: int, schedule: list[tuple[float, bytes]], out: list[float], errors: list) -> None:
    """One keep-alive connection sending ``schedule`` (send time on the
    monotonic clock, request bytes) in order; each answer read whole by its
    Content-Length (what ``serve`` sends), its latency taken from the
    request's scheduled time."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for due, request in schedule:
        wait = due - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        if length is None:
            raise RuntimeError(f"an answer without Content-Length: {head[:200]!r}")
        await reader.readexactly(int(length.group(1)))
        if not head.startswith(b"HTTP/1.1 200 "):
            errors.append(int(head[9:12]))
        out.append(time.monotonic() - due)
    writer.close()


def _process(port: int, schedules: list[list[tuple[float, bytes]]], pipe) -> None:  # noqa: ANN001 - a Connection
    """One load process: its lanes (:func:`_lane`) on one uvloop event
    loop; sends back the latencies, the errors and its own CPU seconds."""
    outs: list[list[float]] = [[] for _ in schedules]
    errors: list = []

    async def lanes() -> None:
        await asyncio.gather(*(_lane(port, schedule, out, errors) for schedule, out in zip(schedules, outs, strict=True)))

    cpu = time.process_time()
    uvloop.run(lanes())
    pipe.send(([latency for out in outs for latency in out], errors, time.process_time() - cpu))


def run(port: int, bodies_: list[bytes], rate: float, processes: int, connections: int) -> tuple[list[float], list, float, float]:
    """Send ``bodies_`` at ``rate`` per second, starting 1 s from now, over
    ``processes`` × ``connections`` keep-alive connections (request ``n``
    on lane ``n`` mod lanes); returns (latencies in s, errors, wall
    seconds, the load processes' CPU seconds)."""
    start = time.monotonic() + 1.0
    lanes = processes * connections
    schedule = [(start + n / rate, _request(port, body)) for n, body in enumerate(bodies_)]
    per_lane = [schedule[lane::lanes] for lane in range(lanes)]
    pipes, workers = [], []
    for p in range(processes):
        parent, child = multiprocessing.Pipe()
        worker = multiprocessing.Process(target=_process, args=(port, per_lane[p * connections : (p + 1) * connections], child))
        worker.start()
        pipes.append(parent)
        workers.append(worker)
    latencies: list[float] = []
    errors: list = []
    client_cpu = 0.0
    for parent in pipes:
        got, errs, cpu = parent.recv()
        latencies += got
        errors += errs
        client_cpu += cpu
    for worker in workers:
        worker.join()
    return latencies, errors, time.monotonic() - start, client_cpu


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (nearest rank), in ms."""
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--rate", type=float, default=500.0, help="requests per second (open loop)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds (after 2 s of warm-up)")
    parser.add_argument("--processes", type=int, default=1, help="load processes")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections per load process")
    parser.add_argument("--quick", action="store_true", help="a small view, 5 s; BENCHMARKS.md untouched")
    args = parser.parse_args()
    shape = Workload(scopes=6, outcomes_per_scope=300, candidates=0.05) if args.quick else Workload(scopes=40, outcomes_per_scope=600, candidates=0.05)
    seconds = 5.0 if args.quick else args.seconds
    started = time.monotonic()
    data, view, models = fill(args.redis_url, shape)
    try:
        with Server(args.redis_url, data.prefix) as server:
            run(server.port, bodies(data, int(2 * args.rate), seed=1), args.rate, args.processes, args.connections)
            load = load_average()
            cpu_before = server.cpu_seconds()
            latencies, errors, wall, client_cpu = run(server.port, bodies(data, int(seconds * args.rate), seed=2), args.rate, args.processes,
                                                     args.connections)
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
        f"{args.rate:,.0f} requests/s for {seconds:.0f} s after 2 s of warm-up over {args.processes} × {args.connections} keep-alive "
        "connections (uvloop load processes); latency from each request's scheduled send time.",
        "",
        "| requests | requests/s | p50 ms | p95 ms | p99 ms | max ms | errors | server CPU ms/request | load generator CPU ms/request |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {len(latencies):,} | {achieved:,.0f} | {p50:.1f} | {p95:.1f} | **{p99:.1f}** | {top:.1f} | {len(errors)} | "
        f"{1000 * server_cpu / max(1, len(latencies)):.2f} | {1000 * client_cpu / max(1, len(latencies)):.2f} |",
    ]
    print("\n".join(lines))
    if not args.quick:
        write_block("advisory-benchmark", "Advisory benchmark", lines)


if __name__ == "__main__":
    main()
