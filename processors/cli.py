"""The ``recurrence-ledger`` command line.

``run`` is the main job: the Kafka worker when KAFKA_BOOTSTRAP_SERVERS is
set, otherwise the embedded runner on a journal (by default the RFC's minimum
checkable evidence case shipped with the package). ``run-journal`` is
CONTRACT §11 exactly.
"""

from __future__ import annotations

import os
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from processors.embedded import RunSummary, run_journal
from processors.ledger.processor import LedgerConfig

app = typer.Typer(add_completion=False, no_args_is_help=True, help="recurrence-ledger: did what the agents learned from a failure help?")
console = Console()

EXAMPLE_JOURNAL = "openapi_drift.jsonl"

ThresholdOption = Annotated[int, typer.Option("--review-threshold", min=1, help="Streak at which a revision needs review (CONTRACT §8).")]
TopOption = Annotated[int, typer.Option("--top-revisions", min=0, help="N of top_revisions (CONTRACT §8).")]
HorizonOption = Annotated[
    Optional[int],
    typer.Option("--provenance-horizon", min=1, help="Journal positions a pending outcome may wait (CONTRACT §5); end of file always decides."),
]


def _config(review_threshold: int, top_revisions: int, provenance_horizon: int | None) -> LedgerConfig:
    return LedgerConfig(review_threshold=review_threshold, top_revisions_limit=top_revisions, provenance_horizon=provenance_horizon)


def print_summary(summary: RunSummary, out_dir: Path) -> None:
    """Per scope: selected / recurred / avoided / unknown / needing review
    (the last statistics record of each scope), then its top revisions."""
    table = Table(title="recurrence statistics (last record per scope)", box=box.SIMPLE_HEAD)
    table.add_column("scope", overflow="fold")
    for column in ("selected", "recurred", "avoided", "unknown", "needing review"):
        table.add_column(column, justify="right")
    for scope_id, stats in sorted(summary.statistics.items()):
        table.add_row(scope_id, *(str(stats[name]) for name in ("selected", "recurred", "avoided", "unknown", "needing_review")))
    console.print(table)
    for scope_id, stats in sorted(summary.statistics.items()):
        console.print(
            f"[bold]{scope_id}[/bold]: as_of_position {stats['as_of_position']}, "
            f"unlinked_handoff_citations {stats['unlinked_handoff_citations']}, "
            f"pending_outcomes {stats['pending_outcomes']}, late_revisions {stats['late_revisions']}"
        )
        for row in stats["top_revisions"]:
            ref = row["artifact_ref"]
            console.print(
                f"  streak {row['terminal_recurred_streak']}: {ref['artifact_id']} r{ref['revision']} "
                f"'{row['signature_key']}'",
                highlight=False,
            )
    counts = ", ".join(f"{topic} {count}" for topic, count in summary.records.items())
    console.print(f"{summary.lines} journal records → {counts}", highlight=False)
    console.print(f"output files: {out_dir}/<topic>.jsonl", highlight=False)


@app.command("run-journal")
def run_journal_command(
    journal: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="Journal file (JSON Lines).")],
    out: Annotated[Path, typer.Option("--out", file_okay=False, help="Output directory: one <topic>.jsonl per output topic.")],
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    provenance_horizon: HorizonOption = 10_000,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar, no summary.")] = False,
) -> None:
    """Process a journal file with the embedded runner (CONTRACT §11)."""
    summary = run_journal(journal, out, _config(review_threshold, top_revisions, provenance_horizon), show_progress=not quiet)
    if not quiet:
        print_summary(summary, out)


@app.command("run")
def run_command(
    journal: Annotated[Optional[Path], typer.Argument(exists=True, dir_okay=False, help="Journal for the embedded runner (default: the packaged minimum case).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", file_okay=False, help="Output directory (default: a new temporary one).")] = None,
    review_threshold: ThresholdOption = 3,
    top_revisions: TopOption = 10,
    provenance_horizon: HorizonOption = 10_000,
) -> None:
    """The main job: the Kafka worker when KAFKA_BOOTSTRAP_SERVERS is set,
    else the embedded runner on JOURNAL (default: the RFC's minimum case)."""
    config = _config(review_threshold, top_revisions, provenance_horizon)
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        try:
            from processors.worker import run_worker
        except ImportError:
            console.print("KAFKA_BOOTSTRAP_SERVERS is set, but this build has no Kafka worker yet; unset it to use the embedded runner.", style="red")
            raise typer.Exit(2) from None
        run_worker(config)
        return
    out_dir = out or Path(tempfile.mkdtemp(prefix="recurrence-ledger-"))
    if journal is None:
        with resources.as_file(resources.files("processors.examples") / EXAMPLE_JOURNAL) as packaged:
            console.print(f"embedded runner (no KAFKA_BOOTSTRAP_SERVERS): packaged journal {EXAMPLE_JOURNAL}", style="bold")
            summary = run_journal(packaged, out_dir, config)
    else:
        summary = run_journal(journal, out_dir, config)
    print_summary(summary, out_dir)


def main() -> None:  # pragma: no cover - console entry point
    """Console entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
