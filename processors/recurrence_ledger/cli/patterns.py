"""``recurrence-ledger patterns``: a pattern group's signature patterns
(contract §23), exported as the team skill document of §23.6
(``recurrence_ledger.ledger.skill``), from a journal file (an embedded run)
or from the deployment's topics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from recurrence_ledger import catalogue, policy
from recurrence_ledger.cli.clients import command_codec, console, kafka_connection, reporting_kafka_errors
from recurrence_ledger.cli.options import (
    BootstrapOption, KafkaConfigOption, PatternSeparatorOption, PatternThresholdOption, PrefixOption, RegistryOption,
)

patterns_app = typer.Typer(no_args_is_help=True, help="Signature patterns across scopes (contract §23).")

#: The export formats: the Markdown skill document of contract §23.6.
FORMATS = ("skill",)


@patterns_app.command("export")
def export_command(
    group: Annotated[str, typer.Option("--group", help="The pattern group to export (\"\" without a group separator).")],
    format_: Annotated[str, typer.Option("--format", help="skill: the Markdown team skill document (contract §23.6).")] = "skill",
    out: Annotated[Optional[Path], typer.Option("--out", dir_okay=False, help="Write the document here (default: standard output).")] = None,
    journal: Annotated[Optional[Path], typer.Option("--journal", exists=True, dir_okay=False, help="From a journal file (embedded run) instead of Kafka.")] = None,
    pattern_threshold: PatternThresholdOption = policy.PATTERN_THRESHOLD.default,
    pattern_group_separator: PatternSeparatorOption = policy.PATTERN_GROUP_SEPARATOR.default,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    schema_registry_url: RegistryOption = None,
) -> None:
    """Export a group's patterns at or above the threshold as one document.

    Per pattern: the signature, its scopes, and each scope's current lesson
    for it (situation, action, lesson). Only the group's own scopes are read
    and named (contract §23.1). From Kafka: the signature-patterns view and
    the Experience revisions of the input topics; from --journal: an
    embedded run with the given policy."""
    from recurrence_ledger.ledger.skill import current_lessons, skill_document

    if format_ not in FORMATS:
        raise typer.BadParameter(f"{format_!r}: the formats are {', '.join(FORMATS)}", param_hint="--format")
    if pattern_group_separator == "":
        raise typer.BadParameter("the pattern group separator is a non-empty text", param_hint=policy.PATTERN_GROUP_SEPARATOR.option)
    if journal is not None:
        from recurrence_ledger.embedded import journal_ledger
        from recurrence_ledger.ledger.config import LedgerConfig

        config = LedgerConfig(pattern_threshold=pattern_threshold, pattern_group_separator=pattern_group_separator)
        events, outputs, _ = journal_ledger(journal, config)
        rows = outputs[catalogue.SIGNATURE_PATTERNS]
        experiences = [value for kind, value in events if kind == catalogue.EXPERIENCE_REVISIONS]
    elif bootstrap or kafka_config:
        from recurrence_ledger.kafka.inputs import applied_inputs
        from recurrence_ledger.kafka.kafka_io import read_topic

        connection = kafka_connection(bootstrap, kafka_config)
        with reporting_kafka_errors():
            codec = command_codec(schema_registry_url, None, kafka_config)
            rows = [value for *_, value in read_topic(connection, catalogue.SIGNATURE_PATTERNS, topic_prefix=topic_prefix, codec=codec)]
            experiences = [value for _, value in applied_inputs(connection, topic_prefix, codec, kinds=(catalogue.EXPERIENCE_REVISIONS,)).events]
    else:
        raise typer.BadParameter("give --journal FILE, or --bootstrap / KAFKA_BOOTSTRAP_SERVERS", param_hint="--journal")
    final = {(row["group"], row["signature_key"]): row for row in rows if row["group"] == group}  # the view's final values, this group only
    scopes = {scope for row in final.values() for scope in row["scopes"]}
    document = skill_document(group, pattern_threshold, final.values(), current_lessons(experiences, scopes))
    if out is None:
        print(document, end="")
    else:
        out.write_text(document, encoding="utf-8")
        console.print(f"{out}: {sum(row['scope_count'] >= pattern_threshold for row in final.values())} patterns", highlight=False)
