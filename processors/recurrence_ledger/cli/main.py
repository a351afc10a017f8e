"""The ``recurrence-ledger`` command line.

``run`` is the main job: the Kafka worker when KAFKA_BOOTSTRAP_SERVERS is
set, otherwise the embedded runner on a journal (by default the minimum
checkable evidence case shipped with the package). ``run-journal`` is
contract §11 exactly.

Help texts are plain text (Typer's rich markup mode, no Markdown or RST
markup): a command's docstring is its help, its first paragraph one short
line (the commands list shows it), its later paragraphs reflowed to the
terminal's width by :func:`reflow_help` (docstring line breaks are not
kept).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import sys
from collections import Counter
from importlib import resources
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from recurrence_ledger.embedded import DEFAULT_VIEW_BATCH, RunSummary, run_journal, stdout_console
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.settings import (
    ENV_ACCEPT_UNICODE_CHANGE,
    DEFAULT_APP_ID,
    DEFAULT_MAX_WAIT_CAUGHT_UP_S,
    ENV_APP_ID,
    ENV_BOOTSTRAP_SERVERS,
    ENV_INSTANCE_ID,
    ENV_KAFKA_CONFIG_FILE,
    ENV_METRICS_PORT,
    ENV_REDIS_URL,
    ENV_SCHEMA_REGISTRY_URL,
    ENV_TOPIC_PREFIX,
    kafka_environment,
    settings,
)
from recurrence_ledger import catalogue, policy
from recurrence_ledger.catalogue import DEFAULT_MAX_OUTPUT_BYTES
from recurrence_ledger.cli.history import DEFAULT_HISTORY_LIMIT, DEFAULT_TREND_LIMIT, HistoryLimitOption, TrendLimitOption, rebuild_history

app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode="rich",
    help="recurrence-ledger: did what the agents learned from a failure help?",
    # A traceback must not print local variables: they hold Redis URLs with passwords.
    pretty_exceptions_show_locals=False,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"recurrence-ledger {version('recurrence-ledger')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """recurrence-ledger: did what the agents learned from a failure help?"""
console = stdout_console()

EXAMPLE_JOURNAL = "openapi_drift.jsonl"

#: Help panels grouping the options of the commands that run the ledger.
WORKER_PANEL = "Kafka worker operation"
POLICY_PANEL = "Ledger policy"

ThresholdOption = Annotated[int, typer.Option("--review-threshold", min=1, rich_help_panel=POLICY_PANEL, help="Streak at which a revision needs review (contract §8).")]
TopOption = Annotated[int, typer.Option("--top-revisions", min=0, rich_help_panel=POLICY_PANEL, help="N of top_revisions (contract §8).")]
HorizonOption = Annotated[
    Optional[int],
    typer.Option("--provenance-horizon", min=1, rich_help_panel=POLICY_PANEL, help="Journal positions a pending outcome may wait (contract §5); end of file always decides."),
]


ViewBatchOption = Annotated[
    int,
    typer.Option("--view-batch", min=1,
                 help="Embedded runner: journal records per batch of the view files (at most one record per changed key per batch, contract §8)."),
]


PendingCandidatesOption = Annotated[
    int,
    typer.Option("--max-pending-candidates", min=1, envvar=policy.MAX_PENDING_CANDIDATES.env, rich_help_panel=POLICY_PANEL,
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
    for line in admission_lines(summary.admission):
        console.print(line, highlight=False)
    counts = ", ".join(f"{topic} {count}" for topic, count in summary.records.items())
    console.print(f"{summary.lines} journal records → {counts}", highlight=False)
    console.print(f"output files: {out_dir.resolve()}/<topic>.jsonl (one per output topic)", highlight=False)


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
    lines = [f"admission: {accepted + rejected} candidate{'s' if accepted + rejected != 1 else ''}", f"  {accepted} accepted"]
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
    Console(stderr=True).print(
        f"WARNING: {summary.dead_letters} of {summary.lines} journal lines were dead-lettered ({reasons}) and are not "
        f"in the ledger; every event that relied on them may count differently. See {out_dir}/dead-letter.jsonl.",
        style="bold red", highlight=False, soft_wrap=True,
    )


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
    allow_dead_letters: Annotated[bool, typer.Option("--allow-dead-letters", help=f"Exit 0 even when journal lines were dead-lettered (the warning is still printed); without it such a run exits {DEAD_LETTERS_EXIT}.")] = False,
) -> None:
    """Process a journal file with the embedded runner (contract §11).

    Exit code: 0 when every line was applied; 3 when any line was
    dead-lettered (a warning with the count is printed; the output files are
    complete all the same), unless --allow-dead-letters; 2 for a usage error."""
    summary = run_journal(journal, out, _config(review_threshold, top_revisions, provenance_horizon, max_pending_candidates), show_progress=not quiet,
                          view_batch=view_batch)
    if not quiet:
        print_summary(summary, out)
    if summary.dead_letters:
        warn_dead_letters(summary, out)
        if not allow_dead_letters:
            raise typer.Exit(DEAD_LETTERS_EXIT)


#: Default output folder of `run` on the embedded runner, in the current
#: directory: one stable place, overwritten by the next run.
DEFAULT_RUN_OUT = Path("recurrence-ledger-out")

AppIdOption = Annotated[str, typer.Option("--app-id", envvar=ENV_APP_ID, rich_help_panel=WORKER_PANEL, help="Consumer group id and changelog prefix.")]
InstanceIdOption = Annotated[
    Optional[str],
    typer.Option("--instance-id", envvar=ENV_INSTANCE_ID, rich_help_panel=WORKER_PANEL, help="Stable id of this worker (transactional id suffix; default: host name)."),
]
OutputFormatOption = Annotated[str, typer.Option("--output-format", rich_help_panel=WORKER_PANEL, help="avro (Confluent-framed) or json.")]
#: What every --redis-url help says about the URL.
REDIS_URL_HELP = (
    "redis://user:password@host:port/db, or rediss://… for TLS (CA: ?ssl_ca_certs=FILE or RL_REDIS_CA_FILE); "
    "prefer the REDIS_URL variable for a URL with a password (command lines are visible to other users)"
)
WorkerRedisOption = Annotated[
    Optional[str],
    typer.Option("--redis-url", envvar=ENV_REDIS_URL, show_default=False, rich_help_panel=WORKER_PANEL, help=f"Redis for the statistics view (optional): {REDIS_URL_HELP}."),
]
CommitIntervalOption = Annotated[int, typer.Option("--commit-interval-ms", min=10, rich_help_panel=WORKER_PANEL, help="Transaction commit interval.")]
MaxBatchOption = Annotated[int, typer.Option("--max-batch", min=1, rich_help_panel=WORKER_PANEL, help="Records consumed per poll.")]
ExitWhenIdleOption = Annotated[
    Optional[float], typer.Option("--exit-when-idle", rich_help_panel=WORKER_PANEL, help="Stop after this many seconds without input (batch jobs).")
]
MaxWaitCaughtUpOption = Annotated[
    float,
    typer.Option(
        "--max-wait-caught-up", min=0, rich_help_panel=WORKER_PANEL,
        help="With --exit-when-idle: how long to wait, idle and without progress of the group, for every input partition of the group "
             "to be committed to its end (exit 0); then exit 4 naming the partitions left.",
    ),
]
StaticMembershipOption = Annotated[
    bool,
    typer.Option(
        "--static-membership/--dynamic-membership", rich_help_panel=WORKER_PANEL,
        help="Static group membership (group.instance.id = --instance-id): a restarted instance takes its partitions back at once; "
             "a stopped one keeps them until its session times out.",
    ),
]
SessionTimeoutOption = Annotated[
    int, typer.Option("--session-timeout-ms", min=1, rich_help_panel=WORKER_PANEL, help="Consumer group session timeout (the broker allows 6,000–1,800,000 by default).")
]
CreateTopicsOption = Annotated[
    Optional[int],
    typer.Option("--create-topics", min=1, rich_help_panel=WORKER_PANEL, help="Create missing catalogue topics with this many partitions first."),
]
MetricsPortOption = Annotated[
    Optional[int],
    typer.Option("--metrics-port", envvar=ENV_METRICS_PORT, rich_help_panel=WORKER_PANEL, help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics."),
]
MaxOutputBytesOption = Annotated[
    int,
    typer.Option(
        "--max-output-bytes", min=256, rich_help_panel=WORKER_PANEL,
        help="Largest output value; a record with a larger output is dead-lettered (oversized_output). Dead letters themselves are not held to it.",
    ),
]
#: The worker's operational options (WorkerConfig fields) that `run` takes as well.
WORKER_OPTIONS = (
    "app_id", "instance_id", "output_format", "redis_url", "commit_interval_ms", "max_batch", "exit_when_idle", "create_topics",
    "metrics_port", "max_output_bytes", "max_wait_caught_up", "static_membership", "session_timeout_ms",
)


def _on_command_line(ctx: typer.Context, name: str) -> bool:
    """Whether parameter ``name`` was given on the command line (not from
    its default or environment variable)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


