"""Every option that more than one command takes, each defined once.

The ledger policy's options (``--review-threshold``,
``--critical-review-threshold``, ``--top-revisions``,
``--provenance-horizon``, ``--max-pending-candidates``,
``--near-duplicate-threshold``) and the runtime's
batching options (``--commit-interval-ms``, ``--max-batch``) are built from
their :mod:`recurrence_ledger.policy` settings: option name, environment
variable (``RL_REVIEW_THRESHOLD`` …), minimum and help; a command gives the
setting's default (``review_threshold: ThresholdOption =
policy.REVIEW_THRESHOLD.default``), never a number of its own.

An option whose help says what it is for in each command (``--redis-url``,
``--app-id``, ``--topic-prefix``, ``--bootstrap``, ``--kafka-config``) is
declared by one function here (flag, environment variable, secrecy); each
of its variants is an ``Annotated`` type below it.

:class:`OptionSet` and :func:`takes` give several commands one set of
options: :data:`LEDGER_POLICY` (every command that runs the ledger) and
:data:`WORKER_OPERATION` (``run`` and ``worker``).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Generic, Optional, TypeVar

import typer

from recurrence_ledger import policy
from recurrence_ledger.catalogue import DEFAULT_MAX_OUTPUT_BYTES
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.settings import (
    DEFAULT_APP_ID,
    DEFAULT_MAX_WAIT_CAUGHT_UP_S,
    DEFAULT_METRICS_HOST,
    ENV_ACCEPT_HOLDOUT_CHANGE,
    ENV_ACCEPT_UNICODE_CHANGE,
    ENV_APP_ID,
    ENV_BOOTSTRAP_SERVERS,
    ENV_HISTORY_LIMIT,
    ENV_INSTANCE_ID,
    ENV_KAFKA_CONFIG_FILE,
    ENV_METRICS_HOST,
    ENV_METRICS_PORT,
    ENV_REDIS_URL,
    ENV_SCHEMA_REGISTRY_URL,
    ENV_STATE_DIR,
    ENV_TOPIC_PREFIX,
    ENV_TREND_LIMIT,
)

T = TypeVar("T")

#: Help panels grouping the options of the commands that run the ledger.
WORKER_PANEL = "Kafka worker operation"
POLICY_PANEL = "Ledger policy"
SERVE_PANEL = "Connection limits"


def setting_option(setting: policy.Setting, panel: str) -> Any:
    """The option of a policy setting: its flag, environment variable,
    minimum and help, in help panel ``panel``."""
    return typer.Option(setting.option, envvar=setting.env, min=setting.minimum, rich_help_panel=panel, help=setting.help)


def parse_fraction(text: str) -> Fraction:
    """A score in (0, 1] written as a fraction (``4/5``) or a decimal
    (``0.8``), read exactly (``Fraction``, never through a binary double).
    Raises typer.BadParameter for anything else (``nan``, ``1e400``, ``0``,
    ``-1/2``, ``6/5``)."""
    if isinstance(text, Fraction):
        return text
    try:
        value = policy.parse_exact_fraction(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a fraction like 4/5 or a decimal like 0.8") from None
    if not 0 < value <= 1:
        raise typer.BadParameter(f"{text!r} is not in (0, 1]")
    return value


def parse_processes(text: str) -> int:
    """A number of processes ≥ 1, or ``auto`` (:data:`policy.AUTO`): the
    cores this process may use (``os.sched_getaffinity``). Raises
    typer.BadParameter for anything else."""
    if isinstance(text, int):
        return text
    if text.strip() == policy.AUTO:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        value = int(text.strip())
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number of processes or {policy.AUTO}") from None
    if value < 1:
        raise typer.BadParameter(f"{text!r}: at least one process")
    if value > policy.MAX_PROCESSES:
        raise typer.BadParameter(f"{text!r}: at most {policy.MAX_PROCESSES} processes")
    return value


def check_journal(journal: Path, out_dir: Path) -> None:
    """Refuse, as a usage error on JOURNAL (exit 2), a journal that cannot
    be run into ``out_dir`` (``embedded.journal.journal_problem``)."""
    from recurrence_ledger.embedded.journal import journal_problem

    problem = journal_problem(journal, out_dir)
    if problem is not None:
        raise typer.BadParameter(problem, param_hint="JOURNAL")


def on_command_line(ctx: typer.Context, name: str) -> bool:
    """Whether parameter ``name`` was given on the command line (not from
    its default or environment variable)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def processes_option(setting: policy.Setting, **panel: str) -> Any:
    """The option of a number of processes (``--jobs``, ``--processes``):
    a number or ``auto`` (:func:`parse_processes`)."""
    return typer.Option(setting.option, envvar=setting.env, parser=parse_processes, metavar="N|auto", help=setting.help, **panel)


