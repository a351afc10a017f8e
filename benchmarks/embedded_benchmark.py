"""Benchmark of the embedded runner, ``recurrence-ledger run-journal``, end to
end (not a test).

One generated journal of 100,000 events (``recurrence_ledger.workload``:
100 scopes × 979 Task Outcomes, 10 failure-bearing heads and 5 Handoffs per
scope) is written to a file; then ``run-journal JOURNAL --out DIR --quiet``
runs ``--repeats`` times, each a separate process as a user runs it
(interpreter start and imports included): the file is read and decoded,
every line validated, applied by the core, and every output record encoded
as canonical JSON and written to its file. events/s = journal lines / wall
seconds of the process; the child's CPU seconds (``getrusage``) are
reported beside it, since the 2-core VM is shared.

``--stages`` also times the runner's stages in this process
(``time.process_time``, one pass): journal decode + validation
(``intake``), ``LedgerProcessor.apply``, ``end_batch`` / ``flush`` (views)
and the canonical-JSON encoding and file writes of the outputs, with the
runner's garbage-collector handling (``gc.freeze`` after each view batch).

Target (issue 23): ≥ 20,000 events/s on a 100,000-event journal. The
numbers go into BENCHMARKS.md between the ``embedded-benchmark`` markers.

``--jobs N`` measures the scope-parallel runs instead (issue 32): on a
200,000-event journal (200 scopes), ``run-journal --jobs 1`` and ``--jobs N``
and ``what-if --sweep review-threshold=2..8`` with ``--jobs 1`` and
``--jobs N``, alternating in one sitting, ``--repeats`` rounds; the speed-up
is the ratio of median wall seconds (target ≥ 1.7 with N = 2), and the
run-journal files of both are checked byte-identical. Recorded between the
``jobs-benchmark`` markers.

    PYTHONPATH=processors python benchmarks/embedded_benchmark.py               # 3 runs, record
    PYTHONPATH=processors python benchmarks/embedded_benchmark.py --no-record --repeats 1 --stages
    PYTHONPATH=processors python benchmarks/embedded_benchmark.py --jobs 2 --repeats 2    # issue 32: --jobs 2 against --jobs 1
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "processors"))

from recurrence_ledger.workload import Workload  # noqa: E402

from benchmarks.record import write_block  # noqa: E402
from benchmarks.whatif_benchmark import cli, write_journal  # noqa: E402

#: 100 × (979 outcomes + 11 Experience revisions + 5 Handoffs + 5 receipts) = 100,000 events.
FULL = Workload(scopes=100, outcomes_per_scope=979, heads_per_scope=10, handoffs=5, seed=7)
QUICK = Workload(scopes=10, outcomes_per_scope=300, heads_per_scope=10, handoffs=5, seed=7)
#: 200 × 1,000 = 200,000 events: the journal of issue 32's --jobs targets.
JOBS = Workload(scopes=200, outcomes_per_scope=979, heads_per_scope=10, handoffs=5, seed=7)
JOBS_QUICK = Workload(scopes=20, outcomes_per_scope=300, heads_per_scope=10, handoffs=5, seed=7)
#: The what-if of the --jobs benchmark: a sweep of seven review thresholds.
SWEEP = "review-threshold=2..8"


def run_once(journal: Path, out: Path) -> tuple[float, float]:
    """One ``run-journal`` process: (wall s, CPU s of the child)."""
    return cli(["run-journal", str(journal), "--out", str(out), "--quiet"], journal.parent)


def stages(journal: Path, out: Path) -> dict[str, float]:
    """CPU µs per journal line of each stage of the embedded runner's loop,
    measured in this process (the same calls ``run_journal`` makes)."""
    import contextlib

    from recurrence_ledger.embedded import DEFAULT_VIEW_BATCH, JsonlSink, RunSummary, journal_lines
    from recurrence_ledger.ledger.intake import BadRecord, decode_journal_line, validate
    from recurrence_ledger.ledger.processor import LedgerProcessor

    clock = time.process_time
    spent = {"intake": 0.0, "apply": 0.0, "views": 0.0, "write": 0.0}
    processor, summary, lines = LedgerProcessor(), RunSummary(), 0
    with contextlib.ExitStack() as stack:
        sink = JsonlSink(out, stack)
        handle = stack.enter_context(open(journal, "rb"))
        for _, line in journal_lines(handle):
            lines += 1
            t0 = clock()
            try:
                kind, value = decode_journal_line(line)
                event = validate(kind, value)
            except BadRecord:
                continue
            t1 = clock()
            emits = processor.apply(kind, event).emits
            t2 = clock()
            sink.write(emits, summary)
            t3 = clock()
            spent["intake"] += t1 - t0
            spent["apply"] += t2 - t1
            spent["write"] += t3 - t2
            if lines % DEFAULT_VIEW_BATCH == 0:
                t0 = clock()
                views = processor.end_batch()
                t1 = clock()
                sink.write(views, summary)
                spent["views"] += t1 - t0
                spent["write"] += clock() - t1
                gc.freeze()  # as run_journal does after each view batch
        t0 = clock()
        views = [*processor.flush(), *processor.end_batch()]
        spent["views"] += clock() - t0
        sink.write(views, summary)
    gc.unfreeze()
    result = {name: seconds / lines * 1e6 for name, seconds in spent.items()}
    result["records_out_per_line"] = sum(summary.records.values()) / lines
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small journal; print only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stages", action="store_true", help="also time the stages in this process")
    parser.add_argument("--no-record", action="store_true", help="print only; leave BENCHMARKS.md alone")
    parser.add_argument("--jobs", type=int, default=None, help="measure run-journal and what-if --sweep with --jobs N against --jobs 1")
    args = parser.parse_args()
    if args.jobs is not None:
        jobs_main(args)
        return
    shape = QUICK if args.quick else FULL
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="rl-embedded-") as tmp:
        journal = Path(tmp) / "journal.jsonl"
        lines = write_journal(shape, journal)
        runs = [run_once(journal, Path(tmp) / f"out{n}") for n in range(args.repeats)]
        split = stages(journal, Path(tmp) / "stages") if args.stages else None
    load_end = os.getloadavg()
    walls = [wall for wall, _ in runs]
    cpus = [cpu for _, cpu in runs]
    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs",
        "lines": lines,
        "walls": walls,
        "cpus": cpus,
        "events_per_s_wall": [lines / wall for wall in walls],
        "events_per_s_cpu": [lines / cpu for cpu in cpus],
        "load": (load_start, load_end),
        "stages": split,
    }
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    if not args.quick and not args.no_record:
        write_markdown(result)


def _code() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def write_markdown(r: dict) -> None:
    """Replace the embedded-benchmark block of BENCHMARKS.md."""
    wall = r["events_per_s_wall"]
    cpu = r["events_per_s_cpu"]
    fmt = " / ".join
    lines = [
        f"Recorded {r['date']} by `python benchmarks/embedded_benchmark.py` (code {_code()}; {r['machine']}; "
        f"load average at start / end: {' '.join(f'{x:.2f}' for x in r['load'][0])} / {' '.join(f'{x:.2f}' for x in r['load'][1])} — a shared VM).",
        "",
        f"Journal: {r['lines']:,} events (`recurrence_ledger.workload`, 100 scopes × 979 outcomes, 10 heads and 5 Handoffs per scope),"
        " run by `recurrence-ledger run-journal JOURNAL --out DIR --quiet` as a separate process per run (interpreter start,"
        " imports, file decode, validation, core, canonical-JSON encode and writes of every output file included).",
        "",
        "| measure | runs | min / median / max |",
        "| --- | --- | --- |",
        f"| events/s (lines / wall s) | {fmt(f'{x:,.0f}' for x in wall)} | {min(wall):,.0f} / **{statistics.median(wall):,.0f}** / {max(wall):,.0f} |",
        f"| events/s of CPU (lines / child CPU s) | {fmt(f'{x:,.0f}' for x in cpu)} | {min(cpu):,.0f} / {statistics.median(cpu):,.0f} / {max(cpu):,.0f} |",
        f"| wall s | {fmt(f'{x:.2f}' for x in r['walls'])} | {min(r['walls']):.2f} / {statistics.median(r['walls']):.2f} / {max(r['walls']):.2f} |",
    ]
    if r["stages"]:
        s = r["stages"]
        lines += [
            "",
            "CPU µs per journal line by stage (one pass in the benchmark process, `time.process_time`):",
            "",
            "| decode + validation | core `apply` | views (`end_batch`) | encode + write outputs | output records per line |",
            "| --- | --- | --- | --- | --- |",
            f"| {s['intake']:.1f} | {s['apply']:.1f} | {s['views']:.1f} | {s['write']:.1f} | {s['records_out_per_line']:.2f} |",
        ]
    met = statistics.median(wall) >= 20_000
    lines += [
        "",
        "| target | measured | |",
        "| --- | --- | --- |",
        f"| embedded runner ≥ 20,000 events/s on a 100,000-event journal | {statistics.median(wall):,.0f} events/s (median wall) | **{'met' if met else 'not met'}** |",
    ]
    write_block("embedded-benchmark", "Embedded runner", lines)


def output_files(out: Path) -> dict[str, bytes]:
    """Every output file of a run-journal folder."""
    return {path.name: path.read_bytes() for path in sorted(out.glob("*.jsonl"))}


def jobs_main(args: argparse.Namespace) -> None:
    """The --jobs benchmark (module docstring)."""
    shape = JOBS_QUICK if args.quick else JOBS
    load_start = os.getloadavg()
    times: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="rl-jobs-") as tmp:
        work = Path(tmp)
        journal = work / "journal.jsonl"
        lines = write_journal(shape, journal)
        for _ in range(args.repeats):
            for jobs in (1, args.jobs):
                out = work / f"rj{jobs}"
                times.setdefault(f"run-journal --jobs {jobs}", []).append(
                    cli(["run-journal", str(journal), "--out", str(out), "--quiet", "--jobs", str(jobs)], work))
                times.setdefault(f"what-if --sweep {SWEEP} --jobs {jobs}", []).append(
                    cli(["what-if", str(journal), "--out", str(work / f"wi{jobs}"), "--sweep", SWEEP, "--quiet", "--jobs", str(jobs)], work))
            same = output_files(work / "rj1") == output_files(work / f"rj{args.jobs}")
            if not same:
                raise SystemExit(f"run-journal --jobs {args.jobs} wrote other files than --jobs 1")
        split = jobs_cpu_split(journal, work, args.jobs) if args.stages else None
    load_end = os.getloadavg()
    median = {name: statistics.median(wall for wall, _ in runs) for name, runs in times.items()}
    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs",
        "lines": lines,
        "jobs": args.jobs,
        "times": times,
        "median_wall": median,
        "speedup": {
            "run-journal": median["run-journal --jobs 1"] / median[f"run-journal --jobs {args.jobs}"],
            "what-if": median[f"what-if --sweep {SWEEP} --jobs 1"] / median[f"what-if --sweep {SWEEP} --jobs {args.jobs}"],
        },
        "files_identical": True,
        "load": (load_start, load_end),
        "cpu_split": split,
    }
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    if not args.quick and not args.no_record:
        write_jobs_markdown(result)


def jobs_cpu_split(journal: Path, work: Path, jobs: int) -> dict[str, float]:
    """CPU seconds (``time.process_time``, in this process, one after the
    other, so the figures do not depend on how loaded the machine is) of
    ``run_journal`` and of the parts of ``run-journal --jobs``: each
    worker process's share (``run_shard``), the merge of every topic's
    files and the pattern stage; ``critical_path`` is what a run on
    ``jobs`` idle cores waits for (the longest share, then the merges
    spread over the cores, then the pattern stage), and ``ideal_speedup``
    one process's CPU over it."""
    from recurrence_ledger.embedded.parallel import STAGE_TOPICS, merge_topic, pattern_stage_outputs, run_shard
    from recurrence_ledger.embedded.runner import RunSummary, run_journal
    from recurrence_ledger.catalogue import OUTPUT_TOPICS
    from recurrence_ledger.ledger.config import LedgerConfig
    from recurrence_ledger.ledger.patterns import PatternStage

    clock = time.process_time
    started = clock()
    run_journal(journal, work / "split-one", show_progress=False)
    one = clock() - started
    shares, results = [], []
    for shard in range(jobs):
        started = clock()
        results.append(run_shard(journal, work / f"split-{shard}", shard, jobs, LedgerConfig(), False, 1000))
        shares.append(clock() - started)
    started = clock()
    for topic in OUTPUT_TOPICS:
        if topic not in STAGE_TOPICS:
            merge_topic(topic, [result.directory for result in results], work / f"split-{topic}.jsonl")
    merge = clock() - started
    started = clock()
    (work / "split-out").mkdir()
    pattern_stage_outputs(results, PatternStage(), work / "split-out", RunSummary())
    stage = clock() - started
    critical = max(shares) + merge / jobs + stage
    return {"one_process": one, **{f"share_{n}": share for n, share in enumerate(shares)}, "merge": merge, "pattern_stage": stage,
            "critical_path": critical, "ideal_speedup": one / critical}