@app.command("run")
def run_command(
    ctx: typer.Context,
    journal: Annotated[Optional[Path], typer.Argument(exists=True, dir_okay=False, help="Journal for the embedded runner (default: the packaged example journal openapi_drift.jsonl).")] = None,
    out: Annotated[
        Optional[Path], typer.Option("--out", file_okay=False, help=f"Output directory of the embedded runner (default: ./{DEFAULT_RUN_OUT}, overwritten by the next run).")
    ] = None,
    topic_prefix: Annotated[str, typer.Option("--topic-prefix", envvar=ENV_TOPIC_PREFIX, rich_help_panel=WORKER_PANEL, help="Deployment prefix of every topic.")] = "",
    app_id: AppIdOption = DEFAULT_APP_ID,
    instance_id: InstanceIdOption = None,
    output_format: OutputFormatOption = "avro",
    redis_url: WorkerRedisOption = None,
    commit_interval_ms: CommitIntervalOption = 100,
    max_batch: MaxBatchOption = 2_000,
    exit_when_idle: ExitWhenIdleOption = None,
    max_wait_caught_up: MaxWaitCaughtUpOption = DEFAULT_MAX_WAIT_CAUGHT_UP_S,
    static_membership: StaticMembershipOption = True,
    session_timeout_ms: SessionTimeoutOption = 10_000,
    create_topics: CreateTopicsOption = 8,
    metrics_port: MetricsPortOption = None,
    max_output_bytes: MaxOutputBytesOption = DEFAULT_MAX_OUTPUT_BYTES,
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    provenance_horizon: HorizonOption = 10_000,
    max_pending_candidates: PendingCandidatesOption = 5_000,
    kafka_config: Annotated[Optional[Path], typer.Option("--kafka-config", envvar=ENV_KAFKA_CONFIG_FILE, dir_okay=False, show_default=False, rich_help_panel=WORKER_PANEL,
        help="Kafka client properties file (Java client.properties format; see docs/kafka.md); with KAFKA_BOOTSTRAP_SERVERS set, run is the worker.")] = None,
    view_batch: ViewBatchOption = DEFAULT_VIEW_BATCH,
) -> None:
    """The main job: the Kafka worker, or the embedded runner without Kafka.

    With KAFKA_BOOTSTRAP_SERVERS set, run is the Kafka worker with the
    worker's operational options below (the bootstrap comes from
    KAFKA_BOOTSTRAP_SERVERS, a Schema Registry from SCHEMA_REGISTRY_URL or
    the --kafka-config file; missing topics are created with 8 partitions).
    Otherwise it runs the embedded runner on JOURNAL (default: the packaged
    example journal openapi_drift.jsonl) and writes one <topic>.jsonl per
    output topic into --out."""
    config = _config(review_threshold, top_revisions, provenance_horizon, max_pending_candidates)
    given = {name: _on_command_line(ctx, name) for name in ("topic_prefix", "kafka_config", *WORKER_OPTIONS)}
    if settings().bootstrap_servers:
        if journal is not None or out is not None:
            console.print(
                "KAFKA_BOOTSTRAP_SERVERS is set, so `run` starts the Kafka worker, which reads topics, not files: "
                "load a journal with `recurrence-ledger publish JOURNAL` and read results with `recurrence-ledger export`; "
                "or unset KAFKA_BOOTSTRAP_SERVERS to run JOURNAL with the embedded runner.",
                style="red",
            )
            raise typer.Exit(2)
        from recurrence_ledger.runtime.worker_config import worker_config_from_env

        worker_config = worker_config_from_env(
            config, topic_prefix=topic_prefix, app_id=app_id, instance_id=instance_id, output_format=output_format,
            commit_interval_ms=commit_interval_ms, max_batch=max_batch, exit_when_idle_s=exit_when_idle,
            create_partitions=create_topics, metrics_port=metrics_port, max_output_bytes=max_output_bytes,
            max_wait_caught_up_s=max_wait_caught_up, static_membership=static_membership, session_timeout_ms=session_timeout_ms,
        )
        connection = _connect(settings().bootstrap_servers, kafka_config)
        registry = _registry(settings().schema_registry_url, None, kafka_config)
        worker_config = replace(worker_config, bootstrap=connection, schema_registry=registry or worker_config.schema_registry)
        console.print(
            f"Kafka worker on {settings().bootstrap_servers} (KAFKA_BOOTSTRAP_SERVERS is set), topic prefix {topic_prefix!r}"
            + (f", metrics on 127.0.0.1:{metrics_port}/metrics" if metrics_port else ""),
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
    out_dir = out or DEFAULT_RUN_OUT
    try:
        if journal is None:
            with resources.as_file(resources.files("recurrence_ledger.examples") / EXAMPLE_JOURNAL) as packaged:
                console.print(
                    f"embedded runner (KAFKA_BOOTSTRAP_SERVERS is not set): packaged journal {EXAMPLE_JOURNAL} → {out_dir}/",
                    style="bold", highlight=False,
                )
                summary = run_journal(packaged, out_dir, config, view_batch=view_batch)
        else:
            console.print(f"embedded runner (KAFKA_BOOTSTRAP_SERVERS is not set): {journal} → {out_dir}/", style="bold", highlight=False)
            summary = run_journal(journal, out_dir, config, view_batch=view_batch)
    except OSError as error:
        console.print(f"error: cannot write the output files to {out_dir}: {error}; choose a folder with --out DIR", style="red", highlight=False)
        raise typer.Exit(1) from None
    print_summary(summary, out_dir)
    if summary.dead_letters:
        warn_dead_letters(summary, out_dir)  # the demo warns but exits 0; run-journal is the one for scripts
    if out is None:
        console.print(f"(the default folder ./{DEFAULT_RUN_OUT}: the next run overwrites it; --out DIR for another one)", style="dim", highlight=False)


# -- Kafka ------------------------------------------------------------------------

BootstrapOption = Annotated[Optional[str], typer.Option("--bootstrap", envvar=ENV_BOOTSTRAP_SERVERS, help="Kafka bootstrap servers (default: bootstrap.servers of the --kafka-config file).")]
KafkaConfigOption = Annotated[
    Optional[Path],
    typer.Option("--kafka-config", envvar=ENV_KAFKA_CONFIG_FILE, dir_okay=False, show_default=False,
                 help="Kafka client properties file (Java client.properties format: security.protocol, SASL, trust store; see docs/kafka.md). KAFKA_* variables override it."),
]
PrefixOption = Annotated[str, typer.Option("--topic-prefix", envvar=ENV_TOPIC_PREFIX, help="Deployment prefix of every topic (contract §1).")]
FormatOption = Annotated[str, typer.Option("--format", help="Value format: avro (Confluent-framed) or json.")]
#: What ``topics delete`` says of the subjects when no registry is configured.
NO_REGISTRY = "no Schema Registry configured (--schema-registry-url, SCHEMA_REGISTRY_URL or schema.registry.url in --kafka-config)"
RegistryOption = Annotated[
    Optional[str],
    typer.Option("--schema-registry-url", envvar=ENV_SCHEMA_REGISTRY_URL,
                 help="Schema Registry (Confluent API) whose ids frame Avro values; without it, the catalogue's fixed ids."),
]
AutoRegisterOption = Annotated[
    Optional[bool],
    typer.Option("--auto-register/--no-auto-register",
                 help="With a Schema Registry: register our schemas under <topic>-value (default), or only look them up."),
]


def _registry(url: str | None, auto_register: bool | None = None, kafka_config: Path | None = None):  # noqa: ANN202 - lazy import
    """The registry settings of a command, or None (fixed-id framing):
    ``--schema-registry-url`` / SCHEMA_REGISTRY_URL, or the registry keys
    (``schema.registry.url``, ``basic.auth.user.info``, …) of the
    ``--kafka-config`` file. Exit 2 for unusable registry settings."""
    from recurrence_ledger.runtime.client_config import ClientConfigError
    from recurrence_ledger.runtime.client_properties import is_registry_key, read_properties
    from recurrence_ledger.serde.registry import registry_settings

    try:
        properties = {k: v for k, v in read_properties(kafka_config).items() if is_registry_key(k)} if kafka_config else {}
        return registry_settings(url, properties, auto_register=auto_register)
    except (ClientConfigError, ValueError) as error:
        console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _codec(url: str | None, auto_register: bool | None = None, kafka_config: Path | None = None):  # noqa: ANN202 - lazy import
    """The value codec of a command (recurrence_ledger.serde.codec)."""
    from recurrence_ledger.serde.codec import make_codec

    return make_codec(_registry(url, auto_register, kafka_config))


@contextlib.contextmanager
def _kafka_errors():
    """Turn the errors a user can cause (missing topics, no broker, a topic
    outside the catalogue, a Schema Registry that refuses or does not
    answer, values framed for another codec) into one red line and exit
    code 1."""
    from confluent_kafka import KafkaException

    from recurrence_ledger.runtime.kafka_io import UndecodableRecord
    from recurrence_ledger.serde.codec import RegistryError

    try:
        yield
    except (LookupError, KafkaException, TimeoutError, RegistryError, UndecodableRecord) as error:
        message = error.args[0] if isinstance(error, KafkaException) and error.args else error
        console.print(f"error: {message}", style="red", highlight=False)
        raise typer.Exit(1) from None


def _connect(bootstrap: str | None, kafka_config: Path | None):  # noqa: ANN202 - lazy import
    """The command's Kafka connection (``--bootstrap`` + ``--kafka-config`` +
    KAFKA_* overrides), checked within client_config.CONNECT_TIMEOUT_S:
    exit 2 for unusable settings, 1 when the cluster cannot be reached or
    refuses the credentials or the TLS handshake. Never prints a secret."""
    from recurrence_ledger.runtime.client_config import ClientConfigError, KafkaConnectionError, check_connection
    from recurrence_ledger.runtime.client_properties import load_connection

    try:
        connection = load_connection(bootstrap, kafka_config, kafka_environment())
        check_connection(connection)
    except ClientConfigError as error:
        console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except KafkaConnectionError as error:
        console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    return connection


def _run_worker_or_exit(config, redis_url: str | None = None) -> None:  # noqa: ANN001 - lazy import
    """Run the worker ``config``; with ``redis_url``, with its view follower
    in the same process (composed by the read side, read.beside)."""
    from recurrence_ledger.runtime.kafka_admin import CoPartitionError
    from recurrence_ledger.runtime.catch_up import NOT_CAUGHT_UP_EXIT, NotCaughtUp
    from recurrence_ledger.runtime.worker import run_worker

    with _refusing_to_start(CoPartitionError):
        with _kafka_errors():
            try:
                if redis_url:
                    from recurrence_ledger.read.beside import run_worker_with_follower

                    run_worker_with_follower(config, redis_url)
                else:
                    run_worker(config)
            except NotCaughtUp as error:
                console.print(f"error: batch run stopped before the group caught up, outputs are incomplete: {error}", style="red", highlight=False)
                raise typer.Exit(NOT_CAUGHT_UP_EXIT) from None


@contextlib.contextmanager
def _refusing_to_start(*errors: type[Exception]):
    """Turn a refusal to start (topics not co-partitioned, or a state built
    on another Unicode version, contract §10) into one red line and exit
    code 2."""
    from recurrence_ledger.ledger.state import UnicodeVersionChanged

    try:
        yield
    except (UnicodeVersionChanged, *errors) as error:
        console.print(f"refusing to start: {error}", style="red", highlight=False)
        raise typer.Exit(2) from None


AcceptUnicodeOption = Annotated[
    bool,
    typer.Option("--accept-unicode-change", envvar=ENV_ACCEPT_UNICODE_CHANGE,
                 help="Start even though the deployment's state was built on another Unicode version (contract §10; docs/upgrading.md)."),
]


def _check_topic(topic: str) -> str:

    if topic not in catalogue.BY_NAME:
        raise typer.BadParameter(f"{topic!r} is not a catalogue topic; one of: {', '.join(catalogue.BY_NAME)}", param_hint="TOPIC")
    return topic


@app.command("worker")
def worker_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    app_id: AppIdOption = DEFAULT_APP_ID,
    instance_id: InstanceIdOption = None,
    output_format: OutputFormatOption = "avro",
    redis_url: WorkerRedisOption = None,
    commit_interval_ms: CommitIntervalOption = 100,
    max_batch: MaxBatchOption = 2_000,
    exit_when_idle: ExitWhenIdleOption = None,
    max_wait_caught_up: MaxWaitCaughtUpOption = DEFAULT_MAX_WAIT_CAUGHT_UP_S,
    static_membership: StaticMembershipOption = True,
    session_timeout_ms: SessionTimeoutOption = 10_000,
    create_topics: CreateTopicsOption = None,
    metrics_port: MetricsPortOption = None,
    max_output_bytes: MaxOutputBytesOption = DEFAULT_MAX_OUTPUT_BYTES,
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    provenance_horizon: HorizonOption = 10_000,
    max_pending_candidates: PendingCandidatesOption = 5_000,
    schema_registry_url: RegistryOption = None,
    auto_register: AutoRegisterOption = None,
    accept_unicode_change: AcceptUnicodeOption = False,
) -> None:
    """Run the ledger as a Kafka stream processor (exactly-once outputs)."""
    from recurrence_ledger.runtime.worker_config import WorkerConfig

    config = WorkerConfig(
        bootstrap=_connect(bootstrap, kafka_config),
        app_id=app_id,
        topic_prefix=topic_prefix,
        output_format=output_format,
        commit_interval_ms=commit_interval_ms,
        max_batch=max_batch,
        exit_when_idle_s=exit_when_idle,
        max_wait_caught_up_s=max_wait_caught_up,
        static_membership=static_membership,
        session_timeout_ms=session_timeout_ms,
        create_partitions=create_topics,
        metrics_port=metrics_port,
        max_output_bytes=max_output_bytes,
        ledger=_config(review_threshold, top_revisions, provenance_horizon, max_pending_candidates),
        schema_registry=_registry(schema_registry_url, auto_register, kafka_config),
        **({"instance_id": instance_id} if instance_id else {}),
        accept_unicode_change=accept_unicode_change,
    )
    _run_worker_or_exit(config, redis_url)


