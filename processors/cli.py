"""The ``recurrence-ledger`` command line.

``run`` is the main job: the Kafka worker when KAFKA_BOOTSTRAP_SERVERS is
set, otherwise the embedded runner on a journal (by default the minimum
checkable evidence case shipped with the package). ``run-journal`` is
contract §11 exactly.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich import box
from rich.table import Table

from recurrence_ledger.embedded import DEFAULT_VIEW_BATCH, RunSummary, run_journal, stdout_console
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.settings import (
    DEFAULT_APP_ID,
    ENV_APP_ID,
    ENV_BOOTSTRAP_SERVERS,
    ENV_INSTANCE_ID,
    ENV_MAX_PENDING_CANDIDATES,
    ENV_METRICS_PORT,
    ENV_REDIS_URL,
    ENV_TOPIC_PREFIX,
    settings,
)
from recurrence_ledger.topics import catalogue
from recurrence_ledger.topics.catalogue import DEFAULT_MAX_OUTPUT_BYTES

app = typer.Typer(add_completion=False, no_args_is_help=True, help="recurrence-ledger: did what the agents learned from a failure help?")
console = stdout_console()

EXAMPLE_JOURNAL = "openapi_drift.jsonl"

ThresholdOption = Annotated[int, typer.Option("--review-threshold", min=1, help="Streak at which a revision needs review (contract §8).")]
TopOption = Annotated[int, typer.Option("--top-revisions", min=0, help="N of top_revisions (contract §8).")]
HorizonOption = Annotated[
    Optional[int],
    typer.Option("--provenance-horizon", min=1, help="Journal positions a pending outcome may wait (contract §5); end of file always decides."),
]


ViewBatchOption = Annotated[
    int,
    typer.Option("--view-batch", min=1,
                 help="Embedded runner: journal records per batch of the view files (at most one record per changed key per batch, contract §8)."),
]


PendingCandidatesOption = Annotated[
    int,
    typer.Option("--max-pending-candidates", min=1, envvar=ENV_MAX_PENDING_CANDIDATES,
                 help="Admission candidates one scope may hold waiting for Task Outcomes; one more is dead-lettered (too_many_pending)."),
]


def _config(review_threshold: int, top_revisions: int, provenance_horizon: int | None, max_pending_candidates: int) -> LedgerConfig:
    return LedgerConfig(
        review_threshold=review_threshold, top_revisions_limit=top_revisions, provenance_horizon=provenance_horizon,
        max_pending_candidates=max_pending_candidates,
    )


def print_summary(summary: RunSummary, out_dir: Path) -> None:
    """Per scope: selected / recurred / avoided / unknown / needing review
    (the last statistics record of each scope), then its top revisions."""
    table = Table(title="recurrence statistics (last record per scope)", box=box.SIMPLE_HEAD)
    table.add_column("scope", overflow="fold")
    for column in ("selected", "recurred", "avoided", "unknown", "needing review"):
        table.add_column(column, justify="right")
    for scope_id, stats in sorted(summary.statistics.items()):
        table.add_row(scope_id, *(str(stats[name]) for name in ("selected", "recurred", "avoided", "unknown", "needing_review")))
    console.print(table)
    for scope_id, stats in sorted(summary.statistics.items()):
        console.print(
            f"[bold]{scope_id}[/bold]: as_of_position {stats['as_of_position']}, "
            f"unlinked_handoff_citations {stats['unlinked_handoff_citations']}, "
            f"pending_outcomes {stats['pending_outcomes']}, late_revisions {stats['late_revisions']}"
        )
        for row in stats["top_revisions"]:
            ref = row["artifact_ref"]
            console.print(
                f"  streak {row['terminal_recurred_streak']}: {ref['artifact_id']} r{ref['revision']} "
                f"'{row['signature_key']}'",
                highlight=False,
            )
    if summary.admission:
        admission = dict(summary.admission)
        accepted, rejected, near = (admission.pop(name, 0) for name in ("accepted", "rejected", "near_duplicates"))
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(admission.items()))
        console.print(
            f"admission: {accepted} accepted, {rejected} rejected{f' ({reasons})' if reasons else ''}, "
            f"{near} with near-duplicate suggestions",
            highlight=False,
        )
    counts = ", ".join(f"{topic} {count}" for topic, count in summary.records.items())
    console.print(f"{summary.lines} journal records → {counts}", highlight=False)
    console.print(f"output files: {out_dir}/<topic>.jsonl", highlight=False)


@app.command("run-journal")
def run_journal_command(
    journal: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="Journal file (JSON Lines).")],
    out: Annotated[Path, typer.Option("--out", file_okay=False, help="Output directory: one <topic>.jsonl per output topic.")],
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    provenance_horizon: HorizonOption = 10_000,
    max_pending_candidates: PendingCandidatesOption = 5_000,
    view_batch: ViewBatchOption = DEFAULT_VIEW_BATCH,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar, no summary.")] = False,
) -> None:
    """Process a journal file with the embedded runner (contract §11)."""
    summary = run_journal(journal, out, _config(review_threshold, top_revisions, provenance_horizon, max_pending_candidates), show_progress=not quiet,
                          view_batch=view_batch)
    if not quiet:
        print_summary(summary, out)


@app.command("run")
def run_command(
    journal: Annotated[Optional[Path], typer.Argument(exists=True, dir_okay=False, help="Journal for the embedded runner (default: the packaged minimum case).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", file_okay=False, help="Output directory (default: a new temporary one).")] = None,
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    provenance_horizon: HorizonOption = 10_000,
    max_pending_candidates: PendingCandidatesOption = 5_000,
    topic_prefix: Annotated[str, typer.Option("--topic-prefix", envvar=ENV_TOPIC_PREFIX, help="Kafka only: deployment prefix of every topic.")] = "",
    view_batch: ViewBatchOption = DEFAULT_VIEW_BATCH,
) -> None:
    """The main job: the Kafka worker when KAFKA_BOOTSTRAP_SERVERS is set,
    else the embedded runner on JOURNAL (default: the packaged minimum case)."""
    config = _config(review_threshold, top_revisions, provenance_horizon, max_pending_candidates)
    if settings().bootstrap_servers:
        if journal is not None or out is not None:
            console.print(
                "KAFKA_BOOTSTRAP_SERVERS is set, so `run` starts the Kafka worker, which reads topics, not files: "
                "load a journal with `recurrence-ledger publish JOURNAL` and read results with `recurrence-ledger export`; "
                "or unset KAFKA_BOOTSTRAP_SERVERS to run JOURNAL with the embedded runner.",
                style="red",
            )
            raise typer.Exit(2)
        from recurrence_ledger.runtime.worker import run_worker, worker_config_from_env

        console.print(
            f"Kafka worker on {settings().bootstrap_servers} (KAFKA_BOOTSTRAP_SERVERS is set), topic prefix {topic_prefix!r}",
            style="bold",
        )
        _run_worker_or_exit(run_worker, worker_config_from_env(config, create_partitions=8, topic_prefix=topic_prefix))
        return
    out_dir = out or Path(tempfile.mkdtemp(prefix="recurrence-ledger-"))
    if journal is None:
        with resources.as_file(resources.files("recurrence_ledger.examples") / EXAMPLE_JOURNAL) as packaged:
            console.print(f"embedded runner (no KAFKA_BOOTSTRAP_SERVERS): packaged journal {EXAMPLE_JOURNAL}", style="bold")
            summary = run_journal(packaged, out_dir, config, view_batch=view_batch)
    else:
        summary = run_journal(journal, out_dir, config, view_batch=view_batch)
    print_summary(summary, out_dir)


# -- Kafka ------------------------------------------------------------------------

BootstrapOption = Annotated[str, typer.Option("--bootstrap", envvar=ENV_BOOTSTRAP_SERVERS, help="Kafka bootstrap servers.")]
PrefixOption = Annotated[str, typer.Option("--topic-prefix", envvar=ENV_TOPIC_PREFIX, help="Deployment prefix of every topic (contract §1).")]
FormatOption = Annotated[str, typer.Option("--format", help="Value format: avro (Confluent-framed) or json.")]


@contextlib.contextmanager
def _kafka_errors():
    """Turn the errors a user can cause (missing topics, no broker, a topic
    outside the catalogue) into one red line and exit code 1."""
    from confluent_kafka import KafkaException

    try:
        yield
    except (LookupError, KafkaException, TimeoutError) as error:
        message = error.args[0] if isinstance(error, KafkaException) and error.args else error
        console.print(f"error: {message}", style="red", highlight=False)
        raise typer.Exit(1) from None


def _run_worker_or_exit(run_worker, config) -> None:  # noqa: ANN001 - lazy import
    from recurrence_ledger.runtime.kafka_admin import CoPartitionError

    try:
        with _kafka_errors():
            run_worker(config)
    except CoPartitionError as error:
        console.print(f"refusing to start: {error}", style="red")
        raise typer.Exit(2) from None


def _check_topic(topic: str) -> str:

    if topic not in catalogue.BY_NAME:
        raise typer.BadParameter(f"{topic!r} is not a catalogue topic; one of: {', '.join(catalogue.BY_NAME)}", param_hint="TOPIC")
    return topic


@app.command("worker")
def worker_command(
    bootstrap: BootstrapOption,
    topic_prefix: PrefixOption = "",
    app_id: Annotated[str, typer.Option("--app-id", envvar=ENV_APP_ID, help="Consumer group id and changelog prefix.")] = DEFAULT_APP_ID,
    instance_id: Annotated[Optional[str], typer.Option("--instance-id", envvar=ENV_INSTANCE_ID, help="Stable id of this worker (transactional id suffix; default: host name).")] = None,
    output_format: Annotated[str, typer.Option("--output-format", help="avro (Confluent-framed) or json.")] = "avro",
    redis_url: Annotated[Optional[str], typer.Option("--redis-url", envvar=ENV_REDIS_URL, help="Redis for the statistics view (optional).")] = None,
    commit_interval_ms: Annotated[int, typer.Option("--commit-interval-ms", min=10, help="Transaction commit interval.")] = 100,
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, help="Records consumed per poll.")] = 2_000,
    exit_when_idle: Annotated[Optional[float], typer.Option("--exit-when-idle", help="Stop after this many seconds without input (batch jobs).")] = None,
    create_topics: Annotated[Optional[int], typer.Option("--create-topics", min=1, help="Create missing catalogue topics with this many partitions first.")] = None,
    metrics_port: Annotated[Optional[int], typer.Option("--metrics-port", envvar=ENV_METRICS_PORT, help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics.")] = None,
    max_output_bytes: Annotated[int, typer.Option("--max-output-bytes", min=256, help="Largest output value; a record with a larger output is dead-lettered (oversized_output). Dead letters themselves are not held to it.")] = DEFAULT_MAX_OUTPUT_BYTES,
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    provenance_horizon: HorizonOption = 10_000,
    max_pending_candidates: PendingCandidatesOption = 5_000,
) -> None:
    """Run the ledger as a Kafka stream processor (exactly-once outputs)."""
    from recurrence_ledger.runtime.worker import WorkerConfig, run_worker

    config = WorkerConfig(
        bootstrap=bootstrap,
        app_id=app_id,
        topic_prefix=topic_prefix,
        output_format=output_format,
        commit_interval_ms=commit_interval_ms,
        max_batch=max_batch,
        exit_when_idle_s=exit_when_idle,
        redis_url=redis_url,
        create_partitions=create_topics,
        metrics_port=metrics_port,
        max_output_bytes=max_output_bytes,
        ledger=_config(review_threshold, top_revisions, provenance_horizon, max_pending_candidates),
        **({"instance_id": instance_id} if instance_id else {}),
    )
    _run_worker_or_exit(run_worker, config)


topics_app = typer.Typer(help="The topic catalogue (contract §1).", no_args_is_help=True)
app.add_typer(topics_app, name="topics")


@topics_app.command("create")
def topics_create_command(
    bootstrap: BootstrapOption,
    partitions: Annotated[int, typer.Option("--partitions", min=1, help="Partitions of every topic (inputs must be co-partitioned).")] = 8,
    topic_prefix: PrefixOption = "",
    replication: Annotated[int, typer.Option("--replication", min=1)] = 1,
) -> None:
    """Create every topic of the catalogue with its settings (idempotent)."""
    from recurrence_ledger.runtime.kafka_admin import create_topics

    with _kafka_errors():
        result = create_topics(bootstrap, partitions, topic_prefix, replication)
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("topic", "cleanup", "schema", "result"):
        table.add_column(column)
    for spec in catalogue.CATALOGUE:
        name = catalogue.physical(spec.name, topic_prefix)
        table.add_row(name, spec.cleanup_policy, spec.schema, result.get(name, "?"))
    console.print(table)


@topics_app.command("delete")
def topics_delete_command(
    bootstrap: BootstrapOption,
    topic_prefix: PrefixOption = "",
    app_id: Annotated[str, typer.Option("--app-id", envvar=ENV_APP_ID, help="The deployment's app id (group and changelog).")] = DEFAULT_APP_ID,
    yes: Annotated[bool, typer.Option("--yes", help="Really delete; without it, only list what would go.")] = False,
) -> None:
    """Delete a deployment's topics (the catalogue under the prefix and the
    state changelog) and consumer groups. Without --yes, lists them only.
    Stop its workers first; the Redis keys go with `view clear`."""
    from recurrence_ledger.runtime.kafka_admin import delete_deployment, deployment_resources

    if not yes:
        names = [name for resources in deployment_resources(topic_prefix, app_id) for name in resources]
        console.print("would delete (run again with --yes):\n  " + "\n  ".join(names), highlight=False)
        return
    with _kafka_errors():
        result = delete_deployment(bootstrap, topic_prefix, app_id)
    for name, outcome in result.items():
        console.print(f"{name}: {outcome}", highlight=False)
    if any(outcome not in ("deleted", "absent") for outcome in result.values()):
        raise typer.Exit(1)


@topics_app.command("list")
def topics_list_command() -> None:
    """Print the catalogue: topic, direction, key, value schema, cleanup."""

    table = Table(box=box.SIMPLE_HEAD)
    for column in ("topic", "direction", "key", "value", "cleanup", "retention ms", "schema id"):
        table.add_column(column)
    for spec in catalogue.CATALOGUE:
        table.add_row(spec.name, spec.direction, spec.key, spec.schema, spec.cleanup_policy, str(spec.retention_ms), str(spec.schema_id))
    console.print(table)


@app.command("publish")
def publish_command(
    journal: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Journal file (JSON Lines).")],
    bootstrap: BootstrapOption,
    topic_prefix: PrefixOption = "",
    fmt: FormatOption = "avro",
    per_kind: Annotated[bool, typer.Option("--per-kind", help="Publish to the per-kind topics (one per event kind, candidates included) instead of source-journal.")] = False,
) -> None:
    """Load a journal file into the input topics (idempotent producer)."""
    from recurrence_ledger.runtime.kafka_io import publish_journal

    with _kafka_errors():
        summary = publish_journal(bootstrap, journal, fmt=fmt, per_kind=per_kind, topic_prefix=topic_prefix)
    per_topic = ", ".join(f"{topic_prefix}{name} {count}" for name, count in summary.topics.items())
    console.print(
        f"published {summary.records} records in {summary.seconds:.2f} s ({per_topic}); "
        f"{summary.raw} published as raw bytes (not valid events: the worker will dead-letter them)",
        highlight=False,
    )


@app.command("export")
def export_command(
    topic: Annotated[str, typer.Argument(help="Logical output topic, e.g. recurrence-observations.")],
    out: Annotated[Path, typer.Option("--out", dir_okay=False, help="JSON Lines file (contract §11 format).")],
    bootstrap: BootstrapOption,
    topic_prefix: PrefixOption = "",
) -> None:
    """Write a topic's committed records to JSON Lines, partition by partition."""
    from recurrence_ledger.runtime.kafka_io import export_topic

    _check_topic(topic)
    with _kafka_errors():
        count = export_topic(bootstrap, topic, out, topic_prefix=topic_prefix)
    console.print(f"{count} records → {out}")


