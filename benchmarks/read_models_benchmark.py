"""Benchmark of the history read models and of the scope list (not a test).

1. ``GET /scopes`` with 10,000 scopes in Redis: the view of 10,000 synthetic
   ScopeStatistics records written with ``RedisView`` (which keeps the scope
   index), ``recurrence-ledger serve`` (uvicorn, its own process) over
   loopback, a bounded number of sequential
   requests per query (sort, filters, paging, the default page of 1,000),
   latency p50 / p95 / max; and the same pages with the scope index removed
   (every scope's record read per request, as before the index).
2. Memory of the read models in Redis: a generated journal
   (``recurrence_ledger.workload``) run through the embedded core, its
   RecurrenceObservations, ReviewCandidates and ScopeStatistics records
   applied with ``ReadModels.apply`` (default limits: 1,000 verdicts per
   revision, 1,000 trend points per scope) into an empty namespace;
   ``MEMORY USAGE`` (exact, ``SAMPLES 0``) of every read-model key, and the
   ``INFO memory`` ``used_memory`` delta, per 1,000 observations.

Records the numbers in BENCHMARKS.md between the ``read-models-benchmark``
markers. Run (the shared Redis of deploy/services.sh; nothing else needed):

    python benchmarks/read_models_benchmark.py            # 10,000 scopes, 200 requests per query
    python benchmarks/read_models_benchmark.py --quick    # smoke size, no file update

Every request goes to 127.0.0.1; every key written lives in a namespace of
its own, deleted at the end.
"""

from __future__ import annotations

import argparse
import platform
import socket
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import httpx
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recurrence_ledger.read.history import ReadModels  # noqa: E402
from recurrence_ledger.catalogue import OBSERVATIONS, REVIEW_CANDIDATES, STATISTICS  # noqa: E402
from recurrence_ledger.read.projection import RedisView  # noqa: E402
from recurrence_ledger.read.keys import Keys, default_namespace  # noqa: E402
from recurrence_ledger.workload import Workload  # noqa: E402

from benchmarks.outputs import located_outputs  # noqa: E402
from benchmarks.record import write_block  # noqa: E402

QUERIES = (
    ("sort=scope_id, page 101 of 50", {"limit": 50, "offset": 5000}),
    ("sort=needing_review, first 50", {"limit": 50, "sort": "needing_review"}),
    ("sort=recurred, page 21 of 50", {"limit": 50, "offset": 1000, "sort": "recurred"}),
    ("needs_review=true, sort=repeat_failure_rate, first 50", {"limit": 50, "sort": "repeat_failure_rate", "needs_review": "true"}),
    ('filter="scope-01", sort=recurred, first 50', {"limit": 50, "sort": "recurred", "filter": "scope-01"}),
    ("default page (limit 1,000, sort=scope_id)", {}),
)


def synthetic_record(index: int) -> dict:
    recurred, avoided = (index * 7) % 23, (index * 3) % 11
    return {
        "scope_id": f"team-{index % 40:02d}/scope-{index:05d}", "as_of_position": 1000 + index, "selected": recurred + avoided + 2,
        "recurred": recurred, "avoided": avoided, "unknown": 2, "unlinked_handoff_citations": index % 3, "needing_review": (index * 13) % 4,
        "top_revisions": [], "pending_outcomes": index % 2, "late_revisions": 0,
        "repeat_failure_rate": None if recurred + avoided == 0 else round(recurred / (recurred + avoided), 4),
        "stale_revision_selections": 0, "by_repair_surface": {},
    }


