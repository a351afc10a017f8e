"""Benchmark of the pure ledger core (not a test).

Times ``LedgerProcessor.apply`` alone — events already decoded and validated,
as the shell hands them over — on a generated journal (recurrence_ledger.workload),
and records the numbers in BENCHMARKS.md between the ``core-benchmark``
markers. Run:

    python benchmarks/core_benchmark.py            # full size (~200k events)
    python benchmarks/core_benchmark.py --quick    # smoke size, no file update
    python benchmarks/core_benchmark.py --no-record --only scaling,records   # print, leave BENCHMARKS.md alone

Measured: events/s and task outcomes/s (CPU time of the process, best and
median of the repeats — wall time on a shared VM is noisy; views published
every 1,000 events with ``end_batch``, as the embedded runner does), the
intake cost (JSON decode + pydantic validation) separately, peak RSS, state
size per 1,000 outcomes, per-outcome cost with 10 vs 10,000 Experience heads
by kind of outcome (linked, unlinked failing = scope_heads matching,
unlinked passing), and records written per input event: ledger facts, view
records, and the changelog records a worker would write (distinct state keys
changed per transaction of ``--tx-events`` events).

It runs against earlier commits too (a core without ``end_batch`` publishes
its views from ``apply``), for before/after comparisons: install that
commit and run this file with its interpreter.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import resource
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recurrence_ledger.ledger.intake import decode_journal_line, validate  # noqa: E402
from recurrence_ledger.ledger.processor import LedgerProcessor  # noqa: E402
from recurrence_ledger.workload import Workload, generate_journal  # noqa: E402

from benchmarks.record import write_block  # noqa: E402

BATCH = 10_000
#: Events per batch of the views (the embedded runner's default --view-batch).
VIEW_BATCH = 1_000
FACTS = ("recurrence-matches", "recurrence-observations", "review-candidates", "admission-decisions", "candidate-sets")
VIEWS = ("recurrence-statistics", "revision-statistics")


def end_batch(processor: LedgerProcessor) -> list:
    """The processor's view records of the batch (none from a core that
    publishes its views from apply)."""
    method = getattr(processor, "end_batch", None)
    return method() if method is not None else []


def validated_batches(shape: Workload):
    """Yield lists of (topic, model) of at most BATCH events, plus the CPU
    seconds spent decoding and validating them."""
    batch, spent = [], 0.0
    for record in generate_journal(shape):
        raw = orjson.dumps(record)
        started = time.process_time()
        topic, value = decode_journal_line(raw)
        batch.append((topic, validate(topic, value)))  # canonical dict, as the shell hands it over
        spent += time.process_time() - started
        if len(batch) == BATCH:
            yield batch, spent
            batch, spent = [], 0.0
    if batch:
        yield batch, spent


def run_core(shape: Workload) -> dict:
    """One full run: CPU seconds in apply(), intake seconds, counts, state size."""
    processor = LedgerProcessor()
    core = intake = 0.0
    events = outcomes = 0
    for batch, spent in validated_batches(shape):
        intake += spent
        started = time.process_time()
        for number, (topic, event) in enumerate(batch, 1):
            processor.apply(topic, event)
            if number % VIEW_BATCH == 0:
                end_batch(processor)
                gc.freeze()  # as the runners do after each batch (embedded.run_journal, the worker's checkpoint)
        end_batch(processor)
        gc.freeze()
        core += time.process_time() - started
        events += len(batch)
        outcomes += sum(1 for topic, _ in batch if topic == "task-outcomes")
    gc.unfreeze()
    store = processor.state.store
    state_bytes = sum(len(orjson.dumps(list(key))) + len(orjson.dumps(value)) for key, value in store.items())
    return {
        "events": events,
        "outcomes": outcomes,
        "core_s": core,
        "intake_s": intake,
        "state_keys": len(store),
        "state_bytes": state_bytes,
    }


def per_outcome_cost(heads: int, outcomes: int) -> dict:
    """µs of CPU of ``apply`` per outcome in one scope with ``heads``
    failure-bearing heads: all outcomes, and by kind — linked (a ``selected``
    was published), unlinked failing (RecurrenceMatches in scope_heads mode)
    and unlinked passing (no failure item). ``views_us_per_event``: the CPU of
    ``end_batch`` every VIEW_BATCH events, per event."""
    shape = Workload(scopes=1, outcomes_per_scope=outcomes, heads_per_scope=heads, handoffs=5, seed=3)
    processor = LedgerProcessor()
    times: dict[str, list[float]] = {"all": [], "linked": [], "unlinked_failing": [], "unlinked_passing": []}
    views = 0.0
    events = 0
    for record in generate_journal(shape):
        topic, value = record["topic"], record["value"]
        event = validate(topic, value)
        started = time.process_time()
        emits = processor.apply(topic, event).emits
        spent = time.process_time() - started
        events += 1
        if events % VIEW_BATCH == 0:
            started = time.process_time()
            end_batch(processor)
            views += time.process_time() - started
        if topic == "task-outcomes":
            times["all"].append(spent)
            if any(emit.topic == "recurrence-observations" and emit.value["event"] == "selected" for emit in emits):
                times["linked"].append(spent)
            elif any(emit.topic == "recurrence-matches" for emit in emits):
                times["unlinked_failing"].append(spent)
            else:
                times["unlinked_passing"].append(spent)
    # Skip the first 10 % of each kind (cache warm-up after the heads were loaded).
    result = {"heads": heads, "views_us_per_event": views / events * 1e6}
    for kind, spent in times.items():
        result[f"{kind}_us"] = statistics.mean(spent[len(spent) // 10:]) * 1e6
        result[f"{kind}_n"] = len(spent)
    return result


def records_per_event(shape: Workload, tx_events: int) -> dict:
    """Records written per input event: ledger facts and view records (views
    published every VIEW_BATCH events, as the embedded runner does, and
    every ``tx_events`` events, as the worker does once per transaction),
    and the changelog records of a worker committing every ``tx_events``
    events (distinct state keys changed per transaction; one partition)."""
    from recurrence_ledger.store.memory import ChangelogStore

    counts = {"facts": 0, "views_embedded": 0, "views_tx": 0, "changelog": 0}
    embedded = LedgerProcessor()
    store = ChangelogStore()
    worker = LedgerProcessor(store)
    events = 0
    for record in generate_journal(shape):
        topic, value = record["topic"], record["value"]
        event = validate(topic, value)
        events += 1
        for emit in embedded.apply(topic, event).emits:
            if emit.topic in FACTS:
                counts["facts"] += 1
            elif emit.topic in VIEWS:  # a core that publishes its views from apply
                counts["views_embedded"] += 1
        if events % VIEW_BATCH == 0:
            counts["views_embedded"] += len(end_batch(embedded))
        counts["views_tx"] += sum(emit.topic in VIEWS for emit in worker.apply(topic, event).emits)
        if events % tx_events == 0:
            counts["views_tx"] += len(end_batch(worker))
            counts["changelog"] += len(store.dirty)
            store.dirty.clear()
    counts["views_embedded"] += len(end_batch(embedded))
    counts["views_tx"] += len(end_batch(worker))
    counts["changelog"] += len(store.dirty)
    result = {name: count / events for name, count in counts.items()}
    result["events"] = events
    result["tx_events"] = tx_events
    result["worker_total"] = result["facts"] + result["views_tx"] + result["changelog"]
    return result


def admission_cost(heads: int, candidates: int) -> dict:
    """µs of CPU per admission candidate in one scope with
    ``heads`` failure-bearing heads whose cues all share two bigrams ("of
    scope-00000", "scope-00000 recurred"): half the candidates near-duplicate
    a head, half are new. Also the mean number of near-duplicates found."""
    shape = Workload(scopes=1, outcomes_per_scope=1, heads_per_scope=heads, handoffs=0, seed=3)
    processor = LedgerProcessor()
    for record in generate_journal(shape):
        processor.apply(record["topic"], validate(record["topic"], record["value"]))
    processor.apply("task-outcomes", validate("task-outcomes", {
        "scope_id": "scope-00000", "journal_position": 10**9, "source_ref": {"source_type": "task_outcome", "source_id": "O-fail"},
        "status": "failed", "observations": [],
        "checks": [{"name": "x", "status": "failed", "basis": "verified", "evidence": [{"kind": "exact", "ref": "ci"}], "details": None}],
    }))
    spent, found = [], 0
    for n in range(candidates):
        cue = f"Failure {n % heads} of scope-00000 recurred" if n % 2 else f"novel failure {n} of scope-00000 recurred"
        event = validate("experience-candidates", {
            "candidate_id": f"C{n}", "scope_id": "scope-00000", "journal_position": 10**9 + n + 1,
            "content": {"situation": "s", "action": "a", "outcome": "o", "lesson": "l", "failure": {
                "signature": {"recall_cue": cue, "symptom": None}, "repair_surface": "experience_content",
                "verification": {"condition": "c", "check_subject": "s"}}},
            "cited_sources": [{"source_type": "task_outcome", "source_id": "O-fail"}],
        })
        started = time.process_time()
        [emit] = processor.apply("experience-candidates", event).emits
        spent.append(time.process_time() - started)
        found += len(emit.value["near_duplicates"])
    return {"heads": heads, "us": statistics.mean(spent) * 1e6, "near_duplicates": found / candidates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes; print only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="print only; leave BENCHMARKS.md alone")
    parser.add_argument("--only", default="", help="comma-separated parts to run and print: core, scaling, admission, records")
    parser.add_argument("--tx-events", type=int, default=250, help="events per worker transaction in the records count")
    args = parser.parse_args()

    shape = Workload(scopes=100, outcomes_per_scope=2_000, heads_per_scope=10, handoffs=5)
    if args.quick:
        shape = Workload(scopes=10, outcomes_per_scope=200, heads_per_scope=10, handoffs=5)
        args.repeats = 1
    # Allocation-heavy Python: a higher gen-0 GC threshold for the parts
    # below; the full runs (run_core) also move what survives each batch
    # out of the collector's generations, as the worker (at every
    # checkpoint) and the embedded runner (every view batch) do.
    gc.set_threshold(50_000, 20, 100)
    big = 1_000 if args.quick else 10_000
    if args.only:
        parts = set(args.only.split(","))
        result: dict = {}
        if "core" in parts:
            result["core"] = run_core(shape)
        if "scaling" in parts:
            result["scaling"] = [per_outcome_cost(h, 300 if args.quick else 2_000) for h in (10, big)]
        if "admission" in parts:
            result["admission"] = [admission_cost(h, 200 if args.quick else 2_000) for h in (10, big)]
        if "records" in parts:
            result["records"] = records_per_event(Workload(scopes=100, outcomes_per_scope=20 if args.quick else 200, heads_per_scope=10, handoffs=5), args.tx_events)
        print(json.dumps(result, indent=2))
        return

    runs = [run_core(shape) for _ in range(args.repeats)]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    first = runs[0]
    events_per_s = [r["events"] / r["core_s"] for r in runs]
    outcomes_per_s = [r["outcomes"] / r["core_s"] for r in runs]
    intake_per_s = [r["events"] / r["intake_s"] for r in runs]
    scaling = [per_outcome_cost(h, 300 if args.quick else 2_000) for h in (10, big)]
    admission = [admission_cost(h, 200 if args.quick else 2_000) for h in (10, big)]
    records = records_per_event(Workload(scopes=100, outcomes_per_scope=20 if args.quick else 200, heads_per_scope=10, handoffs=5), args.tx_events)

    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, 1 process",
        "events": first["events"],
        "scopes": shape.scopes,
        "outcomes": first["outcomes"],
        "events_per_s_best": max(events_per_s),
        "events_per_s_median": statistics.median(events_per_s),
        "outcomes_per_s_best": max(outcomes_per_s),
        "outcomes_per_s_median": statistics.median(outcomes_per_s),
        "intake_events_per_s_median": statistics.median(intake_per_s),
        "peak_rss_mb": rss_mb,
        "state_keys_per_1000_outcomes": first["state_keys"] / first["outcomes"] * 1000,
        "state_kib_per_1000_outcomes": first["state_bytes"] / first["outcomes"] * 1000 / 1024,
        "scaling": scaling,
        "admission": admission,
        "records": records,
    }
    print(json.dumps(result, indent=2))
    if not args.quick and not args.no_record:
        write_markdown(result)


def write_markdown(r: dict) -> None:
    """Replace the core-benchmark block of BENCHMARKS.md."""
    lines = [
        f"Recorded {r['date']} by `python benchmarks/core_benchmark.py` ({r['machine']}; 2-core VM).",
        "",
        f"Workload: {r['events']:,} source events over {r['scopes']} scopes ({r['outcomes']:,} task outcomes,"
        " 10 failure-bearing heads and 5 Handoffs per scope; mixed recurred / avoided / unknown / unlinked / ambiguous).",
        "CPU time of `LedgerProcessor.apply` only (decode + validation measured separately).",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| core events/s (best / median of runs) | {r['events_per_s_best']:,.0f} / {r['events_per_s_median']:,.0f} |",
        f"| core task outcomes/s (best / median) | {r['outcomes_per_s_best']:,.0f} / {r['outcomes_per_s_median']:,.0f} |",
        f"| intake (JSON decode + pydantic validation) events/s, median | {r['intake_events_per_s_median']:,.0f} |",
        f"| peak RSS of the benchmark process | {r['peak_rss_mb']:,.0f} MiB |",
        f"| state keys per 1,000 outcomes | {r['state_keys_per_1000_outcomes']:,.0f} |",
        f"| state size per 1,000 outcomes (canonical JSON of keys + values) | {r['state_kib_per_1000_outcomes']:,.0f} KiB |",
        "",
        "Per-outcome CPU cost of `apply` by number of Experience heads in the scope (2,000 outcomes, first 10 % of each kind",
        "skipped; views published every 1,000 events by `end_batch`, its cost per event in the last column):",
        "",
        "| heads | all outcomes | linked | unlinked failing (scope_heads matching) | unlinked passing | views (end_batch), µs/event |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in r["scaling"]:
        lines.append(
            f"| {row['heads']:,} | {row['all_us']:.1f} | {row['linked_us']:.1f} (n={row['linked_n']}) "
            f"| {row['unlinked_failing_us']:.1f} (n={row['unlinked_failing_n']}) "
            f"| {row['unlinked_passing_us']:.1f} (n={row['unlinked_passing_n']}) | {row['views_us_per_event']:.1f} |"
        )
    rec = r["records"]
    lines += [
        "",
        f"Records written per input event ({rec['events']:,} events, 100 scopes): ledger facts {rec['facts']:.2f}; view records",
        f"{rec['views_embedded']:.3f} with the embedded runner's default batch (1,000 events), {rec['views_tx']:.2f} with one batch",
        f"per worker transaction of {rec['tx_events']} events; a worker's changelog records {rec['changelog']:.2f} (distinct state keys",
        f"changed per transaction); worker total {rec['worker_total']:.2f} (transaction markers not included).",
    ]
    lines += [
        "",
        "Admission: CPU per candidate by number of heads in the scope (2,000 candidates, every head cue sharing",
        "two bigrams with every other; half the candidates near-duplicate a head):",
        "",
        "| heads | µs/candidate | near-duplicates found per candidate |",
        "| --- | --- | --- |",
    ]
    for row in r["admission"]:
        lines.append(f"| {row['heads']:,} | {row['us']:.1f} | {row['near_duplicates']:.2f} |")
    write_block("core-benchmark", "Ledger core", lines)


if __name__ == "__main__":
    main()
