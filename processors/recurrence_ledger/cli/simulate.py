"""``recurrence-ledger simulate``: a simulated agent platform publishing a
realistic, seeded stream through the client library
(``recurrence_ledger.client.simulation``), consulting the advisory of a
``serve`` URL the way a recall ranker would."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Optional

import typer

from recurrence_ledger.cli.clients import console, kafka_connection, reporting_kafka_errors
from recurrence_ledger import policy
from recurrence_ledger.catalogue import SOURCE_JOURNAL, physical
from recurrence_ledger.cli.options import (
    AutoRegisterOption, BootstrapOption, HoldoutRateOption, HoldoutSaltOption, KafkaConfigOption, PrefixOption, RegistryOption,
)
from recurrence_ledger.settings import ENV_API_TOKEN_FILE, kafka_environment


def _rate(text: str) -> float | None:
    from recurrence_ledger.client.simulation import parse_rate

    try:
        return parse_rate(text)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--rate") from None


def simulate_command(
    events: Annotated[Optional[int], typer.Option("--events", min=1, help="Publish this many events, then stop (default: until interrupted).")] = None,
    rate: Annotated[str, typer.Option("--rate", help="Events per second: 200, 200/s, 12000/min, or max.")] = "200/s",
    seed: Annotated[int, typer.Option("--seed", help="The stream's seed (also in every scope id: sim<seed>-checkout-web, …).")] = 7,
    scopes: Annotated[int, typer.Option("--scopes", min=1, max=6, help="Scopes to simulate (1–6).")] = 4,
    lessons: Annotated[int, typer.Option("--lessons", min=1, max=6, help="Lessons per scope (1–6).")] = 4,
    serve_url: Annotated[Optional[str], typer.Option("--serve-url", help="A serve URL whose advisory the recall consults before each task.")] = None,
    token_file: Annotated[Optional[Path], typer.Option("--token-file", envvar=ENV_API_TOKEN_FILE, dir_okay=False,
                                                        help="The API token of --serve-url, when it has one.")] = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    fmt: Annotated[str, typer.Option("--format", help="Value format: avro (Confluent-framed) or json.")] = "avro",
    per_kind: Annotated[bool, typer.Option("--per-kind", help="Publish to the per-kind topics instead of source-journal.")] = False,
    schema_registry_url: RegistryOption = None,
    auto_register: AutoRegisterOption = None,
    holdout_salt: HoldoutSaltOption = policy.HOLDOUT_SALT.default,
    holdout_rate: HoldoutRateOption = policy.HOLDOUT_RATE.default,
) -> None:
    """Publish a simulated platform's events: lessons, handoffs, tasks, reviews.

    A seeded stream through the client library's Publisher: several scopes, each with lessons that help, lessons that
    recur, lessons whose bound check never runs and critical ones; tasks linked to the scope's handoff; review decisions
    on the candidates the ledger raises (an approval publishes the fixed revision and a new handoff); now and then a
    failure no lesson names and a proposed lesson. With --serve-url it asks the advisory about the handoff's lessons
    before each task, as a recall ranker would, and says what the ranking did. Assumes the workers' default review
    thresholds. With the deployment's --holdout-salt and --holdout-rate, each scope has four handoffs that withhold
    the lessons the holdout assignment says, so the ledger measures what each lesson changes. Stops after --events, or on
    Ctrl-C (what was sent is flushed first).
    """
    from recurrence_ledger.client.advisor import Advisor
    from recurrence_ledger.client.publisher import Publisher
    from recurrence_ledger.client.simulation import RANKING_OUTCOMES, SimulatedPlatform, simulate
    from recurrence_ledger.kafka.kafka_io import PublishError

    per_second = _rate(rate)
    if (holdout_salt is None) != (holdout_rate is None):
        raise typer.BadParameter(f"{policy.HOLDOUT_SALT.option} and {policy.HOLDOUT_RATE.option} are given together, or neither")
    if fmt not in ("avro", "json"):
        raise typer.BadParameter("avro or json", param_hint="--format")
    kafka_connection(bootstrap, kafka_config)  # exit 1 or 2 with one line when Kafka is not usable
    advisor = Advisor(serve_url, token_file=token_file, timeout=0.5) if serve_url else None
    holdout = (holdout_salt, holdout_rate) if holdout_salt is not None and holdout_rate is not None else None
    platform = SimulatedPlatform(seed=seed, scopes=scopes, lessons=lessons, advisor=advisor, holdout=holdout)
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())

    def progress(published: int, seconds: float) -> None:
        console.print(f"{published:,} events in {seconds:.1f} s", highlight=False)

    try:
        with reporting_kafka_errors():
            publisher = Publisher(bootstrap, kafka_config=kafka_config, environ=kafka_environment(), schema_registry_url=schema_registry_url,
                                  auto_register=auto_register, per_kind=per_kind, topic_prefix=topic_prefix, fmt=fmt)
            with publisher:
                summary = simulate(platform, publisher, events=events, rate=per_second, stop=stop, progress=progress)
    except PublishError as error:
        console.print(f"error: {error}", style="red", highlight=False)
        raise typer.Exit(1) from None
    finally:
        signal.signal(signal.SIGINT, previous)
        if advisor is not None:
            advisor.close()
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(summary.by_kind.items()))
    where = "the per-kind topics" if per_kind else physical(SOURCE_JOURNAL, topic_prefix)
    console.print(f"published {summary.published} events in {summary.seconds:.1f} s to {len(summary.scopes)} scopes "
                  f"({', '.join(summary.scopes)}) on {where}, by kind: {kinds}", highlight=False)
    if advisor is not None:
        ranking = ", ".join(f"{name} {summary.ranking.get(name, 0)}" for name in RANKING_OUTCOMES)
        console.print(f"recall ranking with the advisory of {serve_url}: {ranking}", highlight=False)
        if summary.ranking.get("unknown", 0) * 2 > sum(summary.ranking.values()):
            console.print("most lessons were unknown to the ledger yet: the advisory reads the view, which follows the stream by the "
                          "workers' commit and the follower's batch; at a lower --rate (say 20/s) it knows more of them", style="dim", highlight=False)
