"""The commands that run the ledger: ``run-journal`` (contract §11 exactly),
``run`` (the main job: the Kafka worker when KAFKA_BOOTSTRAP_SERVERS is set,
otherwise the embedded runner on a journal, by default the minimum
checkable evidence case shipped with the package) and ``worker``.

``run`` and ``worker`` take one set of worker options
(:data:`recurrence_ledger.cli.options.WORKER_OPERATION`), and with
``run-journal`` one set of ledger policy options
(:data:`recurrence_ledger.cli.options.LEDGER_POLICY`).
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich import box
from rich.text import Text
from rich.table import Table

from recurrence_ledger import policy
from recurrence_ledger.cli.clients import (
    check_port,
    check_redis_url,
    command_registry,
    console,
    kafka_connection,
    refusing_to_start,
    reporting_kafka_errors,
    reporting_run_errors,
)
from recurrence_ledger.cli.options import (
    DEFAULT_PARTITIONS,
    LEDGER_POLICY,
    WORKER_OPERATION,
    WORKER_PANEL,
    AcceptHoldoutOption,
    AcceptUnicodeOption,
    AutoRegisterOption,
    BootstrapOption,
    JobsOption,
    KafkaConfigOption,
    ProcessesOption,
    PrefixOption,
    RegistryOption,
    ViewBatchOption,
    check_journal,
    kafka_config_option,
    on_command_line,
    takes,
    topic_prefix_option,
)
from recurrence_ledger.embedded.output import stderr_console
from recurrence_ledger.wording import counted
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.settings import settings

if TYPE_CHECKING:  # the core is imported by the commands that run it, not by --help
    from recurrence_ledger.embedded.runner import RunSummary

EXAMPLE_JOURNAL = "openapi_drift.jsonl"


#: The columns of the run's summary table (titles from the record model), and the figures of each scope's line under it.
SUMMARY_COLUMNS = ("selected", "recurred", "avoided", "unknown", "needing_review")
SUMMARY_LINE = ("as_of_position", "unlinked_handoff_citations", "pending_outcomes", "late_revisions")


def print_summary(summary: RunSummary, out_dir: Path) -> None:
    """Per scope: selected / recurred / avoided / unknown / needing review
    (the last statistics record of each scope), the line ``stats`` prints
    for it (``cli.ops.unknown_line``), then its top revisions and its
    review candidates (:func:`review_lines`)."""
    from recurrence_ledger.cli.ops import unknown_line
    from recurrence_ledger.ledger.records import ScopeStatistics

    table = Table(title="recurrence statistics (last record per scope)", box=box.SIMPLE_HEAD)
    table.add_column("scope", overflow="fold")
    for column in SUMMARY_COLUMNS:
        table.add_column(ScopeStatistics.model_fields[column].title, justify="right")
    for scope_id, stats in sorted(summary.statistics.items()):
        table.add_row(scope_id, *(str(stats[name]) for name in SUMMARY_COLUMNS))
    console.print(table)
    for scope_id, stats in sorted(summary.statistics.items()):
        console.print(Text.assemble((scope_id, "bold"), ": " + ", ".join(f"{name} {stats[name]}" for name in SUMMARY_LINE)))
        notes = unknown_line(stats)  # what `stats` prints under its table: unknown by reason, forward references, unmatched failures…
        if notes:
            console.print(notes, highlight=False, soft_wrap=True)
        for row in stats["top_revisions"]:
            ref = row["artifact_ref"]
            console.print(
                f"  streak {row['terminal_recurred_streak']}: {ref['artifact_id']} r{ref['revision']} "
                f"'{row['signature_key']}'",
                highlight=False,
            )
        for line in review_lines([row for (scope, _), row in summary.review_status.items() if scope == scope_id]):
            console.print(line, highlight=False, soft_wrap=True)
        for line in effect_lines([row for (scope, _, _), row in sorted(summary.effects.items()) if scope == scope_id]):
            console.print(line, highlight=False, soft_wrap=True)
    for line in admission_lines(summary.admission):
        console.print(line, highlight=False)
    counts = ", ".join(f"{topic} {count}" for topic, count in summary.records.items())
    console.print(f"{summary.lines} journal records → {counts}", highlight=False, soft_wrap=True)
    console.print(f"output files: {out_dir.resolve()}/<topic>.jsonl (one per output topic)", highlight=False)


def review_lines(rows: list[dict]) -> list[str]:
    """One line per review candidate of a scope (its last ReviewStatus row,
    contract §18), in ArtifactRef order, then by candidate_id:

        review EXP-a r2 (raised at streak 3): approved by lead; fix EXP-a r3: repair held (selected 1, recurred 0, avoided 1)
        review EXP-b r1 (raised at streak 3): rejected by qa: "the runner, not the lesson"
        review EXP-c r1 (raised at streak 4): open

    The streak is the one that raised the candidate (contract §18), which
    the revision's line above may have passed since.

    [] without candidates."""
    from recurrence_ledger.ledger.state import ref_order

    lines = []
    for row in sorted(rows, key=lambda row: (*ref_order(row["artifact_ref"]), row["candidate_id"])):
        ref, decision, fix, repair = row["artifact_ref"], row["decision"], row["fix_revision"], row["repair"]
        line = f"  review {ref['artifact_id']} r{ref['revision']} (raised at streak {row['streak']}): {row['status']}"
        if decision is not None:
            line += f" by {decision['reviewer']}"
        if row["status"] == "rejected":
            line += f': "{decision["reason"]}"'
        if fix is not None:
            line += (f"; fix {fix['artifact_id']} r{fix['revision']}: repair {repair['status']} "
                     f"(selected {repair['selected']}, recurred {repair['recurred']}, avoided {repair['avoided']})")
        lines.append(line)
    return lines


def effect_lines(rows: list[dict]) -> list[str]:
    """One line per revision with an effect (contract §21.4), in the order
    given:

        effect EXP-a r1: helps, probability_helps 0.9600 (treated 1 of 5 recurred, withheld 4 of 5)

    [] without such revisions."""
    lines = []
    for row in rows:
        ref, effect = row["artifact_ref"], row["effect"]
        probability = "n/a" if effect["probability_helps"] is None else f"{effect['probability_helps']:.4f}"
        treated, withheld = effect["treated"], effect["withheld"]
        line = (f"  effect {ref['artifact_id']} r{ref['revision']}: {effect['verdict']}, probability_helps {probability} "
                f"(treated {treated['recurred']} of {treated['resolved']} recurred, withheld {withheld['recurred']} of {withheld['resolved']})")
        if effect["assignment_mismatches"]:
            line += f", {effect['assignment_mismatches']} assignment mismatches"
        lines.append(line)
    return lines


def admission_lines(admission: Counter) -> list[str]:
    """The admission summary of a run, one line per figure, so that a
    candidate rejected for three reasons reads as one rejection:

        admission: 2 candidates
          1 accepted
          1 rejected — reasons: cue_restates_outcome, no_failure_evidence
          1 with near-duplicate suggestions

    With several rejected candidates each reason carries the number of
    candidates giving it (one candidate can give several). [] without
    candidates. ``admission`` is ``RunSummary.admission``."""
    counts = dict(admission)
    accepted, rejected, near = (counts.pop(name, 0) for name in ("accepted", "rejected", "near_duplicates"))
    if not accepted + rejected:
        return []
    lines = [f"admission: {counted(accepted + rejected, 'candidate')}", f"  {accepted} accepted"]
    reasons = sorted((reason, count) for reason, count in counts.items() if count)
    if rejected == 1:
        lines.append(f"  1 rejected — reasons: {', '.join(reason for reason, _ in reasons)}")
    elif rejected:
        given = ", ".join(f"{reason} {count}" for reason, count in reasons)
        lines.append(f"  {rejected} rejected — reasons (candidates giving each; one candidate can give several): {given}")
    else:
        lines.append("  0 rejected")
    lines.append(f"  {near} with near-duplicate suggestions")
    return lines


#: run-journal's exit code when journal lines were dead-lettered: not 1 (an
#: error that stopped the run) and not 2 (a usage error): the run finished,
#: but part of the journal is not in the ledger — with one bad early line
#: (say an Experience revision), every outcome that relied on it counts
#: differently, and nothing else would tell.
DEAD_LETTERS_EXIT = 3


def warn_dead_letters(summary: RunSummary, out_dir: Path) -> None:
    """A loud warning on stderr: how many journal lines were dead-lettered,
    by reason, and where they are."""
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(summary.dead_letter_reasons.items()))
    stderr_console().print(
        f"WARNING: {summary.dead_letters} of {summary.lines} journal lines were dead-lettered ({reasons}) and are not "
        f"in the ledger; every event that relied on them may count differently. See {out_dir}/dead-letter.jsonl.",
        style="bold red", highlight=False, soft_wrap=True,
    )


@takes(ledger=LEDGER_POLICY)
def run_journal_command(
    journal: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="Journal file (JSON Lines).")],
    out: Annotated[Path, typer.Option("--out", file_okay=False, help="Output directory: one <topic>.jsonl per output topic.")],
    ledger: LedgerConfig,
    view_batch: ViewBatchOption = policy.DEFAULT_VIEW_BATCH,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar, no summary.")] = False,
    allow_dead_letters: Annotated[bool, typer.Option("--allow-dead-letters", help=f"Exit 0 even when journal lines were dead-lettered (the warning is still printed); without it such a run exits {DEAD_LETTERS_EXIT}.")] = False,
    jobs: JobsOption = policy.JOBS.default,
) -> None:
    """Process a journal file with the embedded runner (contract §11).

    Exit code: 0 when every line was applied; 3 when any line was
    dead-lettered (a warning with the count is printed; the output files are
    complete all the same), unless --allow-dead-letters; 2 for a usage error."""
    from recurrence_ledger.embedded.parallel import run_journal_jobs

    check_journal(journal, out)
    with reporting_run_errors(journal, out):
        summary = run_journal_jobs(journal, out, ledger, jobs, show_progress=not quiet, view_batch=view_batch)
    if not quiet:
        print_summary(summary, out)
    if summary.dead_letters:
        warn_dead_letters(summary, out)
        if not allow_dead_letters:
            raise typer.Exit(DEAD_LETTERS_EXIT)


#: Default output folder of `run` on the embedded runner, in the current
#: directory: one stable place, overwritten by the next run.
DEFAULT_RUN_OUT = Path("recurrence-ledger-out")


@takes(worker=WORKER_OPERATION.with_defaults(create_topics=DEFAULT_PARTITIONS), ledger=LEDGER_POLICY)
def run_command(
    ctx: typer.Context,
    journal: Annotated[Optional[Path], typer.Argument(exists=True, dir_okay=False, help="Journal for the embedded runner (default: the packaged example journal openapi_drift.jsonl).")] = None,
    out: Annotated[
        Optional[Path], typer.Option("--out", file_okay=False, help=f"Output directory of the embedded runner (default: ./{DEFAULT_RUN_OUT}, overwritten by the next run).")
    ] = None,
    topic_prefix: Annotated[str, topic_prefix_option("Deployment prefix of every topic.", rich_help_panel=WORKER_PANEL)] = "",
    *,
    worker: dict[str, Any],
    ledger: LedgerConfig,
    kafka_config: Annotated[Optional[Path], kafka_config_option(
        "Kafka client properties file (Java client.properties format; see docs/kafka.md); with it, or with KAFKA_BOOTSTRAP_SERVERS set, run is the worker.",
        rich_help_panel=WORKER_PANEL)] = None,
    view_batch: ViewBatchOption = policy.DEFAULT_VIEW_BATCH,
) -> None:
    """The main job: the Kafka worker, or the embedded runner without Kafka.

    With KAFKA_BOOTSTRAP_SERVERS set, or a --kafka-config file
    (KAFKA_CONFIG_FILE), run is the Kafka worker with the worker's
    operational options below (the bootstrap comes from
    KAFKA_BOOTSTRAP_SERVERS, else the file's bootstrap.servers; a Schema
    Registry from SCHEMA_REGISTRY_URL or the file; missing topics are
    created with 8 partitions).
    Otherwise it runs the embedded runner on JOURNAL (default: the packaged
    example journal openapi_drift.jsonl) and writes one <topic>.jsonl per
    output topic into --out."""
    given = {name: on_command_line(ctx, name) for name in ("topic_prefix", "kafka_config", *WORKER_OPERATION.names)}
    if settings().bootstrap_servers or kafka_config is not None:
        if journal is not None or out is not None:
            console.print(
                "Kafka is configured (KAFKA_BOOTSTRAP_SERVERS, or a --kafka-config / KAFKA_CONFIG_FILE file), so `run` starts "
                "the Kafka worker, which reads topics, not files: load a journal with `recurrence-ledger publish JOURNAL` and "
                "read results with `recurrence-ledger export`; or unset both to run JOURNAL with the embedded runner.",
                style="red",
            )
            raise typer.Exit(2)
        from recurrence_ledger.kafka.client_config import bootstrap_of
        from recurrence_ledger.runtime.worker_config import worker_config_from_env

        check_port(worker["metrics_port"], worker["metrics_host"])  # before anything connects
        redis_url = worker.pop("redis_url")
        connection = kafka_connection(settings().bootstrap_servers, kafka_config)
        worker_config = worker_config_from_env(ledger, bootstrap=connection, topic_prefix=topic_prefix, **worker)
        registry = command_registry(settings().schema_registry_url, None, kafka_config)
        worker_config = replace(worker_config, schema_registry=registry or worker_config.schema_registry)
        where = "KAFKA_BOOTSTRAP_SERVERS is set" if settings().bootstrap_servers else f"from {kafka_config}"
        console.print(
            f"Kafka worker on {bootstrap_of(connection)} ({where}), topic prefix {topic_prefix!r}"
            + (f", metrics on {worker['metrics_host']}:{worker['metrics_port']}/metrics" if worker["metrics_port"] else ""),
            style="bold", highlight=False,
        )
        _run_worker_or_exit(worker_config, redis_url)
        return
    kafka_only = [f"--{name.replace('_', '-')}" for name, on_command_line in given.items() if on_command_line]
    if kafka_only:
        raise typer.BadParameter(
            "only the Kafka worker takes it, and KAFKA_BOOTSTRAP_SERVERS is not set: `run` runs the embedded runner "
            "on a journal file. Set KAFKA_BOOTSTRAP_SERVERS to run the worker.",
            param_hint=", ".join(f"'{name}'" for name in kafka_only),
        )
    from recurrence_ledger.embedded.runner import run_journal

    out_dir = out or DEFAULT_RUN_OUT
    with reporting_run_errors(journal or EXAMPLE_JOURNAL, out_dir):
        if journal is None:
            with resources.as_file(resources.files("recurrence_ledger.examples") / EXAMPLE_JOURNAL) as packaged:
                console.print(
                    f"embedded runner (KAFKA_BOOTSTRAP_SERVERS is not set): packaged journal {EXAMPLE_JOURNAL} → {out_dir}/",
                    style="bold", highlight=False,
                )
                summary = run_journal(packaged, out_dir, ledger, view_batch=view_batch)
        else:
            check_journal(journal, out_dir)
            console.print(f"embedded runner (KAFKA_BOOTSTRAP_SERVERS is not set): {journal} → {out_dir}/", style="bold", highlight=False)
            summary = run_journal(journal, out_dir, ledger, view_batch=view_batch)
    print_summary(summary, out_dir)
    if summary.dead_letters:
        warn_dead_letters(summary, out_dir)  # the demo warns but exits 0; run-journal is the one for scripts
    if out is None:
        console.print(f"(the default folder ./{DEFAULT_RUN_OUT}: the next run overwrites it; --out DIR for another one)", style="dim", highlight=False)


def _run_worker_or_exit(config, redis_url: str | None = None) -> None:  # noqa: ANN001 - lazy import
    """Run the worker ``config``; with ``redis_url``, with its view follower
    in the same process (composed by the read side, ``cli.beside``)."""
    from confluent_kafka import KafkaException

    from recurrence_ledger.kafka.kafka_admin import CoPartitionError
    from recurrence_ledger.runtime.catch_up import NOT_CAUGHT_UP_EXIT, NotCaughtUp
    from recurrence_ledger.runtime.changelog_guard import CHANGELOG_LOST_EXIT, ChangelogLost
    from recurrence_ledger.runtime.checkpoint import RESTART_EXIT, ChangelogUntracked, RestartRequired
    from recurrence_ledger.store.base import StoreError
    from recurrence_ledger.runtime.worker import run_worker

    if redis_url:
        check_redis_url(redis_url)
    with refusing_to_start(CoPartitionError):
        with reporting_kafka_errors():
            try:
                if redis_url:
                    from recurrence_ledger.cli.beside import run_worker_with_follower

                    run_worker_with_follower(config, redis_url)
                else:
                    run_worker(config)
            except NotCaughtUp as error:
                console.print(f"error: batch run stopped before the group caught up, outputs are incomplete: {error}", style="red", highlight=False)
                raise typer.Exit(NOT_CAUGHT_UP_EXIT) from None
            except ChangelogLost as error:
                console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True, markup=False)
                raise typer.Exit(CHANGELOG_LOST_EXIT) from None
            except (RestartRequired, ChangelogUntracked) as error:  # a Kafka client cannot go on: the supervisor restarts it
                console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True, markup=False)
                raise typer.Exit(RESTART_EXIT) from None
            except KafkaException as error:
                # A client in librdkafka's fatal state (a producer fenced after its transaction timed out) never
                # works again, wherever the error surfaced: a restart is the cure, not a user's mistake (exit 1).
                if not (error.args and error.args[0].fatal()):
                    raise
                console.print(f"error: {error.args[0]}: exiting for a restart", style="red", highlight=False, soft_wrap=True, markup=False)
                raise typer.Exit(RESTART_EXIT) from None
            except StoreError as error:  # --state-dir: what is committed is on the changelog
                console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
                raise typer.Exit(RESTART_EXIT if error.restartable else 1) from None


@takes(worker=WORKER_OPERATION, ledger=LEDGER_POLICY)
def worker_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    *,
    worker: dict[str, Any],
    ledger: LedgerConfig,
    schema_registry_url: RegistryOption = None,
    auto_register: AutoRegisterOption = None,
    accept_unicode_change: AcceptUnicodeOption = False,
    accept_holdout_change: AcceptHoldoutOption = False,
    processes: ProcessesOption = policy.WORKER_PROCESSES.default,
) -> None:
    """Run the ledger as a Kafka stream processor (exactly-once outputs).

    With more than one process (the processes option), a supervisor runs
    that many worker processes in the consumer group (instance ids <instance id>-0 … -N-1), restarts one that
    exits with code 3 or is killed, stops them all on SIGTERM, serves all
    their metrics on the metrics port (a process label) and runs the view
    follower (the Redis URL) once, in itself."""
    from recurrence_ledger.runtime.worker_config import WorkerConfig

    check_port(worker["metrics_port"], worker["metrics_host"])  # before anything connects
    redis_url = worker.pop("redis_url")
    config = WorkerConfig(
        bootstrap=kafka_connection(bootstrap, kafka_config),
        topic_prefix=topic_prefix,
        ledger=ledger,
        schema_registry=command_registry(schema_registry_url, auto_register, kafka_config),
        accept_unicode_change=accept_unicode_change,
        accept_holdout_change=accept_holdout_change,
        **worker,
    )
    if processes > 1:
        from recurrence_ledger.cli.beside import supervise
        from recurrence_ledger.kafka.kafka_admin import CoPartitionError
        from recurrence_ledger.runtime.checkpoint import RESTART_EXIT
        from recurrence_ledger.runtime.worker_config import prepare_topics
        from recurrence_ledger.settings import configure_logging

        if redis_url:
            check_redis_url(redis_url)
        configure_logging()
        with refusing_to_start(CoPartitionError), reporting_kafka_errors():
            prepare_topics(config)  # once, before the worker processes start
        raise typer.Exit(supervise(config, processes, worker_process, redis_url, RESTART_EXIT))
    _run_worker_or_exit(config, redis_url)


def worker_process(config) -> None:  # noqa: ANN001 - a WorkerConfig, imported lazily
    """One worker process of ``worker --processes N`` (``cli.beside.Supervisor``
    spawns it): the worker ``config`` without a follower, exiting with the
    code ``worker`` exits with."""
    try:
        _run_worker_or_exit(config)
    except typer.Exit as done:
        sys.exit(done.exit_code)