topics_app = typer.Typer(help="The topic catalogue (contract §1).", no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(topics_app, name="topics")


@topics_app.command("create")
def topics_create_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    partitions: Annotated[int, typer.Option("--partitions", min=1, help="Partitions of every topic (inputs must be co-partitioned).")] = 8,
    topic_prefix: PrefixOption = "",
    replication: Annotated[int, typer.Option("--replication", min=1)] = 1,
    schema_registry_url: RegistryOption = None,
    auto_register: AutoRegisterOption = None,
) -> None:
    """Create every topic of the catalogue with its settings (idempotent).
    With a Schema Registry, also register our schema under each topic's
    subject and set the subject's compatibility to BACKWARD."""
    from recurrence_ledger.runtime.kafka_admin import create_topics

    connection = _connect(bootstrap, kafka_config)
    with _kafka_errors():
        result = create_topics(connection, partitions, topic_prefix, replication)
        registry = _registry(schema_registry_url, auto_register, kafka_config)
        if registry is not None:
            from recurrence_ledger.serde.codec import make_codec
            from recurrence_ledger.serde.registry import configure_subjects, subject

            subjects = configure_subjects(make_codec(registry), topic_prefix)
            result = {name: f"{outcome}; {subjects[subject(name)]}" if subject(name) in subjects else outcome for name, outcome in result.items()}
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("topic", "cleanup", "schema", "result"):
        table.add_column(column)
    for spec in catalogue.CATALOGUE:
        name = catalogue.physical(spec.name, topic_prefix)
        table.add_row(name, spec.cleanup_policy, spec.schema, result.get(name, "?"))
    console.print(table)