@app.command("replay")
def replay_command(
    bootstrap: BootstrapOption,
    start: Annotated[str, typer.Option("--from", help="earliest | offsets:TOPIC/P=O,… | timestamp:ISO-8601 | position:N")] = "earliest",
    topic_prefix: PrefixOption = "",
    app_id: Annotated[str, typer.Option("--app-id", envvar=ENV_APP_ID)] = DEFAULT_APP_ID,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be re-read.")] = False,
    output_format: Annotated[str, typer.Option("--output-format")] = "avro",
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    provenance_horizon: HorizonOption = 10_000,
    max_pending_candidates: PendingCandidatesOption = 5_000,
) -> None:
    """Re-run the ledger over the input topics; adds only records whose
    identity is not in the ledger yet (contract §6, §10)."""
    from recurrence_ledger.runtime.replay import parse_start, run_replay

    try:
        replay_start = parse_start(start)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--from") from None
    with _kafka_errors():
        summary = run_replay(
            bootstrap, topic_prefix, replay_start, app_id=app_id, output_format=output_format, dry_run=dry_run,
            ledger=_config(review_threshold, top_revisions, provenance_horizon, max_pending_candidates),
        )
    table = Table(title="replay plan" if dry_run else "replay", box=box.SIMPLE_HEAD)
    for column in ("topic", "partition", "from", "outputs from", "to", "records to re-read"):
        table.add_column(column, justify="left" if column == "topic" else "right")
    for r in summary.ranges:
        table.add_row(r.topic, str(r.partition), str(r.low), str(r.start), str(r.end), str(r.end - r.low))
    console.print(table)
    if not dry_run:
        console.print(
            f"read {summary.records_read} records in {summary.seconds:.1f} s; "
            f"written {dict(summary.written) or 0}; already in the ledger {dict(summary.suppressed) or 0}",
            highlight=False,
        )
        if summary.conflicted_scopes:
            console.print(
                f"scopes where the replay decided an outcome differently from the ledger (kept the ledger's decision): "
                f"{', '.join(summary.conflicted_scopes)}",
                style="yellow", highlight=False,
            )


