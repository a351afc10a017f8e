"""Benchmark of the statistics API under concurrent load (not a test).

1. Fills a real Redis through the product's own projection: a generated
   journal (``recurrence_ledger.workload``, review candidates on) run
   through the embedded core, its ScopeStatistics and RevisionStatistics
   records submitted to ``FollowerView`` and every followed record applied
   with ``ReadModels.apply``, as the view follower does, into a namespace of
   its own (topic prefix ``apibench<hex>.``), deleted at the end.
2. Starts one ``recurrence-ledger serve`` process (its own process: a
   server in the client's process would share its GIL) on a free loopback
   port, and runs ``--clients`` (20) concurrent keep-alive clients over a
   fixed mix of the read endpoints (:data:`MIX`: what the dashboard polls —
   the scope page, a scope's statistics, revisions, review list and trend —,
   the timeline's revision history, the review inbox's queue and a
   candidate), a share of them conditional (``If-None-Match`` with the
   current ETag, as the dashboard polls: 304). Every request is issued by
   a client as soon as its previous answer arrived (closed loop).
3. Reports, per run, requests/s, latency p50 / p95 / p99 / max as the
   client sees it, errors (anything but 200 / 304), the CPU of the server
   process (``/proc/<pid>/stat``, per request and in cores) and of the load
   generator, and min / median / max over ``--runs`` (≥ 3).

The load generator shares the machine's cores with the server, so it is
kept cheap and its CPU is reported: ``--client threads`` (the default)
runs the clients as threads of ``--client-processes`` processes with the
standard library's ``http.client``; ``--client async`` runs them as tasks
of one ``httpx.AsyncClient``. ``--against PATH`` serves, in the same
sitting, alternately with ``PYTHONPATH=PATH`` (the ``processors`` folder
of another checkout: the code before a change; more folders before it can
hide installed packages) and from this checkout, and records both.

Run (the shared Redis of deploy/services.sh, REDIS_URL; nothing else needed):

    python benchmarks/api_benchmark.py                      # 3 runs of 5,000 requests; BENCHMARKS.md updated
    python benchmarks/api_benchmark.py --against /tmp/before/processors   # e.g. git archive of the commit before
    python benchmarks/api_benchmark.py --quick              # smoke size, no file update

Records the numbers in BENCHMARKS.md between the ``api-benchmark`` markers.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import multiprocessing
import os
import platform
import random
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recurrence_ledger.catalogue import REVIEW_CANDIDATES, REVISION_STATISTICS, STATISTICS  # noqa: E402
from recurrence_ledger.read.follower import FOLLOWED  # noqa: E402
from recurrence_ledger.read.follower_view import FollowerView  # noqa: E402
from recurrence_ledger.read.history import ReadModels  # noqa: E402
from recurrence_ledger.read.keys import default_namespace  # noqa: E402
from recurrence_ledger.workload import Workload  # noqa: E402

from benchmarks.outputs import located_outputs  # noqa: E402
from benchmarks.record import write_block  # noqa: E402

#: The request mix: (kind, weight). Weights sum to 100.
MIX: tuple[tuple[str, int], ...] = (
    ("scopes page (limit 50)", 12),
    ("scope statistics", 16),
    ("revisions sort=streak limit 10", 14),
    ("revisions sort=unknown limit 10", 8),
    ("revisions binding_suspect limit 100", 6),
    ("scope review-candidates", 12),
    ("scope trend", 8),
    ("revision history limit 100", 10),
    ("review queue limit 50", 8),
    ("review candidate", 6),
)
#: Share of requests sent with the current ETag in If-None-Match (answer 304).
CONDITIONAL_SHARE = 0.25
#: Ticks of /proc/<pid>/stat utime and stime per second.
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Data:
    """What the namespace holds: ``scopes``, ``revisions`` ((scope, artifact_id, revision)) and review ``candidates``."""

    prefix: str
    scopes: list[str]
    revisions: list[tuple[str, str, int]]
    candidates: list[str]


def fill(redis_url: str, shape: Workload) -> tuple[Data, FollowerView, ReadModels]:
    """Fill a fresh namespace through the product's projection (module docstring, 1.)."""
    prefix = f"apibench{uuid.uuid4().hex[:8]}."
    namespace = default_namespace(prefix)
    batch = located_outputs(shape, FOLLOWED)
    view = FollowerView(redis_url, namespace=namespace)
    models = ReadModels(view._client, namespace)
    view.submit([r.value for r in batch if r.topic == STATISTICS], revisions=[r.value for r in batch if r.topic == REVISION_STATISTICS])
    view.flush(force=True)
    assert view.pending == 0, "Redis did not take the view's records"
    for start in range(0, len(batch), 5000):
        models.apply(batch[start : start + 5000])
    revisions = sorted({(r.value["scope_id"], r.value["artifact_ref"]["artifact_id"], r.value["artifact_ref"]["revision"])
                        for r in batch if r.topic == REVISION_STATISTICS})
    candidates = sorted({r.value["candidate_id"] for r in batch if r.topic == REVIEW_CANDIDATES})
    return Data(prefix, sorted({r.value["scope_id"] for r in batch if r.topic == STATISTICS}), revisions, candidates), view, models