def write_jobs_markdown(r: dict) -> None:
    """Replace the jobs-benchmark block of BENCHMARKS.md."""
    jobs = r["jobs"]
    rows = []
    for name, runs in r["times"].items():
        rows.append(f"| `{name}` | {' / '.join(f'{wall:.1f}' for wall, _ in runs)} | {r['median_wall'][name]:.1f} | "
                    f"{' / '.join(f'{cpu:.1f}' for _, cpu in runs)} |")
    lines = [
        f"`python benchmarks/embedded_benchmark.py --jobs {jobs}` ({r['date']}, code {_code()}; {r['machine']}; load average at "
        f"start / end {' '.join(f'{x:.2f}' for x in r['load'][0])} / {' '.join(f'{x:.2f}' for x in r['load'][1])}): a journal of "
        f"{r['lines']:,} events (200 scopes), each command a separate process, alternating in one sitting.",
        "",
        "| command | wall s per run | median wall s | CPU s (all processes) |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
        f"Speed-up of `--jobs {jobs}` (median wall of `--jobs 1` / `--jobs {jobs}`): run-journal **{r['speedup']['run-journal']:.2f}×**, "
        f"what-if `--sweep {SWEEP}` **{r['speedup']['what-if']:.2f}×** (target ≥ 1.7× each with 2 jobs); the output files of both "
        "run-journal runs byte-identical. With a load average above the cores (other processes on the machine) the wall "
        "ratio measures the contention, not the runs: read the CPU split below, which does not depend on it.",
    ]
    if r["cpu_split"]:
        c = r["cpu_split"]
        shares = " + ".join(f"{c[f'share_{n}']:.1f}" for n in range(jobs))
        lines += [
            "",
            f"CPU split (`--stages`, in one process one after the other, independent of the load): one process {c['one_process']:.1f} s; "
            f"the {jobs} shares {shares} s, merging the files {c['merge']:.2f} s, the pattern stage {c['pattern_stage']:.2f} s — a critical "
            f"path of {c['critical_path']:.1f} s on {jobs} idle cores: **{c['ideal_speedup']:.2f}×** at most.",
        ]
    write_block("jobs-benchmark", "Scope-parallel runs (`--jobs`)", lines)


if __name__ == "__main__":
    main()