@topics_app.command("delete")
def topics_delete_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    app_id: Annotated[str, typer.Option("--app-id", envvar=ENV_APP_ID, help="The deployment's app id (group and changelog).")] = DEFAULT_APP_ID,
    schema_registry_url: RegistryOption = None,
    yes: Annotated[bool, typer.Option("--yes", help="Really delete; without it, only list what would go.")] = False,
) -> None:
    """Delete a deployment's topics, consumer groups and registry subjects (asks for --yes).

    Deletes the catalogue topics under the prefix, the state changelog and
    the consumer groups of the app id, and with a Schema Registry the
    <topic>-value subjects of the catalogue topics it deleted (soft, then
    permanently). Without --yes it only lists them. Stop the deployment's
    workers first; its Redis keys go with 'recurrence-ledger view clear
    --yes'."""
    from recurrence_ledger.runtime.kafka_admin import delete_deployment, deployment_resources

    topics, groups = deployment_resources(topic_prefix, app_id)
    registry = _registry(schema_registry_url, None, kafka_config)
    catalogue_topics = [catalogue.physical(spec.name, topic_prefix) for spec in catalogue.CATALOGUE]
    if not yes:
        lines = ["would delete (run again with --yes):", f"  topics ({len(topics)}):"]
        lines += [f"    {name}" for name in topics]
        lines.append(f"  consumer groups ({len(groups)}):")
        lines += [f"    {name}" for name in groups]
        if registry is None:
            lines.append(f"  schema registry subjects: none, {NO_REGISTRY}")
        else:
            from recurrence_ledger.serde.registry import subject

            lines.append(f"  schema registry subjects ({len(catalogue_topics)}) at {registry.url}:")
            lines += [f"    {subject(name)}" for name in catalogue_topics]
        console.print("\n".join(lines), highlight=False)
        return
    connection = _connect(bootstrap, kafka_config)
    with _kafka_errors():
        result = delete_deployment(connection, topic_prefix, app_id)
    for label, names in (("topics", topics), ("consumer groups", groups)):
        console.print(f"{label}:", highlight=False)
        for name in names:
            console.print(f"  {name}: {result.get(name, '?')}", highlight=False)
    failed = any(outcome not in ("deleted", "absent") for outcome in result.values())
    if registry is None:
        console.print(f"schema registry subjects: left alone, {NO_REGISTRY}", highlight=False)
    else:
        from recurrence_ledger.serde.registry import delete_subjects

        # Only the subjects of topics that are gone: a topic the broker kept still needs its schema.
        gone = [name for name in catalogue_topics if result.get(name) in ("deleted", "absent")]
        console.print(f"schema registry subjects at {registry.url}:", highlight=False)
        with _kafka_errors():
            subjects = delete_subjects(registry, gone)
        for name, outcome in subjects.items():
            console.print(f"  {name}: {outcome}", highlight=False)
        failed = failed or any(outcome != "absent" and not outcome.startswith("deleted") for outcome in subjects.values())
    if failed:
        raise typer.Exit(1)


