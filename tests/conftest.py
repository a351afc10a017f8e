"""Helpers for every test suite: the fixture cases under tests/cases
and the extraction of their facts from output files. The service
fixtures, the markers that follow from them and the CLI runner are the
plugins in tests/plugins/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["tests.plugins.services", "tests.plugins.secure"]

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tests" / "cases"
#: Every case in tests/cases (tests/cases/README.md): the case-driven tests
#: run each of them. Adding a case is adding its name here.
CASE_NAMES = (
    "minimum_case", "worked_example", "late_run", "forward_refs", "unknown_reasons", "review_loop", "holdout_rules", "holdout_effects",
    "holdout_waiting", "critical_runs", "review_reasons",
)


def case(name: str) -> tuple[Path, dict]:
    """(journal path, expected facts) of the fixture case ``name`` in
    tests/cases; fails (never skips) when either file is missing."""
    journal = CASES / f"{name}.jsonl"
    expected = CASES / f"{name}.expected.json"
    if not journal.is_file() or not expected.is_file():
        pytest.fail(f"fixture case {name} is missing under {CASES}")
    return journal, json.loads(expected.read_text(encoding="utf-8"))


def read_jsonl(path: Path) -> list[dict]:
    """Records of a JSON Lines file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def facts(records: dict[str, list[dict]]) -> dict:
    """The facts of a case's ``<name>.expected.json`` (format in
    tests/cases/README.md) computed from the project's own output records,
    given keyed by output topic."""
    scopes: dict[str, dict] = {}

    def scope(scope_id: str) -> dict:
        return scopes.setdefault(scope_id, {"statistics": None, "revisions": {}, "observations": [], "matches": [], "review_candidates": [],
                                            "review_statuses": {}})

    def reasons(counts: dict) -> dict:  # the reasons (or statuses, §18) that occurred (contract §17)
        return {reason: count for reason, count in counts.items() if count}

    def revision(ref: dict | None) -> str | None:
        return None if ref is None else f"{ref['artifact_id']}r{ref['revision']}"

    for stats in records["recurrence-statistics"]:
        scope(stats["scope_id"])["statistics"] = {
            **{k: stats[k] for k in ("selected", "recurred", "avoided", "unknown", "unlinked_handoff_citations", "needing_review",
                                     "forward_references", "ambiguous_matches", "unmatched_failures", "binding_suspects")},
            "unknown_reasons": reasons(stats["unknown_reasons"]),
            "reviews": reasons({status: stats["reviews"][status] for status in ("open", "approved", "rejected", "superseded")}),
            "repairs": reasons(stats["repairs"]),
            "top_revisions": [
                {
                    "artifact_id": row["artifact_ref"]["artifact_id"],
                    "revision": row["artifact_ref"]["revision"],
                    "signature_key": row["signature_key"],
                    "terminal_recurred_streak": row["terminal_recurred_streak"],
                    **({"severity": row["severity"]} if row.get("severity") is not None else {}),
                }
                for row in stats["top_revisions"]
            ],
        }
        # contract §21 (rev. 4): only in a scope with withheld lessons or conflicts
        if stats["withheld"] or stats["holdout_conflicts"]:
            scope(stats["scope_id"])["statistics"].update(
                withheld=stats["withheld"], holdout_conflicts=stats["holdout_conflicts"], effects=reasons(stats["effects"]),
            )
        # revision 4 (contract §22, §24): listed only where they occurred
        summary = scope(stats["scope_id"])["statistics"]
        if reasons(stats["reviews"]["rejected_by_reason"]):
            summary["rejected_by_reason"] = reasons(stats["reviews"]["rejected_by_reason"])
        if stats["reviews"]["promotion_rate"] is not None:
            summary["promotion_rate"] = stats["reviews"]["promotion_rate"]
        rated = {severity: count for severity, count in stats["recurred_by_severity"].items() if severity != "unrated"}
        if reasons(rated):
            summary["recurred_by_severity"] = reasons(stats["recurred_by_severity"])
    for row in records["revision-statistics"]:
        ref = row["artifact_ref"]
        scope(row["scope_id"])["revisions"][f"{ref['artifact_id']}r{ref['revision']}"] = {
            **{k: row[k] for k in ("selected", "recurred", "avoided", "unknown", "ambiguous", "binding_suspect")},
            "unknown_reasons": reasons(row["unknown_reasons"]),
            **({"effect": row["effect"]} if row["effect"] is not None else {}),
            **({"severity": row["severity"], "needs_review": row["needs_review"]} if row.get("severity") is not None else {}),
        }
    for holdout in records.get("holdout-observations", []):  # contract §21.3
        ref = holdout["artifact_ref"]
        scope(holdout["scope_id"]).setdefault("holdout_observations", []).append(
            f"{holdout['verdict'] or holdout['reason']} {ref['artifact_id']}r{ref['revision']} {holdout['task_outcome_ref']['source_id']} "
            f"{holdout['assignment']}"
        )
    for obs in records["recurrence-observations"]:
        ref = obs["artifact_ref"]
        scope(obs["scope_id"])["observations"].append(
            f"{obs['event']} {ref['artifact_id']}r{ref['revision']} {obs['task_outcome_ref']['source_id']}"
        )
    for match in records["recurrence-matches"]:
        failure = match["failure_ref"]
        text = (
            f"{match['task_outcome_ref']['source_id']} {failure['item_kind']}[{failure['item_index']}] "
            f"{match['candidate_set_mode']} {match['result']}"
        )
        if match["artifact_ref"]:
            text += f" {match['artifact_ref']['artifact_id']}r{match['artifact_ref']['revision']}"
        scope(match["scope_id"])["matches"].append(text)
    runs = {}
    for candidate in records["review-candidates"]:
        ref = candidate["artifact_ref"]
        scope(candidate["scope_id"])["review_candidates"].append(f"{ref['artifact_id']}r{ref['revision']}")
        runs[candidate["candidate_id"]] = candidate["run_start_position"]
    for row in records["review-status"]:  # the view: the last row per candidate (contract §18)
        run = runs.get(row["candidate_id"], "unpublished")
        name = revision(row["artifact_ref"]) + ("" if run is None else f"@{run}")
        scope(row["scope_id"])["review_statuses"][name] = {
            "status": row["status"], "streak": row["streak"], "decision": row["decision"],
            "fix_revision": revision(row["fix_revision"]),
            # contract §21.4: the fix revision's effect, shown when it has one
            "repair": None if row["repair"] is None else {k: v for k, v in row["repair"].items() if k != "effect" or v is not None},
        }
    for entry in scopes.values():
        for name in ("observations", "matches", "review_candidates"):
            entry[name].sort()
        if "holdout_observations" in entry:
            entry["holdout_observations"].sort()
    dead_letter_reasons = {}
    for dead in records["dead-letter"]:
        dead_letter_reasons[dead["reason"]] = dead_letter_reasons.get(dead["reason"], 0) + 1
    return {"dead_letter": len(records["dead-letter"]), "dead_letter_reasons": dict(sorted(dead_letter_reasons.items())), "scopes": scopes}


def view_key(topic: str, record: dict) -> tuple:
    """The table key of a view record (contract §8): its scope for
    ``recurrence-statistics``, (scope, artifact_id, revision) for
    ``revision-statistics``, (scope, candidate_id) for ``review-status``
    (§18), (group, signature_key) for ``signature-patterns`` (§23)."""
    if topic == "signature-patterns":
        return (record["group"], record["signature_key"])
    if topic == "revision-statistics":
        return (record["scope_id"], record["artifact_ref"]["artifact_id"], record["artifact_ref"]["revision"])
    if topic == "review-status":
        return (record["scope_id"], record["candidate_id"])
    return (record["scope_id"],)


def final_views(topic: str, records: list[dict]) -> dict[tuple, dict]:
    """A view topic read as a table: the last record per key (contract §8, §10)."""
    return {view_key(topic, record): record for record in records}


def read_outputs(out_dir: Path) -> dict[str, list[dict]]:
    """Every output topic file of an embedded run."""
    from recurrence_ledger.catalogue import OUTPUT_TOPICS

    return {topic: read_jsonl(out_dir / f"{topic}.jsonl") for topic in OUTPUT_TOPICS}