def request_path(kind: str, data: Data, rng: random.Random) -> str:
    """A path (with query) of request ``kind`` (:data:`MIX`)."""
    scope = quote(rng.choice(data.scopes), safe="")
    base = f"/scopes/{scope}"
    if kind.startswith("scopes page"):
        pages = max(1, len(data.scopes) // 50)
        return "/scopes?" + urlencode({"limit": 50, "offset": 50 * rng.randrange(pages), "sort": rng.choice(["scope_id", "needing_review", "recurred"])})
    if kind == "scope statistics":
        return f"{base}/statistics"
    if kind.startswith("revisions sort=streak"):
        return f"{base}/revisions?sort=streak&limit=10"
    if kind.startswith("revisions sort=unknown"):
        return f"{base}/revisions?sort=unknown&limit=10"
    if kind.startswith("revisions binding_suspect"):
        return f"{base}/revisions?binding_suspect=true&sort=unknown&limit=100"
    if kind == "scope review-candidates":
        return f"{base}/review-candidates"
    if kind == "scope trend":
        return f"{base}/trend"
    if kind.startswith("revision history"):
        scope_id, artifact_id, revision = rng.choice(data.revisions)
        return f"/scopes/{quote(scope_id, safe='')}/revisions/{quote(artifact_id, safe='')}/{revision}/history?order=newest&limit=100"
    if kind.startswith("review queue"):
        return "/review-queue?" + urlencode({"status": rng.choice(["open", "open", "decided", "all"]), "limit": 50})
    if kind == "review candidate":
        return f"/review-candidates/{quote(rng.choice(data.candidates), safe='')}"
    raise KeyError(kind)


def plan(data: Data, url: str, count: int, seed: int) -> list[tuple[str, str | None]]:
    """``count`` requests ``(path, If-None-Match or None)`` drawn from
    :data:`MIX`; the ETags of the conditional ones are fetched here, once
    per distinct path."""
    rng = random.Random(seed)
    kinds = [kind for kind, weight in MIX for _ in range(weight)]
    paths = [request_path(rng.choice(kinds), data, rng) for _ in range(count)]
    etags: dict[str, str] = {}
    requests: list[tuple[str, str | None]] = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for path in paths:
            if rng.random() < CONDITIONAL_SHARE:
                if path not in etags:
                    response = client.get(path)
                    response.raise_for_status()
                    etags[path] = response.headers["etag"]
                requests.append((path, etags[path]))
            else:
                requests.append((path, None))
    return requests


class Server:
    """``recurrence-ledger serve`` as its own process on a free loopback
    port, from ``pythonpath`` (None: this checkout's import path); stopped
    (SIGTERM) at exit."""

    def __init__(self, redis_url: str, prefix: str, pythonpath: str | None = None):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {}))
        self.args = [sys.executable, "-m", "recurrence_ledger.cli", "serve", "--port", str(self.port), "--redis-url", redis_url,
                     "--topic-prefix", prefix, "--log-level", "warning"]
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Server:
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("the API did not start")

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the server process has used."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def __exit__(self, *_: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _thread_client(port: int, requests: list, out: list, errors: list) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for path, etag in requests:
        started = time.perf_counter()
        try:
            connection.request("GET", path, headers={"If-None-Match": etag} if etag else {})
            response = connection.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            status = 0
        out.append(time.perf_counter() - started)
        if status not in (200, 304):
            errors.append(status)
    connection.close()


