"""``what-if``: what another policy would have concluded from the same
inputs (contract §20, docs/tuning.md).

The command reads a journal file or the deployment's input topics, replays
them under the baseline policy and the alternative (one policy, or every
value of ``--sweep SETTING=RANGE``), and writes ``report.md``,
``report.json`` — for a sweep also ``chart.png``, for one alternative its
output files under ``ledger/`` — into ``--out``, and nowhere else.

The **baseline**: each setting given as ``--baseline-…`` on the command
line; else, for the review threshold of a replay of the topics, the one the
deployment's workers stored with every scope of the Redis view (with
``--redis-url`` / ``REDIS_URL``); else the deployment's environment variable
(``RL_REVIEW_THRESHOLD`` …, what the workers read); else the default. The
report says where each setting came from.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from recurrence_ledger import policy
from recurrence_ledger.cli.clients import command_codec, console, kafka_connection, redis_errors, reporting_kafka_errors, reporting_run_errors
from recurrence_ledger.wording import counted
from recurrence_ledger.cli.options import (
    BootstrapOption,
    JobsOption,
    KafkaConfigOption,
    PendingCandidatesOption,
    PrefixOption,
    RegistryOption,
    ViewBatchOption,
    check_journal,
    fraction_parser,
    on_command_line,
    redis_url_option,
)
from recurrence_ledger.settings import settings
from recurrence_ledger.whatif.policies import ATTRIBUTES, MAX_HORIZON_PASSES, MAX_SWEEP_VALUES, SETTINGS, Policy, Sweep

ALTERNATIVE_PANEL = "Alternative policy (default: the baseline's value)"
BASELINE_PANEL = "Baseline policy"
INPUT_PANEL = "Input: the deployment's topics"


#: The settings whose value is an exact fraction, and those whose value is text.
FRACTION_SETTINGS = (policy.NEAR_DUPLICATE_THRESHOLD, policy.EFFECT_PROBABILITY, policy.HOLDOUT_RATE)
TEXT_SETTINGS = (policy.HOLDOUT_SALT,)


def _kind(setting: policy.Setting) -> dict[str, Any]:
    """How an option of ``setting`` parses its value: the parser of
    ``cli.options`` for a fraction, nothing for text, else a minimum."""
    if setting in FRACTION_SETTINGS:
        parser = fraction_parser(setting)
        return {"parser": parser, "metavar": "FRACTION"}
    return {} if setting in TEXT_SETTINGS else {"min": setting.minimum}


def _alternative(setting: policy.Setting) -> Any:
    """The alternative's option of a setting: no variable, no default (the baseline's)."""
    extra = _kind(setting)
    return typer.Option(setting.option, rich_help_panel=ALTERNATIVE_PANEL, show_default=False, help=setting.help, **extra)


def _baseline(setting: policy.Setting) -> Any:
    """The baseline's option of a setting, read from the deployment's
    variable when not given."""
    extra = _kind(setting)
    return typer.Option(f"--baseline-{setting.option.removeprefix('--')}", envvar=setting.env, rich_help_panel=BASELINE_PANEL,
                        help=f"The baseline's value (otherwise {setting.env}, else the default).", **extra)


def _separator_option(baseline: bool) -> Any:
    """The pattern group separator's option (a text, contract §23): the
    alternative's, or with ``baseline`` the baseline's, read from
    RL_PATTERN_GROUP_SEPARATOR when not given."""
    setting = policy.PATTERN_GROUP_SEPARATOR
    if baseline:
        return typer.Option(f"--baseline-{setting.option.removeprefix('--')}", envvar=setting.env, rich_help_panel=BASELINE_PANEL,
                            show_default=False, help=f"The baseline's value (otherwise {setting.env}, else unset: one group).")
    return typer.Option(setting.option, rich_help_panel=ALTERNATIVE_PANEL, show_default=False, help=setting.help)


def parse_sweep(text: str) -> Sweep:
    """``SETTING=RANGE``: SETTING one of :data:`SETTINGS`' names; RANGE a
    comma-separated list of values and ranges ``A..B`` (integers: every one
    from A to B) or ``A..B:STEP`` (fractions need a step: ``1/2..1:1/10``).
    Raises typer.BadParameter for an unknown setting, a value the setting
    refuses, an impossible range (A above B, a step ≤ 0), or too many
    values."""
    name, equals, spec = text.partition("=")
    name = name.strip()
    if not equals or name not in SETTINGS:
        known = ", ".join(SETTINGS)
        raise typer.BadParameter(f"unknown setting {name!r}: a sweep is SETTING=RANGE with SETTING one of {known}", param_hint="--sweep")
    setting = SETTINGS[name]
    fraction = setting in FRACTION_SETTINGS
    parse_value = fraction_parser(setting)

    def number(piece: str) -> Any:
        try:
            return parse_value(piece) if fraction else int(piece.strip())
        except (ValueError, typer.BadParameter) as error:
            raise typer.BadParameter(f"{name}: {piece!r} is not a value ({error})", param_hint="--sweep") from None

    values: list[Any] = []
    for item in filter(None, (piece.strip() for piece in spec.split(","))):
        first, dots, rest = item.partition("..")
        if not dots:
            values.append(number(item))
            continue
        last, colon, step_text = rest.partition(":")
        start, end = number(first), number(last)
        step = number(step_text) if colon else (None if fraction else 1)
        if step is None:
            raise typer.BadParameter(f"{name}: a range of fractions needs a step, e.g. {first}..{last}:1/10", param_hint="--sweep")
        if start > end or step <= 0:
            raise typer.BadParameter(f"{name}: impossible range {item!r} (the first value must not be above the last, the step must be > 0)",
                                     param_hint="--sweep")
        if (end - start) / step >= MAX_SWEEP_VALUES:
            raise typer.BadParameter(f"{name}: {item!r} has more than {MAX_SWEEP_VALUES} values", param_hint="--sweep")
        value = start
        while value <= end:
            values.append(value)
            value += step
    values = list(dict.fromkeys(values))
    if not values:
        raise typer.BadParameter(f"{name}: no values in {spec!r}", param_hint="--sweep")
    for value in values:
        try:
            setting.check(value)
        except ValueError as error:
            raise typer.BadParameter(f"{name}: impossible value {value} ({error})", param_hint="--sweep") from None
    limit = MAX_HORIZON_PASSES if setting is policy.PROVENANCE_HORIZON else MAX_SWEEP_VALUES
    if len(values) > limit:
        raise typer.BadParameter(f"{name}: {len(values)} values, at most {limit}" + (
            " (each provenance horizon is a replay of its own)" if setting is policy.PROVENANCE_HORIZON else ""), param_hint="--sweep")
    return Sweep(setting, tuple(values))


def recorded_review_threshold(redis_url: str, topic_prefix: str) -> tuple[int | None, str]:
    """The review threshold the deployment's workers stored with the scopes
    of its Redis view (``read.keys``: the scope hash's ``review_threshold``)
    and a sentence saying so; ``(None, why)`` when no scope has one. Exit 2
    when scopes disagree, 1 when Redis does not answer."""
    from recurrence_ledger.read.keys import default_namespace
    from recurrence_ledger.read.reader import ViewReader

    namespace = default_namespace(topic_prefix)
    try:
        reader = ViewReader(redis_url, namespace, ca_file=settings().redis_ca_file)
    except ValueError as error:
        console.print(f"error: {error}", style="red", highlight=False)
        raise typer.Exit(2) from None
    try:
        scope_ids = reader.scope_ids()
        pipe = reader.client.pipeline(transaction=False)
        for scope_id in scope_ids:
            pipe.hget(reader.keys.scope(scope_id), "review_threshold")
        stored = Counter(int(value) for value in pipe.execute() if value is not None)
    except redis_errors() as error:
        console.print(f"error: the Redis view {namespace} at {reader.where} did not answer ({error}); "
                      f"give --baseline-review-threshold, or leave REDIS_URL unset to use {policy.REVIEW_THRESHOLD.env}", style="red", highlight=False)
        raise typer.Exit(1) from None
    finally:
        reader.close()
    if not stored:
        return None, f"no scope of the Redis view {namespace} stores one"
    if len(stored) > 1:
        found = ", ".join(f"{threshold} in {count} scopes" for threshold, count in sorted(stored.items()))
        console.print(f"error: the scopes of the Redis view {namespace} record different review thresholds ({found}): "
                      "give the baseline with --baseline-review-threshold", style="red", highlight=False)
        raise typer.Exit(2)
    [(threshold, count)] = stored.items()
    return threshold, f"recorded by the workers in the Redis view {namespace} ({count} scopes)"


def _source(ctx: typer.Context, name: str, setting: policy.Setting) -> str:
    """Where the baseline option ``name`` got its value (the parameter source's
    name: Typer ships its own copy of click's enum)."""
    found = getattr(ctx.get_parameter_source(name), "name", None)
    if found == "COMMANDLINE":
        return "command line"
    if found == "ENVIRONMENT":
        return f"the deployment's {setting.env}"
    return "default"


def what_if_command(
    ctx: typer.Context,
    journal: Annotated[Optional[Path], typer.Argument(dir_okay=True, show_default=False, help="Journal file (JSON Lines); or --from-topics.")] = None,
    *,
    out: Annotated[Path, typer.Option("--out", file_okay=False, help="The what-if's own folder: report.md, report.json, chart.png, ledger/.")],
    review_threshold: Annotated[Optional[int], _alternative(policy.REVIEW_THRESHOLD)] = None,
    provenance_horizon: Annotated[Optional[int], _alternative(policy.PROVENANCE_HORIZON)] = None,
    near_duplicate_threshold: Annotated[Optional[Fraction], _alternative(policy.NEAR_DUPLICATE_THRESHOLD)] = None,
    top_revisions: Annotated[Optional[int], _alternative(policy.TOP_REVISIONS)] = None,
    critical_review_threshold: Annotated[Optional[int], _alternative(policy.CRITICAL_REVIEW_THRESHOLD)] = None,
    pattern_threshold: Annotated[Optional[int], _alternative(policy.PATTERN_THRESHOLD)] = None,
    pattern_group_separator: Annotated[Optional[str], _separator_option(baseline=False)] = None,
    sweep: Annotated[Optional[str], typer.Option(
        "--sweep", rich_help_panel=ALTERNATIVE_PANEL, show_default=False,
        help="Every value of one setting instead of one alternative: SETTING=RANGE, e.g. review-threshold=2..8, "
             "near-duplicate-threshold=3/5..1:1/10, provenance-horizon=100,1000,10000, top-revisions=5..20:5, "
             "critical-review-threshold=1..3, effect-probability=9/10,19/20,99/100, effect-min-resolved=2..10.")] = None,
    effect_min_resolved: Annotated[Optional[int], _alternative(policy.EFFECT_MIN_RESOLVED)] = None,
    effect_probability: Annotated[Optional[Fraction], _alternative(policy.EFFECT_PROBABILITY)] = None,
    holdout_salt: Annotated[Optional[str], _alternative(policy.HOLDOUT_SALT)] = None,
    holdout_rate: Annotated[Optional[Fraction], _alternative(policy.HOLDOUT_RATE)] = None,
    baseline_review_threshold: Annotated[int, _baseline(policy.REVIEW_THRESHOLD)] = policy.REVIEW_THRESHOLD.default,
    baseline_provenance_horizon: Annotated[Optional[int], _baseline(policy.PROVENANCE_HORIZON)] = policy.PROVENANCE_HORIZON.default,
    baseline_near_duplicate_threshold: Annotated[Fraction, _baseline(policy.NEAR_DUPLICATE_THRESHOLD)] = policy.NEAR_DUPLICATE_THRESHOLD.default,
    baseline_top_revisions: Annotated[int, _baseline(policy.TOP_REVISIONS)] = policy.TOP_REVISIONS.default,
    baseline_critical_review_threshold: Annotated[int, _baseline(policy.CRITICAL_REVIEW_THRESHOLD)] = policy.CRITICAL_REVIEW_THRESHOLD.default,
    baseline_pattern_threshold: Annotated[int, _baseline(policy.PATTERN_THRESHOLD)] = policy.PATTERN_THRESHOLD.default,
    baseline_pattern_group_separator: Annotated[Optional[str], _separator_option(baseline=True)] = policy.PATTERN_GROUP_SEPARATOR.default,
    baseline_effect_min_resolved: Annotated[int, _baseline(policy.EFFECT_MIN_RESOLVED)] = policy.EFFECT_MIN_RESOLVED.default,
    baseline_effect_probability: Annotated[Fraction, _baseline(policy.EFFECT_PROBABILITY)] = policy.EFFECT_PROBABILITY.default,
    baseline_holdout_salt: Annotated[Optional[str], _baseline(policy.HOLDOUT_SALT)] = policy.HOLDOUT_SALT.default,
    baseline_holdout_rate: Annotated[Optional[Fraction], _baseline(policy.HOLDOUT_RATE)] = policy.HOLDOUT_RATE.default,
    max_pending_candidates: PendingCandidatesOption = policy.MAX_PENDING_CANDIDATES.default,
    from_topics: Annotated[bool, typer.Option("--from-topics", rich_help_panel=INPUT_PANEL,
                                              help="Read the deployment's input topics from the beginning to their current end "
                                                   "(read_committed, no consumer group, nothing committed) instead of a journal.")] = False,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    schema_registry_url: RegistryOption = None,
    redis_url: Annotated[Optional[str], redis_url_option("The deployment's Redis view, whose scopes record the workers' review threshold "
                                                         "(the baseline's, with --from-topics)", rich_help_panel=INPUT_PANEL)] = None,
    view_batch: ViewBatchOption = policy.DEFAULT_VIEW_BATCH,
    jobs: JobsOption = policy.JOBS.default,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar, no summary.")] = False,
) -> None:
    """What another policy would have concluded from the same inputs.

    Replays a journal file, or with --from-topics the deployment's input
    topics, under the baseline policy and an alternative (the options below,
    or every value of --sweep), and compares them per scope: review
    candidates added and removed, revisions needing review, admission
    decisions that change, outcomes the provenance horizon decided unlinked
    (contract §20); and over all scopes the pattern candidates added and
    removed (contract §23); the revisions whose effect verdict changes
    (contract §21.6). Writes report.md, report.json, for a sweep chart.png,
    for one alternative its output files under ledger/, into --out only:
    never a topic, consumer group, state or Redis key of the deployment.
    Exit code: 0; 1 when Kafka or Redis refuses; 2 for a usage error (an
    unknown setting, an impossible range, an unreadable journal)."""
    from recurrence_ledger.whatif.replay import LEDGER_FOLDER, JournalInput, UnreadableJournal, replay, replay_journal_jobs
    from recurrence_ledger.whatif.report import CHART, build_report, write_report

    if (journal is None) == (not from_topics):
        raise typer.BadParameter("give a JOURNAL file, or --from-topics to read the deployment's input topics (not both)", param_hint="JOURNAL")
    if from_topics and jobs > 1:
        if on_command_line(ctx, "jobs"):
            raise typer.BadParameter("splits a journal file by scope; --from-topics reads the topics in one process", param_hint=policy.JOBS.option)
        jobs = 1  # the deployment's RL_JOBS is for journal files
    parsed = parse_sweep(sweep) if sweep is not None else None
    if "" in (pattern_group_separator, baseline_pattern_group_separator):
        raise typer.BadParameter("a pattern group separator is a non-empty text", param_hint=policy.PATTERN_GROUP_SEPARATOR.option)
    alternative_values = {"review_threshold": review_threshold, "provenance_horizon": provenance_horizon,
                          "near_duplicate_threshold": near_duplicate_threshold, "top_revisions": top_revisions,
                          "critical_review_threshold": critical_review_threshold,
                          "pattern_threshold": pattern_threshold, "pattern_group_separator": pattern_group_separator,
                          "effect_min_resolved": effect_min_resolved, "effect_probability": effect_probability,
                          "holdout_salt": holdout_salt, "holdout_rate": holdout_rate}
    if (baseline_holdout_salt is None) != (baseline_holdout_rate is None):
        raise typer.BadParameter("the baseline's holdout salt and rate are given together, or neither (contract §21.5)",
                                 param_hint=f"--baseline-{policy.HOLDOUT_SALT.option.removeprefix('--')}")
    if parsed is not None and alternative_values[ATTRIBUTES[parsed.setting.name]] is not None:
        raise typer.BadParameter(f"--sweep {sweep} and {parsed.setting.option} name the same setting", param_hint="--sweep")
    options = {"review_threshold": (baseline_review_threshold, policy.REVIEW_THRESHOLD),
               "provenance_horizon": (baseline_provenance_horizon, policy.PROVENANCE_HORIZON),
               "near_duplicate_threshold": (baseline_near_duplicate_threshold, policy.NEAR_DUPLICATE_THRESHOLD),
               "top_revisions": (baseline_top_revisions, policy.TOP_REVISIONS),
               "critical_review_threshold": (baseline_critical_review_threshold, policy.CRITICAL_REVIEW_THRESHOLD),
               "pattern_threshold": (baseline_pattern_threshold, policy.PATTERN_THRESHOLD),
               "pattern_group_separator": (baseline_pattern_group_separator, policy.PATTERN_GROUP_SEPARATOR),
               "effect_min_resolved": (baseline_effect_min_resolved, policy.EFFECT_MIN_RESOLVED),
               "effect_probability": (baseline_effect_probability, policy.EFFECT_PROBABILITY),
               "holdout_salt": (baseline_holdout_salt, policy.HOLDOUT_SALT),
               "holdout_rate": (baseline_holdout_rate, policy.HOLDOUT_RATE)}
    values = {name: value for name, (value, _) in options.items()}
    sources = {name: _source(ctx, f"baseline_{name}", setting) for name, (_, setting) in options.items()}
    redis_url = redis_url or settings().redis_url
    if from_topics and redis_url and sources["review_threshold"] != "command line":
        recorded, why = recorded_review_threshold(redis_url, topic_prefix)
        if recorded is not None:
            values["review_threshold"], sources["review_threshold"] = recorded, why
    try:
        baseline = Policy(**values)
    except ValueError as error:  # e.g. a count above its maximum
        raise typer.BadParameter(f"the baseline policy: {error}") from None
    try:
        fixed = replace(baseline, **{name: value for name, value in alternative_values.items() if value is not None})
    except ValueError as error:  # e.g. a holdout salt without a rate on either side (contract §21.5), a count above its maximum
        raise typer.BadParameter(f"the alternative policy: {error}") from None
    alternatives = parsed.policies(fixed) if parsed is not None else (fixed,)

    if from_topics:
        from recurrence_ledger.whatif.topics import TopicsInput

        source = TopicsInput(kafka_connection(bootstrap, kafka_config), topic_prefix, command_codec(schema_registry_url, False, kafka_config))
        with reporting_kafka_errors():
            source.open()
    else:
        check_journal(journal, out / LEDGER_FOLDER)
        try:
            source = JournalInput(journal).open()
        except UnreadableJournal as error:
            console.print(f"error: {error}", style="red", highlight=False)
            raise typer.Exit(2) from None
    try:
        with reporting_kafka_errors(), reporting_run_errors(journal or "the input topics", out):
            options = {"out_dir": out, "facts_of": alternatives[0] if parsed is None else None, "max_pending_candidates": max_pending_candidates,
                       "view_batch": view_batch, "show_progress": not quiet}
            if from_topics:
                outcome = replay(source, [baseline, *alternatives], **options)
            else:
                outcome = replay_journal_jobs(source, [baseline, *alternatives], jobs, **options)
    finally:
        source.close()
    chart = CHART if parsed is not None else None
    document = build_report(outcome, baseline, sources, alternatives, parsed, chart)
    with reporting_run_errors(journal or "the input topics", out):
        if parsed is not None:
            from recurrence_ledger.whatif.chart import draw_chart

            draw_chart(document["sweep"], out / CHART)
        json_path, markdown_path = write_report(document, out)
    if not quiet:
        _print_summary(document, markdown_path)
    if outcome.dead_letters:  # the first policy replayed: a decision's unknown_candidate depends on the threshold
        whose = "the baseline" if parsed is not None else "the alternative policy"
        console.print(f"warning: {sum(outcome.dead_letters.values())} input records were dead-lettered under {whose} "
                      f"({', '.join(f'{k} {v}' for k, v in sorted(outcome.dead_letters.items()))})", style="yellow", highlight=False)


def _print_summary(document: dict, markdown_path: Path) -> None:
    """The report's totals on the console and where the files are."""
    if document["sweep"] is not None:
        sweep = document["sweep"]
        console.print(f"sweep of {sweep['setting']} over {', '.join(map(str, sweep['values']))} (baseline {sweep['baseline_value']}):", highlight=False)
        for row in sweep["rows"]:
            console.print(f"  {row['value']}: {counted(row['review_candidates'], 'review candidate')}, "
                          f"{counted(row['revisions_needing_review'], 'revision')} needing review, "
                          f"{counted(row['admission_decisions_changed'], 'admission decision')} changed, "
                          f"{counted(row['horizon_unlinked'], 'outcome')} unlinked by the horizon, "
                          f"{counted(row['effect_verdicts_changed'], 'effect verdict')} changed",
                          highlight=False)
    else:
        comparison = document["comparisons"][0]
        totals = comparison["totals"]
        if not comparison["differs"]:
            console.print("no difference: the alternative policy concludes exactly what the baseline does on these inputs", highlight=False)
        else:
            console.print(
                f"{counted(totals['scopes_with_differences'], 'scope')} differ{'s' if totals['scopes_with_differences'] == 1 else ''}: review candidates +{totals['review_candidates_added']} "
                f"-{totals['review_candidates_removed']}, revisions needing review +{totals['revisions_needing_review_added']} "
                f"-{totals['revisions_needing_review_removed']}, admission decisions changed {totals['admission_decisions_changed']}, "
                f"outcomes unlinked by the horizon +{totals['horizon_unlinked_added']} -{totals['horizon_unlinked_removed']}, "
                f"pattern candidates +{totals['pattern_candidates_added']} -{totals['pattern_candidates_removed']}, "
                f"effect verdicts changed {totals['effect_verdicts_changed']}",
                highlight=False,
            )
    console.print(f"report: {markdown_path.resolve()} (and report.json beside it)", highlight=False)
