"""The command line as a user runs it (subprocess, installed entry point)."""

from __future__ import annotations

import functools
import json

import pytest

import pytest

from recurrence_ledger.catalogue import OUTPUT_TOPICS
from tests.conftest import case, facts, read_jsonl, read_outputs
from tests.plugins import processes

#: The CLI as a user runs it, in the test's own working directory (below).
run_cli = functools.partial(processes.run_cli, cwd=None)


@pytest.fixture(autouse=True)
def own_working_directory(tmp_path, monkeypatch):
    """Each test runs in a folder of its own, so that a run without --out
    (./recurrence-ledger-out) never meets another test's, in this process
    or in another xdist worker."""
    monkeypatch.chdir(tmp_path)


def test_run_journal_writes_every_topic_file_and_prints_the_summary(tmp_path):
    journal, expected = case("worked_example")
    result = run_cli("run-journal", str(journal), "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "admission-decisions.jsonl", "candidate-sets.jsonl", "dead-letter.jsonl", "holdout-observations.jsonl", "pattern-candidates.jsonl",
        "recurrence-matches.jsonl", "recurrence-observations.jsonl", "recurrence-statistics.jsonl", "review-candidates.jsonl",
        "review-status.jsonl", "revision-statistics.jsonl", "signature-patterns.jsonl",
    ]
    assert facts(read_outputs(tmp_path)) == expected
    row = next(line for line in result.stdout.splitlines() if "dns-mirror" in line and "selected" not in line)
    assert row.split()[1:] == ["0", "7", "0", "0", "2"]


def test_run_on_embedded_default_processes_the_packaged_minimum_case(tmp_path):
    result = run_cli("run", "--out", str(tmp_path), columns=300)  # the summary line on one line
    assert result.returncode == 0, result.stderr
    by_scope = {record["scope_id"]: record for record in map(json.loads, (tmp_path / "recurrence-statistics.jsonl").read_text().splitlines())}
    last = by_scope["billing-api"]
    # The minimum checkable evidence case, in our own words: r1 selected three
    # times (avoided, recurred, unknown), r2 recurring on three unlinked
    # outcomes, its fix r3 selected and avoided, EXP-mock-server r1
    # recurring three times, and EXP-idempotency-key r1 recurring three times
    # (its candidate left open for the README's review walkthrough); the
    # decisions move no as_of_position (28).
    assert {k: last[k] for k in ("as_of_position", "selected", "recurred", "avoided", "unknown", "unlinked_handoff_citations",
                                 "needing_review")} == {
        "as_of_position": 28, "selected": 4, "recurred": 10, "avoided": 2, "unknown": 1, "unlinked_handoff_citations": 1, "needing_review": 3,
    }
    assert [(r["artifact_ref"]["artifact_id"], r["artifact_ref"]["revision"], r["terminal_recurred_streak"]) for r in last["top_revisions"]] == [
        ("EXP-idempotency-key", 1, 3), ("EXP-mock-server", 1, 3), ("EXP-schema-drift", 2, 3), ("EXP-schema-drift", 1, 1)]
    reviews = {status: last["reviews"][status] for status in ("open", "approved", "rejected", "superseded")}
    assert (last["reviews"]["rejected_by_reason"]["unspecified"], last["reviews"]["promotion_rate"]) == (1, 0.5)
    assert (reviews, last["repairs"]) == ({"open": 1, "approved": 1, "rejected": 1, "superseded": 0},
                                                  {"pending": 0, "held": 1, "recurring": 0, "failed": 0})
    assert "billing-api" in result.stdout
    # Its three review candidates (contract §18): r2's approved with fix r3, whose avoided verdict holds; the mock server's
    # rejected; the idempotency key's open (waiting for a decision: the README's review walkthrough approves it).
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert [line for line in lines if line.startswith("review ")] == [
        "review EXP-idempotency-key r1 (raised at streak 3): open",
        'review EXP-mock-server r1 (raised at streak 3): rejected by qa-lead: "The mock server crashed on the shared CI host: the runner needs fixing, '
        'not the lesson"',
        "review EXP-schema-drift r2 (raised at streak 3): approved by api-platform-lead; fix EXP-schema-drift r3: repair held "
        "(selected 1, recurred 0, avoided 1)",
    ]
    # Under each scope's figures, the line `stats` prints for it: unknown by reason, unmatched failures, withheld, effects.
    assert [line for line in lines if line.startswith(("billing-api: unknown", "checkout-web: unmatched"))] == [
        "billing-api: unknown 1 (check_unverified 1)",
        "checkout-web: unmatched failures 4; withheld 5; effects helps 1, harms 0, undecided 0, insufficient 0",
    ]
    # Its two admission candidates: one accepted with a near-duplicate, one rejected.
    decisions = [json.loads(line) for line in (tmp_path / "admission-decisions.jsonl").read_text().splitlines()]
    assert [(d["decision"], d["reasons"], len(d["near_duplicates"])) for d in decisions] == [
        ("accepted", [], 1), ("rejected", ["no_failure_evidence", "cue_restates_outcome", "missing_repair_surface"], 0)]
    # One candidate rejected for three reasons reads as one rejection.
    counts = ", ".join(f"{topic} {len(read_jsonl(tmp_path / (topic + '.jsonl')))}" for topic in OUTPUT_TOPICS)
    assert lines[lines.index("admission: 2 candidates") + 1 :][:4] == [
        "1 accepted",
        "1 rejected — reasons: cue_restates_outcome, missing_repair_surface, no_failure_evidence",
        "1 with near-duplicate suggestions",
        f"43 journal records → {counts}",
    ]
    # checkout-web (contract §21): a lesson withheld from half of the tasks, recurring in 4 of 5 without it and 1 of 5 with it
    assert [line for line in lines if line.startswith("effect ")] == [
        "effect EXP-flag-snapshot r1: helps, probability_helps 0.9600 (treated 1 of 5 recurred, withheld 4 of 5)"]
    assert (by_scope["checkout-web"]["withheld"], by_scope["checkout-web"]["effects"]["helps"]) == (5, 1)
    assert "review-candidates 3," in counts and "review-status 3," in counts and "dead-letter 0" in counts
    assert f"output files: {tmp_path.resolve()}/<topic>.jsonl" in result.stdout