def _thread_process(port: int, shares: list[list], start: multiprocessing.Event, pipe) -> None:  # noqa: ANN001 - a Connection
    """One client process: a thread per share of requests; sends (latencies, errors, CPU seconds) back."""
    latencies: list[float] = []
    errors: list[int] = []
    threads = [threading.Thread(target=_thread_client, args=(port, share, latencies, errors)) for share in shares]
    start.wait()
    before = _cpu()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pipe.send((latencies, errors, _cpu() - before))
    pipe.close()


def run_threads(port: int, requests: list, clients: int, processes: int) -> tuple[list[float], list[int], float, float]:
    """``clients`` threads over ``processes`` processes: (latencies, errors, wall seconds, client CPU seconds)."""
    shares = [requests[i::clients] for i in range(clients)]
    context = multiprocessing.get_context("fork")
    start = context.Event()
    workers = []
    for index in range(processes):
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=_thread_process, args=(port, shares[index::processes], start, sender))
        process.start()
        workers.append((process, receiver))
    time.sleep(0.3)
    started = time.perf_counter()
    start.set()
    latencies: list[float] = []
    errors: list[int] = []
    cpu = 0.0
    for process, receiver in workers:
        got_latencies, got_errors, got_cpu = receiver.recv()
        latencies += got_latencies
        errors += got_errors
        cpu += got_cpu
        process.join()
    return latencies, errors, time.perf_counter() - started, cpu


def run_async(url: str, requests: list, clients: int) -> tuple[list[float], list[int], float, float]:
    """``clients`` tasks of one ``httpx.AsyncClient``: (latencies, errors, wall seconds, client CPU seconds)."""
    latencies: list[float] = []
    errors: list[int] = []

    async def client_task(client: httpx.AsyncClient, share: list) -> None:
        for path, etag in share:
            started = time.perf_counter()
            try:
                status = (await client.get(path, headers={"If-None-Match": etag} if etag else None)).status_code
            except httpx.HTTPError:
                status = 0
            latencies.append(time.perf_counter() - started)
            if status not in (200, 304):
                errors.append(status)

    async def main() -> None:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:
            await asyncio.gather(*(client_task(client, requests[i::clients]) for i in range(clients)))

    before, started = _cpu(), time.perf_counter()
    asyncio.run(main())
    return latencies, errors, time.perf_counter() - started, _cpu() - before


def redis_cpu(client: redis.Redis) -> float:
    """CPU seconds redis-server has used (INFO cpu; the shared Redis: others' load included)."""
    info = client.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def measure(server: Server, requests: list, args: argparse.Namespace, probe: redis.Redis) -> dict:
    """One run of ``requests`` against ``server``: the figures of the module docstring, 3."""
    server_before, redis_before = server.cpu_seconds(), redis_cpu(probe)
    if args.client == "async":
        latencies, errors, wall, client_cpu = run_async(server.url, requests, args.clients)
    else:
        latencies, errors, wall, client_cpu = run_threads(server.port, requests, args.clients, args.client_processes)
    server_cpu, redis_used = server.cpu_seconds() - server_before, redis_cpu(probe) - redis_before
    latencies.sort()
    at = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731 - ms at quantile q
    return {
        "rps": len(latencies) / wall, "p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "max": latencies[-1] * 1000, "errors": len(errors),
        "server_ms": server_cpu / len(latencies) * 1000, "server_cores": server_cpu / wall,
        "client_ms": client_cpu / len(latencies) * 1000, "client_cores": client_cpu / wall, "redis_cores": redis_used / wall,
    }


def spread(values: list[float], digits: int = 0) -> str:
    """``min / median / max`` of ``values``."""
    return " / ".join(f"{value:,.{digits}f}" for value in (min(values), statistics.median(values), max(values)))


def load_average() -> str:
    """The 1-minute load average (the machine is shared)."""
    return f"{os.getloadavg()[0]:.2f}"


