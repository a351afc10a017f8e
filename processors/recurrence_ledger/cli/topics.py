"""``recurrence-ledger topics``: the topic catalogue (contract §1) on a
cluster: ``create``, ``delete``, ``acls`` and ``list``."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich import box
from rich.table import Table

from recurrence_ledger import catalogue
from recurrence_ledger.cli.clients import kafka_connection, reporting_kafka_errors, command_registry, console
from recurrence_ledger.cli.options import (
    DEFAULT_PARTITIONS,
    AutoRegisterOption,
    BootstrapOption,
    DeploymentAppIdOption,
    KafkaConfigOption,
    PrefixOption,
    RegistryOption,
    YesOption,
    app_id_option,
    bootstrap_option,
)
from recurrence_ledger.settings import DEFAULT_APP_ID

topics_app = typer.Typer(help="The topic catalogue (contract §1).", no_args_is_help=True, rich_markup_mode="rich")

#: What ``topics delete`` says of the subjects when no registry is configured.
NO_REGISTRY = "no Schema Registry configured (--schema-registry-url, SCHEMA_REGISTRY_URL or schema.registry.url in --kafka-config)"


@topics_app.command("create")
def topics_create_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    partitions: Annotated[int, typer.Option("--partitions", min=1, help="Partitions of every topic (inputs must be co-partitioned).")] = DEFAULT_PARTITIONS,
    topic_prefix: PrefixOption = "",
    replication: Annotated[int, typer.Option("--replication", min=1)] = 1,
    schema_registry_url: RegistryOption = None,
    auto_register: AutoRegisterOption = None,
) -> None:
    """Create every topic of the catalogue with its settings (idempotent).
    With a Schema Registry, also register our schema under each topic's
    subject and set the subject's compatibility to BACKWARD."""
    from recurrence_ledger.kafka.kafka_admin import create_topics

    connection = kafka_connection(bootstrap, kafka_config)
    with reporting_kafka_errors():
        result = create_topics(connection, partitions, topic_prefix, replication)
        registry = command_registry(schema_registry_url, auto_register, kafka_config)
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


#: The dry run of ``topics delete`` lists the deployment's names without
#: asking the broker or the registry which exist.
NAMES_ONLY = "  (names only; --yes reports each one deleted or absent)"


@topics_app.command("delete")
def topics_delete_command(
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    app_id: DeploymentAppIdOption = DEFAULT_APP_ID,
    schema_registry_url: RegistryOption = None,
    yes: YesOption = False,
) -> None:
    """Delete a deployment's topics, consumer groups and registry subjects (asks for --yes).

    Deletes the catalogue topics under the prefix, the state changelog and
    the consumer groups of the app id, and with a Schema Registry the
    <topic>-value subjects of the catalogue topics it deleted (soft, then
    permanently). Without --yes it only lists their names, without asking
    the broker which exist; with --yes it reports each as deleted or
    absent. Stop the deployment's
    workers first; its Redis keys go with 'recurrence-ledger view clear
    --yes'."""
    from recurrence_ledger.kafka.kafka_admin import delete_deployment, deployment_resources

    topics, groups = deployment_resources(topic_prefix, app_id)
    registry = command_registry(schema_registry_url, None, kafka_config)
    catalogue_topics = [catalogue.physical(spec.name, topic_prefix) for spec in catalogue.CATALOGUE]
    if not yes:
        lines = ["would delete (run again with --yes):", NAMES_ONLY, f"  topics ({len(topics)}):"]
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
    connection = kafka_connection(bootstrap, kafka_config)
    with reporting_kafka_errors():
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
        with reporting_kafka_errors():
            subjects = delete_subjects(registry, gone)
        for name, outcome in subjects.items():
            console.print(f"  {name}: {outcome}", highlight=False)
        failed = failed or any(outcome != "absent" and not outcome.startswith("deleted") for outcome in subjects.values())
    if failed:
        raise typer.Exit(1)


@topics_app.command("acls")
def topics_acls_command(
    principal: Annotated[str, typer.Option("--principal", help="Principal to authorize, e.g. User:ledger.")],
    role: Annotated[str, typer.Option("--role", help="worker | upstream (publish) | reader (export, rebuild, explain, view rebuild) | replay | follower (view follow) | reviewer (review, the API's decisions: writes review-decisions only).")] = "worker",
    topic_prefix: PrefixOption = "",
    app_id: Annotated[str, app_id_option("The deployment's app id (group, changelog, transactional ids).")] = DEFAULT_APP_ID,
    create_topics: Annotated[bool, typer.Option("--create-topics", help="worker: also Create on every catalogue topic (the worker's --create-topics); without it an admin runs 'topics create'.")] = False,
    apply: Annotated[bool, typer.Option("--apply", help="Create the bindings with the Admin API (as the --kafka-config principal, e.g. an admin) instead of printing kafka-acls commands.")] = False,
    bootstrap: Annotated[Optional[str], bootstrap_option("Kafka bootstrap servers (for --apply, and shown in the commands).")] = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """The ACL bindings a principal needs for a role of the deployment
    (docs/kafka.md, "Connecting to your cluster"), as kafka-acls command
    lines; --apply creates them."""
    from recurrence_ledger.kafka.acls import apply_acls, kafka_acls_commands, role_acls

    try:
        acls = role_acls(role, principal, topic_prefix, app_id, create_topics)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--role/--principal") from None
    if not apply:
        for line in kafka_acls_commands(acls, bootstrap or "BOOTSTRAP", str(kafka_config) if kafka_config else "admin.properties"):
            print(line)
        return
    connection = kafka_connection(bootstrap, kafka_config)
    with reporting_kafka_errors():
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