@app.command("rebuild")
def rebuild_command(
    bootstrap: BootstrapOption,
    redis_url: Annotated[Optional[str], typer.Option("--redis-url", envvar=ENV_REDIS_URL, help="Also rewrite the Redis view.")] = None,
    topic_prefix: PrefixOption = "",
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
) -> None:
    """Rebuild streaks, statistics and the revisions view from the ledger
    topics alone, check them against the latest statistics and
    revision-statistics records, and rewrite the Redis view. Exit code 1
    when the rebuilt views differ from the live ones."""
    from recurrence_ledger.runtime.kafka_io import read_topic
    from recurrence_ledger.ledger.rebuild import compare, compare_revisions, rebuild_revisions, rebuild_views, surfaces_from
    from recurrence_ledger.runtime.view_topics import read_revision_statistics_topic, read_statistics_topic
    from recurrence_ledger.view import RedisView, default_namespace

    with _kafka_errors():
        observations = [value for *_, value in read_topic(bootstrap, catalogue.OBSERVATIONS, topic_prefix=topic_prefix)]
        latest = read_statistics_topic(bootstrap, topic_prefix)
        live_rows = [row for rows in read_revision_statistics_topic(bootstrap, topic_prefix).values() for row in rows.values()]
    surfaces = surfaces_from(latest.values(), live_rows)
    rebuilt = rebuild_views(observations, review_threshold, top_revisions, surfaces)
    differences = compare(rebuilt, latest)
    rebuilt_rows = rebuild_revisions(observations, review_threshold, surfaces)
    revision_differences = compare_revisions(rebuilt_rows, live_rows)
    table = Table(title=f"rebuilt from {len(observations)} observations", box=box.SIMPLE_HEAD)
    for column in ("scope", "selected", "recurred", "avoided", "unknown", "needing review", "top streak", "live view"):
        table.add_column(column, justify="left" if column in ("scope", "live view") else "right")
    for scope_id, fields in differences.items():
        view = rebuilt.get(scope_id) or {}
        top = view.get("top_revisions") or [{"terminal_recurred_streak": 0}]
        table.add_row(
            scope_id, *(str(view.get(name, 0)) for name in ("selected", "recurred", "avoided", "unknown", "needing_review")),
            str(top[0]["terminal_recurred_streak"]), "equal" if not fields else "DIFFERS: " + ", ".join(fields),
        )
    console.print(table)
    console.print(
        f"revisions view: {len(rebuilt_rows)} revisions rebuilt, "
        + ("equal to the revision-statistics topic" if not revision_differences else
           f"{len(revision_differences)} DIFFER, e.g. " + ", ".join(f"{s} {a} r{r}" for s, a, r in revision_differences[:5])),
        highlight=False,
    )
    if redis_url:
        records = [{**record, **rebuilt.get(scope_id, {})} for scope_id, record in latest.items()]
        view = RedisView(redis_url, namespace=default_namespace(topic_prefix), review_threshold=review_threshold)
        view.clear()
        view.submit(records, revisions=[rebuilt_rows[key] for key in sorted(rebuilt_rows)])  # writes at once when Redis answers
        view.flush()
        if view.pending:
            console.print(f"Redis at {redis_url} did not answer: the view was not rewritten", style="red")
            raise typer.Exit(1)
        console.print(f"Redis view {default_namespace(topic_prefix)} rewritten: {len(records)} scopes", highlight=False)
    if any(differences.values()) or revision_differences:
        raise typer.Exit(1)


