"""Re-deriving from the ledger topics: ``replay`` re-runs the ledger over
the input topics and writes only what the ledger lacks (contract §6, §10);
``rebuild`` rebuilds the derived views from the ledger topics alone and
checks them against the live ones (and rewrites the Redis view)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from recurrence_ledger import catalogue, policy
from recurrence_ledger.cli.clients import command_codec, kafka_connection, reporting_kafka_errors, reporting_redis_errors, command_redis_view, refusing_to_start, console
from recurrence_ledger.cli.options import (
    LEDGER_POLICY,
    AcceptHoldoutOption,
    AcceptUnicodeOption,
    AutoRegisterOption,
    BootstrapOption,
    HistoryLimitOption,
    KafkaConfigOption,
    PatternSeparatorOption,
    PatternThresholdOption,
    PrefixOption,
    RegistryOption,
    RewriteRedisOption,
    CriticalThresholdOption,
    ThresholdOption,
    TopOption,
    TrendLimitOption,
    app_id_option,
    json_option,
    output_format_option,
    takes,
)
from recurrence_ledger.cli.view import FollowersRunning, rebuild_history, refuse_beside_followers
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.settings import DEFAULT_APP_ID


@takes(ledger=LEDGER_POLICY)
def replay_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    start: Annotated[str, typer.Option("--from", help="earliest | offsets:TOPIC/P=O,… | timestamp:ISO-8601 | position:N")] = "earliest",
    topic_prefix: PrefixOption = "",
    app_id: Annotated[str, app_id_option("The deployment's app id (its consumer group, changelog and replay group).")] = DEFAULT_APP_ID,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be re-read.")] = False,
    output_format: Annotated[str, output_format_option("avro (Confluent-framed) or json, as the deployment's workers write.")] = "avro",
    as_json: Annotated[bool, json_option("Print the plan and the summary as one JSON object.")] = False,
    *,
    ledger: LedgerConfig,
    schema_registry_url: RegistryOption = None,
    auto_register: AutoRegisterOption = None,
    accept_unicode_change: AcceptUnicodeOption = False,
    accept_holdout_change: AcceptHoldoutOption = False,
) -> None:
    """Re-run the ledger over the input topics, adding only what it lacks.

    Writes only records whose identity is not in the ledger yet (contract
    §6, §10). --dry-run prints the plan only; --json prints the plan and the
    summary as JSON."""
    from recurrence_ledger.runtime.replay import WorkersStarting, parse_start, run_replay

    try:
        replay_start = parse_start(start)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--from") from None
    connection = kafka_connection(bootstrap, kafka_config)
    with refusing_to_start(WorkersStarting), reporting_kafka_errors():
        summary = run_replay(
            connection, topic_prefix, replay_start, app_id=app_id, output_format=output_format, dry_run=dry_run,
            ledger=ledger,
            codec=command_codec(schema_registry_url, auto_register, kafka_config),
            accept_unicode_change=accept_unicode_change,
            accept_holdout_change=accept_holdout_change,
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
    lines = [
        f"read {summary.records_read} records in {summary.seconds:.1f} s",
        f"written (records the ledger lacked): {_per_topic(summary.written)}",
        f"not written again (already in the ledger): {_per_topic(summary.suppressed)}",
    ]
    if summary.views_left:
        lines.append(f"views not written, left to the running workers: {summary.views_left}")
    if summary.patterns_left and summary.patterns_left != summary.views_left:
        lines.append(f"pattern records not written, left to the running workers: {summary.patterns_left}")
    return lines


def replay_json(summary, dry_run: bool) -> dict:  # noqa: ANN001 - ReplaySummary, imported lazily
    """The plan and summary of a replay as a JSON object: ``dry_run``,
    ``ranges`` (per input topic-partition: topic, partition, from,
    outputs_from, to, records), and for a finished replay
    ``records_read``, ``seconds``, ``written`` and ``already_in_ledger``
    (records per output topic), ``conflicted_scopes``, and
    ``views_left_to_workers`` / ``patterns_left_to_workers`` (why the
    replay wrote no views / pattern records, or null)."""
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
            views_left_to_workers=summary.views_left, patterns_left_to_workers=summary.patterns_left,
        )
    return body


def rebuild_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    redis_url: RewriteRedisOption = None,
    topic_prefix: PrefixOption = "",
    review_threshold: ThresholdOption = policy.REVIEW_THRESHOLD.default,
    top_revisions: TopOption = policy.TOP_REVISIONS.default,
    pattern_threshold: PatternThresholdOption = policy.PATTERN_THRESHOLD.default,
    pattern_group_separator: PatternSeparatorOption = policy.PATTERN_GROUP_SEPARATOR.default,
    schema_registry_url: RegistryOption = None,
    critical_review_threshold: CriticalThresholdOption = policy.CRITICAL_REVIEW_THRESHOLD.default,
    app_id: Annotated[str, app_id_option("The deployment's app id (its changelog holds the Unicode pin; its view followers' group is PREFIX+APP_ID-view).")] = DEFAULT_APP_ID,
    accept_unicode_change: AcceptUnicodeOption = False,
    history_limit: HistoryLimitOption = policy.DEFAULT_HISTORY_LIMIT,
    trend_limit: TrendLimitOption = policy.DEFAULT_TREND_LIMIT,
) -> None:
    """Rebuild the derived views from the ledger topics and check them.

    Rebuilds streaks, statistics and the revisions view from the ledger
    topics alone, compares them with the latest statistics and
    revision-statistics records, and with --redis-url (or REDIS_URL set in
    the environment) rewrites the Redis view when they are equal; without
    either it only checks. Rebuilds the pattern stage (contract §23) from
    the observations and compares it with the signature-patterns and
    pattern-candidates topics. Exit code 1 when the rebuilt views differ
    from the live ones; 2 when the deployment's state was built on another
    Unicode version, or (rewriting Redis) while its view followers run."""
    from recurrence_ledger.kafka.kafka_io import read_topic
    from recurrence_ledger.ledger.patterns import rebuild_patterns
    from recurrence_ledger.ledger.rebuild import compare, compare_revisions, rebuild_revisions, rebuild_views, surfaces_from
    from recurrence_ledger.read.rebuild import read_revision_statistics_topic, read_statistics_topic, write_layout_and_patterns
    from recurrence_ledger.read.keys import default_namespace
    from recurrence_ledger.runtime.unicode_pin import check_changelog

    connection = kafka_connection(bootstrap, kafka_config)
    with refusing_to_start(FollowersRunning), reporting_kafka_errors():
        check_changelog(connection, catalogue.physical(catalogue.changelog_name(app_id), topic_prefix), accept_unicode_change)
        if redis_url:
            refuse_beside_followers(connection, app_id, topic_prefix)
    with reporting_kafka_errors():
        codec = command_codec(schema_registry_url, None, kafka_config)
        observations = [value for *_, value in read_topic(connection, catalogue.OBSERVATIONS, topic_prefix=topic_prefix, codec=codec)]
        latest = read_statistics_topic(connection, topic_prefix, codec=codec)
        live_rows = [row for rows in read_revision_statistics_topic(connection, topic_prefix, codec=codec).values() for row in rows.values()]
        live_patterns = {(value["group"], value["signature_key"]): value
                         for *_, value in read_topic(connection, catalogue.SIGNATURE_PATTERNS, topic_prefix=topic_prefix, codec=codec)}
        live_candidates = {value["candidate_id"]: value
                           for *_, value in read_topic(connection, catalogue.PATTERN_CANDIDATES, topic_prefix=topic_prefix, codec=codec)}
    surfaces = surfaces_from(latest.values(), live_rows)
    rebuilt = rebuild_views(observations, review_threshold, top_revisions, surfaces, critical_review_threshold)
    differences = compare(rebuilt, latest)
    rebuilt_rows = rebuild_revisions(observations, review_threshold, surfaces, critical_review_threshold)
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
    if pattern_group_separator == "":
        raise typer.BadParameter("the pattern group separator is a non-empty text", param_hint=policy.PATTERN_GROUP_SEPARATOR.option)
    patterns, candidates = rebuild_patterns(observations, pattern_group_separator, pattern_threshold)
    pattern_differences = sorted(key for key in set(patterns) | set(live_patterns) if patterns.get(key) != live_patterns.get(key))
    candidate_differences = set(candidates) ^ {key for key, value in live_candidates.items() if value["threshold"] == pattern_threshold}
    console.print(
        f"signature patterns: {len(patterns)} rebuilt, {len(candidates)} pattern candidates, "
        + ("equal to the signature-patterns and pattern-candidates topics" if not pattern_differences and not candidate_differences else
           f"{len(pattern_differences)} patterns and {len(candidate_differences)} candidates DIFFER"),
        highlight=False,
    )
    differ = any(differences.values()) or revision_differences or pattern_differences or candidate_differences
    if redis_url and differ:
        console.print("the Redis view was not rewritten: the rebuilt views differ from the published ones (give the deployment's "
                      "policy options, or rewrite the view from the published records with `view rebuild`)", style="red", highlight=False)
    elif redis_url:
        records = [{**record, **rebuilt.get(scope_id, {})} for scope_id, record in latest.items()]
        view = command_redis_view(redis_url, default_namespace(topic_prefix))
        with reporting_redis_errors(view):
            view.clear()
        view.submit(records, revisions=[rebuilt_rows[key] for key in sorted(rebuilt_rows)])  # writes at once when Redis answers
        view.flush()
        if view.pending:
            console.print(f"Redis at {view.where} did not answer: the view was not rewritten", style="red", highlight=False)
            raise typer.Exit(1)
        with reporting_redis_errors(view):
            written = write_layout_and_patterns(view, [patterns[key] for key in sorted(patterns)])  # the rebuilt ones, as the scopes
        with reporting_kafka_errors():
            history = rebuild_history(view, connection, topic_prefix, codec, history_limit, trend_limit)
        console.print(f"Redis view {default_namespace(topic_prefix)} rewritten: {len(records)} scopes, {written} signature patterns", highlight=False)
        console.print(history, highlight=False)
    if differ:
        raise typer.Exit(1)