@topics_app.command("acls")
def topics_acls_command(
    principal: Annotated[str, typer.Option("--principal", help="Principal to authorize, e.g. User:ledger.")],
    role: Annotated[str, typer.Option("--role", help="worker | upstream (publish) | reader (export, rebuild, explain, view rebuild) | replay | follower (view follow).")] = "worker",
    topic_prefix: PrefixOption = "",
    app_id: Annotated[str, typer.Option("--app-id", envvar=ENV_APP_ID, help="The deployment's app id (group, changelog, transactional ids).")] = DEFAULT_APP_ID,
    create_topics: Annotated[bool, typer.Option("--create-topics", help="worker: also Create on every catalogue topic (the worker's --create-topics); without it an admin runs 'topics create'.")] = False,
    apply: Annotated[bool, typer.Option("--apply", help="Create the bindings with the Admin API (as the --kafka-config principal, e.g. an admin) instead of printing kafka-acls commands.")] = False,
    bootstrap: Annotated[Optional[str], typer.Option("--bootstrap", envvar=ENV_BOOTSTRAP_SERVERS, help="Kafka bootstrap servers (for --apply, and shown in the commands).")] = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """The ACL bindings a principal needs for a role of the deployment
    (docs/kafka.md, "Connecting to your cluster"), as kafka-acls command
    lines; --apply creates them."""
    from recurrence_ledger.runtime.acls import apply_acls, kafka_acls_commands, role_acls

    try:
        acls = role_acls(role, principal, topic_prefix, app_id, create_topics)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--role/--principal") from None
    if not apply:
        for line in kafka_acls_commands(acls, bootstrap or "BOOTSTRAP", str(kafka_config) if kafka_config else "admin.properties"):
            print(line)
        return
    connection = _connect(bootstrap, kafka_config)
    with _kafka_errors():
        result = apply_acls(connection, acls)
    for acl, outcome in result.items():
        print(f"{acl.principal} {acl.operation} {acl.resource_type} {acl.name} ({acl.pattern}): {outcome}")
    if any(outcome != "created" for outcome in result.values()):
        raise typer.Exit(1)


@topics_app.command("list")
def topics_list_command() -> None:
    """Print the catalogue: topic, direction, key, value schema, cleanup, retention, schema id."""

    table = Table(box=box.SIMPLE_HEAD)
    for column in ("topic", "direction", "key", "value", "cleanup", "retention ms", "schema id"):
        table.add_column(column)
    for spec in catalogue.CATALOGUE:
        table.add_row(spec.name, spec.direction, spec.key, spec.schema, spec.cleanup_policy, str(spec.retention_ms), str(spec.schema_id))
    console.print(table)


@app.command("publish")
def publish_command(
    journal: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Journal file (JSON Lines).")],
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    fmt: FormatOption = "avro",
    per_kind: Annotated[bool, typer.Option("--per-kind", help="Publish to the per-kind topics (one per event kind, candidates included) instead of source-journal.")] = False,
    schema_registry_url: RegistryOption = None,
    auto_register: AutoRegisterOption = None,
) -> None:
    """Load a journal file into the input topics (idempotent producer)."""
    from recurrence_ledger.runtime.kafka_io import publish_journal

    connection = _connect(bootstrap, kafka_config)
    with _kafka_errors():
        codec = _codec(schema_registry_url, auto_register, kafka_config)
        summary = publish_journal(connection, journal, fmt=fmt, per_kind=per_kind, topic_prefix=topic_prefix, codec=codec)
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
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    schema_registry_url: RegistryOption = None,
) -> None:
    """Write a topic's committed records to JSON Lines, partition by partition."""
    from recurrence_ledger.runtime.kafka_io import export_topic

    _check_topic(topic)
    connection = _connect(bootstrap, kafka_config)
    with _kafka_errors():
        count = export_topic(connection, topic, out, topic_prefix=topic_prefix, codec=_codec(schema_registry_url, None, kafka_config))
    console.print(f"{count} record{'' if count == 1 else 's'} → {out}")


