"""Operator commands of the ``recurrence-ledger`` CLI: ``serve``, ``rank`` and
``stats``.

``rank`` and ``stats`` read the Redis view that the workers project from the
``recurrence-statistics`` and ``revision-statistics`` topics (contract §8,
§14; key layout in ``recurrence_ledger.read.projection``), with the same reader as the HTTP
API (``recurrence_ledger.api.ViewReader``); they never recompute a rule. Both take
``--redis-url`` (env REDIS_URL: ``redis://user:password@host:port/db`` for
an ACL user, ``rediss://…`` for TLS, with the CA in the URL's
``ssl_ca_certs`` or RL_REDIS_CA_FILE; ``recurrence_ledger.read.connect``)
and ``--topic-prefix`` (env RL_TOPIC_PREFIX, which names the view's
namespace as the worker does). Exit codes: 0, 1 when Redis does not answer,
refuses the credentials or the TLS handshake, or ``--scope`` names a scope
the view does not hold, 2 for a usage error. A Redis URL is only ever
printed without its password.

``serve`` runs the HTTP API (``recurrence_ledger.api.app``); who may read it is
decided here: the API token (RL_API_TOKEN, or ``--token-file`` /
RL_API_TOKEN_FILE), ``--cors-origin``, and the bind address — without a
token only a loopback ``--host`` unless ``--allow-unauthenticated``. Who may
decide too: ``--reviewer-tokens FILE`` (RL_REVIEWER_TOKENS_FILE; TOML,
``recurrence_ledger.api.settings.read_reviewer_tokens``) lets each listed
reviewer post review decisions (contract §18), which the API publishes on
the Kafka cluster of ``--bootstrap`` / ``--kafka-config`` (with
``--schema-registry-url`` for a registry's ids).

``rank`` lists every revision of every scope (or of ``--scope``) that has a
selection or a verdict — the view's revisions hash, one last
RevisionStatistics record per revision, not only each scope's top N
— each with artifact_ref, signature_key, terminal_recurred_streak,
needs_review and the revision's figures (repair_surface, selected / recurred /
avoided counts, yield, low_yield; unknown, unknown_reasons, ambiguous and
binding_suspect of contract §17). It orders them as the API's
``sort=streak`` does (``recurrence_ledger.ledger.statistics.rank_key``:
streak, then ArtifactRef, then signature_key, then scope id); ``--surface`` keeps the rows of one repair_surface, ``--low-yield`` the
low-yield ones, ``--binding-suspect`` the binding suspects, ``--limit`` the first N.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich import box
from rich.cells import cell_len
from rich.table import Table

from recurrence_ledger import policy
from recurrence_ledger.cli.options import (
    SERVE_PANEL, BootstrapOption, KafkaConfigOption, MetricsHostOption, MetricsPortOption, ReadRedisOption, RegistryOption, ViewPrefixOption,
    json_option, setting_option,
)
from recurrence_ledger.embedded.output import stderr_console, stdout_console
from recurrence_ledger.wording import counted
from recurrence_ledger.ledger.holdout_records import EFFECT_VERDICTS
from recurrence_ledger.ledger.models import REPAIR_SURFACES

if TYPE_CHECKING:  # the read side is imported by the commands that read, not by --help
    from recurrence_ledger.read.reader import ViewReader
from recurrence_ledger.redact import redact_url
from recurrence_ledger.settings import (
    DEFAULT_METRICS_HOST, ENV_API_TOKEN, ENV_API_TOKEN_FILE, ENV_REVIEWER_TOKENS_FILE, kafka_environment, settings as process_settings,
)

console = stdout_console()
errors = stderr_console()


ScopeOption = Annotated[Optional[str], typer.Option("--scope", help="Only this scope (default: every scope in the view).")]
JsonOption = Annotated[bool, json_option("Print JSON instead of a table.")]


def _reader(redis_url: str | None, topic_prefix: str) -> ViewReader:
    """The view reader of ``rank`` / ``stats``; exit 2 for a URL or CA file
    redis-py cannot use."""
    from recurrence_ledger.api.settings import ApiSettings
    from recurrence_ledger.read.reader import ViewReader

    settings = ApiSettings.from_env(redis_url=redis_url, topic_prefix=topic_prefix)
    try:
        return ViewReader(settings.redis_url, settings.resolved_namespace, ca_file=settings.redis_ca_file)
    except ValueError as error:
        errors.print(f"error: {error}", style="red", highlight=False)
        raise typer.Exit(2) from None


def _fail(message: str) -> typer.Exit:
    errors.print(f"error: {message}", style="red", highlight=False)
    return typer.Exit(1)


def _read_scopes(reader: ViewReader, scope: str | None, read: Callable[[str], Any]) -> dict[str, Any]:
    """``scope_id -> read(scope_id)`` for ``scope`` or every scope of the
    view, sorted, leaving out scopes ``read`` finds nothing for. Raises
    typer.Exit(1) for an unknown scope or when Redis is down."""
    import redis

    from recurrence_ledger.read.connect import describe_error

    try:
        scope_ids = [scope] if scope is not None else reader.scope_ids()
        found = {scope_id: read(scope_id) for scope_id in scope_ids}
    except redis.RedisError as error:
        raise _fail(f"cannot read the Redis view {reader.namespace} at {reader.where}: {describe_error(error)}") from None
    if scope is not None and found[scope] is None:
        raise _fail(f"unknown scope {scope!r}: not in the Redis view {reader.namespace}")
    return {scope_id: value for scope_id, value in found.items() if value is not None}


def _snapshots(reader: ViewReader, scope: str | None) -> dict:
    """``scope_id -> ScopeSnapshot`` for ``scope`` or every scope, sorted.
    Raises typer.Exit(1) for an unknown scope or when Redis is down."""
    return _read_scopes(reader, scope, reader.snapshot)


#: The RevisionStatistics fields ``rank`` prints besides the ArtifactRef and signature.
ROW_FIELDS = ("terminal_recurred_streak", "repair_surface", "selected", "recurred", "avoided", "yield", "low_yield", "needs_review")
#: The fields of contract §17 (revision 3) ``rank`` prints, with the value of
#: a row written before revision 3, which lacks them.
UNKNOWN_FIELDS = {"unknown": 0, "ambiguous": 0, "binding_suspect": False}


#: What ``rank --by`` orders by: ``streak`` (contract §8 order) or
#: ``effect`` (the revisions with an effect, contract §21.4, the likeliest
#: to help first: the API's ``sort=probability_helps``).
RANK_BY = ("streak", "effect")
#: The effect verdicts of contract §21.4, in the contract's order.


def ranked_rows(
    revisions: dict[str, list[dict]], limit: int, surface: str | None = None, low_yield: bool = False, binding_suspect: bool = False,
    by: str = "streak", verdict: str | None = None,
) -> list[dict]:
    """The rows ``rank`` prints: ``revisions`` maps a scope id to
    its RevisionStatistics rows (every revision of the scope, as
    ``recurrence_ledger.api.ViewReader.revisions`` reads them); keeps those whose
    repair_surface is ``surface`` when given, only low-yield ones with
    ``low_yield`` and only binding suspects with ``binding_suspect``; sorts them in contract §8 order
    (``recurrence_ledger.ledger.statistics.rank_key``: streak, ArtifactRef,
    signature_key, scope id — the API's ``sort=streak`` order) and returns the first
    ``limit``. Each row: ``{rank, scope_id, artifact_ref, signature_key,
    terminal_recurred_streak, repair_surface, selected, recurred, avoided,
    yield, low_yield, needs_review, unknown, unknown_reasons, ambiguous,
    binding_suspect, effect}`` (``unknown_reasons`` with all eleven reasons;
    ``effect`` as the ledger published it, contract §21.4). With ``by``
    ``effect`` only the revisions with an effect (and, with ``verdict``,
    that verdict), ordered as the API's ``sort=probability_helps``."""
    from recurrence_ledger.ledger.statistics import rank_key, reason_counts
    from recurrence_ledger.read.reader import REVISION_SORTS

    rows = [
        {
            "scope_id": scope_id,
            "artifact_ref": row["artifact_ref"],
            "signature_key": row["signature_key"],
            **{name: row[name] for name in ROW_FIELDS},
            **{name: row.get(name, default) for name, default in UNKNOWN_FIELDS.items()},
            "unknown_reasons": reason_counts(row.get("unknown_reasons")),
            "effect": row.get("effect"),
        }
        for scope_id, scope_rows in revisions.items()
        for row in scope_rows
    ]
    if by == "effect" or verdict is not None:
        rows = [row for row in rows if row["effect"] is not None and verdict in (None, row["effect"]["verdict"])]
    if surface is not None:
        rows = [row for row in rows if row["repair_surface"] == surface]
    if low_yield:
        rows = [row for row in rows if row["low_yield"]]
    if binding_suspect:
        rows = [row for row in rows if row["binding_suspect"]]
    rows.sort(key=REVISION_SORTS["probability_helps"] if by == "effect" else rank_key)
    return [{"rank": rank, **row} for rank, row in enumerate(rows[:limit], start=1)]


def arm_label(arm: dict) -> str:
    """``1/5``: an arm's recurred of resolved observations (contract §21.4)."""
    return f"{arm['recurred']}/{arm['resolved']}"


def effect_table(rows: list[dict], title: str) -> Table:
    """The ``rank --by effect`` table: per revision its published effect
    (contract §21.4) — verdict, probability_helps, each arm's recurred of
    resolved and recurrence rate, assignment mismatches."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for header, right in (("#", True), ("scope", False), ("revision", False), ("signature", False), ("verdict", False), ("P(helps)", True),
                          ("treated", True), ("withheld", True), ("mismatches", True)):
        table.add_column(header, justify="right" if right else "left", overflow="fold")
    for row in rows:
        effect = row["effect"]
        probability = "-" if effect["probability_helps"] is None else f"{effect['probability_helps']:.4f}"
        rates = [rate if rate is None else f"{rate:.2f}" for rate in (effect["recurrence_rate_treated"], effect["recurrence_rate_withheld"])]
        table.add_row(
            str(row["rank"]), row["scope_id"], revision_label(row["artifact_ref"]), row["signature_key"], effect["verdict"], probability,
            arm_label(effect["treated"]) + (f" = {rates[0]}" if rates[0] else ""), arm_label(effect["withheld"]) + (f" = {rates[1]}" if rates[1] else ""),
            str(effect["assignment_mismatches"]),
            style="red" if effect["verdict"] == "harms" else "green" if effect["verdict"] == "helps" else None,
        )
    return table


def _revisions(reader: ViewReader, scope: str | None) -> dict[str, list[dict]]:
    """``scope_id -> RevisionStatistics rows`` (the view's revisions hash) for ``scope`` or every scope, sorted by scope id. Raises
    typer.Exit(1) for an unknown scope or when Redis is down."""
    return {scope_id: snap.rows for scope_id, snap in _read_scopes(reader, scope, reader.revisions).items()}


#: ``(column, header, right-aligned)`` of the ``rank`` table, in order.
RANK_COLUMNS = (
    ("rank", "#", True), ("scope", "scope", False), ("revision", "revision", False), ("signature", "signature", False),
    ("surface", "surface", False), ("streak", "streak", True), ("recurred", "recurred", True), ("avoided", "avoided", True),
    ("unknown", "unknown", True), ("yield", "yield", True), ("review", "review", False),
)
#: How the ``rank`` table is narrowed while it is wider than the terminal,
#: step by step: ("cut", column, width) cuts a column's cells to that width
#: with an ellipsis (no other cell is ever cut); ("drop", column, …) leaves
#: those columns out (yield still tells how recurred and avoided compare,
#: the review column still names binding suspects; --json has them).
RANK_NARROWING = (
    ("cut", "signature", 24), ("drop", "recurred", "avoided"), ("cut", "signature", 16), ("cut", "scope", 12),
    ("cut", "revision", 12), ("cut", "surface", 13), ("drop", "unknown"), ("cut", "surface", 10), ("cut", "signature", 8),
)
#: Spaces between two columns of a table with pad_edge=False, collapse_padding=True, show_edge=False.
COLUMN_GAP = 2


def revision_label(artifact_ref: dict) -> str:
    """``P1 r2`` (the family is left out when it is experience, as it is for
    every revision the view holds)."""
    family = "" if artifact_ref["family"] == "experience" else f"{artifact_ref['family']}/"
    return f"{family}{artifact_ref['artifact_id']} r{artifact_ref['revision']}"


def rank_table(rows: list[dict], title: str, width: int) -> tuple[Table, list[str]]:
    """The ``rank`` table of ``rows`` (:func:`ranked_rows`) fitted to
    ``width`` columns: one line per row, never a cell broken over lines.
    The scope column is left out when every row has the same scope (the
    title names it), the unknown column when no row has an unknown
    selection; while the table is too wide it is narrowed as
    :data:`RANK_NARROWING` says. Returns the table and the names of the
    columns left out."""
    scopes = sorted({row["scope_id"] for row in rows})
    cells: dict[str, list[str]] = {
        "rank": [str(row["rank"]) for row in rows],
        "scope": [row["scope_id"] for row in rows],
        "revision": [revision_label(row["artifact_ref"]) for row in rows],
        "signature": [row["signature_key"] for row in rows],
        "surface": [row["repair_surface"] or "-" for row in rows],
        "streak": [str(row["terminal_recurred_streak"]) for row in rows],
        "recurred": [str(row["recurred"]) for row in rows],
        "avoided": [str(row["avoided"]) for row in rows],
        "unknown": [str(row["unknown"]) for row in rows],
        "yield": ["-" if row["yield"] is None else f"{row['yield']:.2f}" + (" low" if row["low_yield"] else "") for row in rows],
        # Never both (contract §17): a binding suspect has no terminal verdict, a revision needing review has a streak.
        "review": ["yes" if row["needs_review"] else "suspect" if row["binding_suspect"] else "" for row in rows],
    }
    # Columns without information are left out: scope when every row has the same (the title names it),
    # unknown when no row has an unknown selection (a view written before contract revision 3, or full evidence).
    unknown = any(row["unknown"] for row in rows)
    columns = [column for column in RANK_COLUMNS if not (column[0] == "scope" and len(scopes) == 1) and (column[0] != "unknown" or unknown)]
    natural = {name: max([cell_len(header), *(cell_len(cell) for cell in cells[name])]) for name, header, _ in columns}
    widths = dict(natural)

    def total() -> int:
        return sum(widths.values()) + COLUMN_GAP * (len(widths) - 1)

    left_out: list[str] = []
    cut: set[str] = set()
    for step, name, *rest in RANK_NARROWING:
        if total() <= width or name not in widths:
            continue
        if step == "drop":
            for dropped in (name, *rest):
                del widths[dropped]
                left_out.append(dropped)
        elif widths[name] > rest[0]:
            widths[name] = max(rest[0], widths[name] - (total() - width))
            cut.add(name)
    # Width a left-out column freed goes back to the cut ones, signature first.
    for _step, name, *_ in RANK_NARROWING:
        if name in cut and total() < width:
            widths[name] = min(natural[name], widths[name] + width - total())
    if len(scopes) == 1:
        title += f", scope {scopes[0]}"
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, show_edge=False)
    for name, header, right in columns:
        if name in widths:
            fixed = {"width": widths[name]} if name in cut else {}
            table.add_column(header, justify="right" if right else "left", no_wrap=True, overflow="ellipsis", **fixed)
    for index, row in enumerate(rows):
        style = "red" if row["needs_review"] else "dark_orange" if row["binding_suspect"] else None
        table.add_row(*(cells[name][index] for name, _, _ in columns if name in widths), style=style)
    return table, left_out


def rank_command(
    scope: ScopeOption = None,
    surface: Annotated[Optional[str], typer.Option("--surface", help="Only revisions with this repair_surface: " + ", ".join(REPAIR_SURFACES) + ".")] = None,
    low_yield: Annotated[bool, typer.Option("--low-yield", help="Only low-yield revisions (selected ≥ 3, yield < 0.3).")] = False,
    binding_suspect: Annotated[
        bool, typer.Option("--binding-suspect", help="Only binding suspects: revisions whose bound check proves nothing.")
    ] = False,
    by: Annotated[str, typer.Option("--by", help="streak (contract §8 order) or effect: the revisions with an effect, likeliest to help first (§21.4).")] = "streak",
    effect: Annotated[Optional[str], typer.Option("--effect", help="Only revisions with this effect verdict: " + ", ".join(EFFECT_VERDICTS) + ".")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Rows to print.")] = 10,
    as_json: JsonOption = False,
    redis_url: ReadRedisOption = None,
    topic_prefix: ViewPrefixOption = "",
) -> None:
    """Every revision by streak (or by effect), from the Redis view.

    Lists every revision with a selection or a verdict (not only each
    scope's top N) in the order of the API's sort=streak: streak, then
    ArtifactRef, then signature, then scope. Each row has the revision's
    repair_surface, recurred, avoided and unknown counts, yield and review
    flag, and marks binding suspects; the table fits the terminal (long
    cells end with an ellipsis), --json prints every field.

    --by effect lists the revisions with an effect (contract §21.4: a
    lesson withheld from some tasks) as the ledger published it, the
    likeliest to help first, with each arm; --effect harms keeps the
    lessons that do worse than withholding them."""
    if surface is not None and surface not in REPAIR_SURFACES:
        raise typer.BadParameter(f"{surface!r} is not a repair_surface; one of: {', '.join(REPAIR_SURFACES)}", param_hint="--surface")
    if by not in RANK_BY:
        raise typer.BadParameter(f"{by!r}: one of {', '.join(RANK_BY)}", param_hint="--by")
    if effect is not None and effect not in EFFECT_VERDICTS:
        raise typer.BadParameter(f"{effect!r} is not an effect verdict; one of: {', '.join(EFFECT_VERDICTS)}", param_hint="--effect")
    reader = _reader(redis_url, topic_prefix)
    try:
        rows = ranked_rows(_revisions(reader, scope), limit, surface, low_yield, binding_suspect, by, effect)
    finally:
        reader.close()
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    if by == "effect" or effect is not None:
        if not rows:
            where = f"scope {scope}" if scope is not None else "any scope"
            return console.print(f"no revision with {'effect ' + effect if effect else 'an effect'} in {where} of the Redis view {reader.namespace}", highlight=False)
        console.print(effect_table(rows, f"revisions by effect ({reader.namespace})" + (f", {effect}" if effect else "")), highlight=False)
        console.print(
            "Each lesson's effect as the ledger published it (contract §21.4): treated = recurred/resolved with the lesson, withheld = "
            "without it; P(helps) = probability that the recurrence rate without the lesson is higher. Likeliest to help first.",
            style="dim", highlight=False,
        )
        return
    filters = (f" with repair_surface {surface}" if surface else "") + (" with a low yield" if low_yield else "") + (
        " that are binding suspects" if binding_suspect else "")
    if not rows:
        where = f"scope {scope}" if scope is not None else "any scope"
        console.print(f"no revisions{filters} in {where} of the Redis view {reader.namespace}", highlight=False)
        return
    title = f"revisions by streak ({reader.namespace})" + (f", repair_surface {surface}" if surface else "") + (", low yield" if low_yield else "") + (
        ", binding suspects" if binding_suspect else "")
    table, left_out = rank_table(rows, title, console.width)
    console.print(table.title, style="bold", highlight=False)
    table.title = None
    console.print(table)
    console.print(
        "Ordered by streak, then ArtifactRef, then signature (as the API's sort=streak). yield = avoided / (avoided + recurred), "
        "- without terminal verdicts; low = low yield (selected ≥ 3, yield < 0.3), surfaced only. unknown = selections "
        "without a terminal verdict; suspect = a binding suspect, its bound check proves nothing."
        + (f" Left out at this width: {', '.join(left_out)} (see --json)." if left_out else ""),
        style="dim", highlight=False,
    )


STAT_COLUMNS = ("as_of_position", "selected", "recurred", "avoided", "needing_review", "unknown", "unlinked_handoff_citations", "pending_outcomes", "late_revisions")


def stat_headers() -> dict[str, str]:
    """The column headers of ``stats``: each field's title as the record
    states it (``recurrence_ledger.ledger.records``), a word per line so
    that the table fits 80 columns."""
    from recurrence_ledger.ledger.records import ScopeStatistics

    return {name: ScopeStatistics.model_fields[name].title.replace(" ", "\n") for name in STAT_COLUMNS}


def stat_notes() -> dict[str, str]:
    """The counts a scope's line under the ``stats`` table names, besides
    its binding suspects and unknown reasons: the other ScopeStatistics
    figures marked ``total`` (``total_fields``), with their titles."""
    from recurrence_ledger.ledger.fields import total_fields
    from recurrence_ledger.ledger.records import ScopeStatistics

    return {name: ScopeStatistics.model_fields[name].title for name in total_fields(ScopeStatistics) if name != "binding_suspects"}


def reason_summary(counts: dict | None) -> str:
    """The reasons of contract §17 that occurred, in the contract's order:
    ``"check_missing 2, check_failed 1"``; "" when none."""
    from recurrence_ledger.ledger.statistics import reason_counts

    return ", ".join(f"{reason} {count}" for reason, count in reason_counts(counts).items() if count)


def unknown_line(record: dict) -> str | None:
    """The line ``stats`` prints under its table for one scope: its binding
    suspects, its unknown selections by reason, its ambiguous, unmatched,
    forward, withheld and holdout-conflict counts (those that are not 0)
    and its lessons by effect verdict (contract §21.4, when it has any);
    None when all are 0."""
    suspects = record.get("binding_suspects", 0)
    parts = [counted(suspects, "binding suspect")] if suspects else []
    if record["unknown"]:
        reasons = reason_summary(record.get("unknown_reasons"))
        parts.append(f"unknown {record['unknown']}" + (f" ({reasons})" if reasons else ""))
    parts += [f"{label} {record[name]}" for name, label in stat_notes().items() if record.get(name, 0)]
    effects = record.get("effects") or {}
    if any(effects.values()):  # contract §21.4: the scope's lessons by effect verdict
        parts.append("effects " + ", ".join(f"{verdict} {effects.get(verdict, 0)}" for verdict in EFFECT_VERDICTS))
    return f"{record['scope_id']}: " + "; ".join(parts) if parts else None


def stats_command(
    scope: ScopeOption = None,
    as_json: JsonOption = False,
    redis_url: ReadRedisOption = None,
    topic_prefix: ViewPrefixOption = "",
) -> None:
    """Each scope's statistics record (contract §8), from the Redis view.

    Under the table of counters, a line per scope gives its binding
    suspects, its unknown selections by reason and its ambiguous, unmatched
    and forward counts. --json prints a JSON array of the
    records, sorted by scope id, exactly as the view stores them."""
    reader = _reader(redis_url, topic_prefix)
    try:
        snapshots = _snapshots(reader, scope)
    finally:
        reader.close()
    records = [snap.record for snap in snapshots.values()]
    if as_json:
        print(json.dumps(records, ensure_ascii=False))
        return
    if not records:
        console.print(f"no scopes in the Redis view {reader.namespace}: no statistics record has been projected into it", highlight=False)
        return
    table = Table(title=f"recurrence statistics ({reader.namespace})", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("scope", overflow="fold")
    headers = stat_headers()
    for name in STAT_COLUMNS:
        table.add_column(headers[name], justify="right")
    for record in records:
        table.add_row(record["scope_id"], *(str(record[name]) for name in STAT_COLUMNS))
    console.print(table)
    for record in records:
        line = unknown_line(record)
        if line:
            console.print(line, style="dark_orange" if record.get("binding_suspects", 0) else None, highlight=False)
    console.print(
        "unknown, unlinked Handoff citations and pending outcomes are evidence gaps (coverage), not failures; "
        "late = late revisions; binding suspects = revisions whose bound check proves nothing "
        "(rank --binding-suspect lists them); effects = lessons withheld from some tasks, by verdict (rank --by effect lists them).",
        style="dim", highlight=False,
    )


def serve_command(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on. Without an API token only a loopback address (see --allow-unauthenticated).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port.")] = 8080,
    redis_url: ReadRedisOption = None,
    topic_prefix: ViewPrefixOption = "",
    token_file: Annotated[
        Optional[Path],
        typer.Option(
            "--token-file", envvar=ENV_API_TOKEN_FILE, dir_okay=False, show_default=False,
            help=f"File holding the API token (or set {ENV_API_TOKEN}). With a token, every endpoint but /healthz, the dashboard page, "
            "its static files and the docs answers 401 without Authorization: Bearer <token>.",
        ),
    ] = None,
    cors_origin: Annotated[
        Optional[list[str]],
        typer.Option("--cors-origin", show_default=False, help="An origin (scheme://host[:port]) whose web pages may call the API; repeatable. Default: none, no CORS headers."),
    ] = None,
    allow_unauthenticated: Annotated[
        bool, typer.Option("--allow-unauthenticated", help="Serve without an API token on a non-loopback --host: anyone who reaches the port reads the view.")
    ] = False,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level.")] = "info",
    access_log: Annotated[
        Optional[bool],
        typer.Option(
            "--access-log/--no-access-log", show_default=False,
            help="Log one line per request (uvicorn's access log). Default: only at --log-level debug or trace, since it costs CPU on every request.",
        ),
    ] = None,
    reviewer_tokens: Annotated[
        Optional[Path],
        typer.Option(
            "--reviewer-tokens", envvar=ENV_REVIEWER_TOKENS_FILE, dir_okay=False, show_default=False,
            help="TOML file of reviewer tokens (\\[reviewers] name = \"token\"): each may POST /review-candidates/{id}/decision, "
            "which is published to Kafka as that reviewer's (needs --bootstrap or --kafka-config). Default: no one decides.",
        ),
    ] = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    schema_registry_url: RegistryOption = None,
    limit_concurrency: Annotated[int, setting_option(policy.SERVE_LIMIT_CONCURRENCY, SERVE_PANEL)] = policy.SERVE_LIMIT_CONCURRENCY.default,
    timeout_keep_alive: Annotated[int, setting_option(policy.SERVE_TIMEOUT_KEEP_ALIVE, SERVE_PANEL)] = policy.SERVE_TIMEOUT_KEEP_ALIVE.default,
    header_timeout: Annotated[int, setting_option(policy.SERVE_HEADER_TIMEOUT, SERVE_PANEL)] = policy.SERVE_HEADER_TIMEOUT.default,
    max_header_bytes: Annotated[int, setting_option(policy.SERVE_MAX_HEADER_BYTES, SERVE_PANEL)] = policy.SERVE_MAX_HEADER_BYTES.default,
    metrics_port: MetricsPortOption = None,
    metrics_host: MetricsHostOption = DEFAULT_METRICS_HOST,
) -> None:
    """Serve the statistics API and the dashboard (uvicorn).

    GET / is the dashboard, /scopes… the JSON API, /docs and /redoc its
    documentation (no CDN), /openapi.json, /healthz. The review threshold it
    shows is the one the workers stored in the view.

    With an API token (RL_API_TOKEN or --token-file) every /scopes… request
    needs Authorization: Bearer <token>; the dashboard asks for the token
    once per browser tab. Without a token serve listens on loopback only,
    unless --allow-unauthenticated. Exit code 2 for an unusable token, origin
    or Redis URL, a non-loopback --host without a token, or a --port that
    cannot be bound (another process has it).

    With --reviewer-tokens, each reviewer of the file may post review
    decisions (POST /review-candidates/{id}/decision, its reviewer token as
    Bearer; never the read token): the API publishes them to the
    review-decisions topic of --bootstrap / --kafka-config. Exit code 2 for
    an unusable tokens file or Kafka settings, or reviewer tokens without
    Kafka.

    With --metrics-port, request counts and times by route are served as
    Prometheus text on --metrics-host:PORT (exit code 2 when it cannot be
    bound)."""
    from recurrence_ledger.api.app import decision_publisher, serve
    from recurrence_ledger.api.settings import ApiSettings, api_token_from_env, check_origin, is_loopback, read_api_token, read_reviewer_tokens
    from recurrence_ledger.api.transport import ServeLimits
    from recurrence_ledger.cli.clients import check_port
    from recurrence_ledger.kafka.client_properties import load_connection

    env = process_settings()
    try:
        if token_file is not None:
            token = read_api_token(env.api_token.get_secret_value() if env.api_token else None, token_file)
        else:
            token = api_token_from_env()
        origins = tuple(check_origin(origin) for origin in cors_origin or ())
        reviewers = read_reviewer_tokens(reviewer_tokens) if reviewer_tokens is not None else ()
        kafka = load_connection(bootstrap, kafka_config, kafka_environment()) if reviewers and (bootstrap or kafka_config) else None
    except ValueError as error:
        errors.print(f"error: {error}", style="red", highlight=False)
        raise typer.Exit(2) from None
    if token is None and not is_loopback(host) and not allow_unauthenticated:
        errors.print(
            f"error: refusing to serve the view without an API token on {host}, which is not a loopback address: anyone who "
            f"reaches the port could read it. Set {ENV_API_TOKEN} or --token-file FILE, or --host 127.0.0.1, or (on a network "
            "you trust) --allow-unauthenticated.",
            style="red", highlight=False,
        )
        raise typer.Exit(2)
    # Without a token on loopback, answer only requests addressed to a
    # loopback name: a web page cannot then reach the API through a DNS
    # name it rebinds to 127.0.0.1.
    allowed_hosts = ("127.0.0.1", "localhost", "::1", host.strip("[]").lower()) if token is None and is_loopback(host) else ()
    settings = ApiSettings.from_env(
        redis_url=redis_url, topic_prefix=topic_prefix, api_token=token, cors_origins=origins, allowed_hosts=allowed_hosts,
        reviewer_tokens=reviewers or None, kafka=kafka, schema_registry_url=schema_registry_url,
    )
    try:
        decision_publisher(settings)  # refuses reviewer tokens without Kafka, or the API token among them
    except ValueError as error:
        errors.print(f"error: {error}", style="red", highlight=False)
        raise typer.Exit(2) from None
    check_port(port, host, what="the API")
    check_port(metrics_port, metrics_host)
    if token is not None:
        access = "API token required"
    elif allowed_hosts:
        access = "no API token: loopback only"
    else:
        access = "no API token (--allow-unauthenticated): anyone who reaches the port reads the view"
    if reviewers:
        access += f"; {counted(len(reviewers), 'reviewer')} may decide (decisions to {kafka.bootstrap})"
    console.print(
        f"serving http://{host}:{port}/ (view {settings.resolved_namespace} on {redact_url(settings.redis_url)}; {access}"
        + (f"; CORS for {', '.join(origins)}" if origins else "") + ")",
        style="bold", highlight=False,
    )
    try:
        verbose = log_level.lower() in ("debug", "trace")
        limits = ServeLimits(limit_concurrency=limit_concurrency, timeout_keep_alive=timeout_keep_alive, header_timeout=header_timeout,
                             max_header_bytes=max_header_bytes)
        serve(settings, host=host, port=port, log_level=log_level, access_log=access_log if access_log is not None else verbose, limits=limits,
              metrics=(metrics_port, metrics_host) if metrics_port is not None else None)
    except ValueError as error:  # the Redis URL or CA file
        errors.print(f"error: {error}", style="red", highlight=False)
        raise typer.Exit(2) from None
