"""``recurrence-ledger view``: the Redis statistics view and its read
models (``recurrence_ledger.read``): ``rebuild`` from the topics, ``clear``
a deployment's keys, ``follow`` the committed topics into Redis.
:func:`rebuild_history` is also the read-model part of ``rebuild
--redis-url``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from recurrence_ledger import policy
from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.cli.clients import (
    command_codec, kafka_connection, reporting_kafka_errors, reporting_redis_errors, command_redis_view, check_port, check_redis_url, console, refusing_to_start,
)
from recurrence_ledger.cli.options import (
    BootstrapOption,
    ExitWhenIdleOption,
    HistoryLimitOption,
    KafkaConfigOption,
    MetricsHostOption,
    MetricsPortOption,
    PrefixOption,
    RegistryOption,
    TrendLimitOption,
    ViewRedisOption,
    YesOption,
    app_id_option,
)
from recurrence_ledger.settings import DEFAULT_APP_ID, DEFAULT_METRICS_HOST, configure_logging

view_app = typer.Typer(help="The Redis statistics view.", no_args_is_help=True, rich_markup_mode="rich")


class FollowersRunning(RecurrenceLedgerError):
    """View followers of the deployment are running while a rebuild would
    rewrite their view."""


def refuse_beside_followers(connection: Any, app_id: str, topic_prefix: str) -> None:
    """Raise :class:`FollowersRunning` when the deployment's view followers
    (``view follow``, or workers started with a Redis URL: the group
    ``<prefix><app_id>-view``) have members now: a rebuild writes the view
    without the guard their writes keep, so a row they write meanwhile can
    be replaced by an older one for good (docs/operating.md)."""
    from recurrence_ledger.kafka.kafka_admin import group_members
    from recurrence_ledger.read.follower import SESSION_TIMEOUT_MS, view_group

    group = view_group(app_id, topic_prefix)
    members = group_members(connection, group)
    if members:
        raise FollowersRunning(f"{members} view follower(s) of the group {group} are running (view follow, or workers with a Redis URL): "
                               "stop them while the view is rebuilt, then start them again (a follower killed without leaving its group "
                               f"stays a member until its session times out, {SESSION_TIMEOUT_MS // 1000} s)")


def rebuild_history(view: Any, connection: Any, topic_prefix: str, codec: Any, history_limit: int = policy.DEFAULT_HISTORY_LIMIT,
                    trend_limit: int = policy.DEFAULT_TREND_LIMIT) -> str:
    """Rebuild the read models next to ``view`` (a RedisView) from the
    topics; returns a one-line summary. Raises what
    ``rebuild_read_models`` raises."""
    from recurrence_ledger.read.rebuild import rebuild_read_models
    from recurrence_ledger.read.history import ReadModels

    summary = rebuild_read_models(ReadModels(view._client, view.namespace, history_limit, trend_limit), connection, topic_prefix, codec=codec)
    return (
        f"read models rebuilt: {summary.observations} observations (verdict histories), {summary.candidates} review candidates, "
        f"{summary.review_statuses} review statuses, {summary.trend_points} trend points" + (f", {summary.skipped} records skipped" if summary.skipped else "")
    )


@view_app.command("rebuild")
def view_rebuild_command(
    redis_url: ViewRedisOption,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    schema_registry_url: RegistryOption = None,
    history_limit: HistoryLimitOption = policy.DEFAULT_HISTORY_LIMIT,
    trend_limit: TrendLimitOption = policy.DEFAULT_TREND_LIMIT,
    app_id: Annotated[str, app_id_option("The deployment's app id (its view followers' group is PREFIX+APP_ID-view).")] = DEFAULT_APP_ID,
) -> None:
    """Rebuild the Redis view from the statistics topics.

    Reads the recurrence-statistics and revision-statistics topics whole,
    then replaces the view's keys; then rebuilds the read models (verdict
    histories, trends, review queue) from recurrence-observations,
    review-candidates and recurrence-statistics (the review set and the
    review threshold are the ones the ledger published in the records).
    Refuses to start (exit 2) while view followers of the deployment run:
    stop them meanwhile."""
    from recurrence_ledger.read.rebuild import rebuild_from_topic
    from recurrence_ledger.read.keys import default_namespace

    connection = kafka_connection(bootstrap, kafka_config)
    with refusing_to_start(FollowersRunning), reporting_kafka_errors():
        refuse_beside_followers(connection, app_id, topic_prefix)
    view = command_redis_view(redis_url, default_namespace(topic_prefix))
    with reporting_kafka_errors(), reporting_redis_errors(view):
        codec = command_codec(schema_registry_url, None, kafka_config)
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
    yes: YesOption = False,
) -> None:
    """Delete the Redis view's keys of a deployment (asks for --yes).

    Deletes every key of the view's namespace (the topic prefix's) and
    nothing else. Without --yes it lists the scopes and keys it would
    delete. 'recurrence-ledger view rebuild' writes the view again from the
    topics; so does a view follower still running: stop the followers
    first."""
    from recurrence_ledger.read.keys import default_namespace

    namespace = default_namespace(topic_prefix)
    view = command_redis_view(redis_url, namespace)
    try:
        with reporting_redis_errors(view):
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


@view_app.command("follow")
def view_follow_command(
    redis_url: ViewRedisOption,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    app_id: Annotated[str, app_id_option("The deployment's app id (the follower's group is PREFIX+APP_ID-view).")] = DEFAULT_APP_ID,
    history_limit: HistoryLimitOption = policy.DEFAULT_HISTORY_LIMIT,
    trend_limit: TrendLimitOption = policy.DEFAULT_TREND_LIMIT,
    schema_registry_url: RegistryOption = None,
    exit_when_idle: ExitWhenIdleOption = None,
    metrics_port: MetricsPortOption = None,
    metrics_host: MetricsHostOption = DEFAULT_METRICS_HOST,
) -> None:
    """Follow the committed topics into the Redis view and its history.

    Reads recurrence-statistics, revision-statistics, review-status,
    recurrence-observations, review-candidates and signature-patterns
    (read_committed, consumer group PREFIX+APP_ID-view),
    writes the view and the read models (verdict histories, trends, the review
    queue) and commits its offsets once Redis has them. Runs until SIGTERM, or
    until --exit-when-idle seconds pass without a record. --history-limit and
    --trend-limit must be those of view rebuild."""
    from recurrence_ledger.read.follower import FollowerConfig, run_follower

    configure_logging()
    check_redis_url(redis_url)
    check_port(metrics_port, metrics_host)
    connection = kafka_connection(bootstrap, kafka_config)
    codec = command_codec(schema_registry_url, None, kafka_config)
    config = FollowerConfig(
        bootstrap=connection, redis_url=redis_url, app_id=app_id, topic_prefix=topic_prefix,
        history_limit=history_limit, trend_limit=trend_limit, exit_when_idle_s=exit_when_idle, metrics_port=metrics_port, metrics_host=metrics_host,
    )
    from recurrence_ledger.read.layout import LayoutError
    from recurrence_ledger.redact import redact_url

    with reporting_kafka_errors():
        try:
            applied = run_follower(config, codec)
        except LayoutError as error:
            console.print(f"error: {error}", style="red", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
    console.print(f"view follower stopped: {applied} records applied to {redact_url(redis_url)} (namespace {config.namespace})", highlight=False)