#: ``--jobs N|auto`` of run-journal and what-if (RL_JOBS).
JobsOption = Annotated[int, processes_option(policy.JOBS)]
#: ``--processes N|auto`` of worker (RL_WORKER_PROCESSES).
ProcessesOption = Annotated[int, processes_option(policy.WORKER_PROCESSES, rich_help_panel=WORKER_PANEL)]


def bounded_fraction_parser(setting: policy.Setting) -> Callable[[str], Fraction]:
    """A parser of a fraction (``19/20``) or decimal (``0.95``) read exactly
    and held to ``setting``'s minimum and maximum; raises typer.BadParameter
    otherwise."""

    def parse(text: str) -> Fraction:
        if isinstance(text, Fraction):
            return text
        try:
            value = policy.parse_exact_fraction(text)
        except ValueError:
            raise typer.BadParameter(f"{text!r} is not a fraction like 19/20 or a decimal like 0.95") from None
        try:
            setting.check(value)
        except ValueError as error:
            raise typer.BadParameter(str(error)) from None
        return value

    return parse


def fraction_parser(setting: policy.Setting) -> Callable[[str], Fraction]:
    """The parser of a fraction setting's values: :func:`parse_fraction`
    (a score in (0, 1]) for the near-duplicate threshold, else
    :func:`bounded_fraction_parser` held to the setting's bounds."""
    return parse_fraction if setting is policy.NEAR_DUPLICATE_THRESHOLD else bounded_fraction_parser(setting)


def fraction_option(setting: policy.Setting, panel: str) -> Any:
    """The option of a policy setting whose value is a fraction (the
    near-duplicate threshold, ``effect_probability``, the holdout rate): a
    fraction (4/5) or a decimal (0.8), parsed exactly (:func:`fraction_parser`),
    its default shown as a fraction."""
    return typer.Option(setting.option, envvar=setting.env, parser=fraction_parser(setting), metavar="FRACTION", rich_help_panel=panel, help=setting.help)


def text_option(setting: policy.Setting, panel: str) -> Any:
    """The option of a policy setting whose value is text (the holdout salt)."""
    return typer.Option(setting.option, envvar=setting.env, rich_help_panel=panel, show_default=False, help=setting.help)


ThresholdOption = Annotated[int, setting_option(policy.REVIEW_THRESHOLD, POLICY_PANEL)]
CriticalThresholdOption = Annotated[int, setting_option(policy.CRITICAL_REVIEW_THRESHOLD, POLICY_PANEL)]
TopOption = Annotated[int, setting_option(policy.TOP_REVISIONS, POLICY_PANEL)]
HorizonOption = Annotated[Optional[int], setting_option(policy.PROVENANCE_HORIZON, POLICY_PANEL)]
PendingCandidatesOption = Annotated[int, setting_option(policy.MAX_PENDING_CANDIDATES, POLICY_PANEL)]
NearDuplicateOption = Annotated[Fraction, fraction_option(policy.NEAR_DUPLICATE_THRESHOLD, POLICY_PANEL)]
EffectMinResolvedOption = Annotated[int, setting_option(policy.EFFECT_MIN_RESOLVED, POLICY_PANEL)]
EffectProbabilityOption = Annotated[Fraction, fraction_option(policy.EFFECT_PROBABILITY, POLICY_PANEL)]
HoldoutSaltOption = Annotated[Optional[str], text_option(policy.HOLDOUT_SALT, POLICY_PANEL)]
HoldoutRateOption = Annotated[Optional[Fraction], fraction_option(policy.HOLDOUT_RATE, POLICY_PANEL)]
PatternThresholdOption = Annotated[int, setting_option(policy.PATTERN_THRESHOLD, POLICY_PANEL)]
PatternSeparatorOption = Annotated[
    Optional[str],
    typer.Option(
        policy.PATTERN_GROUP_SEPARATOR.option, envvar=policy.PATTERN_GROUP_SEPARATOR.env, rich_help_panel=POLICY_PANEL,
        show_default=False, help=policy.PATTERN_GROUP_SEPARATOR.help,
    ),
]
CommitIntervalOption = Annotated[int, setting_option(policy.COMMIT_INTERVAL_MS, WORKER_PANEL)]
MaxBatchOption = Annotated[int, setting_option(policy.MAX_BATCH, WORKER_PANEL)]