def test_run_without_out_writes_to_one_stable_folder_and_says_where(tmp_path):
    for _ in range(2):  # the second run overwrites the first one's files: no new folder per run
        result = run_cli("run", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert [p.name for p in tmp_path.iterdir()] == ["recurrence-ledger-out"]
    out = tmp_path / "recurrence-ledger-out"
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{topic}.jsonl" for topic in OUTPUT_TOPICS)
    assert f"output files: {out}/<topic>.jsonl" in result.stdout
    assert "the next run overwrites it" in result.stdout


def test_admission_lines_count_candidates_not_reasons():
    from collections import Counter

    from recurrence_ledger.cli.run import admission_lines

    assert admission_lines(Counter()) == []
    several = Counter({"accepted": 2, "rejected": 3, "near_duplicates": 1, "no_failure_evidence": 3, "cue_restates_outcome": 1})
    assert admission_lines(several) == [
        "admission: 5 candidates",
        "  2 accepted",
        "  3 rejected — reasons (candidates giving each; one candidate can give several): cue_restates_outcome 1, no_failure_evidence 3",
        "  1 with near-duplicate suggestions",
    ]
    assert admission_lines(Counter({"accepted": 1}))[:3] == ["admission: 1 candidate", "  1 accepted", "  0 rejected"]


def test_run_takes_the_worker_options_and_passes_them_to_the_kafka_worker(monkeypatch):
    from typer.testing import CliRunner

    from recurrence_ledger.cli import main as cli, run as cli_run
    from recurrence_ledger.runtime import worker

    from recurrence_ledger.settings import settings

    started = []
    monkeypatch.setattr(worker, "run_worker", started.append)
    # No broker here: the connection check is the secured-broker tests' concern.
    monkeypatch.setattr(cli_run, "kafka_connection", lambda bootstrap, kafka_config: bootstrap)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.delenv("REDIS_URL", raising=False)  # a Redis URL adds the view follower (the next test)
    settings.cache_clear()
    monkeypatch.setattr(cli_run, "settings", settings)
    result = CliRunner().invoke(cli.app, [
        "run", "--metrics-port", "9178", "--app-id", "trial", "--exit-when-idle", "5", "--commit-interval-ms", "250",
        "--topic-prefix", "demo.", "--review-threshold", "4",
    ])
    assert result.exit_code == 0, result.output
    [config] = started
    assert (config.bootstrap, config.metrics_port, config.app_id, config.exit_when_idle_s, config.commit_interval_ms) == (
        "127.0.0.1:1", 9178, "trial", 5.0, 250)
    assert (config.topic_prefix, config.create_partitions, config.ledger.review_threshold) == ("demo.", 8, 4)
    assert "metrics on 127.0.0.1:9178/metrics" in result.output
    settings.cache_clear()


def test_a_kafka_config_file_alone_makes_run_the_worker(monkeypatch, tmp_path):
    """A broker configured only through KAFKA_CONFIG_FILE (bootstrap.servers
    in the file) is a configured broker: `run` starts the worker on it, it
    does not fall back to the packaged example."""
    from typer.testing import CliRunner

    from recurrence_ledger.cli import main as cli, run as cli_run
    from recurrence_ledger.runtime import worker
    from recurrence_ledger.settings import settings

    properties = tmp_path / "client.properties"
    properties.write_text("bootstrap.servers=broker.example:9092\n")
    started = []
    monkeypatch.setattr(worker, "run_worker", started.append)
    monkeypatch.setattr(cli_run, "kafka_connection", lambda bootstrap, kafka_config: f"{bootstrap}|{kafka_config}")
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("KAFKA_CONFIG_FILE", str(properties))
    settings.cache_clear()
    monkeypatch.setattr(cli_run, "settings", settings)
    result = CliRunner().invoke(cli.app, ["run", "--app-id", "trial"])
    settings.cache_clear()
    assert result.exit_code == 0, result.output
    [config] = started
    assert config.bootstrap == f"None|{properties}" and config.app_id == "trial"
    assert f"from {properties}" in result.output.replace("\n", "") and "embedded runner" not in result.output


@pytest.mark.parametrize("command", ["run", "worker"])
def test_a_redis_url_runs_the_worker_with_its_view_follower_beside_it(monkeypatch, command):
    from typer.testing import CliRunner

    from recurrence_ledger.cli import main as cli, run as cli_run
    from recurrence_ledger.cli import beside
    from recurrence_ledger.runtime import worker
    from recurrence_ledger.settings import settings

    alone, with_follower = [], []
    monkeypatch.setattr(worker, "run_worker", alone.append)
    monkeypatch.setattr(beside, "run_worker_with_follower", lambda config, redis_url: with_follower.append((config, redis_url)))
    monkeypatch.setattr(cli_run, "kafka_connection", lambda bootstrap, kafka_config: bootstrap)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.delenv("REDIS_URL", raising=False)
    settings.cache_clear()
    monkeypatch.setattr(cli_run, "settings", settings)
    result = CliRunner().invoke(cli.app, [command, "--redis-url", "redis://127.0.0.1:1/0", "--app-id", "trial"])
    settings.cache_clear()
    assert result.exit_code == 0, result.output
    [(config, redis_url)] = with_follower
    assert not alone and redis_url == "redis://127.0.0.1:1/0" and config.app_id == "trial"


def test_run_without_kafka_refuses_worker_options():
    result = run_cli("run", "--metrics-port", "9178", env={"COLUMNS": "200"})
    assert result.returncode == 2
    assert "'--metrics-port'" in result.stderr and "KAFKA_BOOTSTRAP_SERVERS is not set" in result.stderr


def test_state_dir_is_a_worker_option_of_worker_and_run(tmp_path):
    for command in ("worker", "run"):
        shown = run_cli(command, "--help", env={"COLUMNS": "250"})
        assert shown.returncode == 0 and "--state-dir" in shown.stdout and "RL_STATE_DIR" in shown.stdout, command
    refused = run_cli("run", "--state-dir", str(tmp_path), env={"COLUMNS": "200"})
    assert refused.returncode == 2 and "'--state-dir'" in refused.stderr


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
    assert explanation["revisions"][0]["reason"].startswith("unknown (check_unverified): check[0]: the bound check 'migrations applied")
    tree = run_cli("explain", "migration-lock", "job-recur", "--journal", str(journal))
    assert "matched → M4 r1 (handoff_citations" in tree.stdout
    assert run_cli("explain", "migration-lock", "nope", "--journal", str(journal)).returncode == 1


def test_explain_says_an_outcome_was_dead_lettered(tmp_path):
    """An outcome the ledger dead-lettered is never explained as if it were
    in the ledger: one at a position another already took, one with a
    field of a wrong name — each named with its reason and line."""
    journal, _ = case("minimum_case")
    lines = journal.read_text().splitlines()
    outcomes = [json.loads(line) for line in lines if '"task-outcomes"' in line]
    taken = {**outcomes[0], "value": {**outcomes[0]["value"], "source_ref": {"source_type": "task_outcome", "source_id": "job-late"}}}
    typo = dict(outcomes[0]["value"], source_ref={"source_type": "task_outcome", "source_id": "job-typo"}, journal_position=900)
    typo["obsevations"] = typo.pop("observations")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines, json.dumps(taken), json.dumps({"topic": "task-outcomes", "value": typo})]) + "\n")
    for outcome_id, reason, line in (("job-late", "position_conflict", len(lines) + 1), ("job-typo", "unexpected_field", len(lines) + 2)):
        result = run_cli("explain", "migration-lock", outcome_id, "--journal", str(bad))
        assert result.returncode == 1
        assert (f"error: task outcome '{outcome_id}' of scope 'migration-lock' was dead-lettered, so the ledger never applied it: {reason} at "
                f"line {line} (offset {line - 1}): ") in " ".join(result.stdout.split()), result.stdout
    assert run_cli("explain", "migration-lock", "job-recur", "--journal", str(bad), "--json").returncode == 0


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
    assert result.returncode == 3, result.stderr  # a line was dead-lettered
    [dead] = [json.loads(line) for line in (tmp_path / "out" / "dead-letter.jsonl").read_text().splitlines()]
    assert (dead["reason"], dead["offset"]) == ("too_many_pending", 1)
    [decision] = [json.loads(line) for line in (tmp_path / "out" / "admission-decisions.jsonl").read_text().splitlines()]
    assert (decision["candidate_id"], decision["reasons"]) == ("A", ["missing_source", "missing_failure_record"])  # decided at the end


