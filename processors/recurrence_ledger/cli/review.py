"""``recurrence-ledger review``: human decisions on review candidates,
against Kafka (contract §18) — ``list`` and ``show`` read the
``review-candidates`` and ``review-status`` topics whole; ``approve`` and
``reject`` publish a ReviewDecision to ``review-decisions``
(``recurrence_ledger.kafka.review``), after the checks the API makes too:
the candidate is known, not already decided, its scope's ``as_of_position``
(from ``recurrence-statistics``) is the decision's position, a rejection has
a reason, a fix revision is a higher revision of the candidate's artifact;
a rejection may carry a reason code (``--reason-code``, contract §24).

A candidate is named by its candidate_id, or by any unique beginning of
its hex digits (``3f9a1c``). The reviewer is ``--reviewer``: on Kafka who
may decide is the principal's ACLs (``topics acls --role reviewer``). Exit
codes: 0; 1 when the topics cannot be read, the candidate is unknown or
ambiguous, already decided, or the decision is not delivered; 2 for a usage
error (a rejection without a reason, a bad --fix-revision).
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Optional

import typer
from rich import box
from rich.table import Table

from recurrence_ledger.cli.clients import command_codec, kafka_connection, reporting_kafka_errors, console
from recurrence_ledger.cli.options import TOPICS_ACCESS, TopicsAccess, json_option, takes
from recurrence_ledger.ledger.severity import REASON_CODES

review_app = typer.Typer(help="Human decisions on review candidates (contract §18), against Kafka.", no_args_is_help=True, rich_markup_mode="rich")


StatusOption = Annotated[str, typer.Option("--status", help="open (default), superseded, approved, rejected, decided (approved or rejected) or all.")]
ReviewScopeOption = Annotated[Optional[str], typer.Option("--scope", help="Only this scope's candidates.")]
CandidateArgument = Annotated[str, typer.Argument(help="The candidate_id (sha256:…) or a unique beginning of its hex digits.", show_default=False)]
ReviewerOption = Annotated[str, typer.Option("--reviewer", help="Who decides (an identifier; recorded in the decision).", show_default=False)]
ReviewJsonOption = Annotated[bool, json_option("Print JSON instead of a table.")]
#: ``--reason-code`` of ``review reject``: the codes of contract §24 (``severity.REASON_CODES``).
ReasonCode = Enum("ReasonCode", {code: code for code in REASON_CODES}, type=str)


def _read(access: TopicsAccess, statistics: bool = False):  # noqa: ANN202 - lazy imports
    """The connection, the codec and the review topics as read whole."""
    from recurrence_ledger.kafka.review import read_review_topics

    connection = kafka_connection(access.bootstrap, access.kafka_config)
    codec = command_codec(access.schema_registry_url, kafka_config=access.kafka_config)
    with reporting_kafka_errors():
        topics = read_review_topics(connection, access.topic_prefix, codec, statistics=statistics)
    return connection, codec, topics


def passes(status: str, review_filter: str) -> bool:
    """Whether a candidate with ``status`` passes ``review_filter`` (``recurrence_ledger.read.keys.REVIEW_FILTERS``)."""
    return review_filter == "all" or status == review_filter or (review_filter == "decided" and status in ("approved", "rejected"))


def find_candidate(candidates: dict[str, dict], wanted: str) -> dict:
    """The queue item of the candidate ``wanted`` names (its id, or a unique
    beginning of its hex digits). Exit 1 when none or several match."""
    digits = wanted.removeprefix("sha256:").lower()
    matches = [item for candidate_id, item in candidates.items() if candidate_id.removeprefix("sha256:").startswith(digits)] if digits else []
    if len(matches) != 1:
        why = "no review candidate" if not matches else f"{len(matches)} review candidates"
        console.print(f"error: {why} on the topics has an id beginning {wanted!r}", style="red", highlight=False)
        raise typer.Exit(1)
    return matches[0]


def row(item: dict, status: dict | None) -> dict:
    """One candidate as ``list`` and ``show`` give it: the ReviewCandidate,
    its record's Kafka timestamp, its status (open without a ReviewStatus
    row), decision, fix revision, repair and a rejection's reason code
    (contract §24)."""
    return {
        **item["candidate"], "published_at_ms": item["timestamp"], "status": status["status"] if status else "open",
        "decision": status.get("decision") if status else None, "fix_revision": status.get("fix_revision") if status else None,
        "repair": status.get("repair") if status else None, "reason_code": status.get("reason_code") if status else None,
    }


def _revision(ref: dict | None) -> str:
    return "-" if ref is None else f"{ref['artifact_id']} r{ref['revision']}"


@review_app.command("list")
@takes(access=TOPICS_ACCESS)
def review_list_command(
    access: TopicsAccess,
    status: StatusOption = "open",
    scope: ReviewScopeOption = None,
    as_json: ReviewJsonOption = False,
) -> None:
    """The review candidates with their review status, from the topics.

    Reads review-candidates and review-status whole: every candidate whose
    status passes --status (open by default), oldest first, with its
    decision, fix revision and repair (contract §18)."""
    from recurrence_ledger.read.keys import REVIEW_FILTERS

    if status not in REVIEW_FILTERS:
        raise typer.BadParameter(f"{status!r} is not one of {', '.join(REVIEW_FILTERS)}", param_hint="--status")
    _, _, topics = _read(access)
    rows = [row(item, topics.statuses.get(candidate_id)) for candidate_id, item in topics.candidates.items()]
    rows = [r for r in rows if passes(r["status"], status) and (scope is None or r["scope_id"] == scope)]
    rows.sort(key=lambda r: (r["published_at_ms"], r["candidate_id"]))
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    if not rows:
        console.print(f"no review candidates with status {status}" + (f" in scope {scope}" if scope else ""), highlight=False)
        return
    table = Table(title=f"review candidates ({status})", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for header in ("candidate", "scope", "revision", "streak", "status", "decided by", "fix", "repair"):
        table.add_column(header, justify="right" if header == "streak" else "left", overflow="fold")
    for r in rows:
        decision = r["decision"]
        table.add_row(
            r["candidate_id"].removeprefix("sha256:")[:12], r["scope_id"], _revision(r["artifact_ref"]), str(r["streak"]), r["status"],
            decision["reviewer"] if decision else "-", _revision(r["fix_revision"]), r["repair"]["status"] if r["repair"] else "-",
        )
    console.print(table)


@review_app.command("show")
@takes(access=TOPICS_ACCESS)
def review_show_command(
    candidate: CandidateArgument,
    access: TopicsAccess,
    as_json: ReviewJsonOption = False,
) -> None:
    """One review candidate: its evidence and its review status.

    The failing items of the run that made it a candidate, its reason, and
    its status, decision, fix revision and the repair's counts (contract
    §18)."""
    _, _, topics = _read(access)
    item = find_candidate(topics.candidates, candidate)
    shown = row(item, topics.statuses.get(item["candidate"]["candidate_id"]))
    if as_json:
        print(json.dumps(shown, ensure_ascii=False))
        return
    console.print(f"{shown['candidate_id']} ({shown['status']})", style="bold", highlight=False)
    start = shown["run_start_position"]
    lines = [
        f"scope {shown['scope_id']}, {_revision(shown['artifact_ref'])}, signature {shown['signature_key']!r}",
        f"streak {shown['streak']} from {'the start of its history' if start is None else f'journal position {start}'}: {shown['reason']}",
        "failures: " + ", ".join(f"{ref['task_outcome_ref']['source_id']} {ref['item_kind']}[{ref['item_index']}]" for ref in shown["failure_refs"]),
    ]
    if shown["decision"]:
        decision = shown["decision"]
        lines.append(f"{decision['decision']} by {decision['reviewer']} at {decision['decided_at']} (position {decision['journal_position']})"
                     + (f": {decision['reason']}" if decision["reason"] else "")
                     + (f" (reason code {shown['reason_code']})" if shown["reason_code"] else ""))
    if shown["fix_revision"]:
        lines.append(f"fix revision {_revision(shown['fix_revision'])}")
    if shown["repair"]:
        repair = shown["repair"]
        lines.append(f"repair {repair['status']}: selected {repair['selected']}, avoided {repair['avoided']}, recurred {repair['recurred']}, "
                     f"unknown {repair['unknown']}, streak {repair['terminal_recurred_streak']}")
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def parse_fix_revision(text: str) -> dict:
    """``ARTIFACT:REVISION`` (the last ``:`` splits) as an Experience
    ArtifactRef. Raises typer.BadParameter."""
    artifact_id, colon, revision = text.rpartition(":")
    if not colon or not artifact_id or not revision.isdigit() or int(revision) < 1:
        raise typer.BadParameter(f"{text!r} is not ARTIFACT:REVISION (e.g. P1:2)", param_hint="--fix-revision")
    return {"family": "experience", "artifact_id": artifact_id, "revision": int(revision)}


def decide(candidate: str, decision: str, reviewer: str, reason: str | None, fix_revision: dict | None, access: TopicsAccess,
           reason_code: str | None = None) -> None:
    """Check and publish one decision (the module docstring)."""
    from recurrence_ledger.kafka.kafka_io import PublishError
    from recurrence_ledger.kafka.review import DecisionPublisher, DecisionRefused, new_decision

    connection, codec, topics = _read(access, statistics=True)
    item = find_candidate(topics.candidates, candidate)
    value = item["candidate"]
    position = topics.as_of.get(value["scope_id"])
    if position is None:
        console.print(f"error: recurrence-statistics holds no record of scope {value['scope_id']!r}: no position to decide at", style="red", highlight=False)
        raise typer.Exit(1)
    try:
        record = new_decision(value, topics.statuses.get(value["candidate_id"]), reviewer=reviewer, decision=decision, reason=reason,
                              fix_revision=fix_revision, journal_position=position, reason_code=reason_code)
    except DecisionRefused as refused:
        if refused.code == "invalid_value":
            raise typer.BadParameter(str(refused)) from None
        console.print(f"error: {refused} ({refused.code})", style="red", highlight=False)
        raise typer.Exit(1) from None
    with reporting_kafka_errors():
        try:
            where = DecisionPublisher(connection, access.topic_prefix, codec).publish(record)
        except PublishError as error:
            console.print(f"error: {error}", style="red", highlight=False)
            raise typer.Exit(1) from None
    console.print(
        f"{decision} {value['candidate_id']} ({value['scope_id']}, {_revision(value['artifact_ref'])}) as {reviewer} at position {position}: "
        f"decision {record['decision_id']} published to {where.topic}[{where.partition}]@{where.offset}; the worker applies it "
        "(review show gives its status)",
        highlight=False, soft_wrap=True,
    )


@review_app.command("approve")
@takes(access=TOPICS_ACCESS)
def review_approve_command(
    candidate: CandidateArgument,
    reviewer: ReviewerOption,
    access: TopicsAccess,
    fix_revision: Annotated[Optional[str], typer.Option("--fix-revision", metavar="ARTIFACT:REVISION", help="The revision that repairs it: a higher revision of the candidate's artifact (default: the lowest known one above it).")] = None,
    reason: Annotated[Optional[str], typer.Option("--reason", help="Why (optional for an approval).")] = None,
) -> None:
    """Approve a review candidate: publish the decision to review-decisions.

    The ledger then measures the fix revision's repair (contract §18):
    pending, held, recurring or failed."""
    fix = parse_fix_revision(fix_revision) if fix_revision is not None else None
    decide(candidate, "approved", reviewer, reason, fix, access)


@review_app.command("reject")
@takes(access=TOPICS_ACCESS)
def review_reject_command(
    candidate: CandidateArgument,
    reviewer: ReviewerOption,
    reason: Annotated[str, typer.Option("--reason", help="Why (required, not blank: a rejection stays auditable).", show_default=False)],
    access: TopicsAccess,
    reason_code: Annotated[Optional[ReasonCode], typer.Option(
        "--reason-code", show_default=False,
        help="Why, counted (contract §24): false_cause, broad_scope, weak_evidence, duplicate, not_reproducible or other.")] = None,
) -> None:
    """Reject a review candidate with a reason: publish the decision to review-decisions.

    --reason-code gives the reason a code the ledger counts in the
    scope's rejected_by_reason (without one: unspecified)."""
    decide(candidate, "rejected", reviewer, reason, None, access, reason_code.value if reason_code is not None else None)