@app.command("explain")
def explain_command(
    scope: Annotated[str, typer.Argument(help="scope_id")],
    task_outcome_id: Annotated[str, typer.Argument(help="source_id of the Task Outcome")],
    journal: Annotated[Optional[Path], typer.Option("--journal", exists=True, dir_okay=False, help="Explain from a journal file (embedded run) instead of Kafka.")] = None,
    bootstrap: Annotated[Optional[str], typer.Option("--bootstrap", envvar=ENV_BOOTSTRAP_SERVERS, help="Kafka bootstrap servers.")] = None,
    topic_prefix: PrefixOption = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Why an outcome counted the way it did: receipt → Handoff → cited
    revisions, each failure item and its RecurrenceMatch, and for every
    revision the verdict or the exact reason there is none."""
    from recurrence_ledger.ledger.explain import OutcomeNotFound, explain_outcome

    if journal is not None:
        from recurrence_ledger.embedded import journal_ledger

        events, outputs = journal_ledger(journal)
        matches, observations = outputs[catalogue.MATCHES], outputs[catalogue.OBSERVATIONS]
        candidate_sets = outputs[catalogue.CANDIDATE_SETS]
    elif bootstrap:
        from recurrence_ledger.runtime.kafka_io import read_topic

        with _kafka_errors():
            events = []
            for name in catalogue.INPUT_TOPICS:
                for *_, value in read_topic(bootstrap, name, topic_prefix=topic_prefix):
                    events.append((value["topic"], value["value"]) if name == catalogue.SOURCE_JOURNAL else (name, value))
            matches = [value for *_, value in read_topic(bootstrap, catalogue.MATCHES, topic_prefix=topic_prefix)]
            observations = [value for *_, value in read_topic(bootstrap, catalogue.OBSERVATIONS, topic_prefix=topic_prefix)]
            from recurrence_ledger.runtime.kafka_io import read_candidate_sets

            wanted = {(m["scope_id"], m["candidate_set_digest"]) for m in matches
                      if m["candidate_refs"] is None and (m["scope_id"], m["task_outcome_ref"]["source_id"]) == (scope, task_outcome_id)}
            candidate_sets = read_candidate_sets(bootstrap, wanted, topic_prefix=topic_prefix) if wanted else []
    else:
        raise typer.BadParameter("give --journal FILE, or --bootstrap / KAFKA_BOOTSTRAP_SERVERS", param_hint="--journal")
    try:
        explanation = explain_outcome(scope, task_outcome_id, events, matches, observations, candidate_sets)
    except OutcomeNotFound as error:
        console.print(f"error: {error}", style="red", highlight=False)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(explanation, indent=2, ensure_ascii=False))
        return
    print_explanation(explanation)


def print_explanation(explanation: dict) -> None:
    """The explanation as a tree (user text escaped from rich markup)."""
    from rich.markup import escape
    from rich.tree import Tree

    outcome = explanation["task_outcome"]
    chain = explanation["chain"]
    tree = Tree(escape(f"{outcome['source_id']} in {explanation['scope_id']} (position {outcome['journal_position']}, {outcome['status']})"))
    link = tree.add(escape(f"chain: {chain['status']} — {chain['reason']}"))
    if chain["handoff"]:
        link.add(escape(f"receipt {chain['receipt']} → Handoff {chain['handoff']} → cited failure-bearing revisions: {', '.join(chain['cited']) or 'none'}"))
    items = tree.add(f"failure items: {len(explanation['failure_items'])}")
    for item in explanation["failure_items"]:
        match = item["match"]
        text = f"{item['item_kind']}[{item['item_index']}] '{item['match_input']}'"
        if match is None:
            items.add(escape(f"{text}: no RecurrenceMatch recorded"))
        else:
            target = f" → {match['target']}" if match["target"] else ""
            candidates = (f"candidate set {match['candidate_set_digest']} not found on candidate-sets" if match["candidates"] is None
                          else f"candidates {', '.join(match['candidates']) or 'none'}")
            items.add(escape(f"{text}: {match['result']}{target} ({match['candidate_set_mode']}, {candidates})"))
    revisions = tree.add("revisions")
    for row in explanation["revisions"]:
        selected = "selected, " if row["selected"] else ""
        revisions.add(escape(f"{row['artifact_ref']} ({row['repair_surface']}): {selected}{row['reason']}"))
    console.print(tree, highlight=False)


view_app = typer.Typer(help="The Redis statistics view.", no_args_is_help=True)
app.add_typer(view_app, name="view")


@view_app.command("rebuild")
def view_rebuild_command(
    bootstrap: BootstrapOption,
    redis_url: Annotated[str, typer.Option("--redis-url", envvar=ENV_REDIS_URL)],
    topic_prefix: PrefixOption = "",
    review_threshold: ThresholdOption = 3,
) -> None:
    """Rebuild the Redis view from the recurrence-statistics topic."""
    from recurrence_ledger.runtime.view_topics import rebuild_from_topic
    from recurrence_ledger.view import RedisView
    from recurrence_ledger.view import default_namespace

    view = RedisView(redis_url, namespace=default_namespace(topic_prefix), review_threshold=review_threshold)
    with _kafka_errors():
        scopes = rebuild_from_topic(view, bootstrap, topic_prefix)
    console.print(f"{scopes} scopes written to {redis_url} (namespace {default_namespace(topic_prefix)})", highlight=False)


@view_app.command("clear")
def view_clear_command(
    redis_url: Annotated[str, typer.Option("--redis-url", envvar=ENV_REDIS_URL)],
    topic_prefix: PrefixOption = "",
) -> None:
    """Delete every key of the Redis view's namespace (the prefix's)."""
    from recurrence_ledger.view import RedisView, default_namespace

    view = RedisView(redis_url, namespace=default_namespace(topic_prefix))
    try:
        deleted = view.clear()
    finally:
        view.close()
    console.print(f"{deleted} keys deleted from {redis_url} (namespace {default_namespace(topic_prefix)})", highlight=False)


from recurrence_ledger.cli_ops import register  # noqa: E402 - serve, rank, stats

register(app)


def main() -> None:  # pragma: no cover - console entry point
    """Console entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