@app.command("replay")
def replay_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    start: Annotated[str, typer.Option("--from", help="earliest | offsets:TOPIC/P=O,… | timestamp:ISO-8601 | position:N")] = "earliest",
    topic_prefix: PrefixOption = "",
    app_id: Annotated[str, typer.Option("--app-id", envvar=ENV_APP_ID, help="The deployment's app id (its consumer group, changelog and replay group).")] = DEFAULT_APP_ID,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be re-read.")] = False,
    output_format: Annotated[str, typer.Option("--output-format", help="avro (Confluent-framed) or json, as the deployment's workers write.")] = "avro",
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan and the summary as one JSON object.")] = False,
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    provenance_horizon: HorizonOption = 10_000,
    max_pending_candidates: PendingCandidatesOption = 5_000,
    schema_registry_url: RegistryOption = None,
    auto_register: AutoRegisterOption = None,
    accept_unicode_change: AcceptUnicodeOption = False,
) -> None:
    """Re-run the ledger over the input topics, adding only what it lacks.

    Writes only records whose identity is not in the ledger yet (contract
    §6, §10). --dry-run prints the plan only; --json prints the plan and the
    summary as JSON."""
    from recurrence_ledger.runtime.replay import parse_start, run_replay

    try:
        replay_start = parse_start(start)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--from") from None
    connection = _connect(bootstrap, kafka_config)
    with _refusing_to_start(), _kafka_errors():
        summary = run_replay(
            connection, topic_prefix, replay_start, app_id=app_id, output_format=output_format, dry_run=dry_run,
            ledger=_config(review_threshold, top_revisions, provenance_horizon, max_pending_candidates),
            codec=_codec(schema_registry_url, auto_register, kafka_config),
            accept_unicode_change=accept_unicode_change,
        )
    if as_json:
        print(json.dumps(replay_json(summary, dry_run), ensure_ascii=False))
        return
    table = Table(title="replay plan" if dry_run else "replay", box=box.SIMPLE_HEAD)
    for column in ("topic", "partition", "from", "outputs from", "to", "records to re-read"):
        table.add_column(column, justify="left" if column == "topic" else "right")
    for r in summary.ranges:
        table.add_row(r.topic, str(r.partition), str(r.low), str(r.start), str(r.end), str(r.end - r.low))
    console.print(table)
    if not dry_run:
        for line in replay_lines(summary):
            console.print(line, highlight=False)
        if summary.conflicted_scopes:
            console.print(
                f"scopes where the replay decided an outcome differently from the ledger (kept the ledger's decision): "
                f"{', '.join(summary.conflicted_scopes)}",
                style="yellow", highlight=False,
            )


def _per_topic(counts: dict[str, int]) -> str:
    """``topic count, …`` of the topics with a count, sorted; "none" without."""
    return ", ".join(f"{topic} {count}" for topic, count in sorted(counts.items()) if count) or "none"


def replay_lines(summary) -> list[str]:  # noqa: ANN001 - ReplaySummary, imported lazily
    """The summary of a finished replay as lines of text."""
    return [
        f"read {summary.records_read} records in {summary.seconds:.1f} s",
        f"written (records the ledger lacked): {_per_topic(summary.written)}",
        f"not written again (already in the ledger): {_per_topic(summary.suppressed)}",
    ]


