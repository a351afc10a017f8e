"""Records into and out of the topics: ``publish`` loads a journal file
into the input topics, ``export`` writes a topic's committed records to
JSON Lines (contract §11 format)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recurrence_ledger import catalogue
from recurrence_ledger.cli.clients import command_codec, kafka_connection, reporting_kafka_errors, console
from recurrence_ledger.wording import counted
from recurrence_ledger.cli.options import AutoRegisterOption, BootstrapOption, KafkaConfigOption, PrefixOption, RegistryOption


def _check_topic(topic: str) -> str:
    """``topic`` when it is a catalogue topic; a usage error otherwise."""
    if topic not in catalogue.BY_NAME:
        raise typer.BadParameter(f"{topic!r} is not a catalogue topic; one of: {', '.join(catalogue.BY_NAME)}", param_hint="TOPIC")
    return topic


def publish_command(
    journal: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Journal file (JSON Lines).")],
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    fmt: Annotated[str, typer.Option("--format", help="Value format: avro (Confluent-framed) or json.")] = "avro",
    per_kind: Annotated[bool, typer.Option("--per-kind", help="Publish to the per-kind topics (one per event kind, candidates included) instead of source-journal.")] = False,
    schema_registry_url: RegistryOption = None,
    auto_register: AutoRegisterOption = None,
) -> None:
    """Load a journal file into the input topics (idempotent producer)."""
    from recurrence_ledger.kafka.kafka_io import publish_journal

    connection = kafka_connection(bootstrap, kafka_config)
    with reporting_kafka_errors():
        codec = command_codec(schema_registry_url, auto_register, kafka_config)
        summary = publish_journal(connection, journal, fmt=fmt, per_kind=per_kind, topic_prefix=topic_prefix, codec=codec)
    per_topic = ", ".join(f"{topic_prefix}{name} {count}" for name, count in summary.topics.items())
    console.print(
        f"published {summary.records} records in {summary.seconds:.2f} s ({per_topic}); "
        f"{summary.raw} published as raw bytes (not valid events: the worker will dead-letter them)",
        highlight=False,
    )


def export_command(
    topic: Annotated[str, typer.Argument(help="Logical output topic, e.g. recurrence-observations.")],
    out: Annotated[Path, typer.Option("--out", dir_okay=False, help="JSON Lines file (contract §11 format).")],
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    schema_registry_url: RegistryOption = None,
) -> None:
    """Write a topic's committed records to JSON Lines, partition by partition."""
    from recurrence_ledger.kafka.kafka_io import export_topic

    _check_topic(topic)
    connection = kafka_connection(bootstrap, kafka_config)
    with reporting_kafka_errors():
        count = export_topic(connection, topic, out, topic_prefix=topic_prefix, codec=command_codec(schema_registry_url, None, kafka_config))
    console.print(f"{counted(count, 'record')} → {out}")