# -- Kafka, Schema Registry -------------------------------------------------------


def bootstrap_option(what: str) -> Any:
    """``--bootstrap`` (env KAFKA_BOOTSTRAP_SERVERS), ``what`` its help."""
    return typer.Option("--bootstrap", envvar=ENV_BOOTSTRAP_SERVERS, help=what)


def kafka_config_option(what: str, **panel: str) -> Any:
    """``--kafka-config FILE`` (env KAFKA_CONFIG_FILE), ``what`` its help."""
    return typer.Option("--kafka-config", envvar=ENV_KAFKA_CONFIG_FILE, dir_okay=False, show_default=False, help=what, **panel)


def topic_prefix_option(what: str, **panel: str) -> Any:
    """``--topic-prefix`` (env RL_TOPIC_PREFIX), ``what`` its help."""
    return typer.Option("--topic-prefix", envvar=ENV_TOPIC_PREFIX, help=what, **panel)


def app_id_option(what: str, **panel: str) -> Any:
    """``--app-id`` (env RL_APP_ID), ``what`` its help."""
    return typer.Option("--app-id", envvar=ENV_APP_ID, help=what, **panel)


BootstrapOption = Annotated[Optional[str], bootstrap_option("Kafka bootstrap servers (default: bootstrap.servers of the --kafka-config file).")]
KafkaConfigOption = Annotated[
    Optional[Path],
    kafka_config_option(
        "Kafka client properties file (Java client.properties format: security.protocol, SASL, trust store; see docs/kafka.md). "
        "KAFKA_* variables override it."
    ),
]
PrefixOption = Annotated[str, topic_prefix_option("Deployment prefix of every topic (contract §1).")]
#: The prefix of a command that only reads the Redis view (rank, stats, serve).
ViewPrefixOption = Annotated[str, topic_prefix_option("Deployment prefix; names the view's namespace.")]
#: The deployment's app id of a command that tears down or replays it.
DeploymentAppIdOption = Annotated[str, app_id_option("The deployment's app id (group and changelog).")]
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
AcceptUnicodeOption = Annotated[
    bool,
    typer.Option("--accept-unicode-change", envvar=ENV_ACCEPT_UNICODE_CHANGE,
                 help="Start even though the deployment's state was built on another Unicode version (contract §10; docs/upgrading.md)."),
]
AcceptHoldoutOption = Annotated[
    bool,
    typer.Option("--accept-holdout-change", envvar=ENV_ACCEPT_HOLDOUT_CHANGE,
                 help="Start even though the deployment's state was built under another holdout salt or rate (contract §21.5), and record this one."),
]


def output_format_option(what: str, **panel: str) -> Any:
    """``--output-format`` (avro or json), ``what`` its help."""
    return typer.Option("--output-format", help=what, **panel)


# -- Redis ------------------------------------------------------------------------

#: What every --redis-url help says about the URL.
REDIS_URL_HELP = (
    "redis://user:password@host:port/db, or rediss://… for TLS (CA: ?ssl_ca_certs=FILE or RL_REDIS_CA_FILE), "
    "or redis+cluster://host:port[,host:port…] (rediss+cluster://… for TLS) for Redis Cluster; "
    "prefer the REDIS_URL variable for a URL with a password (command lines are visible to other users)"
)


def redis_url_option(what: str, **panel: str) -> Any:
    """``--redis-url`` (env REDIS_URL, its value never shown as a default):
    ``what`` the Redis is for, then :data:`REDIS_URL_HELP`."""
    return typer.Option("--redis-url", envvar=ENV_REDIS_URL, show_default=False, help=f"{what}: {REDIS_URL_HELP}.", **panel)


#: The Redis view a ``view`` command reads or writes (required).
ViewRedisOption = Annotated[str, redis_url_option("Redis holding the view")]
#: The Redis view ``rank``, ``stats`` and ``serve`` read (ApiSettings' default without it).
ReadRedisOption = Annotated[Optional[str], redis_url_option("Redis holding the view (default redis://127.0.0.1:6379/0)")]
#: ``rebuild``'s optional Redis view to rewrite.
RewriteRedisOption = Annotated[Optional[str], redis_url_option("Also rewrite the Redis view")]
WorkerRedisOption = Annotated[Optional[str], redis_url_option("Redis for the statistics view (optional)", rich_help_panel=WORKER_PANEL)]
HistoryLimitOption = Annotated[
    int, typer.Option("--history-limit", min=1, envvar=ENV_HISTORY_LIMIT, help="Verdicts kept per revision in its history (the newest; the total is counted).")
]
TrendLimitOption = Annotated[int, typer.Option("--trend-limit", min=1, envvar=ENV_TREND_LIMIT, help="Trend points kept per scope (the newest).")]

