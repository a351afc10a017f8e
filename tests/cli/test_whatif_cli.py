"""``recurrence-ledger what-if`` on journal files: the alternative's files
are run-journal's, a sweep of seven review thresholds is one pass with a
chart, the baseline says where it came from, nothing is written outside
--out, and every mistake a user can make is a clear usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recurrence_ledger import policy
from recurrence_ledger.cli import app
from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import case, read_jsonl
from tests.journal import write_journal
from tests.plugins.processes import run_cli

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    records = generate_journal(Workload(scopes=3, outcomes_per_scope=200, heads_per_scope=4, handoffs=2, seed=5, candidates=0.2))
    return write_journal(tmp_path_factory.mktemp("workload") / "workload.jsonl", records)


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})


@pytest.mark.parametrize("name", ["worked_example", "workload"])
def test_what_if_review_threshold_4_writes_exactly_the_files_run_journal_review_threshold_4_writes(name, workload, tmp_path):
    journal = workload if name == "workload" else case(name)[0]
    what_if = run_cli("what-if", str(journal), "--out", str(tmp_path / "wi"), "--review-threshold", "4", "--quiet")
    assert what_if.returncode == 0, what_if.stderr
    reference = run_cli("run-journal", str(journal), "--out", str(tmp_path / "rj"), "--review-threshold", "4", "--quiet")
    assert reference.returncode == 0, reference.stderr
    files = sorted(path.name for path in (tmp_path / "rj").iterdir())
    assert sorted(path.name for path in (tmp_path / "wi" / "ledger").iterdir()) == files and len(files) == 12
    for file in files:
        assert (tmp_path / "wi" / "ledger" / file).read_bytes() == (tmp_path / "rj" / file).read_bytes(), file
    report = json.loads((tmp_path / "wi" / "report.json").read_text())
    assert report["comparisons"][0]["policy"]["review_threshold"] == 4 and report["baseline"]["policy"]["review_threshold"] == 3
    assert sorted(p.name for p in (tmp_path / "wi").iterdir()) == ["ledger", "report.json", "report.md"]


def test_a_sweep_of_seven_thresholds_is_one_pass_with_a_chart_and_the_core_s_counts(workload, tmp_path):
    result = invoke("what-if", str(workload), "--out", str(tmp_path / "sweep"), "--sweep", "review-threshold=2..8", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "sweep" / "report.json").read_text())
    assert report["passes"] == 1 and report["sweep"]["values"] == [2, 3, 4, 5, 6, 7, 8] and report["sweep"]["baseline_value"] == 3
    for row in report["sweep"]["rows"]:
        run_journal(workload, tmp_path / "rj", LedgerConfig(review_threshold=row["value"]), show_progress=False)
        last = {record["scope_id"]: record for record in read_jsonl(tmp_path / "rj" / "recurrence-statistics.jsonl")}
        assert row["review_candidates"] == len(read_jsonl(tmp_path / "rj" / "review-candidates.jsonl")), row
        assert row["revisions_needing_review"] == sum(record["needing_review"] for record in last.values()), row
        assert row["rejected_candidates_avoided"] == 0  # the workload has no review decisions
    assert [row["review_candidates"] for row in report["sweep"]["rows"]] == sorted((row["review_candidates"] for row in report["sweep"]["rows"]), reverse=True)
    assert (tmp_path / "sweep" / "chart.png").read_bytes().startswith(PNG)
    markdown = (tmp_path / "sweep" / "report.md").read_text()
    assert "![review load against the review threshold](chart.png)" in markdown and "| 3 (baseline) |" in markdown
    assert report["review_decisions"] == {"approved": 0, "rejected": 0}


def test_the_baseline_comes_from_the_command_line_the_deployment_s_variable_or_the_default(tmp_path):
    journal, _ = case("worked_example")
    for env, args, expected in (
        ({}, (), (3, "default")),
        ({policy.REVIEW_THRESHOLD.env: "4"}, (), (4, f"the deployment's {policy.REVIEW_THRESHOLD.env}")),
        ({policy.REVIEW_THRESHOLD.env: "4"}, ("--baseline-review-threshold", "2"), (2, "command line")),
    ):
        result = invoke("what-if", str(journal), "--out", str(tmp_path), "--quiet", *args, env=env)
        assert result.exit_code == 0, result.output
        report = json.loads((tmp_path / "report.json").read_text())
        assert (report["baseline"]["policy"]["review_threshold"], report["baseline"]["sources"]["review_threshold"]) == expected
        # no alternative given: the alternative is the baseline, so nothing differs
        assert report["comparisons"][0]["differs"] is False


def test_the_same_threshold_as_the_deployment_s_reports_no_difference(tmp_path):
    journal, _ = case("worked_example")
    result = invoke("what-if", str(journal), "--out", str(tmp_path), "--review-threshold", "4", env={policy.REVIEW_THRESHOLD.env: "4"})
    assert result.exit_code == 0, result.output
    assert "no difference" in result.output
    assert "**No difference**" in (tmp_path / "report.md").read_text()


def test_nothing_is_written_outside_the_out_folder(tmp_path):
    journal, _ = case("worked_example")
    work = tmp_path / "cwd"
    work.mkdir()
    result = run_cli("what-if", str(journal), "--out", "mine", "--sweep", "review-threshold=1..3", "--quiet", cwd=work)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in work.iterdir()] == ["mine"]
    assert sorted(p.name for p in (work / "mine").iterdir()) == ["chart.png", "report.json", "report.md"]


@pytest.mark.parametrize(("args", "message"), [
    (("--sweep", "review-treshold=2..8"), "unknown setting 'review-treshold'"),
    (("--sweep", "review-threshold"), "unknown setting"),
    (("--sweep", "review-threshold=8..2"), "impossible range '8..2'"),
    (("--sweep", "top-revisions=1..9:0"), "impossible range"),
    (("--sweep", "review-threshold=0..4"), "impossible value 0"),
    (("--sweep", "near-duplicate-threshold=1/2..1"), "needs a step"),
    (("--sweep", "near-duplicate-threshold=0.5..1.5:0.1"), "not in (0, 1]"),
    (("--sweep", "provenance-horizon=1..20"), "each provenance horizon is a replay of its own"),
    (("--sweep", "review-threshold=1..1000"), "more than 100 values"),
    (("--sweep", "review-threshold=x"), "'x' is not a value"),
    (("--sweep", "review-threshold=2..4", "--review-threshold", "5"), "name the same setting"),
    (("--near-duplicate-threshold", "nan"), "not a fraction"),
])
def test_a_bad_sweep_or_setting_is_a_usage_error_that_says_why(args, message, tmp_path):
    journal, _ = case("worked_example")
    result = invoke("what-if", str(journal), "--out", str(tmp_path / "out"), *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "out").exists()


def test_an_unreadable_journal_or_no_input_is_an_error(tmp_path):
    result = invoke("what-if", str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and f"cannot read the journal {tmp_path}" in " ".join(result.output.split()), result.output
    result = invoke("what-if", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and "No such file" in result.output, result.output
    for args in ((), (str(tmp_path / "x.jsonl"), "--from-topics")):
        result = invoke("what-if", *args, "--out", str(tmp_path / "out"))
        assert result.exit_code == 2 and "--from-topics" in result.output, result.output


def test_the_packaged_example_at_threshold_one_adds_the_run_of_revision_1_after_its_avoided_verdict(tmp_path):
    """At threshold 3 the example raises two candidates (EXP-schema-drift r2
    and EXP-mock-server r1, the first runs of each); at 1 they are the same
    candidates (a candidate is named by its run), and r1's run after its
    avoided verdict at position 4, one recurrence long, is the one added."""
    result = invoke("what-if", str(Path(__file__).parents[2] / "processors/recurrence_ledger/examples/openapi_drift.jsonl"),
                    "--out", str(tmp_path), "--review-threshold", "1")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    candidates = report["comparisons"][0]["scopes"]["billing-api"]["review_candidates"]
    assert [(row["artifact_id"], row["revision"], row["streak"]) for row in candidates["added"]] == [("EXP-schema-drift", 1, 1)]
    assert candidates.get("removed", []) == []
    assert "Review candidates added" in (tmp_path / "report.md").read_text()


def test_what_if_compares_another_critical_review_threshold(tmp_path):
    """contract §22: with a critical review threshold of 2, critical_runs'
    two critical candidates (runs of one recurrence) and its two critical
    revisions needing review go; a sweep charts 1..3."""
    journal, _ = case("critical_runs")
    result = invoke("what-if", str(journal), "--critical-review-threshold", "2", "--out", str(tmp_path / "one"))
    assert result.exit_code == 0, result.output
    assert "1 scope differs: review candidates +0 -2, revisions needing review +0 -2," in result.output  # the summary, in the singular
    [comparison] = json.loads((tmp_path / "one" / "report.json").read_text())["comparisons"]
    assert comparison["changed_settings"] == ["critical_review_threshold"]
    assert (comparison["totals"]["review_candidates_removed"], comparison["totals"]["revisions_needing_review_removed"]) == (2, 2)
    swept = invoke("what-if", str(journal), "--sweep", "critical-review-threshold=1..3", "--out", str(tmp_path / "sweep"), "--quiet")
    assert swept.exit_code == 0, swept.output
    rows = json.loads((tmp_path / "sweep" / "report.json").read_text())["sweep"]["rows"]
    assert [(row["value"], row["review_candidates"]) for row in rows] == [(1, 2), (2, 0), (3, 0)]