def commit() -> str:
    """This checkout's commit (short), ``+`` when the tree has changes."""
    root = Path(__file__).resolve().parents[1]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True).stdout.strip()
    return head + ("+" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--requests", type=int, default=5000, help="requests per run (after a warm-up of 500)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients (each one keep-alive connection)")
    parser.add_argument("--client", choices=("threads", "async"), default="threads", help="the load generator (module docstring)")
    parser.add_argument("--client-processes", type=int, default=2, help="processes of --client threads")
    parser.add_argument("--against", metavar="PATH", help="also serve with PYTHONPATH=PATH (another checkout's processors folder), alternating runs")
    parser.add_argument("--against-label", default="--against", help="the --against server's name in the table")
    parser.add_argument("--quick", action="store_true", help="a small view, 1,000 requests, 3 runs; BENCHMARKS.md untouched")
    args = parser.parse_args()
    shape = Workload(scopes=6, outcomes_per_scope=300, candidates=0.05) if args.quick else Workload(scopes=40, outcomes_per_scope=600, candidates=0.05)
    count = 1000 if args.quick else args.requests
    started = time.monotonic()
    data, view, models = fill(args.redis_url, shape)
    probe = redis.Redis.from_url(args.redis_url)
    targets = [("this checkout", None)] + ([(args.against_label, args.against)] if args.against else [])
    results: dict[str, list[dict]] = {label: [] for label, _ in targets}
    loads = []
    try:
        for run in range(args.runs):
            for label, pythonpath in targets:
                with Server(args.redis_url, data.prefix, pythonpath) as server:
                    warm = plan(data, server.url, 500, seed=1000 + run)
                    requests = plan(data, server.url, count, seed=run)
                    measure(server, warm, args, probe)
                    loads.append(load_average())
                    result = measure(server, requests, args, probe)
                results[label].append(result)
                print(f"run {run + 1} {label}: {result['rps']:,.0f} requests/s, p50 {result['p50']:.1f} ms, p99 {result['p99']:.1f} ms, "
                      f"errors {result['errors']}, server {result['server_ms']:.2f} ms CPU/request ({result['server_cores']:.2f} cores), "
                      f"client {result['client_ms']:.2f} ms CPU/request ({result['client_cores']:.2f} cores), "
                      f"redis {result['redis_cores']:.2f} cores", flush=True)
    finally:
        models.clear()
        view.clear()
        view.close()
        probe.close()
    client = (f"{args.clients} threads over {args.client_processes} processes (`http.client`, keep-alive)" if args.client == "threads"
              else f"{args.clients} tasks of one `httpx.AsyncClient`")
    lines = [
        f"Recorded {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `python benchmarks/api_benchmark.py"
        + (" --client async" if args.client == "async" else "") + (" --against PATH" if args.against else "")
        + f"` at commit {commit()} ({platform.machine()}, CPython {platform.python_version()}, {os.cpu_count()} cores shared with the "
        f"load generator, redis-server and other jobs: **the machine is shared and noisy**, 1-minute load average {', '.join(loads)} "
        f"at the start of the runs; run time {time.monotonic() - started:.0f} s).",
        "",
        f"One `recurrence-ledger serve` process, {len(data.scopes)} scopes, {len(data.revisions)} revisions and {len(data.candidates)} review "
        f"candidates (workload {shape.scopes} × {shape.outcomes_per_scope} outcomes through the embedded core and the view follower's "
        f"projection). {args.clients} concurrent closed-loop clients — {client} — send {count:,} requests per run after 500 of warm-up: "
        + ", ".join(f"{kind} {weight} %" for kind, weight in MIX)
        + f"; {CONDITIONAL_SHARE:.0%} of them with the current ETag (304). min / median / max of {args.runs} runs, latency as the "
        "client sees it; CPU from /proc (server) and getrusage (client), Redis from INFO cpu (the shared Redis: others' commands included).",
        "",
        "| server | requests/s | p50 ms | p95 ms | p99 ms | errors | server CPU ms/request | server cores | client CPU ms/request | client cores | redis cores |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, runs in results.items():
        get = lambda name: [run[name] for run in runs]  # noqa: E731
        lines.append(
            f"| {label} | **{spread(get('rps'))}** | {spread(get('p50'), 1)} | {spread(get('p95'), 1)} | **{spread(get('p99'), 1)}** | "
            f"{spread(get('errors'))} | {spread(get('server_ms'), 2)} | {spread(get('server_cores'), 2)} | {spread(get('client_ms'), 2)} | "
            f"{spread(get('client_cores'), 2)} | {spread(get('redis_cores'), 2)} |"
        )
    print("\n".join(lines))
    if not args.quick:
        write_block("api-benchmark", "Statistics API under concurrent load", lines)


if __name__ == "__main__":
    main()