# -- running ------------------------------------------------------------------------


def metrics_port_option(**panel: str) -> Any:
    """``--metrics-port`` (env RL_METRICS_PORT)."""
    return typer.Option("--metrics-port", min=1, max=65535, envvar=ENV_METRICS_PORT, help="Serve Prometheus metrics on HOST:PORT/metrics.",
                        **panel)


def metrics_host_option(**panel: str) -> Any:
    """``--metrics-host`` (env RL_METRICS_HOST)."""
    return typer.Option("--metrics-host", envvar=ENV_METRICS_HOST, metavar="HOST",
                        help="Address the metrics port listens on (0.0.0.0: every interface, for a scraper on another host or pod).", **panel)


def exit_when_idle_option(**panel: str) -> Any:
    """``--exit-when-idle SECONDS`` of a batch job."""
    return typer.Option("--exit-when-idle", help="Stop after this many seconds without input (batch jobs).", **panel)


MetricsPortOption = Annotated[Optional[int], metrics_port_option()]
MetricsHostOption = Annotated[str, metrics_host_option()]
ViewBatchOption = Annotated[
    int,
    typer.Option("--view-batch", min=1,
                 help="Embedded runner: journal records per batch of the view files (at most one record per changed key per batch, contract §8)."),
]
ExitWhenIdleOption = Annotated[Optional[float], exit_when_idle_option()]
#: Partitions of the catalogue topics that `topics create` and `run` create.
DEFAULT_PARTITIONS = 8
YesOption = Annotated[bool, typer.Option("--yes", help="Really delete; without it, only list what would go.")]


def json_option(what: str = "Print JSON.") -> Any:
    """``--json``, ``what`` its help."""
    return typer.Option("--json", help=what)


# -- option sets ----------------------------------------------------------------------


class OptionSet(Generic[T]):
    """Options several commands take as one: the parameters of ``build``
    (each an ``Annotated`` option with its default) and the value ``build``
    makes of them, which a command taking the set (:func:`takes`) receives
    in their place."""

    def __init__(self, build: Callable[..., T], parameters: tuple[inspect.Parameter, ...] | None = None) -> None:
        self.build = build
        self.parameters = parameters or tuple(
            parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY) for parameter in inspect.signature(build, eval_str=True).parameters.values()
        )

    @property
    def names(self) -> tuple[str, ...]:
        """The parameter names of the options, in order."""
        return tuple(parameter.name for parameter in self.parameters)

    def with_defaults(self, **defaults: Any) -> OptionSet[T]:
        """The same set with other defaults for some options (``KeyError``
        for a name it does not have)."""
        unknown = set(defaults) - set(self.names)
        if unknown:
            raise KeyError(f"no such options: {sorted(unknown)}")
        return OptionSet(self.build, tuple(p.replace(default=defaults.get(p.name, p.default)) for p in self.parameters))


def takes(**sets: OptionSet) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the options of each set: its parameter named after a
    set (``ledger: LedgerConfig``) is replaced by the set's options, and the
    command is called with that parameter holding the set's value. Raises
    TypeError (at import) when two options take one name."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        parameters: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            parameters += sets[parameter.name].parameters if parameter.name in sets else [parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)]
        names = [parameter.name for parameter in parameters]
        if len(set(names)) != len(names):
            raise TypeError(f"{command.__name__}: options {sorted({n for n in names if names.count(n) > 1})} are taken twice")

        @functools.wraps(command)
        def with_sets(**values: Any) -> Any:
            for name, option_set in sets.items():
                values[name] = option_set.build(**{option: values.pop(option) for option in option_set.names})
            return command(**values)

        with_sets.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_sets.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
        return with_sets

    return decorate


