"""Redis memory per scope (not a test; real broker, real Redis).

For each workload shape: a fresh topic prefix (1 partition), the journal
published, one ``recurrence-ledger worker --redis-url`` run to idle — the
product's own path into Redis: the in-process view follower writes the view
and the history read models (``recurrence_ledger.cli.beside``). Then every
key of the deployment's namespace (``RedisView.keys``) is measured with
``MEMORY USAGE key SAMPLES 0`` (every element counted), grouped by key
family (``read/keys.py``'s tables), and divided by the number of scopes;
``INFO memory``'s ``used_memory`` before and after is printed beside it
(server-wide: other users of the shared Redis move it too). The namespace
is cleared and the topics deleted at the end.

    python benchmarks/redis_memory.py [--redis-url redis://127.0.0.1:6379/13] [--record]

Writes the ``redis-memory`` block of BENCHMARKS.md with ``--record``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from recurrence_ledger.read.keys import default_namespace  # noqa: E402
from recurrence_ledger.read.projection import RedisView  # noqa: E402
from recurrence_ledger.workload import Workload, generate_journal  # noqa: E402

from benchmarks.record import write_block  # noqa: E402
from tests.e2e import harness  # noqa: E402
from tests.journal import write_journal  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHAPES = {
    "100 outcomes per scope": Workload(scopes=200, outcomes_per_scope=100, heads_per_scope=10, handoffs=5, seed=7, candidates=0.05),
    "2,000 outcomes per scope": Workload(scopes=20, outcomes_per_scope=2_000, heads_per_scope=10, handoffs=5, seed=7, candidates=0.05),
}
#: Key families (the part after ``{ns}:``), first match wins; the
#: cross-scope keys carry the namespace's hash tag ``{<ns>}:`` first.
FAMILIES = [
    ("scope hash", r"scope:[^:]+"),
    ("top / review sets", r"scope:[^:]+:(top|review)"),
    ("revisions hash", r"scope:[^:]+:revisions"),
    ("history sorted sets", r"scope:[^:]+:history:.+"),
    ("history meta hashes", r"scope:[^:]+:history-meta:.+"),
    ("avoided sorted sets", r"scope:[^:]+:avoided:.+"),
    ("trend sorted set and its meta hash", r"scope:[^:]+:trend(-meta)?"),
    ("per-scope review queues and review state", r"scope:[^:]+:(review-queue:.+|review-state)"),
    ("scope list and indexes", r"(\{[^}]+\}:)?scopes(:at|:by:.+)?"),
    ("review queue, status, repairs", r"(\{[^}]+\}:)?review-(queue|status|repairs).*"),
    ("other (follower offsets, layout marker)", r".*"),
]


def family(key: str, namespace: str) -> str:
    """The family name of ``key`` (under ``namespace``)."""
    rest = key[len(namespace) + 1:]
    return next(name for name, pattern in FAMILIES if re.fullmatch(pattern, rest))


def measure(bootstrap: str, redis_url: str, label: str, shape: Workload, work: Path) -> dict:
    """Run one shape through a worker into Redis and measure its namespace."""
    prefix = harness.new_prefix()
    namespace = default_namespace(prefix)
    client = redis.Redis.from_url(redis_url)
    try:
        journal = write_journal(work / f"{prefix}journal.jsonl", generate_journal(shape))
        events = sum(1 for _ in open(journal, "rb"))
        harness.prepare(bootstrap, prefix, partitions=1)
        harness.publish(bootstrap, journal, prefix)
        before = client.info("memory")["used_memory"]
        log = work / f"{prefix}worker.log"
        started = time.monotonic()
        harness.run_to_idle(bootstrap, prefix, log, redis_url=redis_url, idle_exit=4.0)
        elapsed = time.monotonic() - started
        after = client.info("memory")["used_memory"]
        view = RedisView(redis_url, namespace=namespace)
        try:
            keys = list(view.keys())
        finally:
            view.close()
        per_family: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for key in keys:
            name = key if isinstance(key, str) else key.decode()
            usage = client.memory_usage(name, samples=0) or 0
            entry = per_family[family(name, namespace)]
            entry[0] += 1
            entry[1] += usage
        total = sum(bytes_ for _, bytes_ in per_family.values())
        return {"label": label, "scopes": shape.scopes, "outcomes_per_scope": shape.outcomes_per_scope, "events": events,
                "keys": len(keys), "memory_usage_bytes": total, "used_memory_delta": after - before,
                "families": {name: {"keys": k, "bytes": b} for name, (k, b) in per_family.items()},
                "worker_wall_s": elapsed, "load": " ".join(open("/proc/loadavg").read().split()[:3]), "at": time.time()}
    finally:
        harness.remove_prefix(bootstrap, prefix, redis_url=redis_url)
        client.close()


def record(results: list[dict], commit: str, redis_version: str) -> None:
    """The ``redis-memory`` block of BENCHMARKS.md."""
    when = datetime.fromtimestamp(results[0]["at"], timezone.utc)
    lines = [
        f"Recorded {when:%Y-%m-%d %H:%M} UTC by `python benchmarks/redis_memory.py` (code {commit}; {platform.machine()}, "
        f"Redis {redis_version} on the same VM, shared with other sessions; load average at the end: {results[-1]['load']}).",
        "",
        "Each workload (`recurrence_ledger.workload`, 10 heads and 5 Handoffs per scope, 5 % admission candidates) run "
        "through one `recurrence-ledger worker --redis-url` to idle (the view and the history read models, written by "
        "the in-process view follower), then `MEMORY USAGE key SAMPLES 0` summed over the deployment's keys. History and "
        "trend keep the newest 1,000 entries (the defaults), so per-scope memory stops growing once those are full.",
        "",
        "| workload | scopes | keys per scope | bytes per scope (MEMORY USAGE) | `used_memory` growth per scope |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(f"| {r['label']} | {r['scopes']:,} | {r['keys'] / r['scopes']:,.1f} | {r['memory_usage_bytes'] / r['scopes'] / 1024:,.1f} KiB "
                     f"| {r['used_memory_delta'] / r['scopes'] / 1024:,.1f} KiB |")
    names = [name for name, _ in FAMILIES]
    lines += ["", "By key family, bytes per scope (keys per scope):", "",
              "| family | " + " | ".join(r["label"] for r in results) + " |", "| --- |" + " --- |" * len(results)]
    for name in names:
        cells = []
        for r in results:
            f = r["families"].get(name)
            cells.append("–" if f is None else f"{f['bytes'] / r['scopes'] / 1024:,.1f} KiB ({f['keys'] / r['scopes']:,.2f})")
        if any(cell != "–" for cell in cells):
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    write_block("redis-memory", "Redis memory per scope", lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    results = []
    with tempfile.TemporaryDirectory(prefix="redis-memory-") as tmp:
        for label, shape in SHAPES.items():
            result = measure(bootstrap, args.redis_url, label, shape, Path(tmp))
            print(json.dumps(result), flush=True)
            results.append(result)
    if args.record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        version = redis.Redis.from_url(args.redis_url).info("server")["redis_version"]
        record(results, commit, version)


if __name__ == "__main__":
    main()
