"""The what-if report (contract §20): ``report.json`` for tools and
``report.md`` for people, written into the what-if's own folder.

:func:`build_report` assembles the JSON document from a finished replay;
:func:`markdown` renders it. The JSON holds every difference; the Markdown
the totals, and per scope at most :data:`MAX_ROWS` rows of each list (the
rest is counted and left to the JSON). The document's shape is in
docs/tuning.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from recurrence_ledger.whatif.compare import compare, rejected_avoided, sweep_rows
from recurrence_ledger.whatif.policies import ATTRIBUTES, SETTINGS, Policy, Sweep, show
from recurrence_ledger.catalogue import OUTPUT_TOPICS
from recurrence_ledger.wording import counted
from recurrence_ledger.whatif.replay import LEDGER_FOLDER, ReplayOutcome

#: Rows of one list shown per scope in report.md.
MAX_ROWS = 20
#: File names in the output folder.
JSON_REPORT, MARKDOWN_REPORT, CHART = "report.json", "report.md", "chart.png"
def _value(policy: Policy, sweep: Sweep) -> Any:
    """A swept setting's value as JSON: an integer, a fraction's text, or None."""
    value = policy.value(sweep.setting)
    return str(value) if isinstance(value, Fraction) else value


def build_report(
    outcome: ReplayOutcome,
    baseline: Policy,
    sources: Mapping[str, str],
    alternatives: Sequence[Policy],
    sweep: Sweep | None = None,
    chart: str | None = None,
    review_decisions: Mapping[tuple[str, str], str] | None = None,
) -> dict:
    """The JSON report: the input, the baseline policy and where each of its
    settings came from (``sources``: policy attribute → text), one
    comparison per alternative (``compare``), the sweep's rows and chart
    file (for a sweep), the replay's passes and seconds. ``review_decisions``
    ((scope_id, candidate_id) → decision, contract §18) defaults to the ones the replay
    read (``outcome.review_decisions``); each comparison's totals and each
    sweep row count the rejected candidates the alternative would not have
    raised (``rejected_candidates_avoided``)."""
    base = outcome.results[baseline]
    if review_decisions is None:
        review_decisions = outcome.review_decisions
    comparisons = [compare(base, outcome.results[alternative]) for alternative in alternatives]
    for alternative, comparison in zip(alternatives, comparisons, strict=True):
        comparison["totals"]["rejected_candidates_avoided"] = rejected_avoided(base, outcome.results[alternative], review_decisions)
    document: dict[str, Any] = {
        "report": "recurrence-ledger what-if (contract §20)",
        "inputs": {**outcome.inputs, "records": outcome.records, "dead_letters": dict(sorted(outcome.dead_letters.items()))},
        "baseline": {"policy": baseline.as_json(), "sources": dict(sources)},
        "comparisons": comparisons,
        "sweep": None,
        "review_decisions": {verdict: sum(1 for given in review_decisions.values() if given == verdict) for verdict in ("approved", "rejected")},
        "ledger_files": str(outcome.facts_dir) if outcome.facts_dir is not None else None,
        "passes": outcome.passes,
        "seconds": round(outcome.seconds, 3),
    }
    if sweep is not None:
        results = [outcome.results[alternative] for alternative in alternatives]
        name = next(key for key, setting in SETTINGS.items() if setting is sweep.setting)
        document["sweep"] = {
            "setting": name,
            "values": [_value(p, sweep) for p in alternatives],
            "baseline_value": _value(baseline, sweep),
            "rows": sweep_rows(base, results, comparisons, lambda p: _value(p, sweep), review_decisions),
            "chart": chart,
        }
    return document


def write_report(document: dict, out_dir: Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.md`` into ``out_dir`` (created if
    needed), and remove what an earlier what-if left there that this report
    does not describe — a sweep's chart, one alternative's ledger files —
    so the folder holds one run; returns the reports' paths. OSError when
    they cannot be written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, markdown_path = out_dir / JSON_REPORT, out_dir / MARKDOWN_REPORT
    json_path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    markdown_path.write_text(markdown(document), encoding="utf-8")
    if document["sweep"] is None:
        (out_dir / CHART).unlink(missing_ok=True)
    if document["ledger_files"] is None:
        ledger = out_dir / LEDGER_FOLDER
        for topic in OUTPUT_TOPICS:
            (ledger / f"{topic}.jsonl").unlink(missing_ok=True)
        if ledger.is_dir() and not any(ledger.iterdir()):
            ledger.rmdir()
    return json_path, markdown_path


# -- Markdown -----------------------------------------------------------------

LABELS = {
    "review_candidates": "review candidates",
    "revisions_needing_review": "revisions needing review (at the end)",
    "decisions_with_near_duplicates": "admission decisions listing near-duplicates",
    "horizon_unlinked": "outcomes the provenance horizon decided unlinked",
    "end_unlinked": "outcomes the end of the input decided unlinked",
    "pattern_candidates": "pattern candidates (contract §23, all scopes)",
    "selected": "selected", "recurred": "recurred", "avoided": "avoided", "unknown": "unknown",
    "pending_outcomes": "pending outcomes (gauge)",
}
#: The rows of the totals table, in order.
TOTAL_ROWS = tuple(LABELS)
SETTING_LABELS = {name: name.replace("_", " ") for name in ATTRIBUTES.values()}


def _cell(value: Any) -> str:
    text = "—" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


def _inputs(inputs: dict) -> str:
    dead = sum(inputs["dead_letters"].values())
    bad = f", {dead} dead-lettered ({', '.join(f'{k} {v}' for k, v in inputs['dead_letters'].items())})" if dead else ""
    if inputs["kind"] == "journal":
        return f"journal `{inputs['path']}`: {inputs['records']:,} records{bad}"
    return (f"the input topics of prefix `{inputs['topic_prefix']}` on {inputs['bootstrap']}, from the beginning to their end "
            f"at the start (read_committed, no consumer group): {inputs['records']:,} records{bad}")


def _run(start: int | None) -> str:
    """A run's name: its opening avoided verdict's position, or the start of history."""
    return "start of history" if start is None else f"after position {start}"


def _signed(value: int) -> str:
    return f"+{value}" if value > 0 else str(value)


def _listed(title: str, header: Sequence[str], rows: Sequence[dict], cells) -> list[str]:  # noqa: ANN001 - row -> cells
    """A titled table of the first MAX_ROWS ``rows`` (``cells(row)`` each),
    the rest counted; [] without rows."""
    if not rows:
        return []
    lines = [f"{title}:", ""] + _table(header, [cells(row) for row in rows[:MAX_ROWS]])
    return lines + ([f"… and {len(rows) - MAX_ROWS} more (report.json)", ""] if len(rows) > MAX_ROWS else [])


def _revision(row: dict) -> str:
    return f"{row['artifact_id']} r{row['revision']}"


def _scope_lines(scope_id: str, entry: dict) -> list[str]:
    lines = [f"### {scope_id}", ""]
    candidates = entry.get("review_candidates", {})
    for kind in ("added", "removed"):
        lines += _listed(f"Review candidates {kind}", ("candidate_id", "revision", "signature", "streak", "run start"), candidates.get(kind, []),
                         lambda r: (r["candidate_id"], _revision(r), r["signature_key"], r["streak"], _run(r["run_start_position"])))
    lines += _listed("Review candidates published by both, with another streak or other failure refs",
                     ("candidate_id", "revision", "streak: baseline → alternative"), candidates.get("changed", []),
                     lambda r: (r["candidate_id"], _revision(r["alternative"]), f"{r['baseline']['streak']} → {r['alternative']['streak']}"))
    for kind in ("added", "removed"):
        lines += _listed(f"Revisions needing review {kind}", ("revision", "signature", "streak"), entry.get("revisions_needing_review", {}).get(kind, []),
                         lambda r: (_revision(r), r["signature_key"], r["streak"]))
    lines += _listed("Admission decisions that change", ("candidate_id", "baseline", "alternative"), entry.get("admission_decisions_changed", []),
                     lambda r: (r["candidate_id"], _decision_text(r["baseline"]), _decision_text(r["alternative"])))
    for name, title in (("horizon_unlinked", "decided unlinked by the provenance horizon"), ("end_unlinked", "decided unlinked at the end of the input")):
        outcomes = entry.get(name)
        for kind in ("added", "removed"):
            rows = (outcomes or {}).get(kind, [])
            if rows:
                lines += [f"Outcomes {title}, {kind}: " + ", ".join(f"{r['task_outcome_id']} (position {r['journal_position']})" for r in rows[:MAX_ROWS])]
                lines += [f"… and {len(rows) - MAX_ROWS} more (report.json)"] if len(rows) > MAX_ROWS else []
                lines.append("")
    lines += _listed("Revisions whose effect verdict changes (contract §21.6)",
                     ("revision", "baseline verdict", "baseline probability_helps", "alternative verdict", "alternative probability_helps"),
                     entry.get("effect_verdicts_changed", []),
                     lambda r: (f"{r['artifact_ref']['artifact_id']} r{r['artifact_ref']['revision']}", *_effect_cells(r["baseline"]),
                                *_effect_cells(r["alternative"])))
    base, alt = entry["statistics"]["baseline"], entry["statistics"]["alternative"]
    if base and alt:
        changed = [name for name in base if base[name] != alt[name] and name != "top_revisions"]
        if changed:
            lines += ["Statistics: " + ", ".join(f"{LABELS.get(n, n.replace('_', ' '))} {base[n]} → {alt[n]}" for n in changed), ""]
        if base["top_revisions"] != alt["top_revisions"]:
            lines += [f"top_revisions: {len(base['top_revisions'])} rows → {len(alt['top_revisions'])} rows", ""]
    return lines


def _effect_cells(side: dict | None) -> tuple[str, str]:
    """A revision's effect under one policy as (verdict, probability_helps)
    cells: "no effect" without one, "n/a" without a probability."""
    if side is None:
        return "no effect", "—"
    probability = side["probability_helps"]
    return side["verdict"], "n/a" if probability is None else f"{probability:.4f}"


def _unset(value: str | None) -> str:
    """A holdout setting as a person reads it (contract §21.5)."""
    return "unset" if value is None else str(value)


def _separator(value: str | None) -> str:
    """A pattern group separator as a person reads it (contract §23)."""
    return "unset (one group)" if value is None else f"`{value}`"


def _decision_text(row: dict | None) -> str:
    if row is None:
        return "not decided"
    near = ", ".join(f"{n['artifact_id']} r{n['revision']} ({n['score']})" for n in row["near_duplicates"]) or "none"
    more = f" (+{row['near_duplicates_total'] - len(row['near_duplicates'])} more)" if row["near_duplicates_total"] > len(row["near_duplicates"]) else ""
    reasons = f" — {', '.join(row['reasons'])}" if row["reasons"] else ""
    return f"{row['decision']}{reasons}; near-duplicates: {near}{more}"


def _policy_lines(document: dict) -> list[str]:
    baseline, sources = document["baseline"]["policy"], document["baseline"]["sources"]
    single = document["sweep"] is None and len(document["comparisons"]) == 1
    header = ["setting", "baseline", "baseline from"] + (["alternative"] if single else [])
    rows = []
    for name in ATTRIBUTES.values():
        shown = _separator if name == "pattern_group_separator" else _unset if name in ("holdout_salt", "holdout_rate") else show
        row = [SETTING_LABELS[name], shown(baseline[name]), sources.get(name, "—")]
        if single:
            alternative = document["comparisons"][0]["policy"][name]
            row.append(shown(alternative) + (" (changed)" if alternative != baseline[name] else ""))
        rows.append(row)
    return _table(header, rows)


def _totals_lines(comparison: dict) -> list[str]:
    totals = comparison["totals"]
    base, alt = totals["baseline"], totals["alternative"]
    rows = [(LABELS[name], base[name], alt[name], _signed(alt[name] - base[name])) for name in TOTAL_ROWS]
    lines = _table(("", "baseline", "alternative", "change"), rows)
    lines += [
        f"Review candidates added {totals['review_candidates_added']}, removed {totals['review_candidates_removed']}, "
        f"published by both with another streak {totals['review_candidates_changed']}; revisions needing review added "
        f"{totals['revisions_needing_review_added']}, removed {totals['revisions_needing_review_removed']}; admission decisions "
        f"that change {totals['admission_decisions_changed']}; outcomes the horizon decided unlinked added "
        f"{totals['horizon_unlinked_added']}, removed {totals['horizon_unlinked_removed']}; scopes with a difference "
        f"{totals['scopes_with_differences']}; pattern candidates added {totals['pattern_candidates_added']}, removed "
        f"{totals['pattern_candidates_removed']}; revisions whose effect verdict changes {totals['effect_verdicts_changed']}.",
        "",
    ]
    if totals.get("rejected_candidates_avoided") is not None:
        lines += [f"Rejected candidates avoided (raised by the baseline, rejected by reviewers, not raised by the alternative): "
                  f"{totals['rejected_candidates_avoided']}.", ""]
    for kind in ("added", "removed"):
        lines += _listed(f"Pattern candidates {kind}", ("group", "signature", "threshold"), comparison["pattern_candidates"][kind],
                         lambda r: (f"`{r['group']}`" if r["group"] else "(one group)", r["signature_key"], r["threshold"]))
    return lines


def _sweep_lines(document: dict) -> list[str]:
    sweep = document["sweep"]
    label = sweep["setting"].replace("-", " ")
    lines = [f"## Sweep: {label}", ""]
    if sweep["chart"]:
        lines += [f"![review load against the {label}]({sweep['chart']})", ""]
    header = (label, "review candidates", "revisions needing review", "candidates added", "candidates removed",
              "decisions listing near-duplicates", "decisions that change", "outcomes unlinked by the horizon", "rejected candidates avoided",
              "effect verdicts that change")
    rows = [
        (f"{row['value']}" + (" (baseline)" if row["value"] == sweep["baseline_value"] else ""), row["review_candidates"],
         row["revisions_needing_review"], row["review_candidates_added"], row["review_candidates_removed"],
         row["decisions_with_near_duplicates"], row["admission_decisions_changed"], row["horizon_unlinked"],
         row["rejected_candidates_avoided"], row["effect_verdicts_changed"])
        for row in sweep["rows"]
    ]
    lines += _table(header, rows)
    decisions = document["review_decisions"]
    lines += [f"Rejected candidates avoided: of the {decisions['rejected']} candidates reviewers rejected in the input "
              f"({decisions['approved']} approved), those the baseline raised and the row's value would not have.", ""]
    lines += ["Each row against the baseline; every difference per scope is in report.json (`comparisons`, in the order of the rows).", ""]
    return lines


def markdown(document: dict) -> str:
    """report.md of a JSON report (:func:`build_report`)."""
    lines = ["# What-if report", "", f"Inputs: {_inputs(document['inputs'])}.", ""]
    lines += ["## Policies", ""] + _policy_lines(document)
    if document["sweep"] is not None:
        lines += _sweep_lines(document)
    else:
        for comparison in document["comparisons"]:
            lines += ["## Totals", ""]
            if not comparison["differs"]:
                lines += ["**No difference**: on these inputs the alternative policy concludes exactly what the baseline does "
                          "(every review candidate, revision needing review, admission decision, unlinked outcome and effect verdict).", ""]
            lines += _totals_lines(comparison)
            if comparison["scopes"]:
                lines += [f"## Per scope ({len(comparison['scopes'])} with a difference)", ""]
                for scope_id, entry in comparison["scopes"].items():
                    lines += _scope_lines(scope_id, entry)
    files = document["ledger_files"]
    lines += [f"The alternative's output files (as `run-journal` writes them): `{files}/<topic>.jsonl`." if files else "",
              f"Replayed in {counted(document['passes'], 'pass', 'passes')}, {document['seconds']} s.", ""]
    return "\n".join(line for line in lines if line is not None) + "\n"
