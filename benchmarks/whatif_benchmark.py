"""Benchmark of ``recurrence-ledger what-if`` against ``run-journal`` (not a test).

On one generated journal (``recurrence_ledger.workload``, ~100,000 events
over 100 scopes, with admission candidates), each round runs, one after the
other and as separate processes, the way a user runs them:

- ``run-journal JOURNAL --review-threshold 4`` (the reference);
- ``what-if JOURNAL --review-threshold 4`` (baseline 3: one pass, the
  baseline's review candidates computed beside the core, report and the
  alternative's output files);
- ``what-if JOURNAL --sweep review-threshold=2..8`` (seven thresholds, one
  pass, report and chart);
- ``what-if JOURNAL --provenance-horizon 500`` (a horizon is a pass of its
  own: two passes), for information.

Targets (issue: policy replay): a what-if over a journal within 20 % of
run-journal on the same file; a sweep of 7 thresholds under 2 single
replays. Both are compared on medians of wall time (and CPU time of the
child processes); the rounds are interleaved so a busy moment of the shared
VM hits every command alike. The numbers go into BENCHMARKS.md between the
``whatif-benchmark`` markers.

    PYTHONPATH=processors python benchmarks/whatif_benchmark.py              # 3 rounds, record
    PYTHONPATH=processors python benchmarks/whatif_benchmark.py --quick      # small journal, print only
    PYTHONPATH=processors python benchmarks/whatif_benchmark.py --docs       # also write the docs/tuning/ examples

``--docs`` writes the example reports and charts of docs/tuning.md: the
packaged example (a what-if at review threshold 1 and near-duplicate
threshold 9/10, and a sweep of thresholds 1..4) and the 100,000-event
workload's sweep of thresholds 2..8 (its report.md and chart; its
report.json is several MB and stays out of the repository).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "processors"))

from recurrence_ledger.workload import Workload, generate_journal  # noqa: E402

from benchmarks.record import write_block  # noqa: E402

#: The full-size workload: 100 scopes × 950 outcomes, 10 heads, 5 Handoffs,
#: an admission candidate after 5 % of the outcomes (101,882 events).
FULL = Workload(scopes=100, outcomes_per_scope=950, heads_per_scope=10, handoffs=5, seed=7, candidates=0.05)
QUICK = Workload(scopes=10, outcomes_per_scope=300, heads_per_scope=10, handoffs=5, seed=7, candidates=0.05)
EXAMPLE = REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"
DOCS = REPO / "docs" / "tuning"
COMMANDS = {
    "run-journal --review-threshold 4": ("run-journal", "{journal}", "--out", "{out}", "--review-threshold", "4", "--quiet"),
    "what-if --review-threshold 4": ("what-if", "{journal}", "--out", "{out}", "--review-threshold", "4", "--quiet"),
    "what-if --sweep review-threshold=2..8": ("what-if", "{journal}", "--out", "{out}", "--sweep", "review-threshold=2..8", "--quiet"),
    "what-if --provenance-horizon 500": ("what-if", "{journal}", "--out", "{out}", "--provenance-horizon", "500", "--quiet"),
}


def cli(args: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``python -m recurrence_ledger.cli ARGS``; (wall s, CPU s of the child)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "processors")}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    env.pop("REDIS_URL", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "recurrence_ledger.cli", *args], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({result.returncode}):\n{result.stderr}{result.stdout}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def write_journal(shape: Workload, path: Path) -> int:
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for record in generate_journal(shape):
            handle.write(json.dumps(record) + "\n")
            count += 1
    return count


def measure(journal: Path, work: Path, rounds: int) -> dict[str, list[tuple[float, float]]]:
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for number in range(rounds):
        for name, template in COMMANDS.items():
            out = work / f"out-{number}-{len(times[name])}"
            args = [part.format(journal=journal.name, out=out) for part in template]
            times[name].append(cli(args, journal.parent))
            shutil.rmtree(out, ignore_errors=True)
            print(f"round {number + 1}: {name}: {times[name][-1][0]:.2f} s wall, {times[name][-1][1]:.2f} s CPU", flush=True)
    return times


def write_docs(journal: Path) -> None:
    """The example reports and charts of docs/tuning.md."""
    examples = {
        "example-what-if": ("what-if", str(EXAMPLE.relative_to(REPO)), "--review-threshold", "1", "--near-duplicate-threshold", "9/10"),
        "example-sweep": ("what-if", str(EXAMPLE.relative_to(REPO)), "--sweep", "review-threshold=1..4"),
    }
    for folder, args in examples.items():
        target = DOCS / folder
        shutil.rmtree(target, ignore_errors=True)
        cli([*args, "--out", str(target.relative_to(REPO)), "--quiet"], REPO)
        shutil.rmtree(target / "ledger", ignore_errors=True)  # run-journal's files: not part of the example
    target = DOCS / "workload-sweep"
    shutil.rmtree(target, ignore_errors=True)
    cli(["what-if", journal.name, "--sweep", "review-threshold=2..8", "--out", str(target), "--quiet"], journal.parent)
    (target / "report.json").unlink()  # several MB: the Markdown and the chart are the example
    for path in sorted(DOCS.rglob("*")):
        if path.is_file():
            print(f"{path.relative_to(REPO)}: {path.stat().st_size:,} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small journal; print only")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="print only; leave BENCHMARKS.md alone")
    parser.add_argument("--docs", action="store_true", help="also write the example reports and charts under docs/tuning/")
    options = parser.parse_args()
    shape = QUICK if options.quick else FULL
    load_before = os.getloadavg()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="whatif-bench-") as folder:
        work = Path(folder)
        journal = work / "workload.jsonl"
        events = write_journal(shape, journal)
        print(f"journal: {events:,} events, {journal.stat().st_size / 1e6:.1f} MB", flush=True)
        times = measure(journal, work, options.rounds)
        if options.docs:
            write_docs(journal)
    load_after = os.getloadavg()
    medians = {name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)) for name, runs in times.items()}
    reference = medians["run-journal --review-threshold 4"]
    rows = []
    for name, runs in times.items():
        wall, cpu = medians[name]
        per_round = " / ".join(f"{w:.2f}" for w, _ in runs)
        rows.append(f"| `{name}` | {per_round} | **{wall:.2f}** | {cpu:.2f} | {wall / reference[0]:.2f}× | {cpu / reference[1]:.2f}× |")
    single, sweep = medians["what-if --review-threshold 4"], medians["what-if --sweep review-threshold=2..8"]
    ratios = [w / r for (w, _), (r, _) in zip(times["what-if --review-threshold 4"], times["run-journal --review-threshold 4"])]
    sweep_ratios = [w / r for (w, _), (r, _) in zip(times["what-if --sweep review-threshold=2..8"], times["run-journal --review-threshold 4"])]
    lines = [
        f"Recorded {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `python benchmarks/whatif_benchmark.py` "
        f"({platform.machine()}, CPython {platform.python_version()}, {os.cpu_count()} CPUs; {options.rounds} interleaved rounds, "
        f"script run time {(time.monotonic() - started) / 60:.1f} min; load average at start / end: "
        f"{' '.join(f'{x:.2f}' for x in load_before)} / {' '.join(f'{x:.2f}' for x in load_after)} — a shared VM).",
        "",
        f"Journal: {events:,} events from `recurrence_ledger.workload` ({shape.scopes} scopes × {shape.outcomes_per_scope} outcomes, "
        f"{shape.heads_per_scope} heads and {shape.handoffs} Handoffs per scope, an admission candidate after {shape.candidates:.0%} of the outcomes). "
        "Each command is a separate process, as a user runs it (interpreter start and imports included), output to a fresh folder.",
        "",
        "| command | wall s per round | median wall s | median CPU s | wall vs run-journal | CPU vs run-journal |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "| target | measured | |",
        "| --- | --- | --- |",
        f"| what-if over a journal ≤ 1.2 × run-journal on the same file | {single[0] / reference[0]:.2f}× (rounds: "
        f"{', '.join(f'{r:.2f}' for r in ratios)}) | **{'met' if single[0] <= 1.2 * reference[0] else 'not met'}** |",
        f"| sweep of 7 review thresholds < 2 single replays | {sweep[0] / reference[0]:.2f}× run-journal (rounds: "
        f"{', '.join(f'{r:.2f}' for r in sweep_ratios)}) | **{'met' if sweep[0] < 2 * reference[0] else 'not met'}** |",
    ]
    print("\n".join(lines))
    if not options.quick and not options.no_record:
        write_block("whatif-benchmark", "What-if: policy replay", lines)


if __name__ == "__main__":
    main()
