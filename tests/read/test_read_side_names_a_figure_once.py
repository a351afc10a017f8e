"""A scope figure is stated once — by the core that computes it, its record
model (``recurrence_ledger.ledger.records``), its Avro schema and the docs —
and the read side (``read/``, ``api/``, ``cli/``, the dashboard's
``static/``) takes it from the model: its hash field, API field, gauge,
column title and label are derived. A read-side file names a figure only
where a page or a sort gives it a place, so a new figure (contract §21–§24
and after) is named by at most one read-side file, or none.

The figures of contract §8 that every page, sort and trend places
(``ESTABLISHED``) are exempt; ``binding_suspects`` has two places: the
dashboard and the ``stats`` command's suspect line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from recurrence_ledger.ledger.fields import field_name
from recurrence_ledger.ledger.records import RevisionStatistics, ScopeStatistics

PACKAGE = Path(__file__).resolve().parents[2] / "processors" / "recurrence_ledger"
READ_SIDE = ("read", "api", "cli", "static")
#: The §8 block, its positions and the figures the sorts, trend and review pages are built on.
ESTABLISHED = {
    "scope_id", "as_of_position", "selected", "recurred", "avoided", "unknown", "unlinked_handoff_citations", "needing_review",
    "top_revisions", "pending_outcomes", "late_revisions", "repeat_failure_rate", "unknown_reasons", "reviews", "repairs",
    "review_threshold", "artifact_ref", "signature_key", "terminal_recurred_streak", "needs_review", "repair_surface", "yield",
    "low_yield", "ambiguous", "binding_suspect", "version",
}
#: Figures with more than one place, and those places.
PLACES = {
    "binding_suspects": {"static/index.html", "cli/ops.py"},
    # contract §22: a critical revision is marked on the dashboard and ranked first in the review
    # inbox (its queue items carry their revision's severity: read model, API item, route, page);
    # cli/review.py imports the reason codes from the core's ``severity`` module.
    # The recall-time advisory (read/advisory.py) hands a recall the revision's severity too.
    "severity": {"read/history.py", "api/schemas.py", "api/routes/review.py", "static/review.html", "static/review.js",
                 "static/dashboard.js", "cli/review.py", "read/advisory.py"},
    # contract §8: the run names the revision's history page shows, and from which the advisory
    # derives the candidate ids it looks up (the ledger's candidate id of each run).
    "runs_reaching_threshold": {"read/pages.py", "read/advisory.py"},
    # contract §22.4: the critical count per scope is a hash field and the alert's gauge.
    "recurred_by_severity": {"read/projection.py", "read/follower.py"},
    # contract §21: ``run`` prints each revision's withheld arm; the holdout assignment's command
    # and route answer whether a lesson is to be ``withheld`` (§21.5: the word, not the figure).
    "withheld": {"cli/run.py", "cli/holdout.py", "api/routes/holdout.py", "static/dashboard-effect.js", "api/schemas.py", "cli/ops.py",
                 "cli/explain.py", "static/index.html"},
    # contract §21.4: the revisions' effect filter and probability_helps sort (reader, API parameter
    # and row), the effect panel of the dashboard (its arms) and ``rank --by effect``.
    # ``run`` prints each revision's effect, ``explain-effect`` says why, and the recall-time advisory
    # hands a recall its verdict and probability (read model, response model, route).
    # ``what-if`` (contract §21.6) takes the effect policy and counts the effect verdicts it changes.
    "effect": {"cli/whatif.py", "read/reader.py", "api/schemas.py", "api/routes/revisions.py", "static/dashboard-effect.js", "cli/ops.py", "cli/run.py",
               "read/advisory.py", "api/routes/advisories.py", "cli/explain.py", "cli/main.py",
               # the hash field, the totals and the gauge per effect verdict (their docs say "effect verdict");
               # the dashboard's effect panel and the field catalogue that labels it
               "read/projection.py", "read/totals.py", "read/follower.py", "static/index.html", "static/dashboard.js", "api/routes/service.py",
               # the review inbox says when a decision takes effect (the word, not the figure)
               "static/review.js"},
    # contract §21.4: a scope's lessons by verdict — ``run``'s summary, the dashboard's effect panel,
    # the scope hash field and the follower's gauges per verdict, ``stats``.
    "effects": {"cli/run.py", "static/dashboard-effect.js", "read/projection.py", "read/totals.py", "read/follower.py", "cli/ops.py",
                "static/index.html", "static/dashboard.js", "api/routes/service.py", "api/schemas.py"},
}


def read_side_files() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE)): path.read_text(encoding="utf-8")
        for room in READ_SIDE
        for path in sorted((PACKAGE / room).rglob("*"))
        if path.is_file() and path.suffix in (".py", ".js", ".html", ".lua") and "vendor" not in path.parts
    }


FIGURES = sorted({field_name(model, name) for model in (ScopeStatistics, RevisionStatistics) for name in model.model_fields} - ESTABLISHED)


@pytest.mark.parametrize("figure", FIGURES)
def test_a_figure_is_named_by_at_most_one_read_side_file(figure):
    naming = {path for path, text in read_side_files().items() if re.search(rf"\b{re.escape(figure)}\b", text)}
    allowed = PLACES.get(figure)
    assert naming <= allowed if allowed else len(naming) <= 1, sorted(naming)


def test_the_figures_of_contract_16_and_17_are_checked():
    assert {"forward_references", "ambiguous_matches", "unmatched_failures", "binding_suspects"} <= set(FIGURES)