def replay_json(summary, dry_run: bool) -> dict:  # noqa: ANN001 - ReplaySummary, imported lazily
    """The plan and summary of a replay as a JSON object: ``dry_run``,
    ``ranges`` (per input topic-partition: topic, partition, from,
    outputs_from, to, records), and for a finished replay
    ``records_read``, ``seconds``, ``written`` and ``already_in_ledger``
    (records per output topic) and ``conflicted_scopes``."""
    body: dict = {
        "dry_run": dry_run,
        "ranges": [
            {"topic": r.topic, "partition": r.partition, "from": r.low, "outputs_from": r.start, "to": r.end, "records": r.end - r.low}
            for r in summary.ranges
        ],
    }
    if not dry_run:
        body.update(
            records_read=summary.records_read, seconds=round(summary.seconds, 3), written=dict(sorted(summary.written.items())),
            already_in_ledger=dict(sorted(summary.suppressed.items())), conflicted_scopes=list(summary.conflicted_scopes),
        )
    return body


@app.command("rebuild")
def rebuild_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    redis_url: Annotated[Optional[str], typer.Option("--redis-url", envvar=ENV_REDIS_URL, show_default=False, help=f"Also rewrite the Redis view: {REDIS_URL_HELP}.")] = None,
    topic_prefix: PrefixOption = "",
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    schema_registry_url: RegistryOption = None,
    app_id: Annotated[str, typer.Option("--app-id", envvar=ENV_APP_ID, help="The deployment's app id (its changelog holds the Unicode pin).")] = DEFAULT_APP_ID,
    accept_unicode_change: AcceptUnicodeOption = False,
    history_limit: HistoryLimitOption = DEFAULT_HISTORY_LIMIT,
    trend_limit: TrendLimitOption = DEFAULT_TREND_LIMIT,
) -> None:
    """Rebuild the derived views from the ledger topics and check them.

    Rebuilds streaks, statistics and the revisions view from the ledger
    topics alone, compares them with the latest statistics and
    revision-statistics records, and with --redis-url rewrites the Redis
    view. Exit code 1 when the rebuilt views differ from the live ones; 2
    when the deployment's state was built on another Unicode version."""
    from recurrence_ledger.runtime.kafka_io import read_topic
    from recurrence_ledger.ledger.rebuild import compare, compare_revisions, rebuild_revisions, rebuild_views, surfaces_from
    from recurrence_ledger.runtime.view_topics import read_revision_statistics_topic, read_statistics_topic
    from recurrence_ledger.read.keys import default_namespace

    connection = _connect(bootstrap, kafka_config)
    from recurrence_ledger.runtime.unicode_pin import check_changelog
    from recurrence_ledger import catalogue

    with _refusing_to_start(), _kafka_errors():
        check_changelog(connection, catalogue.physical(catalogue.changelog_name(app_id), topic_prefix), accept_unicode_change)
    with _kafka_errors():
        codec = _codec(schema_registry_url, None, kafka_config)
        observations = [value for *_, value in read_topic(connection, catalogue.OBSERVATIONS, topic_prefix=topic_prefix, codec=codec)]
        latest = read_statistics_topic(connection, topic_prefix, codec=codec)
        live_rows = [row for rows in read_revision_statistics_topic(connection, topic_prefix, codec=codec).values() for row in rows.values()]
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
        view = _redis_view(redis_url, default_namespace(topic_prefix), review_threshold)
        with _redis_errors(view):
            view.clear()
        view.submit(records, revisions=[rebuilt_rows[key] for key in sorted(rebuilt_rows)])  # writes at once when Redis answers
        view.flush()
        if view.pending:
            console.print(f"Redis at {view.where} did not answer: the view was not rewritten", style="red", highlight=False)
            raise typer.Exit(1)
        with _kafka_errors():
            history = rebuild_history(view, connection, topic_prefix, codec, history_limit, trend_limit)
        console.print(f"Redis view {default_namespace(topic_prefix)} rewritten: {len(records)} scopes", highlight=False)
        console.print(history, highlight=False)
    if any(differences.values()) or revision_differences:
        raise typer.Exit(1)


@app.command("explain")
def explain_command(
    scope: Annotated[str, typer.Argument(help="scope_id")],
    task_outcome_id: Annotated[str, typer.Argument(help="source_id of the Task Outcome")],
    journal: Annotated[Optional[Path], typer.Option("--journal", exists=True, dir_okay=False, help="Explain from a journal file (embedded run) instead of Kafka.")] = None,
    bootstrap: Annotated[Optional[str], typer.Option("--bootstrap", envvar=ENV_BOOTSTRAP_SERVERS, help="Kafka bootstrap servers.")] = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    schema_registry_url: RegistryOption = None,
) -> None:
    """Why an outcome counted the way it did.

    Shows the evidence chain receipt → Handoff → cited revisions, each
    failure item with its RecurrenceMatch, and for every revision the
    verdict or the exact reason there is none."""
    from recurrence_ledger.ledger.explain import OutcomeNotFound, explain_outcome

    if journal is not None:
        from recurrence_ledger.embedded import journal_ledger

        events, outputs = journal_ledger(journal)
        matches, observations = outputs[catalogue.MATCHES], outputs[catalogue.OBSERVATIONS]
        candidate_sets = outputs[catalogue.CANDIDATE_SETS]
    elif bootstrap or kafka_config:
        from recurrence_ledger.runtime.kafka_io import read_topic

        connection = _connect(bootstrap, kafka_config)
        with _kafka_errors():
            codec = _codec(schema_registry_url, None, kafka_config)
            events = []
            for name in catalogue.INPUT_TOPICS:
                for *_, value in read_topic(connection, name, topic_prefix=topic_prefix, codec=codec):
                    events.append((value["topic"], value["value"]) if name == catalogue.SOURCE_JOURNAL else (name, value))
            matches = [value for *_, value in read_topic(connection, catalogue.MATCHES, topic_prefix=topic_prefix, codec=codec)]
            observations = [value for *_, value in read_topic(connection, catalogue.OBSERVATIONS, topic_prefix=topic_prefix, codec=codec)]
            from recurrence_ledger.runtime.kafka_io import read_candidate_sets

            wanted = {(m["scope_id"], m["candidate_set_digest"]) for m in matches
                      if m["candidate_refs"] is None and (m["scope_id"], m["task_outcome_ref"]["source_id"]) == (scope, task_outcome_id)}
            candidate_sets = read_candidate_sets(connection, wanted, topic_prefix=topic_prefix, codec=codec) if wanted else []
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