# ----------------------------------------------------------------- help texts

COMMANDS = (
    "run-journal", "run", "worker", "publish", "export", "replay", "rebuild", "what-if", "explain", "explain-effect", "serve", "rank", "stats", "simulate",
    "topics", "topics create", "topics delete", "topics list", "topics acls", "view", "view rebuild", "view clear", "view follow",
    "review", "review list", "review show", "review approve", "review reject", "holdout", "holdout assign", "patterns", "patterns export",
)


def test_top_level_help_lists_each_command_on_one_line():
    result = run_cli("--help", env={"COLUMNS": "100"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    panel = lines[next(i for i, line in enumerate(lines) if "Commands" in line) + 1 :]
    panel = panel[: next(i for i, line in enumerate(panel) if line.startswith("╰"))]
    names = [line.strip("│ ").split()[0] for line in panel]
    # One line per command: no summary continues on a second line.
    assert names == [name for name in COMMANDS if " " not in name]


def test_help_texts_are_plain_text_without_markup_or_internal_references(monkeypatch):
    from typer import rich_utils
    from typer.testing import CliRunner

    from recurrence_ledger.cli.main import app

    for command in ("", *COMMANDS):
        for columns in ("100", "80"):
            monkeypatch.setattr(rich_utils, "MAX_WIDTH", int(columns))  # what TERMINAL_WIDTH sets when typer is imported
            result = CliRunner().invoke(app, [*command.split(), "--help"])
            assert result.exit_code == 0, (command, result.output)
            for bad in ("``", "`", "RFC", "issue", "CONTRACT", "../"):
                assert bad not in result.output, (command, columns, bad)
            assert max(map(len, result.output.splitlines())) <= int(columns), (command, columns)


# ----------------------------------------------------------------- rank output


class FakeReader:
    """The part of recurrence_ledger.api.ViewReader that rank reads."""

    namespace = "rl:fake."

    def __init__(self, revisions: dict[str, list[dict]]):
        self._revisions = revisions

    def scope_ids(self) -> list[str]:
        return sorted(self._revisions)

    def revisions(self, scope_id: str):
        from types import SimpleNamespace

        rows = self._revisions.get(scope_id)
        return None if rows is None else SimpleNamespace(rows=rows)

    def close(self) -> None:
        pass


def revision_row(scope_id: str, artifact_id: str, streak: int, signature: str, surface: str = "experience_content") -> dict:
    return {
        "scope_id": scope_id, "artifact_ref": {"family": "experience", "artifact_id": artifact_id, "revision": 12},
        "signature_key": signature, "terminal_recurred_streak": streak, "needs_review": streak >= 3, "repair_surface": surface,
        "selected": 9, "recurred": 7, "avoided": 2, "yield": 0.2222, "low_yield": True,
    }


LONG_SIGNATURE = "generated client out of date after contract edit of the public billing schema"
WIDE = {
    "team/payments-eu-west": [revision_row("team/payments-eu-west", "EXP-schema-drift", 4, LONG_SIGNATURE)],
    "port-bound": [revision_row("port-bound", "P1", 3, "port already bound", "recall_policy"),
                   revision_row("port-bound", "Q1-with-a-long-identifier", 0, "flaky acceptance check", "acceptance_check")],
}


def rank_output(monkeypatch, revisions: dict, width: int, *args: str):
    from rich.console import Console
    from typer.testing import CliRunner

    from recurrence_ledger.cli import main as cli, ops as cli_ops

    monkeypatch.setattr(cli_ops, "_reader", lambda redis_url, topic_prefix: FakeReader(revisions))
    monkeypatch.setattr(cli_ops, "console", Console(width=width))
    return CliRunner().invoke(cli.app, ["rank", *args])


def test_rank_table_fits_100_and_80_columns_one_line_per_revision(monkeypatch):
    for width in (100, 80):
        result = rank_output(monkeypatch, WIDE, width)
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert max(map(len, lines)) <= width
        rows = [line for line in lines if line.split()[:1] and line.split()[0].isdigit()]
        assert [line.split()[0] for line in rows] == ["1", "2", "3"]  # one line per revision, none broken
        first = rows[0].split()
        assert "EXP-schema-drift" in first[2] or first[2].startswith("EXP-")
        assert "4" in first and "yes" in first and ("0.22" in first or width < 100)
        # Long cells are cut with an ellipsis, never folded onto a second line.
        assert LONG_SIGNATURE not in result.output and "…" in rows[0]
        assert "generated" in rows[0]
    wide = rank_output(monkeypatch, WIDE, 200)
    assert LONG_SIGNATURE in wide.output and "…" not in wide.output and "Left out" not in wide.output


def test_rank_table_drops_the_scope_column_for_one_scope(monkeypatch):
    result = rank_output(monkeypatch, {"port-bound": WIDE["port-bound"]}, 80)
    assert result.exit_code == 0, result.output
    assert "scope port-bound" in result.output
    [first] = [line for line in result.output.splitlines() if line.startswith("1 ")]
    assert first.split()[1:3] == ["P1", "r12"] and "recall_policy" in first


def test_rank_without_rows_says_so(monkeypatch):
    empty = rank_output(monkeypatch, {}, 100)
    assert empty.exit_code == 0, empty.output
    assert empty.output.strip() == "no revisions in any scope of the Redis view rl:fake."
    filtered = rank_output(monkeypatch, WIDE, 100, "--surface", "working_state", "--scope", "port-bound")
    assert filtered.output.strip() == "no revisions with repair_surface working_state in scope port-bound of the Redis view rl:fake."


def with_unknown(rows: list[dict], **figures) -> list[dict]:
    """Rows of a view written since contract revision 3 (§17 figures)."""
    reasons = {"multiple_matches": 0, "ambiguous": 0, "condition_empty": 0, "condition_not_observed": 0, "condition_unverified": 0,
               "condition_duplicated": 0, "check_missing": 0, "check_unverified": 0, "check_duplicated": 0, "check_not_run": 0, "check_failed": 0}
    return [{**row, "unknown": 0, "unknown_reasons": reasons, "ambiguous": 0, "binding_suspect": False, **figures} for row in rows]


def test_rank_shows_unknown_and_names_binding_suspects_at_every_width(monkeypatch):
    suspect = with_unknown(
        [revision_row("port-bound", "B1", 0, "migration ran against the wrong database", "experience_content")],
        unknown=12, binding_suspect=True, needs_review=False, recurred=0, avoided=0, **{"yield": None, "low_yield": False},
    )
    suspect[0]["unknown_reasons"] = {**suspect[0]["unknown_reasons"], "check_not_run": 12}
    revisions = {"port-bound": with_unknown(WIDE["port-bound"], unknown=2) + suspect, "team/payments-eu-west": WIDE["team/payments-eu-west"]}
    for width in (200, 100, 80):
        result = rank_output(monkeypatch, revisions, width)
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert max(map(len, lines)) <= width
        rows = [line.split() for line in lines if line.split()[:1] and line.split()[0].isdigit()]
        assert [row[0] for row in rows] == ["1", "2", "3", "4"]
        [b1] = [row for row in rows if "B1" in row]
        assert b1[-1] == "suspect" and rows[0][-1] == "yes"  # never both: a suspect has no verdict
        header = next(line for line in lines if line.startswith("#"))
        left_out = " ".join(result.output.split()).split("Left out at this width:")[1:]
        if width == 80:  # the unknown column gives way before the identity of a revision; the footnote says so
            assert "unknown" not in header and "unknown" in left_out[0]
        else:
            assert header.split()[-3:] == ["unknown", "yield", "review"] and "12" in b1
            assert not left_out or "unknown" not in left_out[0]
    # Only binding suspects; --json has the reasons, all eleven, and rows of a view written before revision 3 read with zeros.
    only = rank_output(monkeypatch, revisions, 100, "--binding-suspect", "--json")
    [row] = json.loads(only.output)
    assert (row["artifact_ref"]["artifact_id"], row["unknown"], row["binding_suspect"], row["unknown_reasons"]["check_not_run"]) == ("B1", 12, True, 12)
    every = json.loads(rank_output(monkeypatch, revisions, 100, "--json").output)
    old = next(row for row in every if row["scope_id"] == "team/payments-eu-west")
    assert (old["unknown"], old["ambiguous"], old["binding_suspect"], set(old["unknown_reasons"].values())) == (0, 0, False, {0})
    assert len(old["unknown_reasons"]) == 11
    none = rank_output(monkeypatch, {"team/payments-eu-west": WIDE["team/payments-eu-west"]}, 100, "--binding-suspect")
    assert none.output.strip() == "no revisions that are binding suspects in any scope of the Redis view rl:fake."


def test_stats_prints_binding_suspects_and_unknown_by_reason_under_the_table(monkeypatch):
    from types import SimpleNamespace

    from rich.console import Console
    from typer.testing import CliRunner

    from recurrence_ledger.cli import main as cli, ops as cli_ops

    counters = dict.fromkeys(("selected", "recurred", "avoided", "unknown", "unlinked_handoff_citations", "needing_review", "pending_outcomes",
                              "late_revisions"), 0)
    new = {**counters, "scope_id": "bind-audit", "as_of_position": 26, "unknown": 5, "binding_suspects": 2, "ambiguous_matches": 1,
           "unmatched_failures": 0, "forward_references": 3, "unknown_reasons": {"check_missing": 4, "ambiguous": 1, "check_failed": 0}}
    old = {**counters, "scope_id": "quiet", "as_of_position": 4}  # written before revision 3, nothing unknown
    records = {"bind-audit": new, "quiet": old}

    class Reader:
        namespace = "rl:fake."

        def scope_ids(self):
            return sorted(records)

        def snapshot(self, scope_id):
            return SimpleNamespace(record=records[scope_id]) if scope_id in records else None

        def close(self):
            pass

    monkeypatch.setattr(cli_ops, "_reader", lambda redis_url, topic_prefix: Reader())
    monkeypatch.setattr(cli_ops, "console", Console(width=200))
    result = CliRunner().invoke(cli.app, ["stats"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # The reasons in the contract's order, whatever the stored order.
    assert "bind-audit: 2 binding suspects; unknown 5 (ambiguous 1, check_missing 4); forward references 3; ambiguous matches 1" in lines
    assert not any(line.startswith("quiet:") for line in lines)


# ----------------------------------------------------------------- teardown listings and replay summary


def test_topics_delete_without_yes_lists_topics_and_groups_under_labels():
    result = run_cli("topics", "delete", "--bootstrap", "127.0.0.1:1", "--topic-prefix", "demo.", "--app-id", "trial")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["would delete (run again with --yes):", "  (names only; --yes reports each one deleted or absent)"]
    assert lines[2].startswith("  topics (") and "    demo.source-journal" in lines
    assert "    demo.trial-ledger-state-changelog" in lines
    groups = lines.index("  consumer groups (3):")
    assert lines[groups + 1 :] == [
        "    demo.trial", "    demo.trial-replay", "    demo.trial-view",
        "  schema registry subjects: none, no Schema Registry configured"
        " (--schema-registry-url, SCHEMA_REGISTRY_URL or schema.registry.url in --kafka-config)",
    ]


def test_topics_delete_without_yes_lists_the_catalogue_subjects_with_a_registry():
    result = run_cli("topics", "delete", "--bootstrap", "127.0.0.1:1", "--topic-prefix", "demo.", "--schema-registry-url", "http://127.0.0.1:1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    listed = lines.index("  schema registry subjects (20) at http://127.0.0.1:1:")
    assert lines[listed + 1 : listed + 3] == ["    demo.source-journal-value", "    demo.experience-revisions-value"]
    assert lines[-1] == "    demo.dead-letter-value" and len(lines) == listed + 1 + 20
    assert not any("changelog-value" in line for line in lines)  # the changelog is JSON: no subject


def replay_summary(dry_run: bool = False):
    from recurrence_ledger.runtime.replay import PartitionRange, ReplaySummary

    summary = ReplaySummary(ranges=[PartitionRange("source-journal", 0, 0, 10, 42)], records_read=42, seconds=1.25, dry_run=dry_run)
    summary.written["recurrence-observations"] += 3
    summary.suppressed.update({"recurrence-matches": 7, "recurrence-observations": 12})
    return summary


def test_replay_prints_a_readable_summary_and_json(monkeypatch):
    from typer.testing import CliRunner

    from recurrence_ledger.cli import main as cli, replay as cli_replay
    from recurrence_ledger.runtime import replay

    monkeypatch.setattr(replay, "run_replay", lambda *args, **kwargs: replay_summary(kwargs["dry_run"]))
    monkeypatch.setattr(cli_replay, "kafka_connection", lambda bootstrap, kafka_config: bootstrap)  # no broker in this test
    result = CliRunner().invoke(cli.app, ["replay", "--bootstrap", "127.0.0.1:1"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-3:] == [
        "read 42 records in 1.2 s",
        "written (records the ledger lacked): recurrence-observations 3",
        "not written again (already in the ledger): recurrence-matches 7, recurrence-observations 12",
    ]
    assert "{" not in result.output and "defaultdict" not in result.output
    as_json = CliRunner().invoke(cli.app, ["replay", "--bootstrap", "127.0.0.1:1", "--json"])
    assert json.loads(as_json.output) == {
        "dry_run": False,
        "ranges": [{"topic": "source-journal", "partition": 0, "from": 0, "outputs_from": 10, "to": 42, "records": 42}],
        "records_read": 42, "seconds": 1.25, "written": {"recurrence-observations": 3},
        "already_in_ledger": {"recurrence-matches": 7, "recurrence-observations": 12}, "conflicted_scopes": [],
        "views_left_to_workers": None, "patterns_left_to_workers": None,
    }
    plan = CliRunner().invoke(cli.app, ["replay", "--bootstrap", "127.0.0.1:1", "--dry-run", "--json"])
    assert json.loads(plan.output)["dry_run"] is True and "records_read" not in json.loads(plan.output)

    def left_to_workers(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - run_replay's
        summary = replay_summary()
        summary.patterns_left = "the workers' pattern stage has not consumed p.rep[0] to its end yet"
        return summary

    monkeypatch.setattr(replay, "run_replay", left_to_workers)
    left = CliRunner().invoke(cli.app, ["replay", "--bootstrap", "127.0.0.1:1"])
    assert left.output.splitlines()[-1] == (
        "pattern records not written, left to the running workers: the workers' pattern stage has not consumed p.rep[0] to its end yet")


def test_serve_has_no_review_threshold_of_its_own():
    # The threshold is the workers' policy, stored in the view; a serve flag could only relabel it.
    from recurrence_ledger.api.settings import ApiSettings

    result = run_cli("serve", "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0 and "--review-threshold" not in result.stdout
    assert not hasattr(ApiSettings(), "review_threshold")
