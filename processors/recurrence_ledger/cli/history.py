"""``recurrence-ledger view follow`` and the read-model part of ``view
rebuild`` / ``rebuild --redis-url`` (``recurrence_ledger.read.follower``,
``recurrence_ledger.read.history``).

:func:`register` adds ``follow`` to the ``view`` command group. The main CLI
passes its own option types and Kafka helpers (connection check, codec,
error handling) so that ``view follow`` takes exactly the Kafka, Redis,
prefix and codec options of ``view rebuild`` without this module importing
the CLI (which imports it). No ``from __future__ import annotations`` here:
the command's annotations must be the option objects themselves.
"""

from typing import Annotated, Any, Callable, Optional

import typer

from recurrence_ledger.embedded import stdout_console
from recurrence_ledger.read.history import DEFAULT_HISTORY_LIMIT, DEFAULT_TREND_LIMIT
from recurrence_ledger.settings import DEFAULT_APP_ID, ENV_HISTORY_LIMIT, ENV_METRICS_PORT, ENV_REDIS_URL, ENV_TREND_LIMIT

console = stdout_console()

HistoryLimitOption = Annotated[
    int, typer.Option("--history-limit", min=1, envvar=ENV_HISTORY_LIMIT, help="Verdicts kept per revision in its history (the newest; the total is counted).")
]
TrendLimitOption = Annotated[int, typer.Option("--trend-limit", min=1, envvar=ENV_TREND_LIMIT, help="Trend points kept per scope (the newest).")]


def rebuild_history(view: Any, connection: Any, topic_prefix: str, codec: Any, history_limit: int = DEFAULT_HISTORY_LIMIT,
                    trend_limit: int = DEFAULT_TREND_LIMIT) -> str:
    """Rebuild the read models next to ``view`` (a RedisView) from the
    topics; returns a one-line summary. Raises what
    ``rebuild_read_models`` raises."""
    from recurrence_ledger.read.history import ReadModels
    from recurrence_ledger.read.follower import rebuild_read_models

    summary = rebuild_read_models(ReadModels(view._client, view.namespace, history_limit, trend_limit), connection, topic_prefix, codec=codec)
    return (
        f"read models rebuilt: {summary.observations} observations (verdict histories), {summary.candidates} review candidates, "
        f"{summary.trend_points} trend points" + (f", {summary.skipped} records skipped" if summary.skipped else "")
    )


def register(view_app: typer.Typer, *, connect: Callable, make_codec: Callable, kafka_errors: Callable, options: dict[str, Any]) -> None:
    """Add ``follow`` to the ``view`` group. ``options``: the main CLI's
    option types ``bootstrap``, ``kafka_config``, ``prefix``, ``threshold``,
    ``registry``, ``app_id``, ``exit_when_idle``."""
    Bootstrap, KafkaConfig, Prefix = options["bootstrap"], options["kafka_config"], options["prefix"]  # noqa: N806 - option types
    Threshold, Registry, AppId, ExitWhenIdle = options["threshold"], options["registry"], options["app_id"], options["exit_when_idle"]  # noqa: N806

    def follow_command(
        redis_url: Annotated[str, typer.Option("--redis-url", envvar=ENV_REDIS_URL)],
        bootstrap: Bootstrap = None,
        kafka_config: KafkaConfig = None,
        topic_prefix: Prefix = "",
        app_id: AppId = DEFAULT_APP_ID,
        review_threshold: Threshold = 3,
        history_limit: HistoryLimitOption = DEFAULT_HISTORY_LIMIT,
        trend_limit: TrendLimitOption = DEFAULT_TREND_LIMIT,
        schema_registry_url: Registry = None,
        exit_when_idle: ExitWhenIdle = None,
        metrics_port: Annotated[
            Optional[int], typer.Option("--metrics-port", envvar=ENV_METRICS_PORT, help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics.")
        ] = None,
    ) -> None:
        """Follow the committed topics into the Redis view and its history.

        Reads recurrence-statistics, revision-statistics, recurrence-observations
        and review-candidates (read_committed, consumer group PREFIX+APP_ID-view),
        writes the view and the read models (verdict histories, trends, the review
        queue) and commits its offsets once Redis has them. Runs until SIGTERM, or
        until --exit-when-idle seconds pass without a record. --review-threshold,
        --history-limit and --trend-limit must be those of the workers and of view
        rebuild."""
        import logging

        from recurrence_ledger.read.follower import FollowerConfig, run_follower
        from recurrence_ledger.settings import settings

        logging.basicConfig(level=settings().log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        connection = connect(bootstrap, kafka_config)
        codec = make_codec(schema_registry_url, None, kafka_config)
        config = FollowerConfig(
            bootstrap=connection, redis_url=redis_url, app_id=app_id, topic_prefix=topic_prefix, review_threshold=review_threshold,
            history_limit=history_limit, trend_limit=trend_limit, exit_when_idle_s=exit_when_idle, metrics_port=metrics_port,
        )
        with kafka_errors():
            applied = run_follower(config, codec)
        console.print(f"view follower stopped: {applied} records applied to {redis_url} (namespace {config.namespace})", highlight=False)

    view_app.command("follow")(follow_command)
