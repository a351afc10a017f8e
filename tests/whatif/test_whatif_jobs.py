"""``what-if --jobs N`` (also with ``--sweep``): the journal split by scope
across N processes gives the report, the alternative's output files and
the chart of one process byte for byte (apart from the seconds the replay
took) — pattern candidates, which span scopes, included."""

from __future__ import annotations

import json
from fractions import Fraction
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from recurrence_ledger.catalogue import OUTPUT_TOPICS
from recurrence_ledger.cli import app
from recurrence_ledger.whatif.policies import Policy, Sweep
from recurrence_ledger.whatif.replay import JournalInput, replay_journal_jobs
from recurrence_ledger.whatif.report import build_report, markdown
from recurrence_ledger import policy
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import REPO
from tests.journal import write_journal

CASES = sorted((REPO / "tests" / "cases").glob("*.jsonl"))
BASELINE = Policy(pattern_threshold=2)


def report(journal: Path, out: Path, jobs: int, alternatives: list[Policy], sweep: Sweep | None, view_batch: int = 1000) -> dict[str, bytes]:
    """The what-if's files, without the seconds it took."""
    source = JournalInput(journal).open()
    try:
        outcome = replay_journal_jobs(source, [BASELINE, *alternatives], jobs, out_dir=out, facts_of=alternatives[0] if sweep is None else None,
                                      view_batch=view_batch, show_progress=False)
    finally:
        source.close()
    outcome.seconds = 0.0
    if outcome.facts_dir is not None:
        outcome.facts_dir = outcome.facts_dir.relative_to(out)  # each run writes into a folder of its own
    document = build_report(outcome, BASELINE, {}, alternatives, sweep, "chart.png" if sweep else None)
    files = {"report.json": json.dumps(document, indent=2).encode(), "report.md": markdown(document).encode()}
    if sweep is None:
        files.update({topic: (out / "ledger" / f"{topic}.jsonl").read_bytes() for topic in OUTPUT_TOPICS})
    assert not out.exists() or not [path.name for path in out.iterdir() if path.name.startswith(".jobs-")]
    return files


def assert_same_as_one_process(journal: Path, base: Path, alternatives: list[Policy], sweep: Sweep | None, view_batch: int = 1000) -> dict:
    one = report(journal, base / "jobs1", 1, alternatives, sweep, view_batch)
    for jobs in (2, 3):
        split = report(journal, base / f"jobs{jobs}", jobs, alternatives, sweep, view_batch)
        assert [name for name in one if split[name] != one[name]] == [], f"--jobs {jobs}"
    return json.loads(one["report.json"])


SWEEPS = {
    "review": Sweep(policy.REVIEW_THRESHOLD, (1, 2, 4)),
    "horizon": Sweep(policy.PROVENANCE_HORIZON, (3, 50)),
    "pattern": Sweep(policy.PATTERN_THRESHOLD, (1, 3)),
    "effect": Sweep(policy.EFFECT_PROBABILITY, (Fraction(24, 25), Fraction(99, 100))),
}


@pytest.mark.parametrize("name", sorted(SWEEPS))
@pytest.mark.parametrize("journal", CASES, ids=lambda path: path.stem)
def test_a_sweep_of_every_case_gives_the_report_of_one_process(journal, name, tmp_path):
    sweep = SWEEPS[name]
    assert_same_as_one_process(journal, tmp_path, list(sweep.policies(BASELINE)), sweep)


@pytest.mark.parametrize("journal", CASES, ids=lambda path: path.stem)
def test_one_alternative_gives_the_report_and_output_files_of_one_process(journal, tmp_path):
    assert_same_as_one_process(journal, tmp_path, [Policy(review_threshold=2, pattern_threshold=3, provenance_horizon=20)], None, view_batch=5)


def test_the_holdout_case_gives_the_effect_verdicts_of_one_process(tmp_path):
    document = assert_same_as_one_process(REPO / "tests" / "cases" / "holdout_effects.jsonl", tmp_path,
                                          [Policy(effect_probability=Fraction(99, 100), holdout_salt="s1", holdout_rate=Fraction(1, 2))], None)
    assert document["comparisons"][0]["totals"]["effect_verdicts_changed"] == 3


def test_the_patterns_case_has_pattern_candidates_that_span_processes(tmp_path):
    document = assert_same_as_one_process(REPO / "tests" / "cases" / "patterns.jsonl", tmp_path, [Policy(pattern_threshold=3)], None)
    assert document["comparisons"][0]["pattern_candidates"]["removed"] != []


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scopes=st.integers(1, 6), outcomes=st.integers(3, 30), seed=st.integers(0, 2**16), shared_cues=st.integers(0, 3),
       groups=st.integers(0, 2), shuffle=st.floats(0, 0.3), sweep=st.sampled_from(sorted(SWEEPS)), view_batch=st.sampled_from([1, 9, 1000]))
def test_a_random_journal_gives_the_report_of_one_process(tmp_path_factory, scopes, outcomes, seed, shared_cues, groups, shuffle, sweep, view_batch):
    records = list(generate_journal(Workload(scopes=scopes, outcomes_per_scope=outcomes, heads_per_scope=3, handoffs=2, seed=seed,
                                             candidates=0.3, shared_cues=shared_cues, groups=groups)))
    rng = random.Random(seed)
    for _ in range(int(len(records) * shuffle)):
        i, j = rng.randrange(len(records)), rng.randrange(len(records))
        records[i], records[j] = records[j], records[i]
    base = tmp_path_factory.mktemp("random")
    journal = write_journal(base / "journal.jsonl", records)
    swept = SWEEPS[sweep]
    assert_same_as_one_process(journal, base, list(swept.policies(BASELINE)), swept, view_batch)
    assert_same_as_one_process(journal, base / "one", [Policy(review_threshold=2, pattern_threshold=1)], None, view_batch)


def test_the_command_with_jobs_writes_the_files_and_chart_of_one_process(tmp_path):
    journal = write_journal(tmp_path / "journal.jsonl", generate_journal(Workload(scopes=5, outcomes_per_scope=40, heads_per_scope=3,
                                                                                   handoffs=2, seed=3, candidates=0.3, shared_cues=2)))
    outputs = {}
    for jobs in ("1", "2"):
        result = CliRunner().invoke(app, ["what-if", str(journal), "--out", str(tmp_path / jobs), "--sweep", "review-threshold=2..4", "--quiet",
                                          "--jobs", jobs])
        assert result.exit_code == 0, result.output
        document = json.loads((tmp_path / jobs / "report.json").read_text())
        document["seconds"] = 0
        outputs[jobs] = (document, (tmp_path / jobs / "chart.png").read_bytes())
    assert outputs["1"] == outputs["2"]
    assert sorted(path.name for path in (tmp_path / "2").iterdir()) == ["chart.png", "report.json", "report.md"]


def test_jobs_split_a_journal_not_the_topics(tmp_path):
    result = CliRunner().invoke(app, ["what-if", "--from-topics", "--out", str(tmp_path), "--jobs", "2"])
    assert result.exit_code == 2 and "--jobs" in result.output