def ledger_policy(
    review_threshold: ThresholdOption = policy.REVIEW_THRESHOLD.default,
    top_revisions: TopOption = policy.TOP_REVISIONS.default,
    provenance_horizon: HorizonOption = policy.PROVENANCE_HORIZON.default,
    max_pending_candidates: PendingCandidatesOption = policy.MAX_PENDING_CANDIDATES.default,
    near_duplicate_threshold: NearDuplicateOption = policy.NEAR_DUPLICATE_THRESHOLD.default,
    effect_min_resolved: EffectMinResolvedOption = policy.EFFECT_MIN_RESOLVED.default,
    effect_probability: EffectProbabilityOption = policy.EFFECT_PROBABILITY.default,
    holdout_salt: HoldoutSaltOption = policy.HOLDOUT_SALT.default,
    holdout_rate: HoldoutRateOption = policy.HOLDOUT_RATE.default,
    critical_review_threshold: CriticalThresholdOption = policy.CRITICAL_REVIEW_THRESHOLD.default,
    pattern_threshold: PatternThresholdOption = policy.PATTERN_THRESHOLD.default,
    pattern_group_separator: PatternSeparatorOption = policy.PATTERN_GROUP_SEPARATOR.default,
) -> LedgerConfig:
    """The ledger policy of a command that runs the ledger (contract §5, §8,
    §12, §21, §22, §23), as the core's LedgerConfig. Raises typer.BadParameter for a
    holdout salt without a rate or a rate without a salt, for an empty
    pattern group separator, and for a count above its maximum (an Avro long:
    the records carry the thresholds they applied)."""
    if (holdout_salt is None) != (holdout_rate is None):
        raise typer.BadParameter(f"{policy.HOLDOUT_SALT.option} and {policy.HOLDOUT_RATE.option} are given together, or neither (contract §21.5)")
    if pattern_group_separator == "":
        raise typer.BadParameter("the pattern group separator is a non-empty text (leave it unset for one group)",
                                 param_hint=policy.PATTERN_GROUP_SEPARATOR.option)
    for setting, value in ((policy.REVIEW_THRESHOLD, review_threshold), (policy.TOP_REVISIONS, top_revisions),
                           (policy.PROVENANCE_HORIZON, provenance_horizon), (policy.MAX_PENDING_CANDIDATES, max_pending_candidates),
                           (policy.EFFECT_MIN_RESOLVED, effect_min_resolved), (policy.CRITICAL_REVIEW_THRESHOLD, critical_review_threshold),
                           (policy.PATTERN_THRESHOLD, pattern_threshold)):
        if value is not None and setting.maximum is not None and value > setting.maximum:  # not in --help: a 19-digit bound only hides the default
            raise typer.BadParameter(f"{value} is more than {setting.maximum}", param_hint=setting.option)
    return LedgerConfig(
        review_threshold=review_threshold, top_revisions_limit=top_revisions, provenance_horizon=provenance_horizon,
        max_pending_candidates=max_pending_candidates, near_duplicate_threshold=near_duplicate_threshold,
        effect_min_resolved=effect_min_resolved, effect_probability=effect_probability,
        holdout_salt=holdout_salt, holdout_rate=holdout_rate,
        critical_review_threshold=critical_review_threshold,
        pattern_threshold=pattern_threshold, pattern_group_separator=pattern_group_separator,
    )