class Api:
    """``recurrence-ledger serve`` as its own process (a server in the
    client's process would share its GIL and measure that instead) on a free
    loopback port; stopped (SIGTERM to its pid) at exit."""

    def __init__(self, redis_url: str, prefix: str):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [sys.executable, "-m", "recurrence_ledger.cli", "serve", "--port", str(self.port), "--redis-url", redis_url,
                     "--topic-prefix", prefix, "--log-level", "warning"]
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> str:
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self.url
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the API did not start")

    def __exit__(self, *_: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


def latencies(client: httpx.Client, params: dict, requests: int) -> dict:
    client.get("/scopes", params=params).raise_for_status()  # warm up
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get("/scopes", params=params)
        times.append(time.perf_counter() - started)
        response.raise_for_status()
    times.sort()
    body = response.json()
    return {
        "p50": statistics.median(times) * 1000, "p95": times[int(0.95 * (len(times) - 1))] * 1000, "max": times[-1] * 1000,
        "rows": len(body["scopes"]), "available": body["available"],
    }


def scope_list(redis_url: str, scopes: int, requests: int) -> list[tuple[str, dict, dict | None]]:
    prefix = f"bench{uuid.uuid4().hex[:8]}."
    namespace = default_namespace(prefix)
    view = RedisView(redis_url, namespace=namespace)
    try:
        for start in range(0, scopes, 1000):
            view.submit([synthetic_record(index) for index in range(start, min(scopes, start + 1000))])
        assert view.pending == 0, "Redis did not take the records"
        results = []
        with Api(redis_url, prefix) as url, httpx.Client(base_url=url, timeout=30) as client:
            for label, params in QUERIES:
                results.append([label, latencies(client, params, requests), None])
            client_raw = redis.Redis.from_url(redis_url)
            removed = client_raw.delete(*Keys(namespace).scope_index_keys())
            assert removed, "no scope index key was removed: the benchmark would time the index twice"
            client_raw.close()
            for row in results:
                params = dict(QUERIES)[row[0]]
                row[2] = latencies(client, params, max(10, requests // 10))
        return [tuple(row) for row in results]
    finally:
        view.clear()
        view.close()


def memory(redis_url: str, shape: Workload) -> dict:
    # A ScopeStatistics record after every event, as a worker at low load publishes
    # them: the trend read model fills up to the points it keeps per scope.
    records = located_outputs(shape, (OBSERVATIONS, REVIEW_CANDIDATES, STATISTICS), view_batch=1)
    namespace = f"rlbench-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    models = ReadModels(client, namespace)
    try:
        before = client.info("memory")["used_memory"]
        for start in range(0, len(records), 5000):
            models.apply(records[start : start + 5000])
        after = client.info("memory")["used_memory"]
        sizes = models.memory()
        observations = sum(1 for record in records if record.topic == OBSERVATIONS)
        verdicts = sum(1 for record in records if record.topic == OBSERVATIONS and record.value["event"] != "selected")
        points = sum(1 for record in records if record.topic == STATISTICS)
        revisions = len({(r.value["scope_id"], r.value["artifact_ref"]["artifact_id"], r.value["artifact_ref"]["revision"]) for r in records if r.topic == OBSERVATIONS})
        return {
            "observations": observations, "verdicts": verdicts, "points": points, "revisions": revisions,
            "candidates_open": client.zcard(models.keys.queue("open")), "sizes": sizes, "used_memory_delta": after - before,
            "trend_kept": sum(client.zcard(key) for key in client.scan_iter(match=f"{namespace}:scope:*:trend")),
        }
    finally:
        models.clear()
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--quick", action="store_true", help="1,000 scopes, 20 requests, a small journal; BENCHMARKS.md untouched")
    args = parser.parse_args()
    scopes, requests = (1000, 20) if args.quick else (10_000, 200)
    shape = Workload(scopes=2, outcomes_per_scope=500) if args.quick else Workload(scopes=10, outcomes_per_scope=2000)
    started = time.monotonic()
    listing = scope_list(args.redis_url, scopes, requests)
    mem = memory(args.redis_url, shape)
    per = lambda size, count: size / count * 1000 / 1024  # noqa: E731 - KiB per 1,000
    sizes = mem["sizes"]
    lines = [
        f"Recorded {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `python benchmarks/read_models_benchmark.py` "
        f"({platform.machine()}, CPython {platform.python_version()}, redis-server {redis.Redis.from_url(args.redis_url).info()['redis_version']} "
        f"on the same 2-core VM; run time {time.monotonic() - started:.0f} s).",
        "",
        f"**`GET /scopes` with {scopes:,} scopes in Redis** — `recurrence-ledger serve` (its own process) over loopback, one keep-alive client, {requests} sequential requests per query "
        "(after one warm-up), latency as the client sees it. \"Without the index\": the same page when the scope index is missing "
        f"({max(10, requests // 10)} requests; every scope's record is read, as `GET /scopes` did before).",
        "",
        "| query | rows | matching | p50 | p95 | max | p95 without the index |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, with_index, without in listing:
        lines.append(
            f"| {label} | {with_index['rows']} | {with_index['available']:,} | {with_index['p50']:.1f} ms | **{with_index['p95']:.1f} ms** | "
            f"{with_index['max']:.1f} ms | {without['p95']:.0f} ms |"
        )
    lines += [
        "",
        f"**Read-model memory** — workload {shape.scopes} scopes × {shape.outcomes_per_scope:,} outcomes "
        f"(`recurrence_ledger.workload`, {shape.heads_per_scope} heads per scope) through the embedded core: {mem['observations']:,} "
        f"observations ({mem['verdicts']:,} recurred / avoided verdicts) over {mem['revisions']} revisions, "
        f"{mem['points']:,} ScopeStatistics records ({mem['trend_kept']:,} trend points kept: 1,000 per scope), "
        f"{mem['candidates_open']} open review candidates. `MEMORY USAGE` of every key (exact):",
        "",
        "| read model | bytes | per 1,000 observations |",
        "| --- | --- | --- |",
        f"| verdict histories (history, history-meta, avoided keys) | {sizes['history']:,} | **{per(sizes['history'], mem['observations']):.0f} KiB** |",
        f"| trends | {sizes['trend']:,} | {per(sizes['trend'], mem['observations']):.0f} KiB ({per(sizes['trend'], mem['trend_kept']):.0f} KiB per 1,000 points kept) |",
        f"| review queue | {sizes['review_queue']:,} | {per(sizes['review_queue'], mem['observations']):.1f} KiB |",
        f"| follow-applied offsets | {sizes['applied']:,} | – |",
        f"| all read models ({sizes['keys']} keys); INFO used_memory delta | {sum(v for k, v in sizes.items() if k != 'keys'):,}; {mem['used_memory_delta']:,} | "
        f"{per(sum(v for k, v in sizes.items() if k != 'keys'), mem['observations']):.0f} KiB; {per(mem['used_memory_delta'], mem['observations']):.0f} KiB |",
    ]
    print("\n".join(lines))
    if not args.quick:
        write_block("read-models-benchmark", "History read models and the scope list", lines)


if __name__ == "__main__":
    main()
