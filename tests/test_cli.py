"""The command line as a user runs it (subprocess, installed entry point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import case, facts, read_outputs


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "recurrence_ledger.cli", *args], capture_output=True, text=True, env=environment, timeout=120
    )


def test_run_journal_writes_every_topic_file_and_prints_the_summary(tmp_path):
    journal, expected = case("worked_example")
    result = run_cli("run-journal", str(journal), "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "admission-decisions.jsonl", "candidate-sets.jsonl", "dead-letter.jsonl", "recurrence-matches.jsonl", "recurrence-observations.jsonl",
        "recurrence-statistics.jsonl", "review-candidates.jsonl", "revision-statistics.jsonl",
    ]
    assert facts(read_outputs(tmp_path)) == expected
    row = next(line for line in result.stdout.splitlines() if "dns-mirror" in line and "selected" not in line)
    assert row.split()[1:] == ["0", "7", "0", "0", "2"]


def test_run_on_embedded_default_processes_the_packaged_minimum_case(tmp_path):
    result = run_cli("run", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    last = json.loads((tmp_path / "recurrence-statistics.jsonl").read_text().splitlines()[-1])
    # The minimum checkable evidence case, in our own words.
    assert {k: last[k] for k in ("selected", "recurred", "avoided", "unknown", "unlinked_handoff_citations")} == {
        "selected": 3, "recurred": 2, "avoided": 1, "unknown": 1, "unlinked_handoff_citations": 1,
    }
    assert [(r["artifact_ref"]["revision"], r["terminal_recurred_streak"]) for r in last["top_revisions"]] == [(1, 1), (2, 1)]
    assert "billing-api" in result.stdout
    # Its two admission candidates: one accepted with a near-duplicate, one rejected.
    decisions = [json.loads(line) for line in (tmp_path / "admission-decisions.jsonl").read_text().splitlines()]
    assert [(d["decision"], d["reasons"], len(d["near_duplicates"])) for d in decisions] == [
        ("accepted", [], 1), ("rejected", ["no_failure_evidence", "cue_restates_outcome", "missing_repair_surface"], 0)]
    assert "admission: 1 accepted, 1 rejected" in " ".join(result.stdout.split())


def test_options_change_policy(tmp_path):
    journal, _ = case("worked_example")
    result = run_cli("run-journal", str(journal), "--out", str(tmp_path), "--review-threshold", "5", "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert read_outputs(tmp_path)["review-candidates"] == []


def test_missing_journal_is_a_usage_error(tmp_path):
    result = run_cli("run-journal", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path))
    assert result.returncode == 2
    assert "does not exist" in result.stderr


def test_explain_from_a_journal(tmp_path):
    journal, _ = case("minimum_case")
    result = run_cli("explain", "migration-lock", "job-unknown", "--journal", str(journal), "--json")
    assert result.returncode == 0, result.stderr
    explanation = json.loads(result.stdout)
    assert explanation["chain"]["status"] == "linked"
    assert explanation["revisions"][0]["reason"] == "unknown: the bound check is only declared or has no exact evidence"
    tree = run_cli("explain", "migration-lock", "job-recur", "--journal", str(journal))
    assert "matched → M4 r1 (handoff_citations" in tree.stdout
    assert run_cli("explain", "migration-lock", "nope", "--journal", str(journal)).returncode == 1


def test_rank_takes_low_yield_and_rejects_an_unknown_surface_before_reading_redis():
    help_text = run_cli("rank", "--help", env={"COLUMNS": "200"})
    assert help_text.returncode == 0, help_text.stderr
    assert "--low-yield" in help_text.stdout and "--surface" in help_text.stdout
    # A usage error (exit 2) comes before any Redis access: this Redis URL answers nothing.
    bad = run_cli("rank", "--low-yield", "--surface", "nonsense", "--redis-url", "redis://127.0.0.1:1/0")
    assert bad.returncode == 2
    assert "is not a repair_surface" in bad.stderr


def test_max_pending_candidates_option_dead_letters_the_next_waiting_candidate(tmp_path):
    def waiting(candidate_id, position):
        return {"topic": "experience-candidates", "value": {
            "candidate_id": candidate_id, "scope_id": "s", "journal_position": position,
            "content": {"situation": "s", "action": "a", "outcome": "o", "lesson": "l", "failure": None},
            "cited_sources": [{"source_type": "task_outcome", "source_id": "X"}]}}

    journal = tmp_path / "j.jsonl"
    journal.write_text("".join(json.dumps(record) + "\n" for record in (waiting("A", 1), waiting("B", 2))))
    result = run_cli("run-journal", str(journal), "--out", str(tmp_path / "out"), "--max-pending-candidates", "1", "--quiet")
    assert result.returncode == 0, result.stderr
    [dead] = [json.loads(line) for line in (tmp_path / "out" / "dead-letter.jsonl").read_text().splitlines()]
    assert (dead["reason"], dead["offset"]) == ("too_many_pending", 1)
    [decision] = [json.loads(line) for line in (tmp_path / "out" / "admission-decisions.jsonl").read_text().splitlines()]
    assert (decision["candidate_id"], decision["reasons"]) == ("A", ["missing_source", "missing_failure_record"])  # decided at the end