AppIdOption = Annotated[str, app_id_option("Consumer group id and changelog prefix.", rich_help_panel=WORKER_PANEL)]
InstanceIdOption = Annotated[
    Optional[str],
    typer.Option("--instance-id", envvar=ENV_INSTANCE_ID, rich_help_panel=WORKER_PANEL, help="Stable id of this worker (transactional id suffix; default: host name)."),
]
OutputFormatOption = Annotated[str, output_format_option("avro (Confluent-framed) or json.", rich_help_panel=WORKER_PANEL)]
MaxWaitCaughtUpOption = Annotated[
    float,
    typer.Option(
        "--max-wait-caught-up", min=0, rich_help_panel=WORKER_PANEL,
        help="With --exit-when-idle: how long to wait, idle and without progress of the group, for every input and repartition partition "
             "of the group to be committed to its end, no transaction open on it (exit 0); then exit 4 naming the partitions left.",
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
MaxOutputBytesOption = Annotated[
    int,
    typer.Option(
        "--max-output-bytes", min=256, rich_help_panel=WORKER_PANEL,
        help="Largest output value; a record with a larger output is dead-lettered (oversized_output). Dead letters themselves are not held to it.",
    ),
]
MaxStateBytesOption = Annotated[
    int,
    typer.Option(
        "--max-state-bytes", min=256, max=DEFAULT_MAX_OUTPUT_BYTES, rich_help_panel=WORKER_PANEL,
        help="Largest state record on the changelog; a record that grows one past it is dead-lettered (oversized_output). At most the default: "
             "Kafka's limit for the changelog.",
    ),
]

StateDirOption = Annotated[
    Optional[Path],
    typer.Option(
        "--state-dir", envvar=ENV_STATE_DIR, file_okay=False, rich_help_panel=WORKER_PANEL, show_default=False,
        help="Keep each partition's state in RocksDB under this directory (<dir>/<changelog topic>/<partition>): a restart restores "
             "only the changelog's tail, and the state need not fit in memory. Default: in memory (docs/operating.md, \"RocksDB state\").",
    ),
]

ReseedChangelogOption = Annotated[
    bool,
    typer.Option(
        "--reseed-changelog", rich_help_panel=WORKER_PANEL,
        help="With --state-dir: when a partition's changelog (the ledger's or the pattern stage's) is empty (deleted and created "
             "again) while the group has committed offsets, write its intact local store back to the changelog instead of refusing (exit 5) (docs/operating.md, "
             "\"A lost or truncated changelog\").",
    ),
]


def worker_operation(
    app_id: AppIdOption = DEFAULT_APP_ID,
    instance_id: InstanceIdOption = None,
    output_format: OutputFormatOption = "avro",
    redis_url: WorkerRedisOption = None,
    commit_interval_ms: CommitIntervalOption = policy.COMMIT_INTERVAL_MS.default,
    max_batch: MaxBatchOption = policy.MAX_BATCH.default,
    exit_when_idle: Annotated[Optional[float], exit_when_idle_option(rich_help_panel=WORKER_PANEL)] = None,
    max_wait_caught_up: MaxWaitCaughtUpOption = DEFAULT_MAX_WAIT_CAUGHT_UP_S,
    static_membership: StaticMembershipOption = True,
    session_timeout_ms: SessionTimeoutOption = 10_000,
    create_topics: CreateTopicsOption = None,
    metrics_port: Annotated[Optional[int], metrics_port_option(rich_help_panel=WORKER_PANEL)] = None,
    metrics_host: Annotated[str, metrics_host_option(rich_help_panel=WORKER_PANEL)] = DEFAULT_METRICS_HOST,
    max_output_bytes: MaxOutputBytesOption = DEFAULT_MAX_OUTPUT_BYTES,
    max_state_bytes: MaxStateBytesOption = DEFAULT_MAX_OUTPUT_BYTES,
    state_dir: StateDirOption = None,
    reseed_changelog: ReseedChangelogOption = False,
) -> dict[str, Any]:
    """The Kafka worker's operation, as ``runtime.worker.WorkerConfig``
    fields (``instance_id`` left out when not given: the host name)."""
    fields = {
        "app_id": app_id, "output_format": output_format, "redis_url": redis_url, "commit_interval_ms": commit_interval_ms,
        "max_batch": max_batch, "exit_when_idle_s": exit_when_idle, "max_wait_caught_up_s": max_wait_caught_up,
        "static_membership": static_membership, "session_timeout_ms": session_timeout_ms, "create_partitions": create_topics,
        "metrics_port": metrics_port, "metrics_host": metrics_host, "max_output_bytes": max_output_bytes, "state_dir": state_dir,
        "max_state_bytes": max_state_bytes, "reseed_changelog": reseed_changelog,
    }
    return {**fields, "instance_id": instance_id} if instance_id else fields


@dataclass(frozen=True)
class TopicsAccess:
    """Where a command reads and writes a deployment's topics: the
    connection's options (``--bootstrap``, ``--kafka-config``), the
    deployment's ``--topic-prefix`` and ``--schema-registry-url``."""

    bootstrap: str | None
    kafka_config: Path | None
    topic_prefix: str
    schema_registry_url: str | None


def topics_access(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    schema_registry_url: RegistryOption = None,
) -> TopicsAccess:
    """The :class:`TopicsAccess` of a command's options."""
    return TopicsAccess(bootstrap, kafka_config, topic_prefix, schema_registry_url)


#: The ledger policy options: run-journal, run, worker, replay.
LEDGER_POLICY = OptionSet(ledger_policy)
#: A deployment's topics: the review commands.
TOPICS_ACCESS = OptionSet(topics_access)
#: The worker's operational options: run and worker (run without Kafka refuses them).
WORKER_OPERATION = OptionSet(worker_operation)