view_app = typer.Typer(help="The Redis statistics view.", no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(view_app, name="view")

ViewRedisOption = Annotated[str, typer.Option("--redis-url", envvar=ENV_REDIS_URL, show_default=False, help=f"Redis holding the view: {REDIS_URL_HELP}.")]


def _redis_view(redis_url: str, namespace: str, review_threshold: int = 3):  # noqa: ANN202 - lazy import
    """The RedisView of a command (the CA of RL_REDIS_CA_FILE for a
    rediss:// URL without one); exit 2 for a URL or CA file redis-py cannot
    use."""
    from recurrence_ledger.read.projection import RedisView

    try:
        return RedisView(redis_url, namespace=namespace, review_threshold=review_threshold, ca_file=settings().redis_ca_file)
    except ValueError as error:
        console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@contextlib.contextmanager
def _redis_errors(view):  # noqa: ANN001 - RedisView, imported lazily
    """Turn a Redis that does not answer, refuses the credentials, a
    permission or the TLS handshake into one red line (the URL without its
    password) and exit code 1."""
    from recurrence_ledger.read.connect import describe_error

    try:
        yield
    except redis_errors() as error:
        console.print(f"error: Redis view {view.namespace} at {view.where}: {describe_error(error)}", style="red", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


@view_app.command("rebuild")
def view_rebuild_command(
    redis_url: ViewRedisOption,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    review_threshold: ThresholdOption = 3,
    schema_registry_url: RegistryOption = None,
    history_limit: HistoryLimitOption = DEFAULT_HISTORY_LIMIT,
    trend_limit: TrendLimitOption = DEFAULT_TREND_LIMIT,
) -> None:
    """Rebuild the Redis view from the statistics topics.

    Reads the recurrence-statistics and revision-statistics topics whole,
    then replaces the view's keys; then rebuilds the read models (verdict
    histories, trends, review queue) from recurrence-observations,
    review-candidates and recurrence-statistics. --review-threshold must be
    the workers' (it decides the review set and is stored with each scope).
    Stop the view follower while it runs."""
    from recurrence_ledger.runtime.view_topics import rebuild_from_topic
    from recurrence_ledger.read.keys import default_namespace

    view = _redis_view(redis_url, default_namespace(topic_prefix), review_threshold)
    connection = _connect(bootstrap, kafka_config)
    with _kafka_errors(), _redis_errors(view):
        codec = _codec(schema_registry_url, None, kafka_config)
        scopes = rebuild_from_topic(view, connection, topic_prefix, codec=codec)
        history = rebuild_history(view, connection, topic_prefix, codec, history_limit, trend_limit)
    console.print(f"{scopes} scopes written to {view.where} (namespace {default_namespace(topic_prefix)})", highlight=False)
    console.print(history, highlight=False)


#: Keys ``view clear`` lists before deleting (the rest is counted).
LISTED_KEYS = 20


@view_app.command("clear")
def view_clear_command(
    redis_url: ViewRedisOption,
    topic_prefix: PrefixOption = "",
    yes: Annotated[bool, typer.Option("--yes", help="Really delete; without it, only list what would go.")] = False,
) -> None:
    """Delete the Redis view's keys of a deployment (asks for --yes).

    Deletes every key of the view's namespace (the topic prefix's) and
    nothing else. Without --yes it lists the scopes and keys it would
    delete. 'recurrence-ledger view rebuild' writes the view again from the
    topics."""
    from recurrence_ledger.read.keys import default_namespace

    namespace = default_namespace(topic_prefix)
    view = _redis_view(redis_url, namespace)
    try:
        with _redis_errors(view):
            if yes:
                deleted = view.clear()
                console.print(f"{deleted} keys deleted from {view.where} (namespace {namespace})", highlight=False)
                return
            keys = sorted(view.keys())
            scopes = view.scopes()
    finally:
        view.close()
    if not keys:
        console.print(f"nothing to delete: the Redis view {namespace} at {view.where} has no keys", highlight=False)
        return
    lines = [f"would delete {len(keys)} keys of the Redis view {namespace} at {view.where} (run again with --yes):"]
    lines.append(f"  scopes ({len(scopes)}): {', '.join(scopes) or 'none'}")
    lines.append("  keys:")
    lines += [f"    {key}" for key in keys[:LISTED_KEYS]]
    if len(keys) > LISTED_KEYS:
        lines.append(f"    … and {len(keys) - LISTED_KEYS} more")
    console.print("\n".join(lines), highlight=False)


def redis_errors() -> tuple[type[BaseException], ...]:
    """The errors of a Redis that does not answer (redis imported lazily)."""
    import redis

    return (redis.RedisError, OSError)


from recurrence_ledger.cli.ops import register  # noqa: E402 - serve, rank, stats

register(app)

from recurrence_ledger.cli import history as cli_history  # noqa: E402 - view follow

cli_history.register(view_app, connect=_connect, make_codec=_codec, kafka_errors=_kafka_errors, options={
    "bootstrap": BootstrapOption, "kafka_config": KafkaConfigOption, "prefix": PrefixOption, "threshold": ThresholdOption,
    "registry": RegistryOption, "app_id": AppIdOption, "exit_when_idle": ExitWhenIdleOption,
})


def reflow_help(typer_app: typer.Typer) -> None:
    """Give every command of ``typer_app`` (and of its sub-apps) its
    docstring as help text with each paragraph on one line, so that the
    terminal wraps it at its width instead of at the docstring's line
    breaks (Typer's rich mode keeps single line breaks)."""
    for info in typer_app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(info.callback.__doc__).split("\n\n"))
    for group in typer_app.registered_groups:
        reflow_help(group.typer_instance)


reflow_help(app)


def main() -> None:  # pragma: no cover - console entry point
    """Console entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
