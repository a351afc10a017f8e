"""``recurrence-ledger explain``: why an outcome counted the way it did, and
``explain-effect``: why a lesson's effect verdict is what it is (contract
§21.4) (``recurrence_ledger.ledger.explain``), from a journal file or from
the topics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from recurrence_ledger import catalogue
from recurrence_ledger.cli.clients import command_codec, kafka_connection, reporting_kafka_errors, console
from recurrence_ledger.cli.options import LEDGER_POLICY, BootstrapOption, KafkaConfigOption, PrefixOption, RegistryOption, json_option, takes
from recurrence_ledger.ledger.config import LedgerConfig

def explain_command(
    scope: Annotated[str, typer.Argument(help="scope_id")],
    task_outcome_id: Annotated[str, typer.Argument(help="source_id of the Task Outcome")],
    journal: Annotated[Optional[Path], typer.Option("--journal", exists=True, dir_okay=False, help="Explain from a journal file (embedded run) instead of Kafka.")] = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    as_json: Annotated[bool, json_option()] = False,
    schema_registry_url: RegistryOption = None,
) -> None:
    """Why an outcome counted the way it did.

    Shows the evidence chain receipt → Handoff → cited revisions, each
    failure item with its RecurrenceMatch, and for every revision the
    verdict or the exact reason there is none."""
    from recurrence_ledger.ledger.explain import OutcomeNotFound, explain_outcome

    if journal is not None:
        from recurrence_ledger.embedded.runner import journal_ledger

        events, outputs, rejected = journal_ledger(journal)
        matches, observations = outputs[catalogue.MATCHES], outputs[catalogue.OBSERVATIONS]
        candidate_sets = outputs[catalogue.CANDIDATE_SETS]
    elif bootstrap or kafka_config:
        from recurrence_ledger.kafka.inputs import applied_inputs
        from recurrence_ledger.kafka.kafka_io import read_topic

        connection = kafka_connection(bootstrap, kafka_config)
        with reporting_kafka_errors():
            codec = command_codec(schema_registry_url, None, kafka_config)
            events, rejected = applied_inputs(connection, topic_prefix, codec)
            matches = [value for *_, value in read_topic(connection, catalogue.MATCHES, topic_prefix=topic_prefix, codec=codec)]
            observations = [value for *_, value in read_topic(connection, catalogue.OBSERVATIONS, topic_prefix=topic_prefix, codec=codec)]
            from recurrence_ledger.kafka.kafka_io import read_candidate_sets

            wanted = {(m["scope_id"], m["candidate_set_digest"]) for m in matches
                      if m["candidate_refs"] is None and (m["scope_id"], m["task_outcome_ref"]["source_id"]) == (scope, task_outcome_id)}
            candidate_sets = read_candidate_sets(connection, wanted, topic_prefix=topic_prefix, codec=codec) if wanted else []
    else:
        raise typer.BadParameter("give --journal FILE, or --bootstrap / KAFKA_BOOTSTRAP_SERVERS", param_hint="--journal")
    try:
        explanation = explain_outcome(scope, task_outcome_id, events, matches, observations, candidate_sets, input_ended=journal is not None,
                                      rejected=rejected)
    except OutcomeNotFound as error:
        console.print(f"error: {error}", style="red", highlight=False)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(explanation, indent=2, ensure_ascii=False))
        return
    print_explanation(explanation)


def print_explanation(explanation: dict) -> None:
    """The explanation as a tree (printed without console markup: ids and
    match inputs are shown as they are)."""
    from rich.tree import Tree

    outcome = explanation["task_outcome"]
    chain = explanation["chain"]
    tree = Tree(f"{outcome['source_id']} in {explanation['scope_id']} (position {outcome['journal_position']}, {outcome['status']})")
    link = tree.add(f"chain: {chain['status']} — {chain['reason']}")
    if chain["handoff"]:
        link.add(f"receipt {chain['receipt']} → Handoff {chain['handoff']} → cited failure-bearing revisions: {', '.join(chain['cited']) or 'none'}")
    items = tree.add(f"failure items: {len(explanation['failure_items'])}")
    for item in explanation["failure_items"]:
        match = item["match"]
        text = f"{item['item_kind']}[{item['item_index']}] '{item['match_input']}'"
        if match is None:
            items.add(f"{text}: no RecurrenceMatch recorded")
        else:
            target = f" → {match['target']}" if match["target"] else ""
            candidates = (f"candidate set {match['candidate_set_digest']} not found on candidate-sets" if match["candidates"] is None
                          else f"candidates {', '.join(match['candidates']) or 'none'}")
            items.add(f"{text}: {match['result']}{target} ({match['candidate_set_mode']}, {candidates})")
    revisions = tree.add("revisions")
    for row in explanation["revisions"]:
        selected = "selected, " if row["selected"] else ""
        revisions.add(f"{row['artifact_ref']} ({row['repair_surface']}): {selected}{row['reason']}")
    console.print(tree, highlight=False)


@takes(ledger=LEDGER_POLICY)
def explain_effect_command(
    scope: Annotated[str, typer.Argument(help="scope_id")],
    artifact_id: Annotated[str, typer.Argument(help="artifact_id of the Experience revision")],
    revision: Annotated[int, typer.Argument(min=1, help="its revision number")],
    ledger: LedgerConfig,
    journal: Annotated[Optional[Path], typer.Option("--journal", exists=True, dir_okay=False, help="Explain from a journal file (embedded run) instead of Kafka.")] = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    topic_prefix: PrefixOption = "",
    as_json: Annotated[bool, json_option()] = False,
    schema_registry_url: RegistryOption = None,
) -> None:
    """Why a lesson's effect verdict is what it is (contract §21.4).

    Shows the effect the ledger published for the revision (both arms,
    probability_helps, assignment mismatches), the rule of §21.4 its
    verdict meets under the given policy (--effect-min-resolved,
    --effect-probability: give the deployment's), every task the lesson was
    withheld from with what it would have got (or the reason it got
    nothing) and its assignment, and the treated arm's verdicts. From a
    journal the ledger runs with the given policy; from Kafka the records
    are read as published."""
    from recurrence_ledger.ledger.explain import RevisionNotFound, explain_effect

    if journal is not None:
        from recurrence_ledger.embedded.runner import journal_ledger

        outputs = journal_ledger(journal, ledger).outputs
        rows, withheld, observations = outputs[catalogue.REVISION_STATISTICS], outputs[catalogue.HOLDOUT_OBSERVATIONS], outputs[catalogue.OBSERVATIONS]
    elif bootstrap or kafka_config:
        from recurrence_ledger.kafka.kafka_io import read_topic

        connection = kafka_connection(bootstrap, kafka_config)
        with reporting_kafka_errors():
            codec = command_codec(schema_registry_url, None, kafka_config)
            rows, withheld, observations = (
                [value for *_, value in read_topic(connection, name, topic_prefix=topic_prefix, codec=codec) if value is not None]
                for name in (catalogue.REVISION_STATISTICS, catalogue.HOLDOUT_OBSERVATIONS, catalogue.OBSERVATIONS)
            )
    else:
        raise typer.BadParameter("give --journal FILE, or --bootstrap / KAFKA_BOOTSTRAP_SERVERS", param_hint="--journal")
    try:
        explanation = explain_effect(scope, artifact_id, revision, rows, withheld, observations, ledger.effect_min_resolved, ledger.effect_probability)
    except RevisionNotFound as error:
        console.print(f"error: {error}", style="red", highlight=False)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(explanation, indent=2, ensure_ascii=False))
        return
    print_effect_explanation(explanation)


def print_effect_explanation(explanation: dict) -> None:
    """The effect explanation as a tree (no console markup)."""
    from rich.tree import Tree

    effect = explanation["effect"]
    tree = Tree(f"{explanation['revision']} in {explanation['scope_id']}")
    if effect is None:
        tree.add("no effect: the lesson was never withheld from a linked outcome (contract §21.4)")
        console.print(tree, markup=False, highlight=False)
        return
    probability = "null (an arm has nothing resolved)" if effect["probability_helps"] is None else f"{effect['probability_helps']:.4f}"
    tree.add(f"verdict {effect['verdict']}, probability_helps {probability}")
    tree.add(explanation["rule"])
    treated, withheld = effect["treated"], effect["withheld"]
    arm = tree.add(f"treated arm: {treated['recurred']} of {treated['resolved']} resolved recurred")
    for row in explanation["treated"]:
        arm.add(f"{row['task_outcome']} (position {row['position']}): {row['verdict']}")
    arm = tree.add(f"withheld arm: {withheld['recurred']} of {withheld['resolved']} resolved recurred ({withheld['withheld']} withheld)")
    for row in explanation["withheld"]:
        outcome = row["verdict"] or f"no verdict ({row['reason']})"
        arm.add(f"{row['task_outcome']} (position {row['position']}): {outcome}, assignment {row['assignment']}")
    mismatches = effect["assignment_mismatches"]
    tree.add(f"assignment mismatches {mismatches}: left out of both arms (contract §21.5)"
             + (f"; withheld from {', '.join(explanation['mismatched'])} against the assignment" if explanation["mismatched"] else ""))
    console.print(tree, markup=False, highlight=False)
